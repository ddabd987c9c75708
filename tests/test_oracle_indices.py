"""Index outputs (argmax, argmin: Numerics.indexes) are judged exactly, not by the scale of the values
they index: a wrong index is a mismatch however large the operand, a tied one is right
(fuzzer/oracle/indices.py)."""

import numpy as np
import pytest

from fuzzer import oracle, verdicts
from fuzzer.backends import get_backend
from fuzzer.judging.check import check_case
from fuzzer.ops import registry
from test_oracle import single_op_case

# Row 0's largest value is 1e19, which set the old tolerance (9e14) for the whole output.
VALUES = np.array([[1e19, 3.0, -2.0, 0.5], [1.0, 7.0, 7.0, -4.0], [2.5, -1.0, 2.0, 1.5]])


def judged(op, values, given, dtype="float32", keepdim=False):
    """The lazy and the full verdicts of `given` as op's output over dim 1 of `values`."""
    reference = oracle.compute_reference(single_op_case(op, values, {"dim": 1, "keepdim": keepdim}), {dtype})
    outputs = [np.asarray(given, dtype=np.float64)]
    return [oracle.judge_outputs("given", dtype, outputs, reference, at_floor=at_floor).verdict for at_floor in (True, False)]


def test_the_ops_whose_result_is_an_index_declare_it():
    assert {name for name, op in registry().items() if op.numerics.indexes is not None} == {"argmax", "argmin"}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_reference_index_agrees(dtype):
    assert judged("argmax", VALUES, [0, 1, 0], dtype) == [verdicts.AGREE] * 2


def test_an_index_off_by_one_is_a_mismatch_beside_a_huge_value():
    """The old oracle allowed 9e14 here: [0, 1, 1] passed, argmax pointing at 2.0 instead of 2.5."""
    assert judged("argmax", VALUES, [0, 1, 1]) == [verdicts.MISMATCH] * 2
    assert judged("argmin", VALUES, [2, 3, 2]) == [verdicts.MISMATCH] * 2


def test_any_index_of_tied_values_is_right():
    assert judged("argmax", VALUES, [0, 2, 0]) == [verdicts.AGREE] * 2
    assert judged("argmax", VALUES, [[0], [2], [0]], keepdim=True) == [verdicts.AGREE] * 2


def test_values_a_float16_kernel_rounds_onto_one_tie():
    """1 + 2**-13 and 1 are one float16 value: either index is right there, and not in float32."""
    values = np.array([[1.0, 1.0 + 2.0**-13, 0.5]])
    assert judged("argmax", values, [0], "float16") == [verdicts.AGREE] * 2
    assert judged("argmax", values, [0], "float32") == [verdicts.MISMATCH] * 2


def test_an_entry_that_is_no_index_is_a_mismatch():
    for given in ([0, 1.5, 0], [0, 4, 0], [0, -1, 0]):
        assert judged("argmax", VALUES, given) == [verdicts.MISMATCH] * 2


def test_a_nan_index_is_nan_inf_and_all_zero_indices_are_all_zeros():
    assert judged("argmax", VALUES, [0, np.nan, 0]) == [verdicts.NAN_INF] * 2
    assert judged("argmax", VALUES, [0, 0, 0]) == [verdicts.ALL_ZEROS] * 2


def test_a_backend_that_returns_the_wrong_index_is_found_and_names_the_values():
    case = single_op_case("argmax", VALUES, {"dim": 1, "keepdim": False})
    backend = get_backend("torch-eager:cpu:float32").derive(
        "second-largest", {"argmax": lambda xs, ps, attrs: xs[0].argsort(dim=1, descending=True)[:, 1].to(xs[0].dtype)})
    result = check_case(case, [get_backend("torch-eager:cpu:float32"), backend])
    assert [v.verdict for v in result.verdicts] == [verdicts.AGREE, verdicts.MISMATCH]
    assert "the operand is 3 there, 1e+19 at the reference's index" in result.verdicts[1].detail


def test_the_index_of_a_vector_is_judged_too():
    """argmax over the only dim of a vector: the reference's output is 1-d there, not 0-d."""
    reference = oracle.compute_reference(single_op_case("argmax", np.array([1.0, 5.0, 2.0]), {"dim": 0, "keepdim": False}),
                                         {"float32"})
    for given, verdict in ((1.0, verdicts.AGREE), (2.0, verdicts.MISMATCH)):
        output = np.full(reference.outputs[0].shape, given)
        assert oracle.judge_outputs("given", "float32", [output], reference, at_floor=True).verdict == verdict
