"""torch.special.legendre_polynomial_p(x, n) on the CPU: with n a non-contiguous tensor, P_n(nan) is 1.0 for n >= 2
where the same call on a contiguous n gives nan. Exit 1 while present."""
import sys

import torch

print("torch", torch.__version__)
x = torch.tensor([float("nan")])
n = torch.tensor([[0.0, 0.0], [1.0, 2.0]])
contiguous = torch.special.legendre_polynomial_p(x, n)
strided = torch.special.legendre_polynomial_p(x, n.t().contiguous().t())  # the same values, column-major
print("contiguous n:", contiguous.tolist())
print("strided n:   ", strided.tolist())
sys.exit(0 if torch.equal(contiguous.isnan(), strided.isnan()) else 1)
