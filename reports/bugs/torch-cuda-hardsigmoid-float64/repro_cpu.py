"""F.hardsigmoid's backward in float64 uses a float32 1/6, on the CPU too (no GPU needed).

d/dx hardsigmoid(x) is exactly 1/6 on (-3, 3); torch's float64 CPU backward returns
float32(1/6) = 0.1666666716337204. Exit 1 while the bug is there, 0 once it is fixed.
"""
import sys

import torch
import torch.nn.functional as F

x = torch.tensor([-1.0, 0.5, 2.0], dtype=torch.float64, requires_grad=True)
F.hardsigmoid(x).sum().backward()
print("torch", torch.__version__, "hardsigmoid float64 CPU grad:", x.grad.tolist(), "expected", 1 / 6)
sys.exit(1 if (x.grad - 1 / 6).abs().max().item() > 1e-15 else 0)
