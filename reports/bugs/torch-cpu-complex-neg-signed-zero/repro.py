"""torch CPU complex neg: the vectorized lanes negate a zero component to +0, the scalar tail to -0,
so equal inputs give results on both sides of a branch cut depending on their position.
Exits 1 while the bug is there, 0 once fixed."""
import sys

import numpy as np
import torch

x = torch.full((20,), 4 + 0j, dtype=torch.complex64)
y = torch.sqrt(-x)                       # -(4+0j) is -4-0j (IEEE negation), whose sqrt is -2j
expected = np.sqrt(-np.full(20, 4 + 0j, dtype=np.complex64))
print("torch", torch.__version__, "imag of sqrt(-x):", y.imag.tolist())
print("numpy                     :", expected.imag.tolist())
print("signbit of neg(0+0j).imag  :", torch.signbit(torch.neg(torch.zeros(20, dtype=torch.complex64)).imag).tolist())
sys.exit(0 if np.array_equal(y.numpy(), expected) else 1)
