"""Second-order gradient outputs (double backward), shared by torch-compile-double-grad and jax-double-grad.

A double-gradient backend returns what its first-order kind returns (the outputs, then the gradients
g_j of L = sum_i <output_i, cotangent_i> w.r.t. each differentiated array, gradients.py), then the
gradient of the gradient norm  N = 1/2 * sum_j ||g_j||^2  w.r.t. the same arrays: the Hessian of L
times g, what a gradient penalty (WGAN-GP, R1) backpropagates in training. N's derivative runs
through the first backward, so every op's backward formula is differentiated once more: a backward
computed from detached values (its second-order term dropped) is wrong only here.

The reference is the framework's float64 eager double backward of the stock ops (torch:
autograd.grad(create_graph=True), then autograd.grad of N; jax: jax.grad of N over jax.vjp, op by
op), the honest same-dtype model its eager run in the backend's dtype, as gradients.py explains for
the first order. The compiled side gets there another way (torch.compile cannot compile a
create_graph backward: pytorch#181581 made it an error; it compiles torch.func.grad over
torch.func.vjp instead, one traced graph for both backwards), so the reference shares neither its
tracing nor its kernels.

Ops whose second derivative torch or jax does not implement declare it (OpDef.second_order = False)
and are not drawn by these backends.
"""

from __future__ import annotations

from fuzzer.backends.gradients import cotangent


def half_squared_norm(gradients):
    """N = 1/2 * sum_j ||g_j||^2 over the gradients (any framework's arrays with `(g * g).sum()`)."""
    return sum((gradient * gradient).sum() for gradient in gradients) / 2


# -- torch ------------------------------------------------------------------------------


def torch_double_backward(fn, args, constants=()) -> tuple:
    """(*fn(*args), *first-order gradients, *gradients of N) by eager autograd, w.r.t. each arg but those
    at the indices in `constants`; a gradient that nothing depends on is zeros, as in gradients.py."""
    import torch

    args = [arg if index in constants else arg.detach().requires_grad_(True) for index, arg in enumerate(args)]
    leaves = [arg for index, arg in enumerate(args) if index not in constants]
    outputs = list(fn(*args))
    pairs = [(out, torch.as_tensor(cotangent(i, out.shape), dtype=out.dtype, device=out.device))
             for i, out in enumerate(outputs) if out.requires_grad]
    zeros = [torch.zeros_like(leaf) for leaf in leaves]
    if not pairs:
        return (*outputs, *zeros, *zeros)
    grads = torch.autograd.grad([out for out, _ in pairs], leaves, grad_outputs=[c for _, c in pairs],
                                allow_unused=True, create_graph=True)
    grads = [zero if grad is None else grad for grad, zero in zip(grads, zeros)]
    # A gradient that does not depend on the arrays (linear's w.r.t. its input, for fixed weights) adds nothing to N's.
    varying = [grad for grad in grads if grad.requires_grad]
    second = torch.autograd.grad(half_squared_norm(varying), leaves, allow_unused=True) if varying else [None] * len(leaves)
    # `zero + grad`: autograd may give a ZeroTensor (abs's second derivative), which numpy cannot take.
    return (*(out.detach() for out in outputs), *(grad.detach() for grad in grads),
            *(zero if grad is None else zero + grad for grad, zero in zip(second, zeros)))


def torch_functional_double_backward(fn, args, constants, cotangents) -> tuple:
    """torch_double_backward's results by torch.func (what torch.compile traces): torch.func.grad of N
    over torch.func.vjp of `fn`, with `cotangents[i]` for output i (its float outputs only)."""
    import torch

    fixed = {index: args[index] for index in constants}
    varying = [index for index in range(len(args)) if index not in fixed]

    def forward(*leaves):
        by_index = {**fixed, **dict(zip(varying, leaves))}
        outputs = list(fn(*(by_index[index] for index in range(len(args)))))
        return [out for out in outputs if out.is_floating_point()], outputs

    def gradient_norm(*leaves):
        floats, vjp, outputs = torch.func.vjp(forward, *leaves, has_aux=True)
        grads = vjp([c for c, out in zip(cotangents, outputs) if out.is_floating_point()])
        return half_squared_norm(grads), (outputs, grads)

    leaves = [args[index] for index in varying]
    outputs = list(fn(*args))  # which outputs are float (an unused forward: the compiler drops it)
    if not any(out.is_floating_point() for out in outputs):  # argmax, a comparison: nothing to differentiate
        zeros = [torch.zeros_like(leaf) for leaf in leaves]
        return (*outputs, *zeros, *zeros)
    second, (outputs, grads) = torch.func.grad(gradient_norm, argnums=tuple(range(len(leaves))), has_aux=True)(*leaves)
    return (*outputs, *grads, *second)


# -- jax --------------------------------------------------------------------------------


def jax_double_backward(fn, inputs: dict, names: list[str]) -> list:
    """fn(inputs) -> outputs, then the gradient of each input in `names` order (jax.vjp, as
    gradients.jax_outputs_and_gradients), then the gradients of N (jax.grad over that vjp)."""
    import jax

    def gradient_norm(xs):
        outputs, vjp = jax.vjp(fn, xs)
        (grads,) = vjp([jax.numpy.asarray(cotangent(i, out.shape), dtype=out.dtype) for i, out in enumerate(outputs)])
        return half_squared_norm(grads[name] for name in names), (outputs, grads)

    second, (outputs, grads) = jax.grad(gradient_norm, has_aux=True)(inputs)
    return [*outputs, *(grads[name] for name in names), *(second[name] for name in names)]
