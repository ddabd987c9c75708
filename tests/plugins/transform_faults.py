"""Planted transformation faults, each visible to one backend only, with a control that must agree:

  vmap-ignores-batch   `add` whose jax.vmap rule (jax.custom_batching.custom_vmap) reads element
                       0 of its second operand for every batch element; plain jit never batches
  jax-wrong-vjp        `sin` with a jax.custom_vjp backward of 2 cos(x) g; the forward is right
  torch-wrong-backward `sin` as a torch.autograd.Function whose backward is 2 cos(x) g
  torch-vmap-ignores-batch  `mul` as a torch.library custom op whose vmap rule multiplies every copy by
                       copy 0's second operand, under torch-compile-vmap; torch-compile never batches.
                       (A custom op: dynamo ignores an autograd.Function's own vmap rule, torch 2.13.)
"""

import jax
import jax.numpy as jnp
import torch


@jax.custom_batching.custom_vmap
def add_ignoring_batch(x, y):
    return x + y


@add_ignoring_batch.def_vmap
def _add_rule(axis_size, in_batched, x, y):
    x_batched, y_batched = in_batched
    if y_batched:
        y = y[0]  # the fault: element 0's operand for every element
    return x + y, x_batched


@jax.custom_vjp
def sin_wrong_vjp(x):
    return jnp.sin(x)


sin_wrong_vjp.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (2.0 * jnp.cos(x) * g,))


class SinWrongBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2.0 * torch.cos(x) * g


@torch.library.custom_op("fuzzer_planted::mul_reading_copy_zero", mutates_args=())
def mul_reading_copy_zero(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a * b


@mul_reading_copy_zero.register_fake
def _(a, b):
    return torch.empty_like(a * b)


def _mul_rule(info, in_dims, a, b):
    a, b = (x.movedim(dim, 0) if dim is not None else x.expand(info.batch_size, *x.shape) for x, dim in zip((a, b), in_dims))
    return a * b[:1], 0  # the fault: copy 0's second operand for every copy


mul_reading_copy_zero.register_vmap(_mul_rule)


def register(api):
    add = {"add": lambda xs, ps, attrs: add_ignoring_batch(xs[0], xs[1])}
    api.derive_backend("vmap-ignores-batch", base="jax-vmap:cpu:float32", overrides=add)
    api.derive_backend("jit-ignores-batch", base="jax-jit:cpu:float32", overrides=add)
    jax_sin = {"sin": lambda xs, ps, attrs: sin_wrong_vjp(xs[0])}
    api.derive_backend("jax-wrong-vjp", base="jax-grad:cpu:float32", overrides=jax_sin)
    api.derive_backend("jit-wrong-vjp", base="jax-jit:cpu:float32", overrides=jax_sin)
    torch_sin = {"sin": lambda xs, ps, attrs: SinWrongBackward.apply(xs[0])}
    api.derive_backend("torch-wrong-backward", base="torch-module-grad:cpu:float32", overrides=torch_sin)
    api.derive_backend("module-wrong-backward", base="torch-module:cpu:float32", overrides=torch_sin)
    torch_mul = {"mul": lambda xs, ps, attrs: mul_reading_copy_zero(xs[0], xs[1])}
    api.derive_backend("torch-vmap-ignores-batch", base="torch-compile-vmap:cpu:float32", overrides=torch_mul)
    api.derive_backend("torch-compile-ignores-batch", base="torch-compile:cpu:float32", overrides=torch_mul)
