"""torch.compile with dynamic=True: one compile with symbolic sizes, reused across input shapes.

How a campaign feeds it several shapes: the compiled function is cached by the graph's
structure *without* its input shapes and regime (`shape_free_key`), so every later graph of
the same ops, attributes and wiring, at any input sizes, runs the same dynamic compile instead
of compiling its own. Campaign graphs draw their dims from a small set, so structures recur at
other sizes (the small and size-1 regimes most); attributes that encode a shape (a reshape's
target, layer_norm's normalized_shape) keep such graphs apart, as they must. The several input
sets of one graph (`--inputs-per-graph`) share its shapes and only re-run the compile. Sizes 0
and 1 are specialized by dynamo, so a graph with a size-1 dim recompiles once for that variant;
past dynamo's recompile limit the function is compiled anew (torch_compile.py).
"""

from __future__ import annotations

import hashlib
import json

from fuzzer.backends.torch_compile import TorchCompile
from fuzzer.ir import Graph


def shape_free_key(graph: Graph) -> str:
    """A hash of the graph without its input shapes or regime: ops, attributes, wiring, layouts."""
    data = graph.to_dict()
    data.pop("regime", None)
    for spec in data["inputs"]:
        spec.pop("shape")
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


class TorchCompileDynamic(TorchCompile):
    kind = "torch-compile-dynamic"
    description = "torch.compile (inductor), whole graph, fullgraph=True, dynamic=True, one compile per shape-free structure"
    dynamic = True
    # A program's step, compiled once with symbolic sizes: its shape variants call it again at other sizes.
    runs_programs = True

    def cache_key(self, graph: Graph) -> tuple:
        return (self.name, shape_free_key(graph))


BACKENDS = [TorchCompileDynamic]
