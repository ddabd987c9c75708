"""torch.compile vs eager: F.interpolate with a scale_factor that leaves a dim's size unchanged.

floor(3 * 1.25) = 3, so H keeps its size. Eager CPU copies H (source row = output row) and
ignores the factor; torch.compile (inductor) samples H with the factor (source row =
floor(i / 1.25) for nearest, (i + 0.5) / 1.25 - 0.5 for bilinear). The docs say the given
scale_factor is used in the computation when recompute_scale_factor is unset. Nearest is
pytorch#198201 (open); bilinear (align_corners=False) shows the same split.
Exit 1 while the discrepancy is present.
"""
import sys

import torch
import torch.nn.functional as F

x = torch.arange(12, dtype=torch.float32).reshape(1, 1, 3, 4)
bad = False
for mode, align_corners in (("nearest", None), ("bilinear", False)):
    def fn(t):
        return F.interpolate(t, scale_factor=(1.25, 1.5), mode=mode, align_corners=align_corners)

    eager = fn(x)
    compiled = torch.compile(fn)(x)
    diff = (eager - compiled).abs().max().item()
    print(f"{mode:8s} eager rows {eager[0, 0, :, 0].tolist()}  compiled rows {compiled[0, 0, :, 0].tolist()}  max |diff| {diff:.3g}")
    bad |= diff > 1e-5
    torch._dynamo.reset()
print("torch", torch.__version__)
sys.exit(1 if bad else 0)
