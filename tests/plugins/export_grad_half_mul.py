"""Test plugin: the joint graph of torch.export through a mul whose backward halves the gradient. Its
forward is right, so only a backend that runs its backward (torch-export-grad) can see it. It is a
torch.library custom op with its autograd registered, not a torch.autograd.Function: export traces
through an autograd.Function's forward and leaves its backward out of the joint graph."""

import torch


@torch.library.custom_op("fuzzer_test::mul_halving_its_gradient", mutates_args=())
def mul_halving_its_gradient_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a * b


@mul_halving_its_gradient_op.register_fake
def _(a, b):
    return torch.empty_like(a * b)


def _save_operands(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _half_gradient(ctx, grad):
    a, b = ctx.saved_tensors
    return (grad * b / 2).sum_to_size(a.shape), (grad * a / 2).sum_to_size(b.shape)


mul_halving_its_gradient_op.register_autograd(_half_gradient, setup_context=_save_operands)


def mul_halving_its_gradient(xs, ps, attrs):
    return mul_halving_its_gradient_op(xs[0], xs[1])


def register(api):
    api.derive_backend("plugin-export-grad-half-mul", base="torch-export-grad:cpu:float32",
                       overrides={"mul": mul_halving_its_gradient})
