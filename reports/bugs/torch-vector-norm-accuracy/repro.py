"""torch.linalg.vector_norm (p=2, float32, CPU) loses accuracy on long inputs: it accumulates the squares
in a few float32 running sums, where torch.sum uses cascade summation. On 159,664 equal values it is
about 940 ulp off the float64 answer (relative error 9.2e-5); sqrt(torch.sum(x * x)) is within 1 ulp.

Exit 1 while the error is above 16 ulp (cascade summation of n squares stays within a few ulp).
"""
import sys

import numpy as np
import torch

x = torch.full((587, 17, 16), 1.55064225)  # the fuzzer's shrunk case: 159,664 equal float32 values
exact = float(np.sqrt(np.sum(x.double().numpy() ** 2)))
ulp = float(np.spacing(np.float32(exact)))  # the float32 spacing at the answer
print("torch", torch.__version__)
bad = False
for label, value in (("vector_norm", torch.linalg.vector_norm(x).item()), ("sqrt(sum(x*x))", torch.sqrt(torch.sum(x * x)).item())):
    ulps = abs(value - exact) / ulp
    print(f"{label:15s} {value:.7f}  float64 {exact:.7f}  off by {ulps:.0f} ulp")
    bad |= label == "vector_norm" and ulps > 16
sys.exit(1 if bad else 0)
