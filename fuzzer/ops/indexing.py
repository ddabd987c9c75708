"""Ops that read values at integer indices: gather, index_select, embedding.

The indices are attributes (JSON lists of ints, at most MAX_INDICES of them), not
graph values: every graph value is floating point, and a drawn index is in range by
construction. The frameworks still receive them as int64 tensors built inside the
op (`torch.tensor(...)`, `jnp.asarray(...)`), constants to torch.compile, export,
jit.trace and jax.jit.

embedding is declared as x + F.embedding(indices, weight) on a first operand x of shape
(..., positions, embedding_dim), one index per position: a positional-embedding lookup.
A bare lookup would need an integer graph input, or a fresh output independent of its
operand; adding the rows keeps the op a float-to-float step that composes anywhere in a
graph, while the torch and jax calls stay the public F.embedding and jnp.take.
"""

from __future__ import annotations

import numpy as np

from fuzzer.ops import OpDef
from fuzzer.ops._common import check, draw_dim, numel, rank_between, st
from fuzzer.ops.shape import checked_dim, is_int

MAX_INDICES = 64


def _index_array(value, what: str) -> np.ndarray:
    """A nested list of ints as an int64 array; refuses ragged lists, bools, floats, and more
    than MAX_INDICES entries."""
    try:
        array = np.asarray(value)
    except ValueError:
        array = None
    check(array is not None and array.dtype.kind == "i" and array.ndim >= 1, f"{what} must be a (nested) list of integers, got {value!r}")
    check(1 <= array.size <= MAX_INDICES, f"{what} has {array.size} entries; 1 to {MAX_INDICES} are allowed")
    return array.astype(np.int64)


def _in_range(indices: np.ndarray, size: int, what: str) -> None:
    check(0 <= indices.min() and indices.max() < size, f"{what} {indices.tolist()} are not all in 0..{size - 1}")


def _draw_indices(draw, count: int, size: int) -> list[int]:
    return draw(st.lists(st.integers(0, size - 1), min_size=count, max_size=count))


def _torch_index(indices, like):
    import torch

    return torch.tensor(indices, dtype=torch.int64, device=like.device)


# -- gather ------------------------------------------------------------------------


def _draw_gather(draw, shapes):
    """An index of the input's rank: along `dim` 1..4 entries, elsewhere at most the input's
    size (torch.gather's rule), MAX_INDICES entries in all."""
    shape = shapes[0]
    dim = draw_dim(draw, len(shape))
    index_shape, budget = [], MAX_INDICES
    for axis, size in enumerate(shape):
        limit = 4 if axis == dim % len(shape) else size
        index_shape.append(draw(st.integers(1, max(1, min(limit, budget)))))
        budget //= index_shape[-1]
    flat = _draw_indices(draw, numel(index_shape), shape[dim])
    return {"dim": dim, "index": np.reshape(flat, index_shape).tolist()}


def _infer_gather(attrs, shapes):
    shape = shapes[0]
    dim = checked_dim(attrs["dim"], len(shape))
    index = _index_array(attrs["index"], "gather index")
    check(index.ndim == len(shape), f"gather index has rank {index.ndim}, the input {len(shape)}")
    check(
        all(i <= s for axis, (i, s) in enumerate(zip(index.shape, shape)) if axis != dim),
        f"gather index shape {list(index.shape)} exceeds the input shape {list(shape)} outside dim {dim}",
    )
    _in_range(index, shape[dim], "gather indices")
    return tuple(index.shape)


def _gather_reference(xs, ps, attrs):
    """out[i] = x[i with its `dim` coordinate replaced by index[i]]; on the other dims the
    index may be shorter than the input, which then reads only the leading positions."""
    x, index = xs[0], np.asarray(attrs["index"], dtype=np.int64)
    coordinates = list(np.indices(index.shape))
    coordinates[attrs["dim"]] = index
    return x[tuple(coordinates)]


def _torch_gather(xs, ps, attrs):
    import torch

    return torch.gather(xs[0], attrs["dim"], _torch_index(attrs["index"], xs[0]))


def _jax_gather(xs, ps, attrs):
    """take_along_axis wants the index as long as the input on the other dims; torch.gather
    reads only the leading positions there, so the input is cut to the index's extent first."""
    import jax.numpy as jnp

    x, index = xs[0], np.asarray(attrs["index"])
    dim = attrs["dim"] % x.ndim
    leading = tuple(slice(None) if axis == dim else slice(0, n) for axis, n in enumerate(index.shape))
    return jnp.take_along_axis(x[leading], jnp.asarray(index), axis=dim)


# -- index_select ----------------------------------------------------------------------


def _draw_index_select(draw, shapes):
    shape = shapes[0]
    dim = draw_dim(draw, len(shape))
    return {"dim": dim, "index": _draw_indices(draw, draw(st.integers(1, 8)), shape[dim])}


def _infer_index_select(attrs, shapes):
    shape = list(shapes[0])
    dim = checked_dim(attrs["dim"], len(shape))
    index = _index_array(attrs["index"], "index_select index")
    check(index.ndim == 1, f"index_select takes a flat index list, got {attrs['index']!r}")
    _in_range(index, shape[dim], "index_select indices")
    shape[dim] = index.size
    return tuple(shape)


def _index_select_reference(xs, ps, attrs):
    """The slices of `dim` at the listed positions, in list order, repeats included."""
    x, dim = xs[0], attrs["dim"] % xs[0].ndim
    return x[(slice(None),) * dim + (np.asarray(attrs["index"], dtype=np.int64),)]


def _torch_index_select(xs, ps, attrs):
    import torch

    return torch.index_select(xs[0], attrs["dim"], _torch_index(attrs["index"], xs[0]))


def _jax_index_select(xs, ps, attrs):
    import jax.numpy as jnp

    return jnp.take(xs[0], jnp.asarray(attrs["index"]), axis=attrs["dim"])


# -- embedding ---------------------------------------------------------------------------


def _draw_embedding(draw, shapes):
    positions = shapes[0][-2]
    num_embeddings = draw(st.integers(1, 10))
    return {"num_embeddings": num_embeddings, "indices": _draw_indices(draw, positions, num_embeddings)}


def _infer_embedding(attrs, shapes):
    shape = shapes[0]
    check(len(shape) >= 2, f"embedding adds rows to a (..., positions, embedding_dim) input, got {list(shape)}")
    indices = _index_array(attrs["indices"], "embedding indices")
    check(
        indices.ndim == 1 and indices.size == shape[-2],
        f"embedding needs one index per position ({shape[-2]}), got {attrs['indices']!r}",
    )
    num_embeddings = attrs["num_embeddings"]
    check(is_int(num_embeddings) and num_embeddings >= 1, f"num_embeddings {num_embeddings!r} must be a positive integer")
    _in_range(indices, num_embeddings, "embedding indices")
    return tuple(shape)


def _embedding_params(attrs, shapes):
    return {"weight": (attrs["num_embeddings"], shapes[0][-1])}


def _embedding_reference(xs, ps, attrs):
    """x + weight[indices]: row indices[p] of the table added at position p (dim -2) of x,
    the same for every leading index."""
    return xs[0] + ps["weight"][np.asarray(attrs["indices"], dtype=np.int64)]


def _torch_embedding(xs, ps, attrs):
    import torch.nn.functional as F

    return xs[0] + F.embedding(_torch_index(attrs["indices"], xs[0]), ps["weight"])


def _jax_embedding(xs, ps, attrs):
    import jax.numpy as jnp

    return xs[0] + jnp.take(ps["weight"], jnp.asarray(attrs["indices"]), axis=0)


OPS = [
    OpDef(
        name="gather",
        attrs=('dim', 'index'),
        infer=_infer_gather,
        reference=_gather_reference,
        torch=_torch_gather,
        jax=_jax_gather,
        accepts=rank_between(1, 5),
        draw_attrs=_draw_gather,
    ),
    OpDef(
        name="index_select",
        attrs=('dim', 'index'),
        infer=_infer_index_select,
        reference=_index_select_reference,
        torch=_torch_index_select,
        jax=_jax_index_select,
        accepts=rank_between(1, 5),
        draw_attrs=_draw_index_select,
    ),
    OpDef(
        name="embedding",
        attrs=('num_embeddings', 'indices'),
        infer=_infer_embedding,
        reference=_embedding_reference,
        torch=_torch_embedding,
        jax=_jax_embedding,
        accepts=lambda shape: 2 <= len(shape) <= 5 and shape[-2] <= MAX_INDICES,
        draw_attrs=_draw_embedding,
        params=_embedding_params,
        notes="x + F.embedding(indices, weight): a positional-embedding lookup (see the module docstring)",
    ),
]
