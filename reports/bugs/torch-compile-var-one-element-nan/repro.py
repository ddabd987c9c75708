"""torch.compile (inductor): var / std of a one-element tensor holding nan or inf is 0.0; eager gives nan.

The reduction of one element lowers to inductor's Welford reduction (chosen when the output is a
single element), whose first step sets M2 = 0 without looking at the value, so var = M2 / (n - correction)
= 0 whatever the element is. With two or more elements, or several outputs, the result is nan as in eager.
Exit 1 while the bug is present, 0 once fixed.
"""
import sys

import torch

print("torch", torch.__version__)
compiled_var = torch.compile(lambda x: torch.var(x, dim=0, correction=0))
bad = False
for value in (float("nan"), float("inf")):
    for shape in ((1,), (2,)):
        x = torch.full(shape, value)
        eager, compiled = torch.var(x, dim=0, correction=0).item(), compiled_var(x).item()
        wrong = not (eager != eager and compiled != compiled)  # both should be nan
        print(f"var of {shape[0]} x {value}: eager {eager}, compiled {compiled}{'  WRONG' if wrong else ''}")
        bad |= wrong
        torch._dynamo.reset()
sys.exit(1 if bad else 0)
