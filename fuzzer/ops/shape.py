"""Layout ops: reshape, transpose, permute, flatten, concat.

transpose and permute produce non-contiguous views in torch; the ops after them
(layer_norm, matmul, softmax) must not care. Seed bug 1 lived exactly there.
"""

from __future__ import annotations

import numpy as np

from fuzzer.ops import OpDef
from fuzzer.ops._common import check, norm_dim, numel, rank_between, st


def _draw_reshape(draw, shapes):
    """A random factorization of numel into 1..4 dims (sometimes with a -1)."""
    remaining = numel(shapes[0])
    target = []
    rank = draw(st.integers(1, 4))
    for _ in range(rank - 1):
        divisors = [d for d in range(1, min(remaining, 64) + 1) if remaining % d == 0]
        factor = draw(st.sampled_from(divisors))
        target.append(factor)
        remaining //= factor
    target.append(remaining)
    if draw(st.integers(0, 3)) == 0:
        target[draw(st.integers(0, len(target) - 1))] = -1
    return {"shape": target}


def _infer_reshape(attrs, shapes):
    target, total = list(attrs["shape"]), numel(shapes[0])
    check(all(isinstance(d, int) and (d >= 1 or d == -1) for d in target), "shape entries must be positive or -1")
    check(target.count(-1) <= 1, "at most one -1 in shape")
    known = numel([d for d in target if d != -1])
    if -1 in target:
        check(total % known == 0, f"cannot infer -1: {total} elements into {target}")
        target[target.index(-1)] = total // known
    check(numel(target) == total, f"shape {attrs['shape']} does not hold {total} elements")
    return tuple(target)


def _draw_transpose(draw, shapes):
    rank = len(shapes[0])
    a, b = draw(st.lists(st.integers(0, rank - 1), min_size=2, max_size=2, unique=True))
    return {"dim0": a, "dim1": b}


def _infer_transpose(attrs, shapes):
    shape, rank = list(shapes[0]), len(shapes[0])
    a, b = norm_dim(attrs["dim0"], rank), norm_dim(attrs["dim1"], rank)
    shape[a], shape[b] = shape[b], shape[a]
    return tuple(shape)


def _draw_permute(draw, shapes):
    return {"perm": draw(st.permutations(range(len(shapes[0]))))}


def _infer_permute(attrs, shapes):
    perm, shape = attrs["perm"], shapes[0]
    check(sorted(perm) == list(range(len(shape))), f"perm {perm} is not a permutation of 0..{len(shape) - 1}")
    return tuple(shape[p] for p in perm)


def _draw_flatten(draw, shapes):
    rank = len(shapes[0])
    start = draw(st.integers(0, rank - 1))
    return {"start_dim": start, "end_dim": draw(st.integers(start, rank - 1))}


def _infer_flatten(attrs, shapes):
    shape, rank = shapes[0], len(shapes[0])
    start, end = norm_dim(attrs["start_dim"], rank), norm_dim(attrs["end_dim"], rank)
    check(start <= end, "start_dim must not be after end_dim")
    return tuple(shape[:start]) + (numel(shape[start : end + 1]),) + tuple(shape[end + 1 :])


def _draw_concat(draw, shapes):
    return {"dim": draw(st.integers(0, len(shapes[0]) - 1))}


def _draw_concat_operands(draw, first, attrs):
    count = draw(st.integers(1, 2))
    dim = attrs["dim"]
    return [tuple(first[:dim]) + (draw(st.sampled_from([1, 2, 3, 5])),) + tuple(first[dim + 1 :]) for _ in range(count)]


def _infer_concat(attrs, shapes):
    rank = len(shapes[0])
    dim = norm_dim(attrs["dim"], rank)
    for shape in shapes[1:]:
        check(len(shape) == rank, "all inputs must have the same rank")
        check(
            all(a == b for i, (a, b) in enumerate(zip(shape, shapes[0])) if i != dim),
            f"shapes {[list(s) for s in shapes]} differ outside dim {dim}",
        )
    out = list(shapes[0])
    out[dim] = sum(s[dim] for s in shapes)
    return tuple(out)


def _torch_reshape(xs, ps, attrs):
    return xs[0].reshape(attrs["shape"])


def _jax_reshape(xs, ps, attrs):
    return xs[0].reshape(attrs["shape"])


def _torch_transpose(xs, ps, attrs):
    return xs[0].transpose(attrs["dim0"], attrs["dim1"])


def _jax_transpose(xs, ps, attrs):
    import jax.numpy as jnp

    return jnp.swapaxes(xs[0], attrs["dim0"], attrs["dim1"])


def _torch_permute(xs, ps, attrs):
    return xs[0].permute(*attrs["perm"])


def _jax_permute(xs, ps, attrs):
    import jax.numpy as jnp

    return jnp.transpose(xs[0], attrs["perm"])


def _torch_flatten(xs, ps, attrs):
    return xs[0].flatten(attrs["start_dim"], attrs["end_dim"])


def _jax_flatten(xs, ps, attrs):
    return xs[0].reshape(_infer_flatten(attrs, [tuple(xs[0].shape)]))


def _torch_concat(xs, ps, attrs):
    import torch

    return torch.cat(list(xs), dim=attrs["dim"])


def _jax_concat(xs, ps, attrs):
    import jax.numpy as jnp

    return jnp.concatenate(list(xs), axis=attrs["dim"])


OPS = [
    OpDef(
        name="reshape",
        infer=_infer_reshape,
        reference=lambda xs, ps, attrs: np.reshape(xs[0], attrs["shape"]),
        torch=_torch_reshape,
        jax=_jax_reshape,
        accepts=rank_between(1, 5),
        draw_attrs=_draw_reshape,
    ),
    OpDef(
        name="transpose",
        infer=_infer_transpose,
        reference=lambda xs, ps, attrs: np.swapaxes(xs[0], attrs["dim0"], attrs["dim1"]),
        torch=_torch_transpose,
        jax=_jax_transpose,
        accepts=rank_between(2, 5),
        draw_attrs=_draw_transpose,
    ),
    OpDef(
        name="permute",
        infer=_infer_permute,
        reference=lambda xs, ps, attrs: np.transpose(xs[0], attrs["perm"]),
        torch=_torch_permute,
        jax=_jax_permute,
        accepts=rank_between(2, 5),
        draw_attrs=_draw_permute,
    ),
    OpDef(
        name="flatten",
        infer=_infer_flatten,
        reference=lambda xs, ps, attrs: np.reshape(xs[0], _infer_flatten(attrs, [xs[0].shape])),
        torch=_torch_flatten,
        jax=_jax_flatten,
        accepts=rank_between(2, 5),
        draw_attrs=_draw_flatten,
    ),
    OpDef(
        name="concat",
        infer=_infer_concat,
        reference=lambda xs, ps, attrs: np.concatenate(xs, axis=attrs["dim"]),
        torch=_torch_concat,
        jax=_jax_concat,
        accepts=rank_between(1, 5),
        draw_attrs=_draw_concat,
        draw_operands=_draw_concat_operands,
        arity=(2, 3),
    ),
]
