"""A fault only a pair of region keys of one node reaches (fuzzer/drawing/region_pairs.py), for
tests/test_region_pairs.py.

- `fault-sum-strided-tail`: sum adds 1% of the reduced values' magnitudes when its input is not
  contiguous AND its innermost reduced axis has 16k + r elements (a vector tail, fuzzer/drawing/tails.py),
  as a strided kernel's remainder loop that reads one lane too many would. Either alone is right:
  a contiguous input with a tail, or a strided one without.
"""

from fuzzer.ops import get_op

LANES = 16


def sum_wrong_on_a_strided_tail(xs, ps, attrs):
    x = xs[0]
    out = get_op("sum").torch(xs, ps, attrs)
    dims = [attrs["dim"]] if "dim" in attrs else attrs["dims"]
    extent = x.shape[max(d % x.dim() for d in dims)] if dims else 0
    if not x.is_contiguous() and extent > LANES and extent % LANES:
        out = out + 1e-2 * get_op("sum").torch([x.abs()], ps, attrs)
    return out


def register(api):
    api.derive_backend("fault-sum-strided-tail", base="torch-eager:cpu:float32", overrides={"sum": sum_wrong_on_a_strided_tail})
