"""Test plugin: torch.compile of a mul whose backward halves the gradient, as a wrong derivative
formula in a custom autograd.Function would. Its forward is right, so only a backend that runs
the backward through it (torch-compile-grad) can see it."""

import torch


class MulHalvingItsGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return (grad * b / 2).sum_to_size(a.shape), (grad * a / 2).sum_to_size(b.shape)


def mul_halving_its_gradient(xs, ps, attrs):
    return MulHalvingItsGradient.apply(xs[0], xs[1])


def register(api):
    api.derive_backend("plugin-compile-grad-half-mul", base="torch-compile-grad:cpu:float32",
                       overrides={"mul": mul_halving_its_gradient})
