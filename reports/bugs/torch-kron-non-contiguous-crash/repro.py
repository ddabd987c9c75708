"""torch.kron raises on a transposed (non-contiguous) operand, where it is the same product of the values.

"view size is not compatible with input tensor's size and stride": kron views its operands instead of
reshaping them (pytorch#185650, #54135, #74442; unfixed PRs #185913, #186334). Exit 1 while the bug is there.
"""
import sys

import torch

a, b = torch.ones(2), torch.arange(4.0).reshape(2, 2)
print("torch", torch.__version__)
expected = torch.kron(a, b.t().contiguous())
try:
    got = torch.kron(a, b.t())
except RuntimeError as error:
    print("torch.kron(a, b.t()) raises:", error)
    sys.exit(1)
print("torch.kron(a, b.t()):", got, "equal to the contiguous copy's:", torch.equal(got, expected))
sys.exit(0 if torch.equal(got, expected) else 1)
