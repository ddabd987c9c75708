"""Gradient outputs, shared by the autograd backends (torch-module-grad, jax-grad, torch-compile-grad).

A gradient backend returns the graph's outputs followed by one gradient per graph input
(in graph order), and torch-compile-grad one per parameter after them (`differentiated`: in the
case's order, buffers such as running statistics excluded):
the gradient of the scalar function  sum_i <output_i, cotangent_i>,  i.e.
the vector-Jacobian product with fixed cotangents. The cotangents are a deterministic
function of each output's index and shape, drawn from {-1, -0.75, ..., 1} (exact in every
dtype), so both sides of the comparison and every rerun use the same numbers.

The forward outputs are judged against the numpy reference as always. The gradients are
judged against the same framework's float64 *eager* autograd of the same function, run by
`extra_reference` (see fuzzer/oracle/reference.py, "Extra outputs"), with the same eager autograd in the
backend's dtype as the honest same-dtype model. Why float64 eager autograd is a sound
reference here: the bug classes these backends target are float32 / compiled / transformed
gradients (a jit that fuses a backward wrongly, a custom VJP that is wrong only in one
dtype, a backward kernel that loses precision), and the reference is computed in another
dtype, op by op, with the stock implementations of every op (a plugin's overrides are not
used), so it shares none of that. Its limitation: a gradient rule wrong in the framework
for every dtype (float64 eager included) is wrong in the reference too and goes unseen;
only a numpy derivative written from the math could see that, and the ops declare none. And
the same-dtype model is the framework's own eager autograd: a float32 backward kernel that
loses precision in eager mode too is within its own allowance (torch-module-grad, which is
eager autograd through a module, then tests the module path, the gradient wiring and any
overridden op's backward, not torch's float32 backward kernels themselves).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fuzzer import oracle
from fuzzer.ir import Case, interpret, split_arrays
from fuzzer.ops import get_op


def cotangent(index: int, shape) -> np.ndarray:
    """The fixed cotangent of output `index`: quarter-integers in [-1, 1], seeded by index and shape."""
    rng = np.random.default_rng([index, *(int(size) for size in shape)])
    return rng.integers(-4, 5, size=tuple(shape)) / 4.0


def value_variants(case: Case, dtype: str) -> list[Case]:
    """The case at its own values, at its values rounded to `dtype`, and at NOISY_RUNS copies
    moved by a few units of `dtype`'s roundoff (the runs `oracle.framework_reference` takes)."""
    rounded = {name: oracle.round_to_dtype(value, dtype) for name, value in case.arrays.items()}
    variants = [case, replace(case, arrays=rounded)]
    for run in range(oracle.NOISY_RUNS):
        seed = (case.seed % 2**32) * oracle.NOISY_RUNS + run
        moved = {name: value * (1.0 + rounding_noise(value, seed, dtype)) for name, value in case.arrays.items()}
        variants.append(replace(case, arrays=moved))
    return variants


def inputs_flushed(case: Case, dtype: str) -> Case | None:
    """The case with every value subnormal in `dtype` read as 0, as a compiled kernel that sets DAZ reads it
    (std of [0, 2.8e-40]: its derivative is 0.5 there and 0 at [0, 0]); None where the case has none."""
    arrays = {name: oracle.flushed(value, dtype) for name, value in case.arrays.items()}
    if all(np.array_equal(arrays[name], value) for name, value in case.arrays.items()):
        return None
    return replace(case, arrays=arrays)


def rounding_noise(values, seed: int, dtype: str) -> np.ndarray:
    """Relative errors of a few units of `dtype`'s roundoff (oracle.ROUNDING_SLACK), one per entry, each
    a function of the entry's value and `seed`: equal values move alike, as rounding moves them, so a tie
    (maximum(a, b) at a == b, two equal entries of an amax) stays a tie, and the perturbed runs take
    the subgradient the reference takes there (torch's: half the gradient to each side) rather than
    breaking the tie one way, which would allow any gradient of that output up to the cotangent's size."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    with np.errstate(over="ignore"):  # a hash: uint64 arithmetic wraps
        mixed = (bits ^ np.uint64(seed * 0x9E3779B97F4A7C15 % 2**64)) * np.uint64(0xBF58476D1CE4E5B9)
        mixed ^= mixed >> np.uint64(31)
        mixed *= np.uint64(0x94D049BB133111EB)
        mixed ^= mixed >> np.uint64(29)
    uniform = (mixed >> np.uint64(11)).astype(np.float64) / 2.0**52 - 1.0  # in [-1, 1)
    return oracle.ROUNDING_SLACK * oracle.UNIT_ROUNDOFF[dtype] * uniform


def rounded_op_outputs(impl_for, dtype: str | dict, seed: int, as_array, values_of, rounded_gradient):
    """`impl_for` with every op's output multiplied by 1 + rounding_noise (a constant: autograd
    carries it into the backward pass too), modelling the rounding of each intermediate value,
    which moves a saturated softmax's or a cancelling sum's gradient far more than the inputs';
    and each operand's gradient, as the op hands it back, multiplied by its own 1 + rounding_noise
    (`rounded_gradient(x, factor)`: x forward, gradient * factor backward), modelling the rounding
    of each contribution before autograd sums them: div(x, x)'s two contributions, 1/x and -x/x^2,
    cancel exactly in float64 and to an ulp of 1/x in float32, which no perturbation of values shows.
    `dtype` may be {op name: dtype} where ops round in different dtypes (autocast's choice per op).
    Each factor is a function of the value it moves (rounding_noise; `values_of(x)`: x's values in numpy)."""

    def factor(like, op_dtype, salt):
        return as_array(1.0 + rounding_noise(values_of(like), 1000 * seed + salt, op_dtype), like)

    def impl(op_name):
        fn = impl_for(op_name)
        op_dtype = dtype[op_name] if isinstance(dtype, dict) else dtype

        def run(xs, ps, attrs):
            # Each operand's contribution rounds on its own (div(x, x)'s two), the output by its value alone.
            out = fn([rounded_gradient(x, factor(x, op_dtype, 1 + position)) for position, x in enumerate(xs)], ps, attrs)
            return out * factor(out, op_dtype, 0)

        return run

    return impl


class GradientOutputs:
    """Mixin for a Backend whose outputs are the forward outputs plus the input gradients."""

    transformation = "vjp"

    def eager_gradients(self, case: Case, dtype: str, noise: tuple[str, int] | None = None,
                        device: str = "cpu") -> list[np.ndarray]:
        """The input gradients by the framework's eager autograd in `dtype` on `device`, stock op
        implementations; `noise` (roundoff dtype, seed): every op's output moved as `rounded_op_outputs` does."""
        raise NotImplementedError

    def device_eager_gradients(self, case: Case) -> list[np.ndarray] | None:
        """The eager autograd in the backend's dtype on the backend's own device, with strict precision
        settings (no TF32: that is the precision-policy gate's question), or None on the CPU."""
        if self.device == "cpu":
            return None
        with self.strict_variant().precision_context(case.graph):
            return self.eager_gradients(case, self.dtype, device=self.device)

    def other_route(self, case: Case, dtype: str) -> list[np.ndarray] | None:
        """The same derivatives by another honest route in `dtype` (forward_mode.py), None where there is none.
        In float64, an entry where it is not the reference's (a kink or singular point, where each route
        takes its own convention) is not judged; in the backend's dtype it is one more same-dtype model
        (the routes round differently: softmax's jvp is not its vjp's formula)."""
        return None

    def extra_reference(self, case: Case) -> oracle.Reference:
        """The reference of the gradient outputs (check.py appends it to the numpy reference): float64
        eager runs at the case's values, rounded and perturbed (oracle.framework_reference; the
        perturbed runs also move every op's output), plus the eager run in the backend's dtype as
        an honest same-dtype model (the r_d of gradients: an underflow or cancellation every
        dtype-d implementation makes is no finding). Off the CPU, the eager run on the backend's own
        device is a second such model: its kernels flush, break ties and reduce in their own order,
        as honestly as the CPU's, and a compiled backward on CUDA is not held to the CPU's rounding."""
        with np.errstate(all="ignore"):
            exact, rounded, *moved = value_variants(case, self.dtype)
            noisy = [self.eager_gradients(variant, "float64", (self.dtype, run)) for run, variant in enumerate(moved)]
            exact, rounded = self.eager_gradients(exact, "float64"), self.eager_gradients(rounded, "float64")
            same_dtype = [self.eager_gradients(case, self.dtype)]
            on_device = self.device_eager_gradients(case)
            if (flushed := inputs_flushed(case, self.dtype)) is not None:  # a kernel that reads subnormals as 0 (DAZ)
                same_dtype.append(self.eager_gradients(flushed, "float64"))
            conventions = []
            if (other := self.other_route(case, "float64")) is not None:
                conventions = [[same_convention(value, r64) for value, r64 in zip(other, exact)]]
                same_dtype.append(self.other_route(case, self.dtype))
        if on_device is not None:
            same_dtype.append(on_device)
        sensitivity = 1.0 + sum(get_op(node.op).numerics.sensitivity for node in case.graph.nodes)
        # var's tangent at a constant column is 0 by cancellation, of terms x - mean(x) each an ulp of x in float32
        # summed in another order (inductor's forward mode: 1e-7 at x = -1.1): scaled by the values, not by 0.
        with np.errstate(invalid="ignore"):
            values = max((float(np.max(np.abs(a), where=np.isfinite(a), initial=0.0)) for a in case.arrays.values()), default=0.0)
        return oracle.framework_reference(exact, rounded, [*same_dtype, *noisy, *conventions], self.dtype, sensitivity, values)


# Two float64 routes to one derivative differ by float64 rounding, amplified: far below this, relative to
# the entry and the output's scale. Past it they took different conventions (a tie, a kink).
CONVENTION_TOLERANCE = 1e-6


def same_convention(other: np.ndarray, r64: np.ndarray) -> np.ndarray:
    """The reference where `other` (another route's float64 run) agrees with it, nan (unjudged) elsewhere:
    an honest model that adds no rounding noise of its own, only unjudged entries."""
    with np.errstate(invalid="ignore", over="ignore"):
        scale = np.max(np.abs(r64), where=np.isfinite(r64), initial=0.0)
        agrees = np.isfinite(other) & (np.abs(other - r64) <= CONVENTION_TOLERANCE * (np.abs(r64) + scale))
    return np.where(agrees, r64, np.nan)


def differentiated(case: Case, parameters: bool) -> list[str]:
    """The arrays a gradient backend differentiates, in output order: the graph inputs, then (with
    `parameters`) every parameter that is not a buffer (no gradient flows into running statistics)."""
    from fuzzer.reproducers.program_source import argument_names

    if not parameters:
        return [spec.name for spec in case.graph.inputs]
    buffers = {f"{node.name}.{name}" for node in case.graph.nodes for name in get_op(node.op).buffers}
    return [name for name in argument_names(case) if name not in buffers]


def undifferentiated_indices(case: Case) -> list[int]:
    """Positions, in the graph function's arguments, of the arrays a torch gradient kind passes as they are
    (buffers: `differentiated` with parameters leaves them out): its reproducer's `constants`."""
    from fuzzer.reproducers.program_source import argument_names

    differentiable = set(differentiated(case, parameters=True))
    return [index for index, name in enumerate(argument_names(case)) if name not in differentiable]


# -- torch ------------------------------------------------------------------------------


def torch_outputs_and_gradients(fn, args, constants=()) -> tuple:
    """(*fn(*args), *gradients of sum_i <output_i, cotangent_i> w.r.t. each arg but those at the
    indices in `constants` (buffers: passed as they are)); an arg nothing differentiable depends on
    gets zeros. The args keep their memory layout (detach keeps strides)."""
    import torch

    args = [arg if index in constants else arg.detach().requires_grad_(True) for index, arg in enumerate(args)]
    leaves = [arg for index, arg in enumerate(args) if index not in constants]
    outputs = list(fn(*args))
    pairs = [(out, torch.as_tensor(cotangent(i, out.shape), dtype=out.dtype, device=out.device))
             for i, out in enumerate(outputs) if out.requires_grad]
    if not pairs:  # argmax, floor, ...: no output is differentiable
        return (*outputs, *(torch.zeros_like(leaf) for leaf in leaves))
    grads = torch.autograd.grad([out for out, _ in pairs], leaves, grad_outputs=[c for _, c in pairs], allow_unused=True)
    return (*outputs, *(torch.zeros_like(leaf) if grad is None else grad for grad, leaf in zip(grads, leaves)))


def torch_rounded_gradient():
    """rounded_op_outputs's `rounded_gradient` in torch: an autograd.Function."""
    import torch

    class RoundedGradient(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, factor):
            ctx.save_for_backward(factor)
            return x.view_as(x)

        @staticmethod
        def backward(ctx, gradient):
            (factor,) = ctx.saved_tensors
            return gradient * factor, None

    return RoundedGradient.apply


def torch_eager_gradients(case: Case, dtype: str, noise: tuple[str, int] | None = None,
                          parameters: bool = False, device: str = "cpu", differentiate=None,
                          with_outputs: bool = False) -> list[np.ndarray]:
    """The gradient outputs by eager autograd (`with_outputs`: the graph outputs first): `differentiate(fn, args)`
    (default torch_outputs_and_gradients) returns the outputs, then what it derives from them (second_order.py)."""
    import torch

    names = differentiated(case, parameters)
    tensor = lambda array: torch.from_numpy(np.array(array, dtype=np.float64)).to(device, getattr(torch, dtype))  # noqa: E731
    tensors = {name: tensor(value) for name, value in case.arrays.items()}

    # A custom autograd.Function node is differentiated as the op it wraps: the reference shares none of our backward.
    impl_for = lambda op: get_op(get_op(op).custom_gradient_of or op).impl("torch")  # noqa: E731
    if noise:
        impl_for = rounded_op_outputs(impl_for, noise[0], noise[1], lambda values, like: torch.as_tensor(values, dtype=like.dtype),
                                      lambda like: like.detach().to("cpu", torch.float64).numpy(),
                                      torch_rounded_gradient())

    _, params = split_arrays(case)

    def graph_fn(*leaves):
        arrays = {**tensors, **dict(zip(names, leaves))}
        weights = {node: {param: arrays[f"{node}.{param}"] for param in ps} for node, ps in params.items()}
        return interpret(case.graph, {spec.name: arrays[spec.name] for spec in case.graph.inputs}, weights, impl_for)

    with torch.enable_grad():
        results = (differentiate or torch_outputs_and_gradients)(graph_fn, [tensors[name] for name in names])
    return [grad.detach().to("cpu", torch.float64).numpy() for grad in results[0 if with_outputs else len(case.graph.outputs):]]


# -- jax --------------------------------------------------------------------------------


def jax_outputs_and_gradients(fn, inputs: dict, names: list[str]) -> list:
    """fn(inputs) -> outputs, then the gradient w.r.t. each input in `names` order (jax.vjp)."""
    import jax

    outputs, vjp = jax.vjp(fn, inputs)
    (grads,) = vjp([jax.numpy.asarray(cotangent(i, out.shape), dtype=out.dtype) for i, out in enumerate(outputs)])
    return [*outputs, *(grads[name] for name in names)]


def jax_rounded_gradient(jax):
    """rounded_op_outputs's `rounded_gradient` in jax: a custom_jvp scaling the tangent, which jax
    transposes into the same scaling of the cotangent, so one rule serves jax.vjp and jax.jvp."""

    @jax.custom_jvp
    def rounded_gradient(x, factor):
        return x

    @rounded_gradient.defjvp
    def scaled_tangent(primals, tangents):
        (x, factor), (x_tangent, _) = primals, tangents
        return x, x_tangent * factor

    return rounded_gradient


def jax_eager_gradients(case: Case, dtype: str, noise: tuple[str, int] | None = None,
                        device: str = "cpu", differentiate=None) -> list[np.ndarray]:
    from fuzzer.backends.jax_eager import import_jax

    jax = import_jax()
    inputs, params = split_arrays(case)
    names = [spec.name for spec in case.graph.inputs]
    as_dtype = lambda array: jax.numpy.asarray(np.asarray(array, dtype=np.float64), dtype=getattr(jax.numpy, dtype))  # noqa: E731
    weights = {node: {k: as_dtype(v) for k, v in ps.items()} for node, ps in params.items()}

    impl_for = lambda op: get_op(op).impl("jax")  # noqa: E731
    if noise:
        impl_for = rounded_op_outputs(impl_for, noise[0], noise[1], lambda values, like: jax.numpy.asarray(values, dtype=like.dtype),
                                      lambda like: np.asarray(jax.lax.stop_gradient(like), dtype=np.float64),
                                      jax_rounded_gradient(jax))

    def graph_fn(xs):
        return interpret(case.graph, xs, weights, impl_for)

    with jax.default_device(jax.devices(device)[0]):
        results = (differentiate or jax_outputs_and_gradients)(graph_fn, {name: as_dtype(inputs[name]) for name in names}, names)
    return [np.asarray(grad, dtype=np.float64) for grad in results[len(case.graph.outputs):]]
