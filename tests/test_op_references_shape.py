"""The references of the slicing, padding, layout and indexing ops against values worked out by hand.

Every expected value is written out in the test from the op's definition (which
element goes where), never computed by torch, jax or the reference itself.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from fuzzer.errors import ShapeError
from fuzzer.ops import get_op


def ref(name, xs, ps=None, **attrs):
    """Run an op's reference on float64 arrays, checking its output shape against the shape rule."""
    xs = [np.asarray(x, dtype=np.float64) for x in xs]
    ps = {k: np.asarray(v, dtype=np.float64) for k, v in (ps or {}).items()}
    op = get_op(name)
    out = op.reference(xs, ps, attrs)
    assert out.shape == op.infer(attrs, [x.shape for x in xs])
    assert out.dtype == np.float64
    return out


def infer(name, shapes, **attrs):
    return get_op(name).infer(attrs, shapes)


ROW = [[1.0, 2.0, 3.0]]  # one row of three: the 2-D input the non-constant pad modes need
GRID = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]

# -- pad ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mode, pad, expected",
    [
        ("reflect", [2, 2], [3, 2, 1, 2, 3, 2, 1]),  # mirrored about the edge elements, which are not repeated
        ("reflect", [1, 0], [2, 1, 2, 3]),
        ("replicate", [2, 1], [1, 1, 1, 2, 3, 3]),
        ("circular", [1, 2], [3, 1, 2, 3, 1, 2]),
        ("circular", [3, 3], [1, 2, 3, 1, 2, 3, 1, 2, 3]),  # a full wrap on each side is allowed
    ],
)
def test_pad_modes_on_one_row(mode, pad, expected):
    assert_array_equal(ref("pad", [ROW], pad=pad, mode=mode), [expected])


def test_constant_pad_fills_the_value_and_a_negative_width_crops():
    assert_array_equal(ref("pad", [[1.0, 2.0, 3.0]], pad=[-1, 2], mode="constant", value=5.0), [2, 3, 5, 5])
    assert_array_equal(ref("pad", [[1.0, 2.0, 3.0]], pad=[0, -2], mode="constant", value=5.0), [1])


def test_constant_pad_of_two_dims_fills_the_corner():
    # pad = (left, right) of the last dim, then (top, bottom) of the one before.
    expected = [[-1, -1, -1], [-1, 1, 2], [-1, 3, 4]]
    assert_array_equal(ref("pad", [[[1.0, 2.0], [3.0, 4.0]]], pad=[1, 0, 1, 0], mode="constant", value=-1.0), expected)


def test_reflect_pad_of_two_dims():
    x = [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]]  # (1, 3, 3)
    # the last dim gets 1 on the left (the element next to the edge: 2, 5, 8), then the middle
    # dim 1 at the bottom (the row next to the last one, already padded).
    expected = [[[2, 1, 2, 3], [5, 4, 5, 6], [8, 7, 8, 9], [5, 4, 5, 6]]]
    assert_array_equal(ref("pad", [x], pad=[1, 0, 0, 1], mode="reflect"), expected)


def test_replicate_pad_of_the_last_three_dims_of_a_4d_input():
    x = [[[[1.0, 2.0]], [[3.0, 4.0]]]]  # (1, 2, 1, 2)
    # last dim: 1 on the right; dim -2: 1 on top; dim -3: 1 in front, each a copy of the edge.
    row_a, row_b = [1, 2, 2], [3, 4, 4]
    expected = [[[row_a, row_a], [row_a, row_a], [row_b, row_b]]]
    assert_array_equal(ref("pad", [x], pad=[0, 1, 1, 0, 1, 0], mode="replicate"), expected)


@pytest.mark.parametrize(
    "shape, attrs, broken",
    [
        ((1, 3), dict(pad=[3, 0], mode="reflect"), "reflect width equal to the size"),
        ((1, 3), dict(pad=[0, 4], mode="circular"), "circular width wrapping twice"),
        ((3,), dict(pad=[1, 1], mode="replicate"), "replicate on a 1-D input"),
        ((1, 2, 3, 4), dict(pad=[1, 1], mode="reflect"), "reflect of one dim of a 4-D input"),
        ((1, 3), dict(pad=[-1, 0], mode="replicate"), "negative width outside constant mode"),
        ((3,), dict(pad=[-2, -1], mode="constant", value=0.0), "cropping everything"),
        ((3,), dict(pad=[1, 1], mode="constant", value=float("nan")), "a non-finite fill value"),
        ((3,), dict(pad=[1], mode="constant", value=0.0), "an odd pad list"),
    ],
)
def test_pad_shape_rule_refuses(shape, attrs, broken):
    with pytest.raises(ShapeError):
        infer("pad", [shape], **attrs)


# -- slice, narrow, select, chunk, split_select ------------------------------------------

SEVEN = [10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0]


@pytest.mark.parametrize(
    "start, stop, step, expected",
    [
        (1, 6, 2, [11, 13, 15]),
        (0, 7, 3, [10, 13, 16]),
        (-3, 100, 2, [14, 16]),  # negative start counts from the end; a stop past the end clamps
        (2, -2, 1, [12, 13, 14]),
    ],
)
def test_slice_with_steps(start, stop, step, expected):
    assert_array_equal(ref("slice", [SEVEN], dim=0, start=start, stop=stop, step=step), expected)


def test_slice_of_the_last_dim_of_a_grid():
    assert_array_equal(ref("slice", [GRID], dim=-1, start=0, stop=3, step=2), [[1, 3], [4, 6]])


def test_slice_shape_rule_refuses_empty_and_backward_slices():
    with pytest.raises(ShapeError):
        infer("slice", [(7,)], dim=0, start=5, stop=2, step=1)
    with pytest.raises(ShapeError):
        infer("slice", [(7,)], dim=0, start=5, stop=2, step=-1)


def test_narrow_with_a_negative_start():
    assert_array_equal(ref("narrow", [SEVEN], dim=0, start=-3, length=2), [14, 15])
    assert_array_equal(ref("narrow", [GRID], dim=-1, start=1, length=2), [[2, 3], [5, 6]])
    with pytest.raises(ShapeError):
        infer("narrow", [(7,)], dim=0, start=-3, length=4)


def test_select_drops_the_dim():
    assert_array_equal(ref("select", [GRID], dim=1, index=-1), [3, 6])
    assert_array_equal(ref("select", [GRID], dim=0, index=1), [4, 5, 6])


def test_select_on_a_vector_keeps_shape_one():
    assert_array_equal(ref("select", [SEVEN], dim=-1, index=-2), [15])


def test_chunk_uses_ceil_sized_pieces():
    # 7 in 4 chunks: pieces of ceil(7 / 4) = 2 -> 2, 2, 2, 1.
    assert_array_equal(ref("chunk", [SEVEN], chunks=4, dim=0, index=3), [16])
    assert_array_equal(ref("chunk", [SEVEN], chunks=4, dim=0, index=1), [12, 13])
    # 6 in 4 chunks: pieces of 2 -> only three pieces exist.
    six = SEVEN[:6]
    assert_array_equal(ref("chunk", [six], chunks=4, dim=0, index=2), [14, 15])
    with pytest.raises(ShapeError):
        infer("chunk", [(6,)], chunks=4, dim=0, index=3)
    # more chunks than elements: one element each.
    assert_array_equal(ref("chunk", [GRID], chunks=5, dim=-1, index=2), [[3], [6]])


def test_split_select_takes_the_piece_of_the_given_sizes():
    assert_array_equal(ref("split_select", [SEVEN[:6]], sizes=[1, 3, 2], dim=0, index=1), [11, 12, 13])
    assert_array_equal(ref("split_select", [GRID], sizes=[1, 1], dim=-2, index=1), [[4, 5, 6]])
    with pytest.raises(ShapeError):
        infer("split_select", [(6,)], sizes=[1, 3], dim=0, index=0)


# -- stack, squeeze, unsqueeze, expand, repeat, roll, flip ----------------------------------


def test_stack_on_a_new_last_dim_and_first_dim():
    a, b = [1.0, 2.0], [3.0, 4.0]
    assert_array_equal(ref("stack", [a, b], dim=-1), [[1, 3], [2, 4]])
    assert_array_equal(ref("stack", [a, b, a], dim=0), [[1, 2], [3, 4], [1, 2]])


def test_squeeze_and_unsqueeze_shapes():
    x = np.arange(6.0).reshape(2, 1, 3)
    assert_array_equal(ref("squeeze", [x], dim=-2), [[0, 1, 2], [3, 4, 5]])
    with pytest.raises(ShapeError):
        infer("squeeze", [(2, 1, 3)], dim=0)
    assert infer("unsqueeze", [(2, 3)], dim=-1) == (2, 3, 1)
    assert_array_equal(ref("unsqueeze", [GRID], dim=1), [[[1, 2, 3]], [[4, 5, 6]]])


def test_expand_repeats_size_one_dims_and_adds_leading_ones():
    out = ref("expand", [[[1.0], [2.0]]], sizes=[2, -1, 3])
    assert_array_equal(out, [[[1, 1, 1], [2, 2, 2]], [[1, 1, 1], [2, 2, 2]]])
    with pytest.raises(ShapeError):
        infer("expand", [(2, 1)], sizes=[3, 1])  # only size-1 dims grow
    with pytest.raises(ShapeError):
        infer("expand", [(2, 1)], sizes=[-1, 2, 1])  # no -1 for a new leading dim


def test_repeat_tiles_and_prepends_dims():
    assert_array_equal(ref("repeat", [[1.0, 2.0]], repeats=[2, 3]), [[1, 2, 1, 2, 1, 2], [1, 2, 1, 2, 1, 2]])
    assert_array_equal(ref("repeat", [GRID], repeats=[1, 2]), [[1, 2, 3, 1, 2, 3], [4, 5, 6, 4, 5, 6]])


@pytest.mark.parametrize(
    "shift, expected",
    [(2, [4, 5, 1, 2, 3]), (-1, [2, 3, 4, 5, 1]), (7, [4, 5, 1, 2, 3]), (-10, [1, 2, 3, 4, 5])],
)
def test_roll_one_dim(shift, expected):
    assert_array_equal(ref("roll", [[1.0, 2.0, 3.0, 4.0, 5.0]], shifts=[shift], dims=[0]), expected)


def test_roll_without_dims_rolls_the_flattened_tensor():
    assert_array_equal(ref("roll", [GRID], shifts=[1], dims=None), [[6, 1, 2], [3, 4, 5]])


def test_roll_two_dims():
    assert_array_equal(ref("roll", [GRID], shifts=[1, -1], dims=[0, -1]), [[5, 6, 4], [2, 3, 1]])
    with pytest.raises(ShapeError):
        infer("roll", [(2, 3)], shifts=[1, 1], dims=[1, -1])  # the same dim twice


def test_flip():
    assert_array_equal(ref("flip", [GRID], dims=[0, -1]), [[6, 5, 4], [3, 2, 1]])
    assert_array_equal(ref("flip", [GRID], dims=[1]), [[3, 2, 1], [6, 5, 4]])


@pytest.mark.parametrize(
    "name, attrs",
    [
        ("select", dict(dim=0, index=1.0)),
        ("select", dict(dim=True, index=0)),
        ("narrow", dict(dim=0, start=0, length=1.5)),
        ("slice", dict(dim=0, start=0, stop=2.0, step=1)),
        ("unsqueeze", dict(dim=0.0)),
        ("repeat", dict(repeats=[1, True])),
    ],
)
def test_shape_rules_refuse_integer_attributes_that_are_not_integers(name, attrs):
    # Imported cases are data from elsewhere: a float or a bool must not reach the frameworks.
    with pytest.raises(ShapeError):
        infer(name, [(2, 3)], **attrs)


# -- gather, index_select, embedding -------------------------------------------------------


def test_gather_along_each_dim():
    # out[i][j] = x[i][index[i][j]]
    assert_array_equal(ref("gather", [GRID], dim=1, index=[[2, 0], [1, 1]]), [[3, 1], [5, 5]])
    # out[i][j] = x[index[i][j]][j]
    assert_array_equal(ref("gather", [GRID], dim=-2, index=[[1, 0, 1]]), [[4, 2, 6]])


def test_gather_with_an_index_shorter_than_the_input_reads_the_leading_positions():
    x = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]
    # index (2, 1): rows 0 and 1 only, one column each.
    assert_array_equal(ref("gather", [x], dim=1, index=[[0], [2]]), [[1], [6]])


@pytest.mark.parametrize(
    "attrs",
    [
        dict(dim=1, index=[[3]]),  # out of range
        dict(dim=1, index=[[-1]]),  # torch.gather takes no negative index
        dict(dim=1, index=[[0], [0], [0]]),  # longer than the input outside dim
        dict(dim=1, index=[0, 1]),  # wrong rank
        dict(dim=1, index=[[True]]),
        dict(dim=1, index=[[0.0]]),
        dict(dim=1, index=[[0, 1], [0]]),  # ragged
    ],
)
def test_gather_shape_rule_refuses(attrs):
    with pytest.raises(ShapeError):
        infer("gather", [(2, 3)], **attrs)


def test_index_select_with_repeats():
    assert_array_equal(ref("index_select", [GRID], dim=-1, index=[2, 2, 0]), [[3, 3, 1], [6, 6, 4]])
    assert_array_equal(ref("index_select", [GRID], dim=0, index=[1]), [[4, 5, 6]])
    with pytest.raises(ShapeError):
        infer("index_select", [(2, 3)], dim=0, index=[2])


def test_embedding_adds_the_looked_up_rows_at_each_position():
    x = [[0.5, -1.0], [1.0, 1.0], [0.0, 2.0]]  # 3 positions, embedding_dim 2
    weight = [[10.0, 20.0], [30.0, 40.0]]
    out = ref("embedding", [x], {"weight": weight}, num_embeddings=2, indices=[1, 0, 1])
    assert_array_equal(out, [[30.5, 39.0], [11.0, 21.0], [30.0, 42.0]])


def test_embedding_rows_are_the_same_for_every_leading_index():
    x = np.zeros((2, 2, 1))
    out = ref("embedding", [x], {"weight": [[1.0], [2.0], [3.0]]}, num_embeddings=3, indices=[2, 2])
    assert_array_equal(out, [[[3], [3]], [[3], [3]]])
    assert get_op("embedding").params({"num_embeddings": 3, "indices": [2, 2]}, [(2, 2, 1)]) == {"weight": (3, 1)}
    with pytest.raises(ShapeError):
        infer("embedding", [(2, 2, 1)], num_embeddings=3, indices=[2, 3])
