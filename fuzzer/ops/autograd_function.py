"""Custom autograd.Function nodes: an existing op's forward, wrapped in a torch.autograd.Function whose
backward we write from the math, as training code does for a fused or memory-saving kernel.

`custom_grad_mul` is mul, etc.: the same shape rule, reference and numerics (its forward *is* the
op's), a torch implementation that goes through `Function.apply`, so eager autograd, AOTAutograd
(torch-compile-grad) and dynamo's tracing of custom Functions run our backward; the gradient
references differentiate the plain op's stock implementation (OpDef.custom_gradient_of; gradients.py),
which shares none of it. The generator may pass one value as both operands (mul(y, y)), the case of
pytorch#183604 (an autograd.Function given the same tensor twice got half its gradient).

jax has no autograd.Function: its backends run the plain op's jax implementation. The backward
formulas are written in differentiable torch ops, so a double backward through them is defined.
"""

from __future__ import annotations

from dataclasses import replace

from fuzzer.ops import OpDef
from fuzzer.ops.elementwise import OPS as ELEMENTWISE
from fuzzer.ops.matmul import OPS as MATMUL
from fuzzer.ops.unary import OPS as UNARY


def _apply(op_name: str):
    def custom_grad(xs, ps, attrs):
        from fuzzer.ops._autograd_functions import FUNCTIONS

        return FUNCTIONS[op_name].apply(*xs)

    custom_grad.__name__ = f"custom_grad_{op_name}"
    return custom_grad


def _custom_grad(op: OpDef) -> OpDef:
    # Float only: a backward is written for float tensors (the plain op keeps its integer semantics).
    return replace(op, name=f"custom_grad_{op.name}", torch=_apply(op.name), custom_gradient_of=op.name,
                   exact_dtypes=(), exact_reference=None, family="", named_only=True,
                   notes=f"{op.name} in a torch.autograd.Function with our backward; jax runs the plain {op.name}")


WRAPPED = ("mul", "add", "div", "sin", "exp", "matmul")
OPS = [_custom_grad(op) for op in (*ELEMENTWISE, *UNARY, *MATMUL) if op.name in WRAPPED]
