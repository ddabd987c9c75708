"""Test plugin: faults that live only in one regime each (fuzzer/drawing/regimes.py), so a test can show
that a short campaign in that regime finds what the small regime never reaches.

- `fault-large-sum`: sum is off by 1e-3 of its largest input once the input has more than
  100,000 elements (a blocked-reduction path taken only above a size threshold); the small
  regime caps tensors at 20,000 elements.
- `fault-tiny-tanh`: tanh returns 0 for 0 < |x| < 1e-6 (a wrong small-argument branch, error up
  to 1e-6); the small regime's smallest values are 1e-3 * N(0, 1), whose scale hides 1e-6.
- `fault-ceil-mode-pool`: max_pool2d halves the last output column when `ceil_mode=True` (a wrong
  partial last window); the generator never drew ceil_mode before this round.
- `fault-channels-last-conv`: conv2d of a channels_last input reads its storage as if it were
  contiguous NCHW (values land in the wrong places); only the layout regime hands eager and
  compiled backends channels_last inputs.
"""

import torch

from fuzzer.ops import get_op


def large_sum(xs, ps, attrs):
    x = xs[0]
    dims = attrs["dim"] if "dim" in attrs else tuple(attrs["dims"])  # sum takes one int or a tuple
    out = torch.sum(x, dim=dims, keepdim=attrs["keepdim"])
    if x.numel() > 100_000:
        out = out + 1e-3 * x.abs().max()
    return out


def tiny_tanh(xs, ps, attrs):
    x = xs[0]
    return torch.where((x.abs() < 1e-6) & (x != 0), torch.zeros_like(x), torch.tanh(x))


def channels_last_conv(xs, ps, attrs):
    x = xs[0]
    if not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last):
        x = torch.as_strided(x, x.shape, torch.empty(x.shape).stride()).clone()  # storage read as NCHW
    return get_op("conv2d").torch([x], ps, attrs)


def ceil_mode_pool(xs, ps, attrs):
    out = get_op("max_pool2d").torch(xs, ps, attrs)
    if attrs.get("ceil_mode"):
        out = out.clone()
        out[..., -1] = out[..., -1] * 0.5
    return out


def register(api):
    base = "torch-eager:cpu:float32"
    api.derive_backend("fault-large-sum", base=base, overrides={"sum": large_sum})
    api.derive_backend("fault-tiny-tanh", base=base, overrides={"tanh": tiny_tanh})
    api.derive_backend("fault-channels-last-conv", base=base, overrides={"conv2d": channels_last_conv})
    api.derive_backend("fault-ceil-mode-pool", base=base, overrides={"max_pool2d": ceil_mode_pool})
