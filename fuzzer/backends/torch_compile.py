"""torch.compile (inductor) of the whole graph; compiled once per graph structure and reused."""

from __future__ import annotations

from fuzzer.backends import CompiledCache, interpret
from fuzzer.backends.torch_eager import TorchEager
from fuzzer.ir import Graph

# Compiled graphs by (backend name, graph structure), kept for the life of the process
# (a campaign worker) and bounded so a long campaign does not grow without limit.
COMPILED = CompiledCache(limit=256)


class TorchCompile(TorchEager):
    kind = "torch-compile"
    description = "torch.compile (inductor), whole graph, dynamic=False"
    expensive = True

    def _graph_fn(self, graph: Graph):
        import torch

        return COMPILED.get(
            (self.name, graph.structure_key()),
            lambda: torch.compile(lambda inputs, params: interpret(graph, inputs, params, self.impl_for), dynamic=False),
        )


BACKENDS = [TorchCompile]
