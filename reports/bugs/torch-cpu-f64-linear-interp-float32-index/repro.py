"""float64 linear interpolation on the CPU takes each output's left source index with floorf, a
float32 floor of the float64 coordinate, while its weight stays float64, clamped to [0, 1]: where the
coordinate lies just below an integer, floorf rounds it up, the weight becomes 0, and the output is
the next input instead of the interpolation. Exit 1 while the bug is present, 0 once fixed.
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

print("torch", torch.__version__)
torch.manual_seed(0)
W, Wo = 16385, 16378
x = torch.randn(1, 1, W, dtype=torch.float64); xs = x[0, 0].numpy(); i = np.arange(Wo); bad = False
for align_corners in (True, False):
    y = F.interpolate(x, size=Wo, mode="linear", align_corners=align_corners)[0, 0].numpy()
    src = i * (W - 1) / (Wo - 1) if align_corners else np.maximum((i + 0.5) * W / Wo - 0.5, 0)
    lo = np.floor(src).astype(int); frac = src - lo
    expected = xs[lo] * (1 - frac) + xs[np.minimum(lo + 1, W - 1)] * frac
    k = int(np.abs(y - expected).argmax()); err = abs(y[k] - expected[k]); bad |= err > 1e-9
    print(f"align_corners={align_corners}: output {k}, source coordinate {src[k]!r}: "
          f"got {y[k]!r}, expected {expected[k]!r} (error {err:.1e}, float64 would be ~1e-16)")
sys.exit(1 if bad else 0)
