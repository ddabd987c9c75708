"""Layout, slicing and padding ops: everything that moves or copies values without arithmetic.

reshape, transpose, permute, flatten, concat, stack, squeeze, unsqueeze, expand, repeat,
roll, flip, slice, narrow, select, chunk, split_select, pad.

transpose and permute produce non-contiguous views in torch; the ops after them
(layer_norm, matmul, softmax) must not care. Seed bug 1 lived exactly there.
expand produces a stride-0 view, slice with a step a strided one: the same
regime, harder. Dims are drawn negative too wherever the frameworks take them.
Every reference builds its output from explicit source positions (numpy
indexing), so the slicing and padding conventions are written out, not inherited.
"""

from __future__ import annotations

import math

import numpy as np

from fuzzer.ops import OpDef
from fuzzer.ops._common import DIMS, check, draw_dim, draw_dims, maybe_negative, norm_dim, numel, rank_between, st
from fuzzer.ops._complex import complex_semantics
from fuzzer.ops._exact import EXACT_DTYPES, integer_semantics

MAX_RANK = 5
# How many times expand or repeat may multiply the element count: the generator bounds
# whole graphs (MAX_ELEMENTS), this keeps single-op cases (the registry tests) small too.
MAX_GROWTH = 16
PAD_MODES = ("constant", "reflect", "replicate", "circular")
# Exact in float16 and bfloat16 too, so the fill value itself is never rounded.
PAD_VALUES = (0.0, 1.0, -1.0, 0.5, -2.5, 3.0)


def is_int(value) -> bool:
    """An int and not a bool (JSON true is no index)."""
    return isinstance(value, int) and not isinstance(value, bool)


def checked_dim(value, rank: int) -> int:
    """norm_dim for a dim read from attributes, which may come from an imported file."""
    check(is_int(value), f"dim {value!r} must be an integer")
    return norm_dim(value, rank)


def _int_list(value, what: str) -> list[int]:
    check(isinstance(value, list) and all(is_int(v) for v in value), f"{what} must be a list of integers, got {value!r}")
    return value


def _distinct_dims(dims, rank: int) -> list[int]:
    normalized = [norm_dim(d, rank) for d in _int_list(dims, "dims")]
    check(len(set(normalized)) == len(normalized), f"dims {dims} name a dim twice")
    return normalized


def _take(x, dim: int, positions):
    """x at the source `positions` along `dim` (a copy): the slicing, padding and tiling references' primitive."""
    return np.take(x, np.asarray(positions, dtype=np.int64), axis=dim)


def _index_at(dim: int, item) -> tuple:
    """The indexing tuple that applies `item` on `dim` (x[..., item] for dim -1, as a user writes it)."""
    if dim < 0:
        return (Ellipsis, item) + (slice(None),) * (-dim - 1)
    return (slice(None),) * dim + (item,)


def _at_least_1d(out):
    """Rank 0 becomes shape (1,), as in the reductions: every op returns rank >= 1."""
    return out.reshape(1) if out.ndim == 0 else out


def _reshape_reference(infer):
    """For ops that only regroup dims: the input, row-major, in the inferred shape."""
    return lambda xs, ps, attrs: np.reshape(xs[0], infer(attrs, [xs[0].shape]))


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


def _repair_reshape(attrs, shapes):
    """A target that no longer has the input's element count gets -1 for its largest entry
    (one with a -1 already adapts)."""
    target = list(attrs["shape"])
    if -1 in target or numel(target) == numel(shapes[0]):
        return attrs
    target[int(np.argmax(target))] = -1
    return {**attrs, "shape": target}


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
    return {"dim0": maybe_negative(draw, a, rank), "dim1": maybe_negative(draw, b, rank)}


def _infer_transpose(attrs, shapes):
    shape, rank = list(shapes[0]), len(shapes[0])
    a, b = checked_dim(attrs["dim0"], rank), checked_dim(attrs["dim1"], rank)
    shape[a], shape[b] = shape[b], shape[a]
    return tuple(shape)


def _draw_permute(draw, shapes):
    rank = len(shapes[0])
    return {"perm": [maybe_negative(draw, p, rank) for p in draw(st.permutations(range(rank)))]}


def _infer_permute(attrs, shapes):
    perm, shape = _int_list(attrs["perm"], "perm"), shapes[0]
    normalized = sorted(p % len(shape) for p in perm if -len(shape) <= p < len(shape))
    check(normalized == list(range(len(shape))), f"perm {perm} is not a permutation of the {len(shape)} dims")
    return tuple(shape[p] for p in perm)


def _draw_flatten(draw, shapes):
    rank = len(shapes[0])
    start = draw(st.integers(0, rank - 1))
    end = draw(st.integers(start, rank - 1))
    return {"start_dim": maybe_negative(draw, start, rank), "end_dim": maybe_negative(draw, end, rank)}


def _infer_flatten(attrs, shapes):
    shape, rank = shapes[0], len(shapes[0])
    start, end = checked_dim(attrs["start_dim"], rank), checked_dim(attrs["end_dim"], rank)
    check(start <= end, "start_dim must not be after end_dim")
    return tuple(shape[:start]) + (numel(shape[start : end + 1]),) + tuple(shape[end + 1 :])


def _draw_concat(draw, shapes):
    return {"dim": draw_dim(draw, len(shapes[0]))}


def _draw_concat_operands(draw, first, attrs):
    count = draw(st.integers(1, 2))
    dim = attrs["dim"] % len(first)
    return [tuple(first[:dim]) + (draw(st.sampled_from([1, 2, 3, 5])),) + tuple(first[dim + 1 :]) for _ in range(count)]


def _infer_concat(attrs, shapes):
    rank = len(shapes[0])
    dim = checked_dim(attrs["dim"], rank)
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


# -- stack, squeeze, unsqueeze, expand, repeat, roll, flip ---------------------------


def _draw_stack(draw, shapes):
    rank = len(shapes[0])
    return {"dim": draw(st.integers(-rank - 1, rank))}


def _draw_stack_operands(draw, first, attrs):
    # Same shape by definition; the generator may pick one existing value twice.
    return [tuple(first)] * draw(st.integers(1, 2))


def _infer_stack(attrs, shapes):
    check(all(tuple(s) == tuple(shapes[0]) for s in shapes), f"stack needs equal shapes, got {[list(s) for s in shapes]}")
    out = list(shapes[0])
    out.insert(checked_dim(attrs["dim"], len(out) + 1), len(shapes))
    return tuple(out)


def _torch_stack(xs, ps, attrs):
    import torch

    return torch.stack(list(xs), dim=attrs["dim"])


def _jax_stack(xs, ps, attrs):
    import jax.numpy as jnp

    return jnp.stack(list(xs), axis=attrs["dim"])


def _accepts_squeeze(shape):
    # Rank >= 2: squeezing a rank-1 tensor would leave rank 0.
    return 2 <= len(shape) <= MAX_RANK and 1 in shape


def _draw_squeeze(draw, shapes):
    shape = shapes[0]
    dim = draw(st.sampled_from([i for i, d in enumerate(shape) if d == 1]))
    return {"dim": dim - len(shape) if draw(st.booleans()) else dim}


def _infer_squeeze(attrs, shapes):
    shape = tuple(shapes[0])
    check(len(shape) >= 2, f"squeeze needs rank >= 2 (ops never return rank 0), got {list(shape)}")
    dim = checked_dim(attrs["dim"], len(shape))
    check(shape[dim] == 1, f"dim {attrs['dim']} of shape {list(shape)} has size {shape[dim]}, not 1")
    return shape[:dim] + shape[dim + 1 :]


def _draw_unsqueeze(draw, shapes):
    rank = len(shapes[0])
    return {"dim": draw(st.integers(-rank - 1, rank))}


def _infer_unsqueeze(attrs, shapes):
    out = list(shapes[0])
    out.insert(checked_dim(attrs["dim"], len(out) + 1), 1)
    return tuple(out)


def _jax_unsqueeze(xs, ps, attrs):
    import jax.numpy as jnp

    return jnp.expand_dims(xs[0], attrs["dim"])


def _draw_expand(draw, shapes):
    """Size-1 dims to a size from DIMS (or kept: -1, 1), other dims kept (-1 or their size),
    sometimes a new leading dim; the element count grows at most MAX_GROWTH times."""
    shape, growth, sizes = shapes[0], 1, []

    def grown(allowed):
        nonlocal growth
        size = draw(st.sampled_from([d for d in allowed if growth * max(d, 1) <= MAX_GROWTH]))
        growth *= max(size, 1)
        return size

    if len(shape) < MAX_RANK and draw(st.booleans()):
        sizes.append(grown(DIMS))
    for d in shape:
        sizes.append(grown((-1, *DIMS)) if d == 1 else draw(st.sampled_from([-1, d])))
    return {"sizes": sizes}


def _infer_expand(attrs, shapes):
    shape, sizes = shapes[0], _int_list(attrs["sizes"], "sizes")
    extra = len(sizes) - len(shape)
    check(extra >= 0, f"expand sizes {sizes} have fewer dims than the input {list(shape)}")
    check(all(s >= 1 for s in sizes[:extra]), f"new leading sizes in {sizes} must be positive (no -1 there)")
    for d, s in zip(shape, sizes[extra:]):
        check(s in (-1, d) or (d == 1 and s >= 1), f"cannot expand a dim of size {d} to {s}: only size-1 dims grow")
    return tuple(sizes[:extra]) + tuple(d if s == -1 else s for d, s in zip(shape, sizes[extra:]))


def _torch_expand(xs, ps, attrs):
    return xs[0].expand(attrs["sizes"])


def _jax_expand(xs, ps, attrs):
    import jax.numpy as jnp

    return jnp.broadcast_to(xs[0], _infer_expand(attrs, [tuple(xs[0].shape)]))


def _expand_reference(xs, ps, attrs):
    """Broadcasting: a size-1 dim repeats its one slice, new leading dims repeat the whole input."""
    return np.broadcast_to(xs[0], _infer_expand(attrs, [xs[0].shape])).copy()


def _draw_repeat(draw, shapes):
    rank, growth, repeats = len(shapes[0]), 1, []
    for _ in range(rank + draw(st.integers(0, min(1, MAX_RANK - rank)))):
        times = draw(st.sampled_from([r for r in (1, 2, 3) if growth * r <= MAX_GROWTH]))
        growth *= times
        repeats.append(times)
    return {"repeats": repeats}


def _infer_repeat(attrs, shapes):
    shape, repeats = shapes[0], _int_list(attrs["repeats"], "repeats")
    check(len(repeats) >= len(shape), f"repeats {repeats} have fewer entries than the input has dims ({len(shape)})")
    check(min(repeats) >= 1, f"repeats {repeats} must be positive")
    padded = (1,) * (len(repeats) - len(shape)) + tuple(shape)
    return tuple(d * r for d, r in zip(padded, repeats))


def _repeat_reference(xs, ps, attrs):
    """Tiling: out[i] = x[i mod n] on every dim, the input's shape left-padded with 1s to len(repeats)."""
    repeats = attrs["repeats"]
    x = np.reshape(xs[0], (1,) * (len(repeats) - xs[0].ndim) + xs[0].shape)
    for dim, times in enumerate(repeats):
        n = x.shape[dim]
        x = _take(x, dim, np.arange(n * times) % n)
    return x


def _torch_repeat(xs, ps, attrs):
    return xs[0].repeat(attrs["repeats"])


def _jax_repeat(xs, ps, attrs):
    import jax.numpy as jnp

    return jnp.tile(xs[0], attrs["repeats"])


def _draw_roll(draw, shapes):
    """Per-dim shifts, negative and past the size too; one time in four dims None: torch.roll
    then rolls the flattened tensor."""
    shape = shapes[0]
    if draw(st.integers(0, 3)) == 0:
        total = numel(shape)
        return {"shifts": [draw(st.integers(-2 * total, 2 * total))], "dims": None}
    dims = draw_dims(draw, len(shape))
    return {"shifts": [draw(st.integers(-2 * shape[d], 2 * shape[d])) for d in dims], "dims": dims}


def _infer_roll(attrs, shapes):
    shifts, dims = _int_list(attrs["shifts"], "shifts"), attrs["dims"]
    if dims is None:
        check(len(shifts) == 1, f"rolling the flattened tensor (dims None) takes one shift, got {shifts}")
    else:
        check(len(shifts) == len(_distinct_dims(dims, len(shapes[0]))) >= 1, f"shifts {shifts} and dims {dims} must pair up")
    return tuple(shapes[0])


def _roll_reference(xs, ps, attrs):
    """out[i] = x[(i - shift) mod n] on each rolled dim; dims None: the same on the row-major
    flattened tensor, reshaped back."""
    x = xs[0]
    if attrs["dims"] is None:
        flat = x.reshape(-1)
        return _take(flat, 0, (np.arange(flat.size) - attrs["shifts"][0]) % flat.size).reshape(x.shape)
    for dim, shift in zip(attrs["dims"], attrs["shifts"]):
        n = x.shape[dim]
        x = _take(x, dim, (np.arange(n) - shift) % n)
    return x


def _torch_roll(xs, ps, attrs):
    import torch

    return torch.roll(xs[0], attrs["shifts"], attrs["dims"])


def _jax_roll(xs, ps, attrs):
    import jax.numpy as jnp

    if attrs["dims"] is None:
        return jnp.roll(xs[0], attrs["shifts"][0])
    return jnp.roll(xs[0], tuple(attrs["shifts"]), axis=tuple(attrs["dims"]))


def _draw_flip(draw, shapes):
    return {"dims": draw_dims(draw, len(shapes[0]))}


def _infer_flip(attrs, shapes):
    check(len(_distinct_dims(attrs["dims"], len(shapes[0]))) >= 1, "flip needs at least one dim")
    return tuple(shapes[0])


def _flip_reference(xs, ps, attrs):
    """out[i] = x[n - 1 - i] on every listed dim."""
    x = xs[0]
    for dim in attrs["dims"]:
        x = _take(x, dim, np.arange(x.shape[dim])[::-1])
    return x


def _torch_flip(xs, ps, attrs):
    import torch

    return torch.flip(xs[0], attrs["dims"])


def _jax_flip(xs, ps, attrs):
    import jax.numpy as jnp

    return jnp.flip(xs[0], axis=tuple(attrs["dims"]))


# -- slice, narrow, select, chunk, split_select ----------------------------------------


def _slice_positions(attrs, n: int) -> range:
    """Python's slice semantics: a negative bound counts from the end, bounds past the ends
    clamp, and the step is positive (torch slicing takes no other)."""
    return range(*slice(attrs["start"], attrs["stop"], attrs["step"]).indices(n))


def _draw_slice(draw, shapes):
    shape = shapes[0]
    dim = draw_dim(draw, len(shape))
    n = shape[dim]
    first = draw(st.integers(0, n - 1))
    end = draw(st.integers(first + 1, n))
    # Bounds as users write them: from the end (negative) or past the end (clamped) at times.
    start = first - n if draw(st.booleans()) else first
    if end < n:
        stop = end - n if draw(st.booleans()) else end
    else:
        stop = end + draw(st.sampled_from([0, 0, 1, 5]))
    return {"dim": dim, "start": start, "stop": stop, "step": draw(st.integers(1, 3))}


def _infer_slice(attrs, shapes):
    shape = list(shapes[0])
    dim = checked_dim(attrs["dim"], len(shape))
    check(all(is_int(attrs[k]) for k in ("start", "stop", "step")), "start, stop and step must be integers")
    check(attrs["step"] >= 1, f"step {attrs['step']} must be positive (torch slicing takes no other)")
    shape[dim] = len(_slice_positions(attrs, shape[dim]))
    check(shape[dim] >= 1, f"slice {attrs['start']}:{attrs['stop']}:{attrs['step']} of a dim of size {shapes[0][dim]} is empty")
    return tuple(shape)


def _slice_reference(xs, ps, attrs):
    return _take(xs[0], attrs["dim"], list(_slice_positions(attrs, xs[0].shape[attrs["dim"]])))


def _slice_index(attrs) -> tuple:
    return _index_at(attrs["dim"], slice(attrs["start"], attrs["stop"], attrs["step"]))


def _indexed(index_of):
    """torch and jax alike: Python indexing (x[..., a:b:s]) with the tuple index_of(attrs)."""

    def index(xs, ps, attrs):
        return xs[0][index_of(attrs)]

    return index


def _squeeze(xs, ps, attrs):
    """torch and jax alike: the tensor method."""
    return xs[0].squeeze(attrs["dim"])


def _torch_unsqueeze(xs, ps, attrs):
    return xs[0].unsqueeze(attrs["dim"])


def _draw_narrow(draw, shapes):
    shape = shapes[0]
    dim = draw_dim(draw, len(shape))
    n = shape[dim]
    first = draw(st.integers(0, n - 1))
    start = first - n if draw(st.booleans()) else first
    return {"dim": dim, "start": start, "length": draw(st.integers(1, n - first))}


def _narrow_range(attrs, n: int) -> range:
    """torch.narrow: `length` elements from `start`; a negative start counts from the end."""
    start = attrs["start"]
    check(is_int(start) and -n <= start < n, f"start {start} is out of range for a dim of size {n}")
    first = attrs["start"] % n
    check(is_int(attrs["length"]) and 1 <= attrs["length"] <= n - first, f"length {attrs['length']} from {first} does not fit a dim of size {n}")
    return range(first, first + attrs["length"])


def _infer_narrow(attrs, shapes):
    shape = list(shapes[0])
    dim = checked_dim(attrs["dim"], len(shape))
    shape[dim] = len(_narrow_range(attrs, shape[dim]))
    return tuple(shape)


def _narrow_reference(xs, ps, attrs):
    return _take(xs[0], attrs["dim"], list(_narrow_range(attrs, xs[0].shape[attrs["dim"]])))


def _torch_narrow(xs, ps, attrs):
    import torch

    return torch.narrow(xs[0], attrs["dim"], attrs["start"], attrs["length"])


def _jax_narrow(xs, ps, attrs):
    from jax import lax

    x = xs[0]
    dim = attrs["dim"] % x.ndim
    positions = _narrow_range(attrs, x.shape[dim])
    return lax.slice_in_dim(x, positions.start, positions.stop, axis=dim)


def _draw_select(draw, shapes):
    shape = shapes[0]
    dim = draw_dim(draw, len(shape))
    return {"dim": dim, "index": draw(st.integers(-shape[dim], shape[dim] - 1))}


def _infer_select(attrs, shapes):
    shape = tuple(shapes[0])
    dim = checked_dim(attrs["dim"], len(shape))
    check(is_int(attrs["index"]) and -shape[dim] <= attrs["index"] < shape[dim], f"index {attrs['index']} is out of range for a dim of size {shape[dim]}")
    return shape[:dim] + shape[dim + 1 :] or (1,)


def _select_reference(xs, ps, attrs):
    """The slice at `index` (negative: from the end) of `dim`, which disappears; rank 0 is kept as (1,)."""
    x = xs[0]
    return _at_least_1d(_take(x, attrs["dim"], attrs["index"] % x.shape[attrs["dim"]]))


def _torch_select(xs, ps, attrs):
    import torch

    return _at_least_1d(torch.select(xs[0], attrs["dim"], attrs["index"]))


def _jax_select(xs, ps, attrs):
    return _at_least_1d(xs[0][_index_at(attrs["dim"], attrs["index"])])


def _chunk_sizes(n: int, chunks: int) -> list[int]:
    """torch.chunk's rule: pieces of ceil(n / chunks), the last one shorter, and fewer than
    `chunks` pieces when the elements run out (7 in 4 chunks: 2, 2, 2, 1; 6 in 4: 2, 2, 2).
    numpy's and jax's array_split balance the pieces instead, so they are not used."""
    size = -(-n // chunks)
    return [min(size, n - start) for start in range(0, n, size)]


def _draw_chunk(draw, shapes):
    shape = shapes[0]
    dim = draw_dim(draw, len(shape))
    chunks = draw(st.integers(1, min(shape[dim] + 1, 9)))
    return {"chunks": chunks, "dim": dim, "index": draw(st.integers(0, len(_chunk_sizes(shape[dim], chunks)) - 1))}


def _draw_split_select(draw, shapes):
    shape = shapes[0]
    dim = draw_dim(draw, len(shape))
    n = shape[dim]
    cuts = draw(st.lists(st.integers(1, n - 1), max_size=min(3, n - 1), unique=True)) if n > 1 else []
    bounds = [0, *sorted(cuts), n]
    sizes = [b - a for a, b in zip(bounds, bounds[1:])]
    return {"sizes": sizes, "dim": dim, "index": draw(st.integers(0, len(sizes) - 1))}


def _piece_sizes(attrs, n: int) -> list[int]:
    """The sizes of the pieces chunk / split_select cut a dim of size n into."""
    if "chunks" in attrs:
        check(is_int(attrs["chunks"]) and attrs["chunks"] >= 1, f"chunks {attrs['chunks']} must be a positive integer")
        return _chunk_sizes(n, attrs["chunks"])
    sizes = _int_list(attrs["sizes"], "sizes")
    check(min(sizes, default=0) >= 1 and sum(sizes) == n, f"split sizes {sizes} must be positive and add up to {n}")
    return sizes


def _infer_piece(attrs, shapes):
    shape = list(shapes[0])
    dim = checked_dim(attrs["dim"], len(shape))
    sizes = _piece_sizes(attrs, shape[dim])
    index = attrs["index"]
    check(is_int(index) and 0 <= index < len(sizes), f"index {index} is not one of the {len(sizes)} pieces {sizes}")
    shape[dim] = sizes[attrs["index"]]
    return tuple(shape)


def _piece_reference(xs, ps, attrs):
    """Piece `index` of the dim cut into consecutive pieces of the sizes above."""
    x, dim, index = xs[0], attrs["dim"], attrs["index"]
    sizes = _piece_sizes(attrs, x.shape[dim])
    start = sum(sizes[:index])
    return _take(x, dim, range(start, start + sizes[index]))


def _torch_chunk(xs, ps, attrs):
    import torch

    return torch.chunk(xs[0], attrs["chunks"], attrs["dim"])[attrs["index"]]


def _torch_split_select(xs, ps, attrs):
    import torch

    return torch.split(xs[0], attrs["sizes"], attrs["dim"])[attrs["index"]]


def _jax_piece(xs, ps, attrs):
    """jnp.split at the cut points of torch's pieces (for chunk: torch's rule, see _chunk_sizes)."""
    import jax.numpy as jnp

    x, dim = xs[0], attrs["dim"]
    cuts = np.cumsum(_piece_sizes(attrs, x.shape[dim]))[:-1].tolist()
    return jnp.split(x, cuts, axis=dim)[attrs["index"]]


# -- pad ---------------------------------------------------------------------------


def _paddable_dim_counts(mode: str, rank: int) -> list[int]:
    """How many trailing dims F.pad pads in `mode` (its documented limits): any number for
    constant; otherwise the last dim of a 2-D/3-D input, the last 2 of a 3-D/4-D, the last 3
    of a 4-D/5-D."""
    if mode == "constant":
        return list(range(1, rank + 1))
    return [k for k in (1, 2, 3) if rank in (k + 1, k + 2)]


def _pad_pairs(pad: list[int]) -> list[tuple[int, int]]:
    """torch's pad list (left, right) pairs: the first pair pads the last dim, the next the one before."""
    return list(zip(pad[0::2], pad[1::2]))


def _pad_width_bounds(mode: str, n: int) -> tuple[int, int]:
    """The range one side's width is drawn from for a dim of size n: reflect needs width < n,
    circular width <= n (it wraps at most once); a negative constant width crops."""
    low = -min(2, n - 1) if mode == "constant" else 0
    high = {"reflect": min(3, n - 1), "circular": min(3, n)}.get(mode, 3)
    return low, high


def _draw_pad(draw, shapes):
    shape = shapes[0]
    mode = draw(st.sampled_from([m for m in PAD_MODES if _paddable_dim_counts(m, len(shape))]))
    count = draw(st.sampled_from(_paddable_dim_counts(mode, len(shape))))
    pad = []
    for n in reversed(shape[len(shape) - count :]):
        low, high = _pad_width_bounds(mode, n)
        left = draw(st.integers(low, high))
        pad += [left, draw(st.integers(max(low, 1 - n - left), high))]
    attrs = {"pad": pad, "mode": mode}
    if mode == "constant":
        attrs["value"] = draw(st.sampled_from(PAD_VALUES))
    return attrs


def _infer_pad(attrs, shapes):
    shape, mode, pad = list(shapes[0]), attrs["mode"], _int_list(attrs["pad"], "pad")
    check(mode in PAD_MODES, f"pad mode {mode!r} is not one of {', '.join(PAD_MODES)}")
    check(
        len(pad) % 2 == 0 and len(pad) // 2 in _paddable_dim_counts(mode, len(shape)),
        f"{mode} pad {pad} cannot pad {len(pad) / 2:g} dims of a rank-{len(shape)} input",
    )
    if mode == "constant":
        value = attrs["value"]
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        check(is_number and math.isfinite(value), f"pad value {value!r} must be a finite number")
    for i, (left, right) in enumerate(_pad_pairs(pad)):
        dim = len(shape) - 1 - i
        n = shape[dim]
        if mode != "constant":
            limit = {"reflect": n - 1, "circular": n}.get(mode, math.inf)
            check(0 <= min(left, right) and max(left, right) <= limit, f"{mode} pad widths {left}, {right} do not fit a dim of size {n}")
        shape[dim] = n + left + right
        check(shape[dim] >= 1, f"pad widths {left}, {right} crop a dim of size {n} to nothing")
    return tuple(shape)


def _pad_sources(n: int, left: int, right: int, mode: str):
    """The input position each output position along one dim copies; -1 where the value goes.

    Output position j is input position j - left. reflect mirrors about the edge elements
    without repeating them ([1, 2, 3] by 2 -> [3, 2, 1, 2, 3, 2, 1]); replicate repeats the
    edge element; circular wraps around; constant fills with `value`, and a negative width
    crops instead."""
    at = np.arange(-left, n + right)
    if mode == "reflect":
        at = np.abs(at)
        return np.where(at > n - 1, 2 * (n - 1) - at, at)
    if mode == "replicate":
        return np.clip(at, 0, n - 1)
    if mode == "circular":
        return at % n
    return np.where((at >= 0) & (at < n), at, -1)


def _pad_reference(xs, ps, attrs):
    x = xs[0]
    for i, (left, right) in enumerate(_pad_pairs(attrs["pad"])):
        dim = x.ndim - 1 - i
        sources = _pad_sources(x.shape[dim], left, right, attrs["mode"])
        x = _take(x, dim, np.maximum(sources, 0))
        if attrs["mode"] == "constant":
            x[_index_at(dim, sources < 0)] = attrs["value"]
    return x


def _torch_pad(xs, ps, attrs):
    import torch.nn.functional as F

    return F.pad(xs[0], attrs["pad"], mode=attrs["mode"], value=attrs.get("value"))


def _jax_pad(xs, ps, attrs):
    import jax.numpy as jnp
    from jax import lax

    x = xs[0]
    widths = _pad_pairs(attrs["pad"])[::-1]
    widths = [(0, 0)] * (x.ndim - len(widths)) + widths
    if attrs["mode"] == "constant":
        # lax.pad, not jnp.pad: a negative width crops, as in torch.
        return lax.pad(x, jnp.asarray(attrs["value"], x.dtype), [(low, high, 0) for low, high in widths])
    return jnp.pad(x, widths, mode={"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[attrs["mode"]])


OPS = [
    OpDef(
        name="reshape",
        attrs=('shape',),
        infer=_infer_reshape,
        reference=lambda xs, ps, attrs: np.reshape(xs[0], attrs["shape"]),
        torch=_torch_reshape,
        jax=_jax_reshape,
        accepts=rank_between(1, 5),
        draw_attrs=_draw_reshape,
        repair_attrs=_repair_reshape,
    ),
    OpDef(
        name="transpose",
        attrs=('dim0', 'dim1'),
        infer=_infer_transpose,
        reference=lambda xs, ps, attrs: np.swapaxes(xs[0], attrs["dim0"], attrs["dim1"]),
        torch=_torch_transpose,
        jax=_jax_transpose,
        accepts=rank_between(2, 5),
        draw_attrs=_draw_transpose,
    ),
    OpDef(
        name="permute",
        attrs=('perm',),
        infer=_infer_permute,
        reference=lambda xs, ps, attrs: np.transpose(xs[0], attrs["perm"]),
        torch=_torch_permute,
        jax=_jax_permute,
        accepts=rank_between(2, 5),
        draw_attrs=_draw_permute,
    ),
    OpDef(
        name="flatten",
        attrs=('start_dim', 'end_dim'),
        infer=_infer_flatten,
        reference=_reshape_reference(_infer_flatten),
        torch=_torch_flatten,
        jax=_jax_flatten,
        accepts=rank_between(2, 5),
        draw_attrs=_draw_flatten,
    ),
    OpDef(
        name="concat",
        attrs=('dim',),
        infer=_infer_concat,
        reference=lambda xs, ps, attrs: np.concatenate(xs, axis=attrs["dim"]),
        torch=_torch_concat,
        jax=_jax_concat,
        accepts=rank_between(1, 5),
        draw_attrs=_draw_concat,
        draw_operands=_draw_concat_operands,
        arity=(2, 3),
    ),
    OpDef(
        name="stack",
        attrs=('dim',),
        infer=_infer_stack,
        reference=lambda xs, ps, attrs: np.stack(xs, axis=attrs["dim"]),
        torch=_torch_stack,
        jax=_jax_stack,
        accepts=rank_between(1, MAX_RANK - 1),
        draw_attrs=_draw_stack,
        draw_operands=_draw_stack_operands,
        arity=(2, 3),
    ),
    OpDef(
        name="squeeze",
        attrs=('dim',),
        infer=_infer_squeeze,
        reference=_reshape_reference(_infer_squeeze),
        torch=_squeeze,
        jax=_squeeze,
        accepts=_accepts_squeeze,
        draw_attrs=_draw_squeeze,
    ),
    OpDef(
        name="unsqueeze",
        attrs=('dim',),
        infer=_infer_unsqueeze,
        reference=_reshape_reference(_infer_unsqueeze),
        torch=_torch_unsqueeze,
        jax=_jax_unsqueeze,
        accepts=rank_between(1, MAX_RANK - 1),
        draw_attrs=_draw_unsqueeze,
    ),
    OpDef(
        name="expand",
        attrs=('sizes',),
        infer=_infer_expand,
        reference=_expand_reference,
        torch=_torch_expand,
        jax=_jax_expand,
        accepts=rank_between(1, MAX_RANK),
        draw_attrs=_draw_expand,
        notes="torch returns a stride-0 view: the ops after it read one element many times",
    ),
    OpDef(
        name="repeat",
        attrs=('repeats',),
        infer=_infer_repeat,
        reference=_repeat_reference,
        torch=_torch_repeat,
        jax=_jax_repeat,
        accepts=rank_between(1, MAX_RANK),
        draw_attrs=_draw_repeat,
    ),
    OpDef(
        name="roll",
        attrs=('shifts', 'dims'),
        infer=_infer_roll,
        reference=_roll_reference,
        torch=_torch_roll,
        jax=_jax_roll,
        accepts=rank_between(1, MAX_RANK),
        draw_attrs=_draw_roll,
    ),
    OpDef(
        name="flip",
        attrs=('dims',),
        infer=_infer_flip,
        reference=_flip_reference,
        torch=_torch_flip,
        jax=_jax_flip,
        accepts=rank_between(1, MAX_RANK),
        draw_attrs=_draw_flip,
    ),
    OpDef(
        name="slice",
        attrs=('dim', 'start', 'stop', 'step'),
        infer=_infer_slice,
        reference=_slice_reference,
        torch=_indexed(_slice_index),
        jax=_indexed(_slice_index),
        accepts=rank_between(1, MAX_RANK),
        draw_attrs=_draw_slice,
        notes="a step > 1 gives torch a strided view",
    ),
    OpDef(
        name="narrow",
        attrs=('dim', 'start', 'length'),
        infer=_infer_narrow,
        reference=_narrow_reference,
        torch=_torch_narrow,
        jax=_jax_narrow,
        accepts=rank_between(1, MAX_RANK),
        draw_attrs=_draw_narrow,
    ),
    OpDef(
        name="select",
        attrs=('dim', 'index'),
        infer=_infer_select,
        reference=_select_reference,
        torch=_torch_select,
        jax=_jax_select,
        accepts=rank_between(1, MAX_RANK),
        draw_attrs=_draw_select,
    ),
    OpDef(
        name="chunk",
        attrs=('chunks', 'dim', 'index'),
        infer=_infer_piece,
        reference=_piece_reference,
        torch=_torch_chunk,
        jax=_jax_piece,
        accepts=rank_between(1, MAX_RANK),
        draw_attrs=_draw_chunk,
        notes="one chunk of torch.chunk (ceil-sized pieces), not numpy's balanced array_split",
    ),
    OpDef(
        name="split_select",
        attrs=('sizes', 'dim', 'index'),
        infer=_infer_piece,
        reference=_piece_reference,
        torch=_torch_split_select,
        jax=_jax_piece,
        accepts=rank_between(1, MAX_RANK),
        draw_attrs=_draw_split_select,
    ),
    OpDef(
        name="pad",
        attrs=('pad', 'mode', 'value?'),
        infer=_infer_pad,
        reference=_pad_reference,
        torch=_torch_pad,
        jax=_jax_pad,
        accepts=rank_between(1, MAX_RANK),
        draw_attrs=_draw_pad,
    ),
]
# Data movement moves integers and bools as they are (pad's float fill value aside).
OPS = [op if op.name == "pad" else integer_semantics(op, EXACT_DTYPES) for op in OPS]
OPS = complex_semantics(OPS, {op.name: "complex" for op in OPS if op.name != "pad"})
