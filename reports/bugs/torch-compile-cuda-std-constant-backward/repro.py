"""torch.compile (inductor) on CUDA differentiates torch.std of a constant tensor wrongly. Eager: std of
[1., 1., 1.] is 0 and its gradient 0. Compiled on CUDA the std is 3e-8 and the gradient -0.408 on every
entry, though adding a constant to x leaves std unchanged, so any gradient must sum to 0.
Exits 1 while compiled differs from eager, 0 once fixed, 2 without a CUDA GPU."""
import sys

import torch

if not torch.cuda.is_available():
    print("needs a CUDA GPU", file=sys.stderr)
    sys.exit(2)
print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name())
bad = False
for n in (3, 12):
    grads = []
    for f in (torch.std, torch.compile(torch.std)):
        x = torch.full((n,), 1.0, device="cuda", requires_grad=True)
        f(x).backward()
        grads.append(x.grad)
    print(f"n={n}: eager grad {grads[0][:3].tolist()}  compiled grad {grads[1][:3].tolist()} (sum {grads[1].sum().item():.3g})")
    bad |= not torch.allclose(grads[0], grads[1], atol=1e-3)
sys.exit(1 if bad else 0)
