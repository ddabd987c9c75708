"""torch CUDA complex sqrt near the negative real axis: the real part is sqrt(|z|) * cos(fl(pi/2)), negative and
far from |y| / (2 sqrt(|x|)). Exits 1 while CUDA's real part is off by more than 1e-3 relative; 2 without a GPU."""
import sys

import numpy as np
import torch

if not torch.cuda.is_available():
    print("This reproducer needs a CUDA GPU.", file=sys.stderr)
    sys.exit(2)
print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name())
bad = False
for z in (-1e10 + 1j, -1e30 + 1e20j, -1e18 + 1e11j, -4 + 1e-6j):
    t = torch.tensor([z], dtype=torch.complex64)
    cpu, cuda, exact = t.sqrt().item(), t.cuda().sqrt().item(), np.sqrt(np.complex128(t.item()))
    print(f"sqrt({z}): cpu {cpu}  cuda {cuda}  exact {exact}")
    bad |= abs(cuda.real - exact.real) > 1e-3 * abs(exact.real)
sys.exit(1 if bad else 0)
