"""torch.compile (inductor) of the graph's forward, and its backward: the outputs, then the gradient
of sum_i <output_i, cotangent_i> w.r.t. every graph input and every parameter (gradients.py), judged
against float64 torch eager autograd of the stock ops.

The forward is compiled as torch-compile compiles it (whole graph, once per structure), with the
inputs and parameters requiring grad; AOTAutograd then traces the joint graph, and inductor compiles
the backward too, at the first torch.autograd.grad through it. So both passes a training step runs
are the compiler's (pytorch/pytorch#182012: an all-zero gradient of diagonal_scatter only under
compile). A backward that fails to compile or to run is the case's crash; a graph break is no verdict,
as for torch-compile.
"""

from __future__ import annotations

import numpy as np

from fuzzer.backends.gradients import GradientOutputs, torch_eager_gradients, torch_outputs_and_gradients, undifferentiated_indices
from fuzzer.backends.torch_compile import TorchCompile, inductor_config, with_inductor_config
from fuzzer.ir import Case, Graph
from fuzzer.reproducers.op_source import Source
from fuzzer.reproducers.program_source import torch_program


class TorchCompileGrad(GradientOutputs, TorchCompile):
    # A forward it computes exactly as torch-compile, wrong the same way, is torch-compile's finding.
    derives_from_kind = "torch-compile"
    kind = "torch-compile-grad"
    in_sets = {"grad": {30: "cpu:float32"}, "cpu": {25: "cpu:float32"}, "gpu": {55: "cuda:float32"}}
    description = ("torch.compile (inductor) of the forward and its backward: outputs, then gradients w.r.t. "
                   "inputs and parameters (vs float64 eager autograd)")
    dtypes = ("float32", "float64")
    # Inductor compiles two graphs per structure, the forward and the backward: 1.1-2.5x the forward
    # alone's seconds (generated graphs of 2-4 ops, a warm process, this project's loaded 2-core CPU machine).
    compile_weight = 2 * TorchCompile.compile_weight
    cpu_compile_weight = 2 * TorchCompile.cpu_compile_weight

    def _execute(self, graph: Graph, inputs: dict, params: dict) -> list[np.ndarray]:
        import torch

        from fuzzer.running.model import buffer_weights  # imports torch: not at module level, where backends are named

        compiled = self._graph_fn(graph)
        arrays = self._input_tensors(graph, inputs) | {f"{node}.{name}": self._to_torch(value)
                                                        for node, ps in params.items() for name, value in ps.items()}
        names = list(arrays)  # graph inputs, then parameters: the graph function's arguments
        constants = [index for index, name in enumerate(names) if name in buffer_weights(graph)]

        def forward(*args):
            values = dict(zip(names, args))
            weights = {node: {name: values[f"{node}.{name}"] for name in ps} for node, ps in params.items()}
            return compiled({spec.name: values[spec.name] for spec in graph.inputs}, weights)

        # The backward compiles at the first autograd.grad, so inductor's config covers both passes.
        with torch.enable_grad(), self.precision_context(graph), inductor_config(self.compile_options):
            results = torch_outputs_and_gradients(forward, list(arrays.values()), constants)
        return [out.detach().to("cpu", torch.float64).numpy() for out in results]

    def eager_gradients(self, case: Case, dtype: str, noise=None, device: str = "cpu") -> list[np.ndarray]:
        return torch_eager_gradients(case, dtype, noise, parameters=True, device=device)

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        # The campaign's own torch_outputs_and_gradients, written out: the same cotangents, and the
        # backward run through the compiled forward (inductor compiles it there).
        source = Source(imports=["import torch"])
        source.add_function(torch_outputs_and_gradients)
        constants = undifferentiated_indices(case)
        call = (f"torch_outputs_and_gradients(program, args, constants={constants})" if constants
                else "torch_outputs_and_gradients(program, args)")
        context = with_inductor_config("torch.enable_grad()", self.compile_options, source)
        return torch_program(case, self, [self.compile_source(), "# outputs, then the gradients of the inputs and weights"],
                             call, context, source=source)


BACKENDS = [TorchCompileGrad]
