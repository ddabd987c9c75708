"""torch.compile(dynamic=True), AOTAutograd: after index_add_ through a transposed view of x, zero_ of the
slice x[:, start:stop] (bounds traced as symbols) leaves entries of that slice non-zero in the returned view.
backend="eager" and dynamic=False are right; backend="aot_eager" is wrong as inductor is.
Exits 1 while the returned slice is not all zeros, 0 once fixed."""
import sys

import torch

def f(x, src, start=0, stop=2):  # integers as defaults: dynamic=True traces them as symbols
    x.swapaxes(0, 1).index_add_(0, torch.tensor([1]), src, alpha=-0.5)
    return x[:, start:stop].zero_()

print("torch", torch.__version__)
bad = False
for backend in ("aot_eager", "inductor"):
    torch._dynamo.reset()
    x = torch.ones(31, 3)
    out = torch.compile(f, backend=backend, dynamic=True)(x, torch.zeros(1, 31))
    print(f"{backend}: {int((out != 0).sum())} of {out.numel()} entries of the zeroed slice are not 0")
    bad |= bool((out != 0).any())
sys.exit(1 if bad else 0)
