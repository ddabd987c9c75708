"""jax.jit of the whole graph; one jitted function per graph structure, reused across input sets."""

from __future__ import annotations

from fuzzer.backends import CompiledCache, interpret
from fuzzer.backends.jax_eager import JaxEager, import_jax
from fuzzer.ir import Graph

JITTED = CompiledCache(limit=1024)


class JaxJit(JaxEager):
    kind = "jax-jit"
    description = "jax.jit of the whole graph (XLA)"
    expensive = False  # one XLA compile per graph (~0.1 s): every graph runs it

    def _graph_fn(self, graph: Graph):
        jax = import_jax()
        return JITTED.get(
            (self.name, graph.structure_key()),
            lambda: jax.jit(lambda inputs, params: interpret(graph, inputs, params, self.impl_for)),
        )


BACKENDS = [JaxJit]
