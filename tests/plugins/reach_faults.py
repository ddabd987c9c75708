"""Test plugin: faults that live only in one region of the second reach round, so a test can show that a
default campaign (steered toward the keys not covered yet) finds each.

- `fault-softplus-threshold`: softplus gives 0 where beta * x is exactly its threshold (a branch
  point, fuzzer/drawing/branch_points.py), as a kernel whose two branches both skip the equal case would.
- `fault-sum-tail`: sum adds 1% of the reduced values' magnitudes when its innermost reduced axis
  has 16k + r elements, r 2..7 (a vector tail, fuzzer/drawing/tails.py; no regime's sizes leave those
  remainders, only shape ops that join or pad dims), as a remainder loop that reads one lane too
  many would.
- `fault-pool-output-tail`: avg_pool2d is off by 1% where its output's last dim is 16 + r, r 2..15
  (an output size class: one partial tile past a full one), as an output tile's masked remainder
  stored twice would be. Small inputs pool to 17 at most; large ones to 63 and more.
"""

import torch

from fuzzer.ops import get_op

LANES = 16


def in_tail(extent: int, low: int, high: int) -> bool:
    return extent > LANES and low <= extent % LANES <= high


def softplus_at_threshold(xs, ps, attrs):
    x, beta, threshold = xs[0], attrs.get("beta", 1.0), attrs.get("threshold", 20.0)
    out = get_op("softplus").torch(xs, ps, attrs)
    return torch.where(x * beta == threshold, torch.zeros_like(out), out)


def sum_with_a_bad_tail(xs, ps, attrs):
    x = xs[0]
    out = get_op("sum").torch(xs, ps, attrs)
    dims = [attrs["dim"]] if "dim" in attrs else attrs["dims"]
    if dims and in_tail(x.shape[max(d % x.dim() for d in dims)], 2, 7):
        out = out + 1e-2 * get_op("sum").torch([x.abs()], ps, attrs)
    return out


def avg_pool_with_a_bad_output_tail(xs, ps, attrs):
    out = get_op("avg_pool2d").torch(xs, ps, attrs)
    return out * 1.01 if LANES + 2 <= out.shape[-1] < 2 * LANES else out


def register(api):
    base = "torch-eager:cpu:float32"
    api.derive_backend("fault-softplus-threshold", base=base, overrides={"softplus": softplus_at_threshold})
    api.derive_backend("fault-sum-tail", base=base, overrides={"sum": sum_with_a_bad_tail})
    api.derive_backend("fault-pool-output-tail", base=base, overrides={"avg_pool2d": avg_pool_with_a_bad_output_tail})
