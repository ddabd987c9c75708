"""torch.compile of a double backward: torch-compile-grad's outputs and gradients, then the gradient
of their norm (fuzzer/backends/second_order.py), all three computed by one compiled graph.

A kind of its own rather than a mode of torch-compile-grad: it compiles another program
(torch.func.grad over torch.func.vjp, traced whole by dynamo, where torch-compile-grad compiles the
forward and lets AOTAutograd derive the backward), at about twice the compile cost, so the
campaign's compile budget gives it a share of its own, and its findings a bucket of their own.
"""

from __future__ import annotations

import numpy as np

from fuzzer.backends.gradients import cotangent, torch_eager_gradients, undifferentiated_indices
from fuzzer.backends.second_order import torch_double_backward, torch_functional_double_backward, torch_graph_cotangents
from fuzzer.backends.torch_compile import inductor_config
from fuzzer.backends.torch_compile import with_inductor_config
from fuzzer.backends.torch_compile_grad import TorchCompileGrad
from fuzzer.ir import Case, Graph, infer_shapes, interpret
from fuzzer.ops import get_op
from fuzzer.reproducers.op_source import Source
from fuzzer.reproducers.program_source import torch_program


def cotangents_source(case: Case, dtype: str, device: str, source: Source) -> list[str]:
    """A reproducer's lines that set COTANGENTS as the campaign's compile takes them (torch_graph_cotangents),
    with `cotangent` written out into `source`."""
    source.add_function(cotangent)
    shapes = infer_shapes(case.graph)
    return [f"COTANGENTS = [torch.as_tensor(cotangent(i, shape), dtype=torch.{dtype}, device={device!r})",
            f"              for i, shape in enumerate({[tuple(shapes[name]) for name in case.graph.outputs]!r})]"]


class TorchCompileDoubleGrad(TorchCompileGrad):
    # Its outputs and first-order gradients are torch-compile-grad's: wrong the same way, its finding.
    derives_from_kind = "torch-compile-grad"
    kind = "torch-compile-double-grad"
    transformation = "double-vjp"
    in_sets = {"grad": {40: "cpu:float32"}}
    description = ("torch.compile of torch.func.grad of the gradient norm: outputs, gradients, then the "
                   "gradients of their norm (vs float64 eager double backward)")
    compile_weight = 2 * TorchCompileGrad.compile_weight
    cpu_compile_weight = 2 * TorchCompileGrad.cpu_compile_weight

    def supports(self, op_name: str) -> bool:
        # Not a custom autograd.Function node: dynamo drops its backward under torch.func.grad (pytorch#193279,
        # still in torch 2.13) and differentiates the forward instead, so that backward would go untested here.
        op = get_op(op_name)
        return op.second_order and not op.custom_gradient_of and super().supports(op_name)

    def _traced_function(self, graph: Graph, impls: dict):
        from fuzzer.running.model import buffer_weights

        buffers = buffer_weights(graph)
        cotangents = torch_graph_cotangents(graph, self.dtype, self.device)  # fixed per structure: constants of the trace

        def double_backward(inputs, params):
            names = [*inputs, *(f"{node}.{name}" for node, ps in params.items() for name in ps)]
            args = [*inputs.values(), *(value for ps in params.values() for value in ps.values())]

            def graph_fn(*values):
                by_name = dict(zip(names, values))
                weights = {node: {name: by_name[f"{node}.{name}"] for name in ps} for node, ps in params.items()}
                return interpret(graph, {name: by_name[name] for name in inputs}, weights, impls.__getitem__)

            constants = [index for index, name in enumerate(names) if name in buffers]
            return torch_functional_double_backward(graph_fn, args, constants, cotangents)

        return double_backward

    def _execute(self, graph: Graph, inputs: dict, params: dict) -> list[np.ndarray]:
        import torch

        tensors = {node: {name: self._to_torch(value) for name, value in ps.items()} for node, ps in params.items()}
        with self.precision_context(graph), inductor_config(self.compile_options):
            results = self._graph_fn(graph)(self._input_tensors(graph, inputs), tensors)
        return [out.detach().to("cpu", torch.float64).numpy() for out in results]

    def eager_gradients(self, case: Case, dtype: str, noise=None, device: str = "cpu") -> list[np.ndarray]:
        return torch_eager_gradients(case, dtype, noise, parameters=True, device=device, differentiate=torch_double_backward)

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        # The campaign's own torch_functional_double_backward and cotangents, compiled whole as it compiles them.
        source = Source(imports=["import torch"])
        source.add_function(torch_functional_double_backward)
        constants = undifferentiated_indices(case)
        transform = [
            *cotangents_source(case, self.dtype, self.device, source),
            "# outputs, gradients of the inputs and weights, then the gradients of their norm 1/2 sum ||g||^2",
            f"program = torch.compile(lambda *args: torch_functional_double_backward(graph, args, {constants!r}, COTANGENTS),",
            f'                        backend="inductor", fullgraph=True, dynamic={self.dynamic})',
        ]
        context = with_inductor_config("torch.enable_grad()", self.compile_options, source)
        return torch_program(case, self, transform, "program(*args)", context, source=source)


BACKENDS = [TorchCompileDoubleGrad]
