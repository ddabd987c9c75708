"""torch.compile (inductor, CPU) crashes on torch.roll followed by replicate padding of the same dim:
InductorError: AssertionError: vr must not be None for symbol q0. Eager is right.

Exit 1 while the bug is present, 0 once the compiled function matches eager.
"""
import sys

import torch
import torch.nn.functional as F


def f(x):
    return F.pad(torch.roll(x, 1, -1), (1, 0), mode="replicate")


x = torch.tensor([[1.0, 2.0, 3.0]])
print("torch", torch.__version__)
eager = f(x)
print("eager   ", eager.tolist())  # [[3, 3, 1, 2]]
try:
    compiled = torch.compile(f)(x)
except Exception as exc:  # the bug: inductor raises while compiling
    print("compiled raised:", str(exc).splitlines()[0])
    sys.exit(1)
print("compiled", compiled.tolist())
sys.exit(0 if torch.equal(eager, compiled) else 1)
