"""Test plugin: faults that live only on one rung of the size ladder (fuzzer/drawing/ladder.py), so a test can
show that the ladder regime, steered toward the rungs not yet tried, finds what no other regime draws:
no other regime puts 2^16 + 1 or 2^17 + 1 elements on an axis (their sizes stop at 32,769).

- `fault-ladder-sum`: sum adds 1% of the reduced values' magnitudes when a reduced axis has 2^k + 1
  elements, k >= 16 (as a blocked reduction would that mis-sizes its one-element last block). An
  error of a few elements hides in the rounding a sum of 65,537 float32 values may do; 1% does not.
- `fault-ladder-matmul`: matmul is off the same way when its inner (contracted) size is 2^k + 1, k >= 16.
"""

import torch

from fuzzer.ops import get_op

FIRST_FAULTY_POWER = 16


def past_a_power_of_two(extent: int) -> bool:
    return extent - 1 >= 2**FIRST_FAULTY_POWER and (extent - 1) & (extent - 2) == 0


def ladder_sum(xs, ps, attrs):
    x = xs[0]
    out = get_op("sum").torch(xs, ps, attrs)
    dims = [attrs["dim"]] if "dim" in attrs else attrs["dims"]
    if any(past_a_power_of_two(x.shape[d]) for d in dims):
        out = out + 1e-2 * get_op("sum").torch([x.abs()], ps, attrs)
    return out


def ladder_matmul(xs, ps, attrs):
    out = torch.matmul(xs[0], xs[1])
    if past_a_power_of_two(xs[0].shape[-1]):
        out = out + 1e-2 * torch.matmul(xs[0].abs(), xs[1].abs())
    return out


def register(api):
    base = "torch-eager:cpu:float32"
    api.derive_backend("fault-ladder-sum", base=base, overrides={"sum": ladder_sum})
    api.derive_backend("fault-ladder-matmul", base=base, overrides={"matmul": ladder_matmul})
