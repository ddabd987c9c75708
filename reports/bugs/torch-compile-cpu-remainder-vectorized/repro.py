"""torch.compile (CPU inductor): a vectorized torch.remainder is nan for an infinite divisor and 0 for a large
quotient, where eager (and the scalar tail of the same kernel) give the dividend and the true remainder.

The vector path computes a - floor(a / b) * b (pytorch#198057, open). Exit 1 while compiled differs from eager.
"""
import sys

import torch

inf = float("inf")
a = torch.tensor([5.5, -5.5, 0.0, 1e20, 2147483648.0, 7.0, 1.5, -0.0])  # 8 elements: one vector
b = torch.tensor([inf, -inf, inf, 3.0, 3.0, 0.7, inf, 1.0])
eager = torch.remainder(a, b)
compiled = torch.compile(torch.remainder, fullgraph=True)(a, b)
print("torch", torch.__version__)
print("eager:   ", eager.tolist())
print("compiled:", compiled.tolist())  # nan where b is inf, 0.0 for 1e20 % 3 on torch 2.15.0 CPU
same = (eager == compiled) | (eager.isnan() & compiled.isnan())
sys.exit(0 if bool(same.all()) else 1)
