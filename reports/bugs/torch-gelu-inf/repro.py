"""F.gelu(+inf) returns nan in float32 on CPU (approximate="none") for tensors of 2 or more elements (the
vectorized path); a single element, float64, approximate="tanh" and jax.nn.gelu give +inf, as the math does.

Exit 1 while the bug is present, 0 once gelu(+inf) is +inf.
"""
import sys

import torch
import torch.nn.functional as F

print("torch", torch.__version__)
bad = False
for n in (1, 2, 16):  # one element takes the scalar path
    x = torch.full((n,), float("inf"))
    y = F.gelu(x, approximate="none")
    print(f"float32, {n:2d} elements: gelu(+inf) = {y[0].item()}  (expected inf; float64 gives "
          f"{F.gelu(x.double())[0].item()})")
    bad |= not (torch.isinf(y) & (y > 0)).all().item()
sys.exit(1 if bad else 0)
