"""torch.export of the joint (forward + backward) graph: the nested module exported with a scalar loss,
turned into one graph of forward and backward by torch.export.experimental._export_forward_backward
(unstable API, present in torch 2.13 and 2.15), and that graph run. Its results: the graph's outputs,
then the gradients of sum_i <output_i, cotangent_i> w.r.t. every graph input and every parameter
(gradients.py), judged against float64 eager autograd of the stock ops, as torch-compile-grad's are.

The joint needs the loss as the exported forward's output, and allows other outputs only where no
gradient flows from them: the module exported returns the loss, then the graph's outputs detached.
An argument that gets no gradient must not require one (AOTAutograd refuses it, pytorch#101192), so an
eager autograd run of the loss first decides which inputs and parameters require grad; the others get
zeros, as torch_outputs_and_gradients gives them. The joint's ExportedProgram.module() cannot unflatten
its outputs (the loss and the gradients), so its graph module is called directly, the arguments and
outputs placed by the graph signature. A torch.autograd.Function's own backward is not in the joint
(export traces through its forward), so the training-graph ops `custom_grad_*` test nothing here.

Exported once per graph structure, as torch-jit-trace traces once: the joint takes every weight and
buffer as an argument, so a later case of the same structure (the same inputs get gradients and the same
outputs are differentiable) runs the stored joint with its own weights and values. The module is the
flat one, so that every case of a structure names its parameters alike.
An export is about a second; a structure's cases are about nine in a campaign.
"""

from __future__ import annotations

import numpy as np

from fuzzer.backends import CompiledCache
from fuzzer.backends.gradients import GradientOutputs, cotangent, torch_eager_gradients
from fuzzer.backends.torch_module import ModuleBackend
from fuzzer.ir import Case
from fuzzer.reproducers.op_source import Source


def torch_joint_outputs_and_gradients(model, inputs, exported=None) -> tuple:
    """(*model(*inputs), *gradients of sum_i <output_i, cotangent_i> w.r.t. each input, then each of
    model's parameters in `named_parameters` order), every one from the joint graph of torch.export; where no
    output is differentiable there is no loss to export, and the outputs are eager's, the gradients zeros.
    `exported(key, export)`, where given, returns the joint stored for `key` or stores export()'s."""
    import torch
    from torch.export.experimental import _export_forward_backward

    parameters = dict(model.named_parameters())
    for parameter in parameters.values():
        parameter.requires_grad_(True)
    leaves = [x.detach().requires_grad_(True) for x in inputs]
    outputs = list(model(*leaves))
    differentiable = [i for i, out in enumerate(outputs) if out.requires_grad]
    zeros = [torch.zeros_like(arg) for arg in [*inputs, *parameters.values()]]
    if not differentiable:  # argmax, floor, ...: no loss to differentiate
        return (*(out.detach() for out in outputs), *zeros)
    cotangents = [torch.as_tensor(cotangent(i, outputs[i].shape), dtype=outputs[i].dtype, device=outputs[i].device)
                  for i in differentiable]
    loss = sum((outputs[i] * c).sum() for i, c in zip(differentiable, cotangents))
    # The joint refuses an argument that requires grad and gets none (pytorch#101192): eager autograd says which do.
    reached = torch.autograd.grad(loss, [*leaves, *parameters.values()], allow_unused=True)
    gets_gradient = [grad is not None for grad in reached]
    for parameter, gets in zip(parameters.values(), gets_gradient[len(inputs):]):
        parameter.requires_grad_(gets)

    class Loss(torch.nn.Module):
        """The loss, then the outputs, detached: the joint allows no other output a gradient flows from."""

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *inputs_and_cotangents):
            outputs = self.model(*inputs_and_cotangents[:len(inputs)])
            pairs = zip([outputs[i] for i in differentiable], inputs_and_cotangents[len(inputs):])
            return sum((out * c).sum() for out, c in pairs), *(out.detach() for out in outputs)

    user_inputs = [x.detach().requires_grad_(gets) for x, gets in zip(inputs, gets_gradient)] + cotangents
    export = lambda: _export_forward_backward(torch.export.export(Loss(), tuple(user_inputs)))  # noqa: E731
    joint = export() if exported is None else exported((tuple(parameters), tuple(gets_gradient), tuple(differentiable)), export)
    # The graph module's arguments, in the signature's order: weights and buffers by name (this model's: every
    # one is persistent), the joint's own constants (tensors our ops build from attributes), then the user inputs.
    stored = {**joint.constants, **{f"model.{name}": value for name, value in model.state_dict(keep_vars=True).items()}}
    pending = iter(user_inputs)
    arguments = [next(pending) if spec.target is None else stored[spec.target] for spec in joint.graph_signature.input_specs]
    results = list(zip(joint.graph_signature.output_specs, joint.graph_module(*arguments)))
    kinds = torch.export.graph_signature.OutputKind
    by_kind = lambda kind: [(spec.target, value) for spec, value in results if spec.kind == kind]  # noqa: E731
    input_gradients = iter(value for _, value in by_kind(kinds.GRADIENT_TO_USER_INPUT))  # in input order
    # A parameter's target is its name under Loss: "model." and its name in `model`.
    parameter_gradients = {target.removeprefix("model."): value for target, value in by_kind(kinds.GRADIENT_TO_PARAMETER)}
    gradients = [next(input_gradients) if gets else None for gets in gets_gradient[:len(inputs)]]
    gradients += [parameter_gradients.get(name) for name in parameters]
    return (*(value for _, value in by_kind(kinds.USER_OUTPUT)),
            *(zero if gradient is None else gradient for gradient, zero in zip(gradients, zeros)))


class TorchExportGrad(GradientOutputs, ModuleBackend):
    kind = "torch-export-grad"
    in_sets = {"grad": {45: "cpu:float32"}}
    description = ("torch.export of the joint forward + backward graph (_export_forward_backward): outputs, then "
                   "gradients w.r.t. inputs and parameters (vs float64 eager autograd)")
    expensive = True
    context_source = "torch.enable_grad()"
    # The joint is one flat aten graph whatever the nesting, and a nesting drawn per case (its seed's) would
    # give every case of a structure other parameter names, so no stored joint could serve it.
    flat = True

    def unavailable_reason(self) -> str | None:
        reason = super().unavailable_reason()
        if reason:
            return reason
        import torch
        import torch.export.experimental

        if not hasattr(torch.export.experimental, "_export_forward_backward"):
            return (f"torch.export.experimental has no _export_forward_backward (the joint graph's export) "
                    f"in torch {torch.__version__}.")
        return None

    def program(self, graph, module, args, fresh):
        structure = (self.name, graph.structure_key())
        return lambda *inputs: torch_joint_outputs_and_gradients(
            module, inputs, lambda key, export: JOINTS.get((structure, key), export))

    def transform(self, module, args, fresh):
        return lambda *inputs: torch_joint_outputs_and_gradients(module, inputs)

    def run_context(self):
        import torch

        return torch.enable_grad()

    def reproducer_transform(self, source: Source) -> list[str]:
        source.add_function(torch_joint_outputs_and_gradients)
        return ["program = lambda *inputs: torch_joint_outputs_and_gradients(model, inputs)"
                "  # outputs, then the gradients of the inputs and weights, from the exported joint graph"]

    def eager_gradients(self, case: Case, dtype: str, noise=None, device: str = "cpu") -> list[np.ndarray]:
        return torch_eager_gradients(case, dtype, noise, parameters=True, device=device)


# Joints by (backend name, graph structure, the joint's own key), for the life of the process, oldest evicted first.
JOINTS = CompiledCache(limit=64)

BACKENDS = [TorchExportGrad]
