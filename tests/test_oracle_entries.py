"""Each entry is judged against its own allowance, from its own scale (fuzzer/oracle/entry_scale.py),
at most the output's (compare.py, "Per entry"): an entry far below the output's largest magnitude
may no longer be off by a relative error far above the dtype's precision."""

import numpy as np
import pytest

from fuzzer import oracle, verdicts
from fuzzer.backends import get_backend
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.judging.check import check_case
from fuzzer.oracle.compare import entry_allowance
from test_oracle import single_op_case

# sqrt(1e4) = 100 set the old allowance of every entry: 2 * 3e-5 * 1e4 = 0.6, 30% of sqrt(4).
VALUES = np.array([[1e4, 4.0, 0.25, 2.0]])


def verdicts_of(op, values, planted_at, relative, dtype="float32"):
    """The lazy and full verdicts of op's correctly rounded output with `relative` error planted at `planted_at`."""
    reference = oracle.compute_reference(single_op_case(op, values), {dtype})
    output = oracle.round_to_dtype(reference.outputs[0], dtype)
    output[planted_at] = reference.outputs[0][planted_at] * (1 + relative)
    return [oracle.judge_outputs("planted", dtype, [output], reference, at_floor=at_floor).verdict for at_floor in (True, False)]


@pytest.mark.parametrize("op", ["sqrt", "tanh", "log"])
def test_a_small_entry_beside_a_large_input_is_judged_by_its_own_scale(op):
    assert verdicts_of(op, VALUES, (0, 1), 1e-3) == [verdicts.MISMATCH] * 2
    assert verdicts_of(op, VALUES, (0, 1), 1e-6) == [verdicts.AGREE] * 2


def test_the_real_backends_agree_beside_a_large_input():
    case = single_op_case("sqrt", VALUES)
    backends = ["torch-eager:cpu:float32", "jax-eager:cpu:float32", "torch-eager:cpu:float16", "numpy-ref:cpu:float16"]
    assert check_case(case, [get_backend(name) for name in backends]).verdict == verdicts.AGREE


def test_an_entry_that_cancels_keeps_the_allowance_of_what_it_summed():
    """1e4 - (1e4 - 1) is 1 in float64, yet a float32 kernel may be off by a roundoff of 1e4 there:
    the entry's scale is what was subtracted (the reach of the operands' rounding), not |1|."""
    big = np.array([1e4, 2.0])
    reference = oracle.compute_reference(single_op_case("sub", big, extra_inputs=[np.array([1e4 - 1.0, 1.0])]), {"float32"})
    assert reference.entry_scales[0][0] == 1e4 + (1e4 - 1.0)
    assert entry_allowance(reference, 0, "float32")[0] >= 1e4 * 2.0**-24


def test_an_entry_never_allows_more_than_its_output():
    generator = CaseGenerator(max_nodes=4)
    for seed in range(12):
        case = generator.case(seed)
        reference = oracle.compute_reference(case, {"float32", "float16"})
        for dtype in ("float32", "float16"):
            for index in range(len(reference.outputs)):
                entries = entry_allowance(reference, index, dtype)
                assert np.all(entries <= oracle.allowed_error(reference, index, dtype)), (seed, dtype, index)
