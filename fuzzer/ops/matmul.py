"""linear, matmul (plain, batched, broadcast batch dims), bmm, addmm, baddbmm and einsum.

Tiled kernels hide bugs at tile edges (seed bug 4: a tiled matmul returned zeros),
so the sizes drawn include K = 1 and sizes just off multiples of 8/16/32.
"""

from __future__ import annotations

import numpy as np

from fuzzer.ops import Ladder, OpDef, Regions
from fuzzer.ops._common import DIMS, check, like, rank_between, st
from fuzzer.ops._complex import complex_semantics
from fuzzer.ops.numerics import Numerics

TILE_EDGE_SIZES = (1, 3, 7, 9, 15, 17, 31, 33)


def _draw_features(draw):
    return draw(st.sampled_from(sorted(set(TILE_EDGE_SIZES + DIMS))))


def _draw_linear(draw, shapes):
    return {"out_features": _draw_features(draw), "bias": draw(st.booleans())}


def _infer_linear(attrs, shapes):
    check(attrs["out_features"] >= 1, "out_features must be >= 1")
    return tuple(shapes[0][:-1]) + (attrs["out_features"],)


def _linear_params(attrs, shapes):
    params = {"weight": (attrs["out_features"], shapes[0][-1])}
    if attrs["bias"]:
        params["bias"] = (attrs["out_features"],)
    return params


def _linear_reference(xs, ps, attrs):
    """y = x W^T + b, W of shape (out_features, in_features) as in torch."""
    out = xs[0] @ ps["weight"].T
    return out + ps["bias"] if attrs["bias"] else out


def _torch_linear(xs, ps, attrs):
    import torch

    return torch.nn.functional.linear(xs[0], ps["weight"], ps.get("bias"))


def _jax_linear(xs, ps, attrs):
    out = xs[0] @ ps["weight"].T
    return out + ps["bias"] if attrs["bias"] else out


def _infer_mv(attrs, shapes):
    check(len(shapes[0]) == 1, f"mv takes a vector, got shape {list(shapes[0])}")
    check(attrs["out_features"] >= 1, "out_features must be >= 1")
    return (attrs["out_features"],)


def _mv_params(attrs, shapes):
    return {"weight": (attrs["out_features"], shapes[0][0])}


def _mv_reference(xs, ps, attrs):
    """y = W x: a matrix-vector product, the matrix (out_features, len(x)) a weight on the left."""
    return ps["weight"] @ xs[0]


def _torch_mv(xs, ps, attrs):
    import torch

    return torch.mv(ps["weight"], xs[0])


def _jax_mv(xs, ps, attrs):
    return ps["weight"] @ xs[0]


def _draw_matmul_operands(draw, first, attrs):
    """(..., K, N) for a first operand (..., M, K); batch dims equal, 1, or absent."""
    k = first[-1]
    n = _draw_features(draw)
    batch = list(first[:-2])
    style = draw(st.sampled_from(["same", "broadcast", "unbatched"])) if batch else "unbatched"
    if style == "same":
        return [tuple(batch) + (k, n)]
    if style == "broadcast":
        return [tuple(1 if draw(st.booleans()) else b for b in batch) + (k, n)]
    return [(k, n)]


MATMUL_BATCH_STYLES = ("none", "same", "broadcast")


def _matmul_batch_region(attrs, shapes):
    """torch dispatches a matmul to mm, to bmm on equal batch dims, or expands broadcast ones first."""
    a, b = shapes
    style = "none" if len(a) == 2 and len(b) == 2 else "same" if a[:-2] == b[:-2] else "broadcast"
    return {f"batch={style}"}


def _infer_matmul(attrs, shapes):
    a, b = shapes
    check(len(a) >= 2 and len(b) >= 2, "matmul needs operands of rank >= 2")
    check(a[-1] == b[-2], f"inner dims differ: {list(a)} @ {list(b)}")
    try:
        batch = np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))
    except ValueError:
        check(False, f"batch dims {list(a[:-2])} and {list(b[:-2])} do not broadcast")
    return tuple(batch) + (a[-2], b[-1])


def _torch_matmul(xs, ps, attrs):
    import torch

    return torch.matmul(xs[0], xs[1])


def _jax_matmul(xs, ps, attrs):
    import jax.numpy as jnp

    return jnp.matmul(xs[0], xs[1])


def _draw_bmm_operands(draw, first, attrs):
    batch, _, k = first
    return [(batch, k, _draw_features(draw))]


def _infer_bmm(attrs, shapes):
    a, b = shapes
    check(len(a) == 3 and len(b) == 3, f"bmm takes two rank-3 operands, got {list(a)} and {list(b)}")
    check(a[0] == b[0], f"batch sizes differ: {a[0]} and {b[0]}")
    check(a[2] == b[1], f"inner dims differ: {list(a)} @ {list(b)}")
    return (a[0], a[1], b[2])


def _torch_bmm(xs, ps, attrs):
    import torch

    return torch.bmm(xs[0], xs[1])


def broadcasts_to(shape, target) -> bool:
    """Does `shape` broadcast to exactly `target` (never beyond it)?"""
    try:
        return tuple(np.broadcast_shapes(tuple(shape), tuple(target))) == tuple(target)
    except ValueError:
        return False


# -- addmm and baddbmm: beta * input + alpha * (a @ b) -----------------------------

# No zero alpha: torch documents only beta = 0 as dropping its term (and its nan/inf).
SCALES = {"alpha": (1.0, 0.5, -1.5, 2.0), "beta": (1.0, 0.0, -1.0, 0.5)}


def _draw_scales(draw, shapes):
    return {name: draw(st.sampled_from(choices)) for name, choices in SCALES.items()}


def _grow(draw, size):
    """A size that `size` broadcasts to: itself, or any size when it is 1."""
    return _draw_features(draw) if size == 1 and draw(st.booleans()) else size


def _draw_addmm_operands(draw, first, attrs):
    """input is (p,) or (n, p), size-1 dims broadcast; mat1 (n, k), mat2 (k, p)."""
    n = _draw_features(draw) if len(first) == 1 else _grow(draw, first[0])
    p, k = _grow(draw, first[-1]), _draw_features(draw)
    return [(n, k), (k, p)]


def _draw_baddbmm_operands(draw, first, attrs):
    """input is (n, p) or (b, n, p), size-1 dims broadcast; batch1 (b, n, k), batch2 (b, k, p)."""
    b = draw(st.sampled_from(DIMS)) if len(first) == 2 else _grow(draw, first[0])
    n, p, k = _grow(draw, first[-2]), _grow(draw, first[-1]), _draw_features(draw)
    return [(b, n, k), (b, k, p)]


def _infer_scaled_product(attrs, shapes):
    added, a, b = shapes
    rank = len(a)
    check(
        rank in (2, 3) and len(b) == rank,
        f"the product needs two operands of rank 2 (addmm) or 3 (baddbmm), got {list(a)} and {list(b)}",
    )
    check(a[-1] == b[-2] and a[:-2] == b[:-2], f"operands do not multiply: {list(a)} @ {list(b)}")
    product = tuple(a[:-1]) + (b[-1],)
    check(broadcasts_to(added, product), f"input {list(added)} does not broadcast to the product's shape {list(product)}")
    return product


def _scaled_product_reference(xs, ps, attrs):
    """beta * input + alpha * (a @ b), input broadcast to the product's shape. beta = 0 drops
    the input term entirely, so nan and inf in it do not propagate (torch's documented rule)."""
    added, a, b = xs
    product = attrs["alpha"] * np.matmul(a, b)
    return like(a, product if attrs["beta"] == 0 else attrs["beta"] * added + product)


def _scaled_product_error(xs, ps, attrs):
    """|beta| |input| + |alpha| |a| @ |b|, the classic error-bound magnitude: the rounding model's
    op on absolute values keeps alpha's and beta's signs and would let the two terms cancel."""
    added, a, b = (np.abs(x) for x in xs)
    product = abs(attrs["alpha"]) * np.matmul(a, b)
    return product if attrs["beta"] == 0 else abs(attrs["beta"]) * added + product


def _torch_scaled_product(name):
    def run(xs, ps, attrs):
        import torch

        return getattr(torch, name)(xs[0], xs[1], xs[2], beta=attrs["beta"], alpha=attrs["alpha"])

    return run


def _jax_scaled_product(xs, ps, attrs):
    import jax.numpy as jnp

    product = attrs["alpha"] * jnp.matmul(xs[1], xs[2])
    return product if attrs["beta"] == 0 else attrs["beta"] * xs[0] + product


# -- einsum --------------------------------------------------------------------------

EQUATIONS = (
    "ij->ji",
    "ii->i",
    "ij,j->i",
    "i,j->ij",
    "bi,bi->b",
    "bij,bjk->bik",
    "bij,jk->bik",
    "bhqd,bhkd->bhqk",
    "bhqk,bhkd->bhqd",
)


def _terms(equation: str) -> tuple[list[str], str]:
    inputs, output = equation.split("->")
    return inputs.split(","), output


def _fits_first(equation: str, shape) -> bool:
    """Does `shape` fit the equation's first operand (its rank, and equal sizes for a repeated letter)?"""
    first = _terms(equation)[0][0]
    if len(first) != len(shape):
        return False
    sizes = {}
    return all(sizes.setdefault(letter, size) == size for letter, size in zip(first, shape))


def _einsum_accepts(shape) -> bool:
    return any(_fits_first(equation, shape) for equation in EQUATIONS)


def _draw_einsum(draw, shapes):
    return {"equation": draw(st.sampled_from([e for e in EQUATIONS if _fits_first(e, shapes[0])]))}


def _draw_einsum_operands(draw, first, attrs):
    """Sizes of the first operand's letters carry over; every new letter gets a drawn size."""
    inputs, _ = _terms(attrs["equation"])
    sizes = dict(zip(inputs[0], first))
    for term in inputs[1:]:
        for letter in term:
            if letter not in sizes:
                sizes[letter] = _draw_features(draw)
    return [tuple(sizes[letter] for letter in term) for term in inputs[1:]]


def _einsum_contracted(attrs, shapes):
    """The first operand's axes whose letter the output lacks: summed over."""
    inputs, output = _terms(attrs["equation"])
    return tuple(axis for axis, letter in enumerate(inputs[0]) if letter not in output)


def _infer_einsum(attrs, shapes):
    equation = attrs["equation"]
    check(equation in EQUATIONS, f"equation {equation!r} is not one of {list(EQUATIONS)}")
    inputs, output = _terms(equation)
    check(len(shapes) == len(inputs), f"{equation!r} takes {len(inputs)} operands, got {len(shapes)}")
    sizes = {}
    for term, shape in zip(inputs, shapes):
        check(len(term) == len(shape), f"operand {list(shape)} does not have the {len(term)} dims of {term!r} in {equation!r}")
        for letter, size in zip(term, shape):
            check(sizes.setdefault(letter, size) == size, f"dim {letter!r} of {equation!r} is both {sizes[letter]} and {size}")
    return tuple(sizes[letter] for letter in output)


def _einsum_reference(xs, ps, attrs):
    """numpy's einsum: a repeated letter in one operand takes the diagonal, a letter missing
    from the output is summed over, the output's letters give its dim order."""
    return like(xs[0], np.einsum(attrs["equation"], *xs))


def _torch_einsum(xs, ps, attrs):
    import torch

    return torch.einsum(attrs["equation"], *xs)


def _jax_einsum(xs, ps, attrs):
    import jax.numpy as jnp

    return jnp.einsum(attrs["equation"], *xs)


SUMS_OF_PRODUCTS = "adds many rounded products: the error grows with the contraction's length and cancellation"
CONTRACTION = Numerics(sensitivity=2.0, why={"sensitivity": SUMS_OF_PRODUCTS})
# The first operand's last axis is K of an M x K @ K x N product (linear, matmul, bmm).
LAST_AXIS_CONTRACTS = Ladder("contraction", lambda attrs, shapes: (len(shapes[0]) - 1,))
SCALED_PRODUCT = Numerics(sensitivity=2.0, forward_error=_scaled_product_error, why={
    "sensitivity": SUMS_OF_PRODUCTS,
    "forward_error": "beta * input and alpha * a @ b may cancel, each rounded (_scaled_product_error)"})

OPS = [
    OpDef(
        name="linear",
        attrs=('out_features', 'bias'),
        infer=_infer_linear,
        reference=_linear_reference,
        torch=_torch_linear,
        jax=_jax_linear,
        accepts=rank_between(1, 4),
        draw_attrs=_draw_linear,
        params=_linear_params,
        ladder=LAST_AXIS_CONTRACTS,
        numerics=CONTRACTION,
    ),
    # linear's x W^T with the weight on the left (W x, as jax code writes `matrix @ row`): under jax.vmap
    # the shared matrix times a batched vector is another batching rule (jax#39103).
    OpDef(
        name="mv",
        attrs=('out_features',),
        infer=_infer_mv,
        reference=_mv_reference,
        torch=_torch_mv,
        jax=_jax_mv,
        accepts=rank_between(1, 1),
        draw_attrs=lambda draw, shapes: {"out_features": _draw_features(draw)},
        params=_mv_params,
        numerics=CONTRACTION,
        ladder=Ladder("contraction", lambda attrs, shapes: (0,)),
    ),
    OpDef(
        name="matmul",
        attrs=(),
        infer=_infer_matmul,
        reference=lambda xs, ps, attrs: np.matmul(xs[0], xs[1]),
        torch=_torch_matmul,
        jax=_jax_matmul,
        accepts=rank_between(2, 4),
        draw_operands=_draw_matmul_operands,
        arity=(2, 2),
        ladder=LAST_AXIS_CONTRACTS,
        numerics=CONTRACTION,
        regions=Regions(tuple(f"batch={style}" for style in MATMUL_BATCH_STYLES), _matmul_batch_region),
    ),
    OpDef(
        name="bmm",
        attrs=(),
        infer=_infer_bmm,
        reference=lambda xs, ps, attrs: np.matmul(xs[0], xs[1]),
        torch=_torch_bmm,
        jax=_jax_matmul,
        accepts=rank_between(3, 3),
        draw_operands=_draw_bmm_operands,
        arity=(2, 2),
        ladder=LAST_AXIS_CONTRACTS,
        numerics=CONTRACTION,
    ),
    OpDef(
        name="addmm",
        attrs=('alpha', 'beta'),
        infer=_infer_scaled_product,
        reference=_scaled_product_reference,
        torch=_torch_scaled_product("addmm"),
        jax=_jax_scaled_product,
        accepts=rank_between(1, 2),
        draw_attrs=_draw_scales,
        draw_operands=_draw_addmm_operands,
        arity=(3, 3),
        numerics=SCALED_PRODUCT,
    ),
    OpDef(
        name="baddbmm",
        attrs=('alpha', 'beta'),
        infer=_infer_scaled_product,
        reference=_scaled_product_reference,
        torch=_torch_scaled_product("baddbmm"),
        jax=_jax_scaled_product,
        accepts=rank_between(2, 3),
        draw_attrs=_draw_scales,
        draw_operands=_draw_baddbmm_operands,
        arity=(3, 3),
        numerics=SCALED_PRODUCT,
    ),
    OpDef(
        name="einsum",
        attrs=('equation',),
        infer=_infer_einsum,
        reference=_einsum_reference,
        torch=_torch_einsum,
        jax=_jax_einsum,
        accepts=_einsum_accepts,
        draw_attrs=_draw_einsum,
        draw_operands=_draw_einsum_operands,
        arity=(1, 2),
        ladder=Ladder("contraction", _einsum_contracted),
        numerics=CONTRACTION,
    ),
]
OPS = complex_semantics(OPS, dict.fromkeys(("matmul", "mv", "bmm", "einsum"), "complex"))
