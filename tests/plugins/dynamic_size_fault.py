"""A planted dynamic-shape fault: a torch.compile(dynamic=True) backend whose compiled code is right at
the sizes it was first compiled for and scales the first output by 1.5 when it runs at other sizes
with a dim past 17 (the class of a vectorized tail that the code specialized for the traced size
gets wrong). It lives only where one dynamic compile is reused at a size the small regime never
draws (its dims stop at 17): campaigns reach it through shape variants (fuzzer/drawing/shape_variants.py)."""

from fuzzer.backends.torch_compile_dynamic import TorchCompileDynamic

FIRST_SIZES: dict = {}


class StaleSizeFault(TorchCompileDynamic):
    kind = "planted-dynamic-stale-size"

    def _graph_fn(self, graph):
        run = super()._graph_fn(graph)
        sizes = tuple(spec.shape for spec in graph.inputs)
        if FIRST_SIZES.setdefault(self.cache_key(graph), sizes) == sizes or max(max(s, default=1) for s in sizes) <= 17:
            return run

        def stale(inputs, params):
            first, *rest = run(inputs, params)
            return [first * 1.5, *rest]

        return stale


def register(api):
    api.add_backend(StaleSizeFault)
