"""Forward-mode outputs (Jacobian-vector products), shared by torch-jvp, torch-compile-jvp and jax-jvp (and
the tangents of the Hessian-vector kinds, second_order.py).

A forward-mode backend returns the graph's outputs, then one tangent per graph output: J t, the
derivative of that output along fixed tangents t_j of the differentiated arrays (`tangent`:
quarter-integers like gradients.py's cotangents, drawn from a stream of their own). Forward mode
runs each op's JVP rule (torch's `result:` formulas of derivatives.yaml, functorch's batching of
them, inductor's fusion of the joint graph; jax's jvp rules under XLA), a code path reverse mode
never enters: a JVP rule that drops a term, or a compiler that fuses one wrongly, is wrong only here.

torch's reference is reverse mode, not forward mode: J t = d/du <J^T u, t>, the gradient w.r.t. the
cotangent u of the vjp's inner product with t (a double backward, float64 eager, stock ops; the vjp is
linear in u, so u = 1 serves). Forward mode's formulas are thus checked against reverse mode's, which
share none of them; ops whose second derivative torch lacks declare it (OpDef.second_order) and are
not drawn. jax derives reverse mode from forward mode (linearize, then transpose), so it has no such
independent path: jax-jvp's reference is jax's float64 eager jvp, and it tests what jax.jit makes of a
jvp, not jax's rules. The honest same-dtype model is, as for gradients, the reference's own
computation in the backend's dtype.

Where a derivative is not defined, the two modes take different honest conventions: for maximum of
nan and 0, reverse mode passes both operands' parts (t_a + t_b), forward mode the second's (t_b, torch
2.13); reverse mode multiplies floor's zero derivative into cos(inf)'s nan and gets 0, forward mode
gets nan * 0 = nan. An entry where torch's float64 eager forward mode is not the reverse-mode reference
is left unjudged (`other_route`, gradients.same_convention); forward mode in the backend's dtype is
one more honest same-dtype model (it rounds in another order than reverse mode: softmax's jvp). So
torch-compile-jvp judges the compiler's forward mode against eager's, and torch-jvp, whose same-dtype
model is its own stock run, judges a plugin's forward-mode rules (derive_backend) and, off the CPU, the
device's kernels against the CPU's; a forward-mode formula of torch's that disagrees with reverse mode in
every dtype is unjudged (torch's own OpInfo tests check each formula against numerical derivatives:
check_forward_ad).
"""

from __future__ import annotations

import numpy as np


# Seeds the tangents apart from the cotangents (gradients.cotangent), which share their index and shape.
TANGENT_STREAM = 7919


def tangent(index: int, shape) -> np.ndarray:
    """The fixed tangent of differentiated array `index`: quarter-integers in [-1, 1], seeded by index and shape."""
    rng = np.random.default_rng([index, *(int(size) for size in shape), TANGENT_STREAM])
    return rng.integers(-4, 5, size=tuple(shape)) / 4.0


# -- torch ------------------------------------------------------------------------------


def torch_tangents(leaves) -> list:
    """tangent(j, ...) for each leaf j, as a tensor of the leaf's dtype on its device."""
    import torch

    return [torch.as_tensor(tangent(j, leaf.shape), dtype=leaf.dtype, device=leaf.device) for j, leaf in enumerate(leaves)]


# torch's documented gaps in forward mode, no verdict: an op whose forward-mode formula it has not written
# ("Trying to use forward AD with mkldnn_rnn_layer that does not support it", lstm on the CPU, torch 2.13), and
# cuDNN's RNN, which reads its weights' storage, which functorch's wrappers have none of (pytorch/functorch#629).
FORWARD_AD_GAPS = ("Trying to use forward AD with", "Cannot access storage of TensorWrapper")


def torch_jvp_by_reverse(fn, args, constants=()) -> tuple:
    """(*fn(*args), *J t of each output) by eager reverse mode, t = torch_tangents of each arg but those at
    the indices in `constants`: the gradient w.r.t. u of <vjp(u), t>. A non-float output, or one nothing
    differentiable reaches, has a zero tangent (as torch.func.jvp gives it)."""
    import torch

    args = [arg if index in constants else arg.detach().requires_grad_(True) for index, arg in enumerate(args)]
    leaves = [arg for index, arg in enumerate(args) if index not in constants]
    outputs = list(fn(*args))
    tangents_out = [torch.zeros_like(out) for out in outputs]
    probes = {i: torch.ones_like(out, requires_grad=True) for i, out in enumerate(outputs) if out.requires_grad}
    if probes:
        grads = torch.autograd.grad([outputs[i] for i in probes], leaves, grad_outputs=list(probes.values()),
                                    allow_unused=True, create_graph=True)
        products = [(grad * t).sum() for grad, t in zip(grads, torch_tangents(leaves)) if grad is not None and grad.requires_grad]
        if products:  # else every gradient is constant in u: no output depends on the leaves
            derived = torch.autograd.grad(sum(products), list(probes.values()), allow_unused=True)
            for i, value in zip(probes, derived):
                if value is not None:
                    tangents_out[i] = value
    return (*(out.detach() for out in outputs), *(value.detach() for value in tangents_out))


def torch_functional_jvp(fn, args, constants, tangents) -> tuple:
    """(*fn(*args), *J t of each output) by torch.func.jvp (forward mode), `tangents` those of the args
    not at the indices in `constants`, in order (`without_overlap`)."""
    import torch

    fixed = {index: args[index] for index in constants}
    varying = [index for index in range(len(args)) if index not in fixed]

    def forward(*leaves):
        by_index = {**fixed, **dict(zip(varying, leaves))}
        return tuple(fn(*(by_index[index] for index in range(len(args)))))

    outputs, derived = torch.func.jvp(forward, without_overlap(args[index] for index in varying), tuple(tangents))
    return (*outputs, *derived)


def without_overlap(primals) -> tuple:
    """The primals, each whose elements share memory (an expanded layout) as a contiguous copy: make_dual copies
    a tangent into its primal's strides, which such a primal cannot hold ("more than one element of the
    written-to tensor refers to a single memory location", torch 2.13 and 2.15)."""
    return tuple(p.contiguous() if any(s == 0 and n > 1 for s, n in zip(p.stride(), p.shape)) else p for p in primals)


def torch_forward_mode(fn, args) -> tuple:
    """torch_functional_jvp of every arg along torch_tangents (torch_eager_gradients' `differentiate`)."""
    return torch_functional_jvp(fn, args, (), torch_tangents(args))


# -- jax --------------------------------------------------------------------------------


def jax_tangents(inputs: dict, names: list[str]) -> dict:
    """tangent(j, ...) for the input named names[j], as an array of its dtype."""
    import jax

    return {name: jax.numpy.asarray(tangent(j, inputs[name].shape), dtype=inputs[name].dtype) for j, name in enumerate(names)}


def jax_outputs_and_tangents(fn, inputs: dict, names: list[str]) -> list:
    """fn(inputs) -> outputs, then J t of each output (jax.jvp), t the tangent of each input in `names`
    order; a non-float output's tangent (jax's float0) as zeros."""
    import jax

    outputs, derived = jax.jvp(fn, (inputs,), (jax_tangents(inputs, names),))
    return [*outputs, *(jax.numpy.zeros(out.shape) if value.dtype == jax.dtypes.float0 else value
                        for out, value in zip(outputs, derived))]
