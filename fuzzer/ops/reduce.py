"""Reductions and the scan cumsum.

Over a set of dims: sum, mean, amax, amin, var, std, logsumexp, norm, spelled both ways
torch and jax take them: `dims`, distinct dims in any order (passed as a tuple), or `dim`,
one int. Over one dim (`dim`, because torch's signature takes a single int): max, min,
prod, argmax, argmin. Dims are drawn negative too and reach torch and jax as drawn; the
references normalize them. All take `keepdim`; a full reduction without keepdim gives
shape (1,) in every framework here, not a 0-d scalar. cumsum keeps the shape.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fuzzer.errors import OpUnsupported
from fuzzer.ops import Ladder, OpDef
from fuzzer.ops._common import check, draw_dim, draw_dims, like, norm_dim, rank_between, release, st
from fuzzer.ops._complex import complex_semantics
from fuzzer.ops._exact import INTEGERS, integer_semantics
from fuzzer.ops.numerics import PIECEWISE_CONSTANT, Numerics

NORM_ORDERS = (1, 2, "inf")  # JSON has no infinity: the max norm is the string "inf"
# jnp.linalg.vector_norm takes several axes from jax 0.4.36 on (jax-ml/jax@aaaee63); before, it
# hands them to jnp.linalg.norm, where two axes are a matrix norm and more raise "Invalid axis values".
JAX_VECTOR_NORM_AXES = (0, 4, 36)


def _draw_dims(draw, shapes):
    """One int dim one time in four (dim=1), else a tuple of dims (dim=(2, -3))."""
    rank = len(shapes[0])
    dims = {"dim": draw_dim(draw, rank)} if draw(st.integers(0, 3)) == 0 else {"dims": draw_dims(draw, rank)}
    return {**dims, "keepdim": draw(st.booleans())}


def _draw_dim(draw, shapes):
    return {"dim": draw_dim(draw, len(shapes[0])), "keepdim": draw(st.booleans())}


def _reduced_dims(attrs, rank: int) -> tuple[int, ...]:
    """The dims reduced over, normalized: the `dims` list, or the single `dim`."""
    given = attrs["dims"] if "dims" in attrs else [attrs["dim"]]
    dims = sorted({norm_dim(d, rank) for d in given})
    check(len(dims) == len(given) and dims, "dims must be distinct and non-empty")
    return tuple(dims)


REDUCED_AXES = Ladder("reduction", lambda attrs, shapes: _reduced_dims(attrs, len(shapes[0])))


def _count(attrs, shape) -> int:
    """How many elements each output value reduces."""
    return int(np.prod([shape[d] for d in _reduced_dims(attrs, len(shape))]))


def _infer(attrs, shapes):
    shape = shapes[0]
    dims = _reduced_dims(attrs, len(shape))
    if attrs["keepdim"]:
        return tuple(1 if i in dims else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in dims) or (1,)


def _given_dims(attrs):
    """The dims as the attributes spell them: one int, or a tuple (negative or not, any order)."""
    return attrs["dim"] if "dim" in attrs else tuple(attrs["dims"])


def _shaped(reduce, as_given: bool):
    """An implementation from `reduce(x, dims, attrs)`, reshaped to the inferred output shape.
    `dims` is the sorted tuple of reduced dims >= 0 (the references' math), or with as_given
    the dims as the attributes spell them, which torch and jax get as a user passes them."""

    def run(xs, ps, attrs):
        x = xs[0]
        dims = _given_dims(attrs) if as_given else _reduced_dims(attrs, x.ndim)
        return reduce(x, dims, attrs).reshape(_infer(attrs, [tuple(x.shape)]))

    return run


# -- var / std -------------------------------------------------------------------


def _draw_variance(draw, shapes):
    attrs = _draw_dims(draw, shapes)
    # Bessel's correction needs two values per output (n - 1 = 0 divides by zero).
    can_correct = _count(attrs, shapes[0]) > 1
    return {**attrs, "correction": 1 if can_correct and draw(st.booleans()) else 0}


def _infer_variance(attrs, shapes):
    check(attrs["correction"] in (0, 1), f"correction must be 0 or 1, got {attrs['correction']!r}")
    check(_count(attrs, shapes[0]) > attrs["correction"], "correction 1 needs more than one value per output")
    return _infer(attrs, shapes)


def _variance(x, dims, attrs):
    """sum((x - mean)^2) / (n - correction): correction 1 is the unbiased (Bessel) estimate,
    0 the population variance. Two passes: the deviations are taken from the mean.

    The values are first shifted by each row's first value, so a constant row is exactly 0, as
    the math says: the mean of 12 equal values is not always the value in floating point, and
    std = 3.5e-18 instead of 0 made atan2(std, 0) pi/2 instead of 0, a false mismatch for the
    backend that computed the exact 0. Where the shift overflows, the plain deviations are kept."""
    if not x.size:
        return like(x, _squared_deviations(x, dims, attrs) / (_count(attrs, x.shape) - attrs["correction"]))
    first = x[tuple(slice(0, 1) if d in dims else slice(None) for d in range(x.ndim))]
    with np.errstate(over="ignore", invalid="ignore"):
        total = _squared_deviations(x - first, dims, attrs)
    finite = np.isfinite(total)
    if not finite.all():  # the plain pass only where the shifted one is not finite
        total = np.where(finite, total, _squared_deviations(x, dims, attrs))
    return like(x, total / (_count(attrs, x.shape) - attrs["correction"]))


def _variance_in_dtype(x, dims, attrs):
    """The variance as a kernel of x's dtype computes it (the same-dtype model): the plain two
    passes in that dtype, inf where a Welford combine may overflow (_where_a_combine_overflows)."""
    total = _where_a_combine_overflows(x, dims, attrs, _squared_deviations(x, dims, attrs))
    return like(x, total / (_count(attrs, x.shape) - attrs["correction"]))


def _squared_deviations(values, dims, attrs):
    """sum((values - mean)^2) over `dims`, the mean taken first (two passes)."""
    mean = np.mean(values, axis=dims, keepdims=True)
    return np.sum((values - mean) ** 2, axis=dims, keepdims=attrs["keepdim"])


def _where_a_combine_overflows(x, dims, attrs, total):
    """`total` (the sum of squared deviations in x's dtype), inf where a Welford kernel's combine of
    two partial results may overflow though the sum does not: it multiplies the difference of their
    means by itself, and that difference may be the row's whole range (torch.var on CUDA: inf for
    0 and 1.97e19, whose variance is 1.94e38, H200 campaign). The oracle then accepts either."""
    if not x.size:
        return total
    with np.errstate(over="ignore", invalid="ignore"):
        spread = np.ptp(np.asarray(x, dtype=np.float64), axis=dims, keepdims=attrs["keepdim"])
        overflows = np.isfinite(total) & (spread * spread > float(np.finfo(x.dtype).max))
    return np.where(overflows, np.inf, total)


def _standard_deviation(x, dims, attrs):
    return like(x, np.sqrt(_variance(x, dims, attrs)))


def _standard_deviation_in_dtype(x, dims, attrs):
    return like(x, np.sqrt(_variance_in_dtype(x, dims, attrs)))


def _variance_parts(xs, attrs):
    """(max |x|, standard deviation, n / (n - correction)) per output value, in float64."""
    x = np.asarray(xs[0], dtype=np.float64)
    dims = _reduced_dims(attrs, x.ndim)
    count = _count(attrs, x.shape)
    spread = np.max(np.abs(x), axis=dims, keepdims=attrs["keepdim"])
    sd = np.sqrt(np.var(x, axis=dims, keepdims=attrs["keepdim"]))
    return spread, sd, count / (count - attrs["correction"])


def _variance_error(xs, ps, attrs):
    """A correct float32 variance of near-equal values is off by far more than roundoff * var:
    an updating (Welford) mean carries an error of ~roundoff * max|x| into each deviation d_i,
    which moves sum(d_i^2) by ~2 * roundoff * max|x| * sum|d_i|. (A two-pass variance only
    adds n * (roundoff * max|x|)^2, second order.)"""
    spread, sd, bessel = _variance_parts(xs, attrs)
    return np.reshape(2.0 * spread * sd * bessel, _infer(attrs, [np.shape(xs[0])]))


def _std_error(xs, ps, attrs):
    """The variance's error above through d sqrt(v) = dv / (2 sqrt(v)): ~roundoff * max|x|. For
    constant rows (sd = 0) that is the whole result: a two-pass std is |x - rounded mean|."""
    spread, _, bessel = _variance_parts(xs, attrs)
    return np.reshape(spread * np.sqrt(bessel), _infer(attrs, [np.shape(xs[0])]))


def _torch_variance(name):
    def run(x, dims, attrs):
        import torch

        return getattr(torch, name)(x, dim=dims, correction=attrs["correction"], keepdim=attrs["keepdim"])

    return run


def _jax_variance(name):
    def run(x, dims, attrs):
        import jax.numpy as jnp

        return getattr(jnp, name)(x, axis=dims, ddof=attrs["correction"], keepdims=attrs["keepdim"])

    return run


# -- logsumexp -------------------------------------------------------------------


def _logsumexp(x, dims, attrs):
    """m + log(sum(exp(x - m))) with m the max over dims, so exp never overflows. An infinite
    max is not subtracted (torch's convention): all -inf gives -inf, a +inf gives +inf."""
    peak = np.max(x, axis=dims, keepdims=True)
    shift = np.where(np.isfinite(peak), peak, 0)
    out = np.log(np.sum(np.exp(x - shift), axis=dims, keepdims=True)) + shift
    return like(x, out if attrs["keepdim"] else np.squeeze(out, axis=dims))


def _torch_logsumexp(x, dims, attrs):
    import torch

    return torch.logsumexp(x, dim=dims, keepdim=attrs["keepdim"])


def _jax_logsumexp(x, dims, attrs):
    import jax

    return jax.nn.logsumexp(x, axis=dims, keepdims=attrs["keepdim"])


# -- norm ------------------------------------------------------------------------


def _draw_norm(draw, shapes):
    return {**_draw_dims(draw, shapes), "p": draw(st.sampled_from(NORM_ORDERS))}


def _infer_norm(attrs, shapes):
    check(attrs["p"] in NORM_ORDERS, f"p must be one of {list(NORM_ORDERS)}, got {attrs['p']!r}")
    return _infer(attrs, shapes)


def _order(attrs) -> float:
    return float("inf") if attrs["p"] == "inf" else float(attrs["p"])


def _vector_norm(x, dims, attrs):
    """The vector p-norm of the values over dims taken together (never a matrix norm):
    p=1 sum|x|, p=2 sqrt(sum x^2) (unscaled, as torch and jax compute it: it overflows
    where x^2 does), p="inf" max|x|."""
    keep = attrs["keepdim"]
    if attrs["p"] == 1:
        return like(x, np.sum(np.abs(x), axis=dims, keepdims=keep))
    if attrs["p"] == 2:
        return like(x, np.sqrt(np.sum(x * x, axis=dims, keepdims=keep)))
    return like(x, np.max(np.abs(x), axis=dims, keepdims=keep))


def _torch_norm(x, dims, attrs):
    # torch's CPU 2-norm accumulates float32 squares sequentially per vector lane, not pairwise
    # like torch.sum: 1500 ulp off for 160k equal values, beyond the rounding model (which covers
    # pairwise/blocked sums). Large-op campaigns flag it; it is pytorch/pytorch#169237, a real bug.
    import torch

    return torch.linalg.vector_norm(x, ord=_order(attrs), dim=dims, keepdim=attrs["keepdim"])


def _jax_norm(x, dims, attrs):
    import jax
    import jax.numpy as jnp

    if not hasattr(jnp.linalg, "vector_norm"):
        raise OpUnsupported("jax.numpy.linalg.vector_norm is missing in this jax")
    if isinstance(dims, tuple) and len(dims) > 1 and release(jax) < JAX_VECTOR_NORM_AXES:
        raise OpUnsupported(f"jax.numpy.linalg.vector_norm takes one axis before jax 0.4.36 (this is {jax.__version__})")
    return jnp.linalg.vector_norm(x, ord=_order(attrs), axis=dims, keepdims=attrs["keepdim"])


# -- single-dim reductions ---------------------------------------------------------


def _product(x, dims, attrs):
    """The product over dim: the product itself, even where a partial product of np.prod's order
    leaves the range (of [1e200, 1e200, 1e-200, 1e-200] it is 1, not inf); entries whose value
    depends on the order are undefined (_product_undefined)."""
    keep = attrs["keepdim"]
    out = np.prod(x, axis=dims, keepdims=keep)
    big, small, _ = _log2_factors(x, dims, keep)
    outside = (big > FLOAT64_EXPONENTS[1]) | (small < FLOAT64_EXPONENTS[0])
    return np.where(outside, _product_apart(x, dims, keep), out) if outside.any() else out


def _product_in_dtype(x, dims, attrs):
    """The product as a kernel of x's dtype may compute it (the same-dtype model): where the
    product of the factors larger than 1 in magnitude overflows, some multiplication order
    overflows (every partial product is at most that), so the result is +-inf there even if this
    order's is finite: an honest implementation's value then depends on its order, and the oracle
    skips entries whose same-dtype reference is non-finite while the float64 one is finite.
    Likewise where the product of the factors smaller than 1 in magnitude is below float32's
    smallest normal (half-precision kernels multiply in float32): some order's partial product is
    subnormal, which a kernel that flushes subnormals (XLA on the CPU) reads as 0, so the result
    is +-0 there (nan where some order also overflows, or a factor is infinite: the flushed
    partial product times inf)."""
    keep = attrs["keepdim"]
    out = np.prod(x, axis=dims, keepdims=keep)
    growth = np.prod(np.where(np.abs(x) > 1, np.abs(x), 1), axis=dims, keepdims=keep)
    magnitudes = np.abs(np.asarray(x, dtype=np.float64))  # float16 would underflow long before float32
    shrink = np.prod(np.where(magnitudes < 1, magnitudes, 1), axis=dims, keepdims=keep)
    some_order_overflows, some_order_flushes = np.isinf(growth), shrink < np.finfo(np.float32).tiny
    finite = np.isfinite(out)
    out = np.where(some_order_overflows & finite, np.copysign(np.inf, out),
                   np.where(some_order_flushes & finite, np.copysign(0.0, out), out))
    return like(x, np.where(some_order_overflows & some_order_flushes, np.nan, out))


# log2 of float64's smallest normal and of its overflow threshold.
FLOAT64_EXPONENTS = (-1022.0, 1024.0)
# Mantissas (np.frexp: 0.5 <= |m| < 1) multiplied at once: 2 ** -512 stays normal.
MANTISSA_CHUNK = 512


def _log2_factors(x, dims, keep):
    """Per product, over its finite factors: the log2 of the product of those larger than 1 in
    magnitude, of those smaller (a zero gives -inf), and of all of them."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log2(np.abs(np.where(np.isfinite(x), x, 1.0)))
        big = np.sum(np.where(logs > 0, logs, 0.0), axis=dims, keepdims=keep)
        small = np.sum(np.where(logs < 0, logs, 0.0), axis=dims, keepdims=keep)
        return big, small, big + small


def _product_apart(x, dims, keep):
    """The product over `dims`, rounded as a float64 product is but with mantissas and exponents
    kept apart (np.frexp) and joined once at the end, so no partial product leaves the range."""
    kept = x.ndim - len(dims)
    moved = np.moveaxis(x, dims, range(kept, x.ndim))
    flat = moved.reshape(*moved.shape[:kept], -1)
    mantissas, exponents = np.frexp(flat)
    mantissa, exponent = np.ones(flat.shape[:-1]), np.sum(exponents, axis=-1)
    for start in range(0, flat.shape[-1], MANTISSA_CHUNK):
        mantissa, carry = np.frexp(mantissa * np.prod(mantissas[..., start:start + MANTISSA_CHUNK], axis=-1))
        exponent += carry
    out = np.ldexp(mantissa, np.clip(exponent, -4 * 1024, 4 * 1024))
    return np.expand_dims(out, dims) if keep else out


def _product_undefined(xs, ps, attrs):
    """Where the product's value depends on the order of multiplication: some order's partial
    products overflow while the product does not (inf against a finite value or 0; 0 * inf is
    nan), or underflow to 0 while the product is normal; or an infinite factor meets factors whose
    product underflows (inf, or 0 * inf = nan). A nan factor, or inf with a zero, is nan in any order."""
    x = np.asarray(xs[0], dtype=np.float64)
    dims, keep = _reduced_dims(attrs, x.ndim), attrs["keepdim"]
    big, small, total = _log2_factors(x, dims, keep)
    low, high = FLOAT64_EXPONENTS
    finite = np.all(np.isfinite(x), axis=dims, keepdims=keep)
    lone_infinite = (np.any(np.isinf(x), axis=dims, keepdims=keep) & ~np.any(np.isnan(x) | (x == 0), axis=dims, keepdims=keep))
    with np.errstate(invalid="ignore"):
        order_dependent = finite & (((big > high) & ((small < low) | (total <= high))) | ((small < low) & (total >= low)))
        undefined = order_dependent | (lone_infinite & (small < low))
    return undefined.reshape(_infer(attrs, [x.shape]))


def _torch_dim_reduce(name):
    """torch.max / torch.min (values only), torch.prod: one int dim."""

    def run(x, dim, attrs):
        import torch

        out = getattr(torch, name)(x, dim=dim, keepdim=attrs["keepdim"])
        return out.values if name in ("max", "min") else out

    return run


def _torch_arg_reduce(name):
    def run(x, dim, attrs):
        import torch

        return getattr(torch, name)(x, dim=dim, keepdim=attrs["keepdim"]).to(x.dtype)

    return run


def _jax_arg_reduce(name):
    def run(x, dim, attrs):
        import jax.numpy as jnp

        return getattr(jnp, name)(x, axis=dim, keepdims=attrs["keepdim"]).astype(x.dtype)

    return run


def _arg_reference(numpy_fn):
    def run(x, dims, attrs):
        """The index along dim of the first extreme value (ties: the lowest index, as torch and
        jax document; a nan counts as the extreme, in all three), as a float of the input's dtype."""
        return like(x, numpy_fn(x, axis=dims[0], keepdims=attrs["keepdim"]))

    return run


def _values_at_index(xs, ps, attrs, indices):
    """(x's values at `indices` along dim, and which entries of `indices` are an index of that dim):
    argmax's and argmin's Numerics.indexes. An invalid index reads entry 0."""
    x = np.asarray(xs[0], dtype=np.float64)
    dim = norm_dim(attrs["dim"], x.ndim)
    indices = np.asarray(indices, dtype=np.float64)
    valid = np.isfinite(indices) & (indices == np.round(indices)) & (indices >= 0) & (indices < x.shape[dim])
    at = np.where(valid, indices, 0).astype(np.int64)
    kept = x.shape[:dim] + (1,) + x.shape[dim + 1:]  # the indices with keepdim (the output of a 1-d x is 1-d here)
    return np.take_along_axis(x, at.reshape(kept), axis=dim).reshape(indices.shape), valid


ARG_REDUCTION = replace(PIECEWISE_CONSTANT, indexes=_values_at_index, why={
    **PIECEWISE_CONSTANT.why, "indexes": "its result is an index along dim: judged exactly, or by the values it points at where they tie"})


def _widened(numpy_fn):
    """torch's sum, prod and cumsum of integers (and bools): in int64, wrapping there; of floats, in their dtype."""
    return lambda x, dims, attrs: numpy_fn(x if x.dtype.kind == "f" else x.astype(np.int64), axis=dims, keepdims=attrs["keepdim"])


def _numpy_reduce(numpy_fn):
    return lambda x, dims, attrs: like(x, numpy_fn(x, axis=dims, keepdims=attrs["keepdim"]))


def _torch_reduce(name):
    def run(x, dims, attrs):
        import torch

        return getattr(torch, name)(x, dim=dims, keepdim=attrs["keepdim"])

    return run


def _jax_reduce(name, widened=False):
    """jnp.`name`; `widened`: an integer or bool operand accumulates in int64, as torch's sum and prod do
    (jax's own sum of uint8 is uint64, so a later negative value wraps: GPU campaign, uint8 sum - 128)."""
    def run(x, dims, attrs):
        import jax.numpy as jnp

        widen = {"dtype": _torch_integer_accumulator(x)} if widened else {}  # jnp.max takes no dtype
        return getattr(jnp, name)(x, axis=dims, keepdims=attrs["keepdim"], **widen)

    return run


def _torch_integer_accumulator(x):
    """jnp.int64 for an integer or bool jax array (torch sums, multiplies and scans those in int64), else None."""
    import jax.numpy as jnp

    return jnp.int64 if jnp.issubdtype(x.dtype, jnp.integer) or x.dtype == jnp.bool_ else None


# -- cumsum ----------------------------------------------------------------------


def _draw_cumsum(draw, shapes):
    return {"dim": draw_dim(draw, len(shapes[0]))}


def _infer_cumsum(attrs, shapes):
    norm_dim(attrs["dim"], len(shapes[0]))
    return shapes[0]


def _cumsum_reference(xs, ps, attrs):
    """out[..., i, ...] = sum of x[..., j, ...] for j <= i along dim (inclusive scan)."""
    return like(xs[0], np.cumsum(xs[0], axis=attrs["dim"]))


def _exact_cumsum(xs, ps, attrs):
    """torch's cumsum of integers (and bools): in int64, wrapping there."""
    x = np.asarray(xs[0])
    return np.cumsum(x if x.dtype.kind == "f" else x.astype(np.int64), axis=attrs["dim"])


def _torch_cumsum(xs, ps, attrs):
    import torch

    return torch.cumsum(xs[0], dim=attrs["dim"])


def _jax_cumsum(xs, ps, attrs):
    import jax.numpy as jnp

    return jnp.cumsum(xs[0], axis=attrs["dim"], dtype=_torch_integer_accumulator(xs[0]))


def _reduction(name, reference, torch_reduce, jax_reduce, draw_attrs=_draw_dims, infer=_infer,
               attrs=("dim?", "dims?", "keepdim"), numerics=Numerics(), **fields):
    """A reduction from `reduce(x, dims, attrs)` functions (`_shaped`), numerics.low_precision_model
    one too; every reduction's sensitivity is REDUCTION_SENSITIVITY."""
    model = numerics.low_precision_model
    return OpDef(
        name=name,
        infer=infer,
        reference=_shaped(reference, as_given=False),
        torch=_shaped(torch_reduce, as_given=True),
        jax=_shaped(jax_reduce, as_given=True),
        accepts=rank_between(1, 5),
        draw_attrs=draw_attrs,
        attrs=attrs,
        ladder=REDUCED_AXES,
        numerics=replace(numerics, sensitivity=REDUCTION_SENSITIVITY,
                         low_precision_model=None if model is None else _shaped_model(model),
                         why={"sensitivity": REDUCTION_SENSITIVITY_WHY, **numerics.why}),
        **fields,
    )


def _shaped_model(model):
    shaped = _shaped(model, as_given=False)
    shaped.__qualname__ = model.__qualname__  # the name `fuzz ops --numerics` prints
    return shaped


REDUCTION_SENSITIVITY = 2.0
REDUCTION_SENSITIVITY_WHY = "combines many rounded operands; set for the whole family, max and min included"
LOW_PRECISION_VARIANCE = ("a narrower kernel takes plain deviations in its dtype and may overflow in a Welford "
                          "combine of partial results (_variance_in_dtype)")

OPS = [
    integer_semantics(_reduction("sum", _numpy_reduce(np.sum), _torch_reduce("sum"), _jax_reduce("sum", widened=True)), INTEGERS,
                      _shaped(_widened(np.sum), as_given=False)),
    _reduction("mean", _numpy_reduce(np.mean), _torch_reduce("mean"), _jax_reduce("mean")),
    integer_semantics(_reduction("amax", _numpy_reduce(np.max), _torch_reduce("amax"), _jax_reduce("max"))),
    integer_semantics(_reduction("amin", _numpy_reduce(np.min), _torch_reduce("amin"), _jax_reduce("min"))),
    integer_semantics(_reduction("max", _numpy_reduce(np.max), _torch_dim_reduce("max"), _jax_reduce("max"), _draw_dim,
                                 attrs=("dim", "keepdim"))),
    integer_semantics(_reduction("min", _numpy_reduce(np.min), _torch_dim_reduce("min"), _jax_reduce("min"), _draw_dim,
                                 attrs=("dim", "keepdim"))),
    integer_semantics(_reduction(
        "prod",
        _product,
        _torch_dim_reduce("prod"),
        _jax_reduce("prod", widened=True),
        _draw_dim,
        attrs=("dim", "keepdim"),
        numerics=Numerics(undefined=_product_undefined, low_precision_model=_product_in_dtype, why={
            "undefined": "past float64's range the value depends on the order of the multiplications",
            "low_precision_model": "some multiplication order overflows, or flushes a subnormal partial product "
                                   "(_product_in_dtype)"}),
        notes="one dim: torch.prod takes a single int dim",
    ), INTEGERS, _shaped(_widened(np.prod), as_given=False)),
    _reduction(
        "var",
        _variance,
        _torch_variance("var"),
        _jax_variance("var"),
        _draw_variance,
        _infer_variance,
        attrs=("dim?", "dims?", "keepdim", "correction"),
        numerics=Numerics(forward_error=_variance_error, low_precision_model=_variance_in_dtype, why={
            "forward_error": "an updating (Welford) mean's rounding moves every deviation (_variance_error)",
            "low_precision_model": LOW_PRECISION_VARIANCE}),
    ),
    _reduction(
        "std",
        _standard_deviation,
        _torch_variance("std"),
        _jax_variance("std"),
        _draw_variance,
        _infer_variance,
        attrs=("dim?", "dims?", "keepdim", "correction"),
        numerics=Numerics(forward_error=_std_error, low_precision_model=_standard_deviation_in_dtype, why={
            "forward_error": "the variance's error through the root: a whole constant row's result (_std_error)",
            "low_precision_model": LOW_PRECISION_VARIANCE}),
    ),
    _reduction("logsumexp", _logsumexp, _torch_logsumexp, _jax_logsumexp),
    _reduction("norm", _vector_norm, _torch_norm, _jax_norm, _draw_norm, _infer_norm, attrs=("dim?", "dims?", "keepdim", "p")),
    integer_semantics(_reduction("argmax", _arg_reference(np.argmax), _torch_arg_reduce("argmax"), _jax_arg_reduce("argmax"),
                                 _draw_dim, attrs=("dim", "keepdim"), numerics=ARG_REDUCTION)),
    integer_semantics(_reduction("argmin", _arg_reference(np.argmin), _torch_arg_reduce("argmin"), _jax_arg_reduce("argmin"),
                                 _draw_dim, attrs=("dim", "keepdim"), numerics=ARG_REDUCTION)),
    integer_semantics(OpDef(
        name="cumsum",
        attrs=('dim',),
        infer=_infer_cumsum,
        reference=_cumsum_reference,
        torch=_torch_cumsum,
        jax=_jax_cumsum,
        accepts=rank_between(1, 5),
        draw_attrs=_draw_cumsum,
        ladder=Ladder("reduction", lambda attrs, shapes: (norm_dim(attrs["dim"], len(shapes[0])),)),
        numerics=Numerics(sensitivity=REDUCTION_SENSITIVITY, scans_in_dtype=True, why={
            "sensitivity": "a running sum of many rounded terms",
            "scans_in_dtype": "torch's CUDA cumsum carries the running value in float16/bfloat16, as its maintainers "
                              "intend (pytorch#180150, #180155)"}),
    ), INTEGERS, _exact_cumsum),
]
OPS = complex_semantics(OPS, dict.fromkeys(("sum", "mean", "cumsum"), "complex"))  # prod: its reference is float-only (frexp)
