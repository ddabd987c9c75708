"""torch.compile of a Hessian-vector product by forward over reverse (torch.func.jvp of torch.func.grad, the
composition torch.func.hessian runs: jacfwd of jacrev): the outputs, then H t w.r.t. each input and
parameter, H the Hessian of L = sum_i <output_i, cotangent_i> (gradients.py), t fixed tangents
(forward_mode.py). Judged against float64 eager reverse over reverse (second_order.py), which shares
neither the tracing nor the forward-mode rules; where the two routes take different conventions in
float64, the entry is not judged, and forward over reverse in the backend's dtype is one more honest
model (forward_mode.py explains both)."""

from __future__ import annotations

from functools import partial

import numpy as np

from fuzzer.backends.forward_mode import torch_tangents
from fuzzer.backends.gradients import torch_eager_gradients, undifferentiated_indices
from fuzzer.backends.second_order import (torch_forward_over_reverse, torch_functional_hvp, torch_graph_cotangents,
                                          torch_hvp_by_reverse)
from fuzzer.backends.torch_compile_double_grad import cotangents_source
from fuzzer.backends.torch_compile_grad import TorchCompileGrad
from fuzzer.backends.torch_jvp import TorchForwardMode, forward_mode_function
from fuzzer.ir import Case, Graph
from fuzzer.reproducers.op_source import Source
from fuzzer.reproducers.program_source import torch_program


class TorchCompileHvp(TorchForwardMode, TorchCompileGrad):
    # Its outputs are torch-compile's forward: wrong the same way, torch-compile's finding.
    derives_from_kind = "torch-compile"
    kind = "torch-compile-hvp"
    transformation = "hvp"
    in_sets = {"grad": {65: "cpu:float32"}}
    description = ("torch.compile of torch.func.jvp over torch.func.grad (torch.func.hessian's composition): outputs, "
                   "then H t w.r.t. inputs and parameters (vs float64 eager reverse over reverse)")
    compile_weight = 2 * TorchCompileGrad.compile_weight
    cpu_compile_weight = 2 * TorchCompileGrad.cpu_compile_weight

    def _traced_function(self, graph: Graph, impls: dict):
        return forward_mode_function(graph, lambda op: impls[op], partial(torch_functional_hvp, cotangents=torch_graph_cotangents(graph, self.dtype, self.device)))

    def eager_gradients(self, case: Case, dtype: str, noise=None, device: str = "cpu") -> list[np.ndarray]:
        return torch_eager_gradients(case, dtype, noise, parameters=True, device=device, differentiate=torch_hvp_by_reverse)

    def other_route(self, case: Case, dtype: str) -> list[np.ndarray]:
        return torch_eager_gradients(case, dtype, parameters=True, differentiate=torch_forward_over_reverse)

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        source = Source(imports=["import torch"])
        source.add_function(torch_functional_hvp)
        source.add_function(torch_tangents)
        constants = undifferentiated_indices(case)
        transform = [
            f"TANGENTS = torch_tangents([a for i, a in enumerate(args) if i not in {constants!r}])",
            *cotangents_source(case, self.dtype, self.device, source),
            "# the outputs, then H t: forward over reverse, as torch.func.hessian composes them",
            f"program = torch.compile(lambda *args: torch_functional_hvp(graph, args, {constants!r}, TANGENTS, COTANGENTS),",
            f'                        backend="inductor", fullgraph=True, dynamic={self.dynamic})',
        ]
        return torch_program(case, self, transform, "program(*args)", source=source)


BACKENDS = [TorchCompileHvp]
