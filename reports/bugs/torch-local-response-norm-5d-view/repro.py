"""F.local_response_norm raises on a non-contiguous 5-D input (its 3-D-spatial path calls .view).

The 4-D path and a contiguous copy of the same 5-D input work. Exit 1 while it raises, 0 once
the non-contiguous input gives the contiguous copy's result.
"""
import sys

import torch
import torch.nn.functional as F

x = torch.randn(2, 3, 2, 4, 5).transpose(3, 4)  # a transposed view: valid input, not contiguous
print("torch", torch.__version__)
expected = F.local_response_norm(x.contiguous(), 3)
try:
    actual = F.local_response_norm(x, 3)
except RuntimeError as exc:
    print("RuntimeError:", str(exc).splitlines()[0])
    sys.exit(1)
print("max |difference| from the contiguous copy:", (actual - expected).abs().max().item())
sys.exit(0 if torch.allclose(actual, expected) else 1)
