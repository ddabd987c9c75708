"""torch.compile of the whole graph with a configuration of its own: the base of the configured
compile kinds (torch-compile-dynamic, torch-compile-max-autotune). No backend of its own.

The configuration is data on the class, which a reproducer writer reads: `compile_mode`
(torch.compile's mode), `dynamic` (torch.compile's dynamic) and `compile_options` (inductor
config, patched around every call, compile included: torch.compile(options=...) reaches only
inductor, while some settings, e.g. `freezing`, are read by dynamo as it traces).
"""

from __future__ import annotations

from typing import ClassVar

from fuzzer.backends import interpret
from fuzzer.backends.torch_compile import BROKEN, COMPILED, GraphBreak, TorchCompile, _own_code_object
from fuzzer.ir import Graph


class ConfiguredTorchCompile(TorchCompile):
    compile_mode: ClassVar[str | None] = None
    dynamic: ClassVar[bool] = False
    compile_options: ClassVar[dict] = {}

    def cache_key(self, graph: Graph) -> tuple:
        """Graphs with one key share one compiled function (one code object: see _own_code_object)."""
        return (self.name, graph.structure_key())

    def _graph_fn(self, graph: Graph):
        import torch

        key = self.cache_key(graph)
        if key in BROKEN:
            raise GraphBreak(BROKEN[key])

        def build():
            impls = {op: self.impl_for(op) for op in graph.op_names()}

            def run_graph(inputs, params):
                return interpret(graph, inputs, params, impls.__getitem__)

            return torch.compile(_own_code_object(run_graph, f"fuzz_graph_{key[1]}"), mode=self.compile_mode,
                                 dynamic=self.dynamic, fullgraph=True)

        compiled = COMPILED.get(key, build)

        def run(inputs, params):
            try:
                with torch._inductor.config.patch(self.compile_options):
                    return compiled(inputs, params)
            except torch._dynamo.exc.FailOnRecompileLimitHit:
                # This function was compiled for more shape variants than dynamo keeps per code
                # object (recompile_limit): start a new one rather than fail the case.
                COMPILED.entries.pop(key, None)
                return self._graph_fn(graph)(inputs, params)
            except torch._dynamo.exc.Unsupported as exc:
                BROKEN[key] = f"graph break under fullgraph=True: {str(exc).strip().splitlines()[0]}"
                raise GraphBreak(BROKEN[key]) from None

        return run
