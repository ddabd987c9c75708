"""torch.compile (inductor) of the whole graph, fullgraph=True; compiled once per graph structure and reused."""

from __future__ import annotations

import types

from fuzzer.backends import CompiledCache
from fuzzer.backends.torch_eager import TorchEager
from fuzzer.errors import OpUnsupported
from fuzzer.ir import Case, Graph, interpret
from fuzzer.program_source import torch_program

# Compiled graphs by (backend name, graph structure), kept for the life of the process
# (a campaign worker) and bounded so a long campaign does not grow without limit.
COMPILED = CompiledCache(limit=256)
# Graph structures dynamo could not capture whole: not traced again for their other input sets.
BROKEN: dict = {}


class GraphBreak(OpUnsupported):
    """dynamo cannot capture the graph whole (a graph break): the backend gives no verdict on it.

    Compiling with fullgraph=False instead would compile the op functions shared by every graph
    as frames of their own after the break; each code object holds at most `recompile_limit` (8)
    variants, and then dynamo runs it *eagerly*, silently: those graphs would no longer test
    inductor. A campaign counts these outcomes per backend (the `not_compiled` statistic).
    """


def _own_code_object(fn, name: str):
    """A copy of `fn` with a code object of its own: dynamo keeps its compiled variants per code
    object (at most `recompile_limit`), so one shared function would stop compiling after 8 graphs."""
    return types.FunctionType(fn.__code__.replace(co_name=name), fn.__globals__, name, fn.__defaults__, fn.__closure__)


class TorchCompile(TorchEager):
    derives_from_kind = "torch-eager"
    kind = "torch-compile"
    description = "torch.compile (inductor), whole graph, fullgraph=True, dynamic=False"
    expensive = True
    # The first graph in a fresh worker imports dynamo and inductor and fills their caches:
    # measured 12-18 s on an idle machine, 30-50 s under load (the compile budget's prior).
    cold_start_seconds = 20.0

    def _graph_fn(self, graph: Graph):
        import torch

        key = (self.name, graph.structure_key())
        if key in BROKEN:
            raise GraphBreak(BROKEN[key])

        def build():
            # Looked up outside the traced function: dynamo need not trace the op registry
            # (older releases fail to, e.g. torch 2.1 on its first, registry-filling call).
            impls = {op: self.impl_for(op) for op in graph.op_names()}

            def run_graph(inputs, params):
                return interpret(graph, inputs, params, impls.__getitem__)

            return torch.compile(_own_code_object(run_graph, f"fuzz_graph_{key[1]}"), dynamic=False, fullgraph=True)

        compiled = COMPILED.get(key, build)

        def run(inputs, params):
            try:
                return compiled(inputs, params)
            except torch._dynamo.exc.Unsupported as exc:
                BROKEN[key] = f"graph break under fullgraph=True: {str(exc).strip().splitlines()[0]}"
                raise GraphBreak(BROKEN[key]) from None

        return run

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        compile_line = 'program = torch.compile(graph, backend="inductor", fullgraph=True, dynamic=False)'
        return torch_program(case, self, [compile_line], "program(*args)")


BACKENDS = [TorchCompile]
