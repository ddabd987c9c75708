"""torch.compile (inductor) of the whole graph; compiled once per graph structure and reused."""

from __future__ import annotations

import types

from fuzzer.backends import CompiledCache, interpret
from fuzzer.backends.torch_eager import TorchEager
from fuzzer.ir import Graph

# Compiled graphs by (backend name, graph structure), kept for the life of the process
# (a campaign worker) and bounded so a long campaign does not grow without limit.
COMPILED = CompiledCache(limit=256)


def _own_code_object(fn, name: str):
    """A copy of `fn` with a code object of its own.

    dynamo keeps its compiled variants per code object, at most `recompile_limit` (8)
    of them, and then silently runs the function *eagerly*. One shared lambda for every
    graph would stop being compiled after the 8th graph of a worker.
    """
    return types.FunctionType(fn.__code__.replace(co_name=name), fn.__globals__, name, fn.__defaults__, fn.__closure__)


class TorchCompile(TorchEager):
    kind = "torch-compile"
    description = "torch.compile (inductor), whole graph, dynamic=False"
    expensive = True

    def _graph_fn(self, graph: Graph):
        import torch

        key = graph.structure_key()

        def build():
            # Looked up outside the traced function: dynamo need not trace the op registry
            # (older releases fail to, e.g. torch 2.1 on its first, registry-filling call).
            impls = {op: self.impl_for(op) for op in graph.op_names()}

            def run_graph(inputs, params):
                return interpret(graph, inputs, params, impls.__getitem__)

            return torch.compile(_own_code_object(run_graph, f"fuzz_graph_{key}"), dynamic=False)

        return COMPILED.get((self.name, key), build)


BACKENDS = [TorchCompile]
