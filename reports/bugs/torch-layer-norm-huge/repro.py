"""float32 F.layer_norm on CPU returns nan for large finite inputs (|x| above about 1.8e19, where x*x
overflows float32), even for a single element, where the answer is 0 (x - mean(x) = 0). The float64
path and a two-pass float32 computation are right. Rows of 17+ elements (another kernel path) are right.

Exit 1 while the bug is present, 0 once the results are finite and right.
"""
import sys

import torch
import torch.nn.functional as F

print("torch", torch.__version__)
bad = False
for n in (1, 4, 16):
    x = torch.full((1, n), 3e19) * torch.linspace(1.0, 1.5, n)
    got = F.layer_norm(x, (n,), eps=1e-5)
    expected = F.layer_norm(x.double(), (n,), eps=1e-5).float()
    ok = torch.allclose(got, expected, atol=1e-4)
    print(f"n={n:2d}, x ~ 3e19: float32 {got[0, :3].tolist()}  float64 {expected[0, :3].tolist()}  {'ok' if ok else 'WRONG'}")
    bad |= not ok
sys.exit(1 if bad else 0)
