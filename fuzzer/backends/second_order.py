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

from fuzzer.backends.forward_mode import jax_tangents, torch_tangents, without_overlap
from fuzzer.backends.gradients import cotangent


def half_squared_norm(gradients):
    """N = 1/2 * sum_j ||g_j||^2 over the gradients (any framework's arrays with `(g * g).sum()`)."""
    return sum((gradient * gradient).sum() for gradient in gradients) / 2


# -- torch ------------------------------------------------------------------------------


def torch_graph_cotangents(graph, dtype: str, device: str) -> list:
    """The fixed cotangent of each graph output (gradients.cotangent) as a tensor of `dtype` on `device`."""
    import torch

    from fuzzer.ir import infer_shapes

    shapes = infer_shapes(graph)
    return [torch.as_tensor(cotangent(i, shapes[name]), dtype=getattr(torch, dtype), device=device)
            for i, name in enumerate(graph.outputs)]


def _torch_gradients_with_graph(fn, args, constants) -> tuple:
    """(outputs, leaves, zeros, gradients): fn's outputs at `args` (each but those at the indices in
    `constants` a leaf requiring grad), and the gradient of sum_i <output_i, cotangent_i> w.r.t. each leaf
    with its graph kept (create_graph), zeros where nothing depends on a leaf; None where no output is
    differentiable (argmax, a comparison)."""
    import torch

    args = [arg if index in constants else arg.detach().requires_grad_(True) for index, arg in enumerate(args)]
    leaves = [arg for index, arg in enumerate(args) if index not in constants]
    outputs = list(fn(*args))
    pairs = [(out, torch.as_tensor(cotangent(i, out.shape), dtype=out.dtype, device=out.device))
             for i, out in enumerate(outputs) if out.requires_grad]
    zeros = [torch.zeros_like(leaf) for leaf in leaves]
    if not pairs:
        return outputs, leaves, zeros, None
    grads = torch.autograd.grad([out for out, _ in pairs], leaves, grad_outputs=[c for _, c in pairs],
                                allow_unused=True, create_graph=True)
    return outputs, leaves, zeros, [zero if grad is None else grad for grad, zero in zip(grads, zeros)]


def _gradient_of(scalar, leaves, zeros) -> list:
    """The gradient of `scalar` w.r.t. `leaves`, zeros where it does not depend on one, and all zeros where
    `scalar` is None (nothing second-order to differentiate). `zero + g`: autograd may give a ZeroTensor
    (abs's second derivative), which numpy cannot take."""
    import torch

    second = torch.autograd.grad(scalar, leaves, allow_unused=True) if scalar is not None else [None] * len(leaves)
    return [zero if grad is None else zero + grad for grad, zero in zip(second, zeros)]


def torch_double_backward(fn, args, constants=()) -> tuple:
    """(*fn(*args), *first-order gradients, *gradients of N) by eager autograd, w.r.t. each arg but those
    at the indices in `constants`; a gradient that nothing depends on is zeros, as in gradients.py."""
    outputs, leaves, zeros, grads = _torch_gradients_with_graph(fn, args, constants)
    if grads is None:
        return (*outputs, *zeros, *zeros)
    # A gradient constant in the leaves (linear's w.r.t. its input, for fixed weights) adds nothing to N's.
    varying = [grad for grad in grads if grad.requires_grad]
    second = _gradient_of(half_squared_norm(varying) if varying else None, leaves, zeros)
    return (*(out.detach() for out in outputs), *(grad.detach() for grad in grads), *second)


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


# -- Hessian-vector products: H t, t the tangents of forward_mode.py ----------------------------------


def torch_hvp_by_reverse(fn, args, constants=()) -> tuple:
    """(*fn(*args), *H t w.r.t. each arg but those at the indices in `constants`) by eager reverse over
    reverse: the gradient of <grad L, t>, L = sum_i <output_i, cotangent_i> (gradients.py), t the tangents
    of forward_mode.py; an arg that nothing second-order depends on gets zeros."""
    outputs, leaves, zeros, grads = _torch_gradients_with_graph(fn, args, constants)
    if grads is None:
        return (*outputs, *zeros)
    products = [(grad * t).sum() for grad, t in zip(grads, torch_tangents(leaves)) if grad.requires_grad]
    return (*(out.detach() for out in outputs), *_gradient_of(sum(products) if products else None, leaves, zeros))


def torch_functional_hvp(fn, args, constants, tangents, cotangents) -> tuple:
    """torch_hvp_by_reverse's results by forward over reverse, as torch.func.hessian composes them
    (jacfwd of jacrev): torch.func.jvp of torch.func.grad of L along `tangents` (those of the args not at
    the indices in `constants`), with `cotangents[i]` for output i (its float outputs only)."""
    import torch

    fixed = {index: args[index] for index in constants}
    varying = [index for index in range(len(args)) if index not in fixed]

    def loss(*leaves):
        by_index = {**fixed, **dict(zip(varying, leaves))}
        outputs = list(fn(*(by_index[index] for index in range(len(args)))))
        return sum((out * c).sum() for out, c in zip(outputs, cotangents) if out.is_floating_point()), outputs

    leaves = without_overlap(args[index] for index in varying)
    outputs = list(fn(*args))  # which outputs are float
    if not any(out.is_floating_point() for out in outputs):
        return (*outputs, *(torch.zeros_like(leaf) for leaf in leaves))
    gradient = torch.func.grad(loss, argnums=tuple(range(len(leaves))), has_aux=True)
    _, products, outputs = torch.func.jvp(gradient, leaves, tuple(tangents), has_aux=True)
    return (*outputs, *products)


def torch_forward_over_reverse(fn, args) -> tuple:
    """torch_functional_hvp of every arg with the fixed tangents and cotangents (torch_eager_gradients' `differentiate`)."""
    import torch

    cotangents = [torch.as_tensor(cotangent(i, out.shape), dtype=out.dtype, device=out.device) for i, out in enumerate(fn(*args))]
    return torch_functional_hvp(fn, args, (), torch_tangents(args), cotangents)


def _jax_loss(fn):
    import jax

    def loss(xs):
        outputs = fn(xs)
        floats = [(i, out) for i, out in enumerate(outputs) if jax.numpy.issubdtype(out.dtype, jax.numpy.floating)]
        return sum((out * jax.numpy.asarray(cotangent(i, out.shape), dtype=out.dtype)).sum() for i, out in floats), outputs

    return loss


def jax_hessian_vector_products(fn, inputs: dict, names: list[str]) -> list:
    """fn(inputs) -> outputs, then H t of each input in `names` order: jax.jvp of jax.grad of L (forward
    over reverse, jax.hessian's composition: jacfwd of jacrev), t the tangents of forward_mode.py."""
    import jax

    _, products, outputs = jax.jvp(jax.grad(_jax_loss(fn), has_aux=True), (inputs,), (jax_tangents(inputs, names),), has_aux=True)
    return [*outputs, *(products[name] for name in names)]


def jax_hvp_by_reverse(fn, inputs: dict, names: list[str]) -> list:
    """jax_hessian_vector_products' results by reverse over reverse: jax.grad of <jax.grad L, t>."""
    import jax

    tangents = jax_tangents(inputs, names)

    def directional(xs):
        grads, outputs = jax.grad(_jax_loss(fn), has_aux=True)(xs)
        return sum((grads[name] * tangents[name]).sum() for name in names), outputs

    products, outputs = jax.grad(directional, has_aux=True)(inputs)
    return [*outputs, *(products[name] for name in names)]
