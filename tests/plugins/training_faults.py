"""Test plugin: faults planted only in the training-graph regions, each right in the forward and in
every region but its own.

- fault-double-grad-sin: torch.compile of a double backward through a sin whose derivative is a
  constant of the backward (a first-order Taylor step around the detached input): its gradient is
  right, the gradient of that gradient drops its second-order term.
- fault-custom-grad-twice: eager autograd (torch-module-grad) of a custom autograd.Function mul that
  halves its gradients when it is given one tensor as both operands (pytorch#183604). Eager, not
  compiled: dynamo refuses an autograd.Function given one tensor twice (a graph break, "duplicate
  tensor input", torch 2.13), so torch-compile-grad gives no verdict on such a graph.
- fault-autocast-off-ignored-in-backward: torch.compile under autocast of a nested
  autocast(enabled=False) matmul whose backward runs in the outer region's dtype (pytorch#179804);
  without autocast around it, its backward is float32 and right.
- fault-maximum-tie-gradient: eager autograd (torch-module-grad) of a maximum that gives the whole
  gradient to both operands where they tie, where torch's documented subgradient gives each half.
- fault-hvp-sin: fault-double-grad-sin's sin under torch-compile-hvp (forward over reverse): H t drops
  the second-order term, the gradient stays right.
- fault-jvp-mul-drops-a-term: eager forward mode (torch-jvp) of a custom autograd.Function mul whose
  jvp rule drops a * tb; its forward and backward are right, so every reverse-mode kind passes it.
"""

import torch


def sin_dropping_its_second_order_term(xs, ps, attrs):
    x = xs[0]
    at = x.detach()
    return torch.sin(at) + torch.cos(at) * (x - at)  # = sin(x), d/dx = cos(x) taken as a constant


class MulHalvedWhenGivenOneTensorTwice(torch.autograd.Function):
    @staticmethod
    def forward(a, b):
        return a * b

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.scale = 0.5 if inputs[0] is inputs[1] else 1.0

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return (ctx.scale * grad * b).sum_to_size(a.shape), (ctx.scale * grad * a).sum_to_size(b.shape)


def mul_halved_when_given_one_tensor_twice(xs, ps, attrs):
    return MulHalvedWhenGivenOneTensorTwice.apply(*xs)


class MatmulWithBackwardIn(torch.autograd.Function):
    @staticmethod
    def forward(a, b, backward_dtype):
        return torch.matmul(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, b, ctx.backward_dtype = inputs
        ctx.save_for_backward(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = (x.to(ctx.backward_dtype) for x in ctx.saved_tensors)
        grad = grad.to(ctx.backward_dtype)
        return (grad @ b.mT).float().sum_to_size(a.shape), (a.mT @ grad).float().sum_to_size(b.shape), None


def matmul_region_ignored_in_backward(xs, ps, attrs):
    device = xs[0].device.type
    outer = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else xs[0].dtype
    with torch.autocast(device, enabled=False):
        return MatmulWithBackwardIn.apply(*(x.float() for x in xs), outer)


def maximum_whole_gradient_to_both_at_a_tie(xs, ps, attrs):
    a, b = xs
    tie = (a == b).detach()
    # Forward: maximum. Backward: where they tie, d/da = d/db = 1 (a + b - (one of them, detached)).
    return torch.where(tie, a + b - a.detach(), torch.maximum(a, b))


class MulWhoseJvpDropsATerm(torch.autograd.Function):
    @staticmethod
    def forward(a, b):
        return a * b

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.b = inputs[1]

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return (grad * b).sum_to_size(a.shape), (grad * a).sum_to_size(b.shape)

    @staticmethod
    def jvp(ctx, a_tangent, b_tangent):
        return a_tangent * ctx.b  # d(ab) = da b + a db: the second term dropped


def mul_whose_jvp_drops_a_term(xs, ps, attrs):
    return MulWhoseJvpDropsATerm.apply(*xs)


def register(api):
    api.derive_backend("fault-double-grad-sin", base="torch-compile-double-grad:cpu:float32",
                       overrides={"sin": sin_dropping_its_second_order_term})
    api.derive_backend("fault-custom-grad-twice", base="torch-module-grad:cpu:float32",
                       overrides={"custom_grad_mul": mul_halved_when_given_one_tensor_twice})
    api.derive_backend("fault-autocast-off-ignored-in-backward", base="torch-compile-autocast-grad:cpu:float32",
                       overrides={"autocast_off_matmul": matmul_region_ignored_in_backward})
    api.derive_backend("fault-maximum-tie-gradient", base="torch-module-grad:cpu:float32",
                       overrides={"maximum": maximum_whole_gradient_to_both_at_a_tie})
    api.derive_backend("fault-jvp-mul-drops-a-term", base="torch-jvp:cpu:float32", overrides={"mul": mul_whose_jvp_drops_a_term})
    api.derive_backend("fault-hvp-sin", base="torch-compile-hvp:cpu:float32", overrides={"sin": sin_dropping_its_second_order_term})
