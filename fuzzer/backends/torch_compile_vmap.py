"""torch.compile of torch.func.vmap of the graph over a new leading batch axis of the graph inputs (the
batch and its judging: fuzzer/backends/batching.py): functorch's batching rules, traced whole by dynamo
and compiled by inductor. Copy 0's outputs are judged as torch-compile's, every other judged copy's
against the float64 reference of that copy."""

from __future__ import annotations

import numpy as np

from fuzzer import oracle
from fuzzer.backends.batching import batch_size, copies_reference, copies_source, judged_copies, other_copies
from fuzzer.backends.torch_compile import TorchCompile
from fuzzer.errors import documented_gaps
from fuzzer.ir import Case, Graph, interpret
from fuzzer.reproducers.op_source import Source
from fuzzer.reproducers.program_source import torch_program


# functorch's documented gaps, no verdict: no batching rule for the fused RNN ops (eager vmap loops over the
# batch with a warning, a compile raises; pytorch/pytorch#134606, open), and batch_norm in training mode,
# whose running statistics are updated in place and not batched (functorch's "Batch norm got a batched
# tensor as input while the running_mean or running_var ... were not batched"; its docs' UX limitations).
VMAP_GAPS = ("Batching rule not implemented for aten::gru", "Batching rule not implemented for aten::lstm",
             "Batching rule not implemented for aten::rnn", "Batch norm got a batched tensor as input while the running_mean")


class TorchCompileVmap(TorchCompile):
    # Compiled by inductor: copy 0 computed exactly as torch-compile computes it, wrong the same way, is its finding.
    derives_from_kind = "torch-compile"
    kind = "torch-compile-vmap"
    transformation = "vmap"
    in_sets = {}
    description = ("torch.compile of torch.func.vmap(graph) over 3 stacked input sets (parameters shared), or a ladder "
                   "rung's 2^k - 1 .. 2^k + 1; every copy judged, of a rung those at powers of two")
    dtypes = ("float32", "float64")  # its other copies are drawn as float values (batching.batch_copies)
    computes_every_node = False
    runs_programs = False

    def _traced_function(self, graph: Graph, impls: dict):
        import torch

        return torch.func.vmap(lambda inputs, params: interpret(graph, inputs, params, lambda op: impls[op]), in_dims=(0, None))

    def _execute(self, graph: Graph, inputs: dict, params: dict) -> list[np.ndarray]:
        import torch

        others = other_copies(graph)
        with torch.no_grad(), self.precision_context(graph), documented_gaps(VMAP_GAPS):
            stacked = {name: torch.cat([x[None], self._to_torch(others[name])]) for name, x in self._input_tensors(graph, inputs).items()}
            weights = {node: {k: self._to_torch(v) for k, v in ps.items()} for node, ps in params.items()}
            outputs = self._graph_fn(graph)(stacked, weights)
        return [out[k].double().cpu().numpy() for k in [0, *judged_copies(batch_size(graph))] for out in outputs]

    def extra_reference(self, case: Case) -> oracle.Reference:
        return copies_reference(case, self.dtype)

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        inputs = len(case.graph.inputs)
        transform = [
            *copies_source(case.graph),
            f"INPUTS = {inputs}",
            "stacked = [torch.cat([x[None], torch.as_tensor(c).to(x.device, x.dtype)]) for x, c in zip(args[:INPUTS], COPIES)]",
            "in_dims = (0,) * INPUTS + (None,) * (len(args) - INPUTS)  # the weights are shared",
            "program = torch.compile(torch.func.vmap(graph, in_dims=in_dims), backend=\"inductor\", fullgraph=True, dynamic=False)",
        ]
        judged = [0, *judged_copies(batch_size(case.graph))]
        # The outputs of copy 0, then of each other copy judged: as the campaign judged them.
        return torch_program(case, self, transform, f"[o[k] for k in {judged} for o in program(*stacked, *args[INPUTS:])]",
                             "torch.no_grad()", source=Source(imports=["import torch", "import numpy as np"]))


BACKENDS = [TorchCompileVmap]
