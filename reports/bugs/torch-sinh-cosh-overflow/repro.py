"""float32 torch.sinh / torch.cosh return inf on CPU for |x| in about (88.72, 89.42] once the tensor is long
enough for the vectorized (Sleef) path, although the result fits in float32 (max 3.4028e38).
Fewer elements (the scalar path) give the right finite value.

Exit 1 while the bug is present, 0 once both ops give the float64 answer rounded to float32.
"""
import sys

import numpy as np
import torch

x = np.array([88.98707, -89.3] * 16, dtype=np.float32)  # 32 elements
print("torch", torch.__version__)
bad = False
for name in ("sinh", "cosh"):
    expected = getattr(np, name)(x.astype(np.float64)).astype(np.float32)  # finite: |value| < 3.4e38
    for n in (4, 32):
        got = getattr(torch, name)(torch.from_numpy(x[:n])).numpy()
        ok = np.allclose(got, expected[:n], rtol=1e-5)
        print(f"torch.{name}, {n:2d} elements: {got[:2].tolist()}  expected {expected[:2].tolist()}  {'ok' if ok else 'WRONG'}")
        bad |= not ok
sys.exit(1 if bad else 0)
