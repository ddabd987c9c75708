"""torch CPU grouped conv3d is wrong for a channels_last_3d input with a non-contiguous weight.

F.conv3d(x, w, groups=2) with x in channels_last_3d and w holding the same values as a
contiguous weight but with dims 1 and 2 stored transposed (w.transpose(1, 2).contiguous()
.transpose(1, 2)) gives errors of order 1; either tensor alone in that layout is right,
and groups=1 is right. Found by the fuzzer's torch-layout backend (conv3d, case shrunk to
unsqueeze > conv3d). Exit 1 while the discrepancy is present.
"""
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn(1, 4, 3, 2, 2)
w = torch.randn(2, 2, 3, 1, 1)  # groups=2: (out_channels, in_channels / groups, kD, kH, kW)
x_cl = x.contiguous(memory_format=torch.channels_last_3d)
w_strided = w.transpose(1, 2).contiguous().transpose(1, 2)
assert torch.equal(x, x_cl) and torch.equal(w, w_strided)  # same values, other layouts

expected = F.conv3d(x.double(), w.double(), groups=2)
print("torch", torch.__version__)
worst = 0.0
for x_in, w_in, name in ((x, w, "contiguous x, contiguous w"), (x_cl, w, "channels_last_3d x"),
                         (x, w_strided, "strided w"), (x_cl, w_strided, "channels_last_3d x + strided w")):
    error = (F.conv3d(x_in, w_in, groups=2).double() - expected).abs().max().item()
    print(f"{name:34s} max |error| {error:.3g}")
    worst = max(worst, error)
sys.exit(1 if worst > 1e-4 else 0)
