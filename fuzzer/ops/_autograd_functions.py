"""The torch.autograd.Function classes of fuzzer/ops/autograd_function.py: each op's forward, and its
backward written from the math in differentiable torch ops. A module of its own, imported by the
implementations at their first call, so that the op registry does not import torch, and so that
dynamo, tracing an implementation, finds the classes defined (a class built inside a traced function
is a graph break)."""

import torch


class Mul(torch.autograd.Function):
    @staticmethod
    def forward(a, b):
        return a * b

    @staticmethod
    def setup_context(ctx, inputs, output):  # the form torch.func transforms need too
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return (grad * b).sum_to_size(a.shape), (grad * a).sum_to_size(b.shape)


class Add(torch.autograd.Function):
    @staticmethod
    def forward(a, b):
        return a + b

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.shapes = [x.shape for x in inputs]

    @staticmethod
    def backward(ctx, grad):
        return tuple(grad.sum_to_size(shape) for shape in ctx.shapes)


class Div(torch.autograd.Function):
    @staticmethod
    def forward(a, b):
        return a / b

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        # -grad * (a / b) / b, not -grad * a / (b * b): b * b underflows for a subnormal b (0 / 0 where a is 0).
        return (grad / b).sum_to_size(a.shape), (-grad * ((a / b) / b)).sum_to_size(b.shape)


class Sin(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return torch.sin(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.cos(x)


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return torch.exp(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)  # d exp(x) = exp(x): the output, not the input, is saved

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out


class Matmul(torch.autograd.Function):
    @staticmethod
    def forward(a, b):
        return torch.matmul(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors  # (..., M, K) @ (..., K, N), batch dims broadcast
        return (grad @ b.mT).sum_to_size(a.shape), (a.mT @ grad).sum_to_size(b.shape)


FUNCTIONS = {"mul": Mul, "add": Add, "div": Div, "sin": Sin, "exp": Exp, "matmul": Matmul}


