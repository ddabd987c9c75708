"""torch.sign(nan) returns 0 on CPU (float32 and float64, scalar and vectorized paths); numpy and jax return nan.

Exit 1 while the bug is present, 0 once torch.sign propagates nan.
"""
import sys

import torch

x = torch.tensor([float("nan"), 1.0, -2.0, 0.0])
print("torch", torch.__version__)
bad = False
for dtype in (torch.float32, torch.float64):
    for n in (1, 16):  # 16 elements take the vectorized path
        y = torch.sign(x.to(dtype).repeat(n))
        print(f"{str(dtype):14s} {4 * n:2d} elements: sign(nan) = {y[0].item()}  (expected nan)")
        bad |= not torch.isnan(y[0]).item()
sys.exit(1 if bad else 0)
