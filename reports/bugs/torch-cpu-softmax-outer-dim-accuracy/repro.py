"""torch CPU float32 softmax / log_softmax over a non-last dim add the exponentials one after the other:
on 16,385 values (one 1, the rest 0) softmax(x, dim=0) is ~1,050 ulp off the float64 answer, 11x the
error of the same numbers laid out along the last dim. Exits 1 while the outer-dim error is over 4x that."""
import sys

import torch

print("torch", torch.__version__)
x = torch.zeros(16385, 1)
x[0, 0] = 1.0
bad = False
for f in (torch.softmax, torch.log_softmax):
    exact = f(x.double(), 0)
    ulp = torch.finfo(torch.float32).eps * exact.abs()  # the float32 spacing near each answer
    outer = ((f(x, 0).double() - exact).abs() / ulp).max().item()  # dim 0 of [n, 1]: the outer-dim kernel
    last = ((f(x.T.contiguous(), -1).T.double() - exact).abs() / ulp).max().item()  # dim -1 of [1, n]
    print(f"{f.__name__:12s} dim=0: {outer:7.0f} ulp   same values on the last dim: {last:5.0f} ulp")
    bad |= outer > 4 * max(last, 1.0)
sys.exit(1 if bad else 0)
