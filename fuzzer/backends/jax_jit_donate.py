"""jax.jit with the graph inputs' buffers donated (donate_argnums): XLA may write outputs into
the inputs' memory, so a wrong input/output aliasing (an output written over an input that is
still read) shows as a wrong value. Each run puts fresh buffers on the device (JaxEager._execute),
so a donated, deleted buffer is never read again by us."""

from __future__ import annotations

import warnings

from fuzzer.backends.jax_eager import import_jax
from fuzzer.backends.jax_jit import JITTED, JaxJit
from fuzzer.ir import Case, Graph
from fuzzer.reproducers.program_source import jax_program


class JaxJitDonate(JaxJit):
    # Compiled by jax.jit: a forward it computes exactly as jax-jit, wrong the same way, is jax-jit's finding.
    derives_from_kind = "jax-jit"
    kind = "jax-jit-donate"
    description = "jax.jit with the graph inputs donated (donate_argnums=0: outputs may reuse input buffers)"
    donate_argnums = (0,)  # the graph inputs (argument 0); the parameters (argument 1) are kept
    runs_programs = True  # a program's state donated to each step, which returns the next (fuzzer/programs/program.py)

    def _graph_fn(self, graph: Graph):
        jax = import_jax()
        jitted = JITTED.get((self.name, graph.structure_key()),
                            lambda: jax.jit(self._body(graph), donate_argnums=self.donate_argnums))

        def run(inputs, params):
            with warnings.catch_warnings():
                # "Some donated buffers were not usable": no output has an input's shape; nothing to test then.
                warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
                return jitted(inputs, params)

        return run

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        donated = f"donate_argnums=tuple(range({len(case.graph.inputs)}))"  # the graph inputs, not the weights
        return jax_program(case, self, [f"program = jax.jit(graph, {donated})"], "program(*args)")


BACKENDS = [JaxJitDonate]
