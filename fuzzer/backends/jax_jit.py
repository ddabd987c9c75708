"""jax.jit of the whole graph; one jitted function per graph structure, reused across input sets."""

from __future__ import annotations

from fuzzer.backends import CompiledCache
from fuzzer.backends.jax_eager import JaxEager, import_jax
from fuzzer.ir import Case, Graph
from fuzzer.reproducers.program_source import jax_program

JITTED = CompiledCache(limit=1024)


class JaxJit(JaxEager):
    derives_from_kind = "jax-eager"
    kind = "jax-jit"
    path = "jax/xla"
    in_sets = {"cpu": {50: "cpu:float32", 60: "cpu:float64"},
               "gpu": {70: "gpu:float32", 80: "gpu:float64", 90: "gpu:bfloat16"}}
    description = "jax.jit of the whole graph (XLA)"
    computes_every_node = False
    # One XLA compile per new graph (~57 ms + 36 ms per node), ~43% of a worker's time when it ran
    # on every graph: it takes its share of the compile budget (fuzzer/running/budget.py) like the others.
    expensive = True
    runs_programs = True  # a program's step jitted once, called for every step

    def _graph_fn(self, graph: Graph):
        jax = import_jax()
        return JITTED.get(
            (self.name, graph.structure_key()),
            lambda: jax.jit(self._body(graph)),
        )

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        return jax_program(case, self, [], "jax.jit(graph)(*args)")


BACKENDS = [JaxJit]
