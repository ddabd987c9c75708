"""torch.compile (inductor) gives nan gradients for amin/amax of a float16/bfloat16 gelu or silu: the
backward compares the reduction's result with the activation recomputed in float32, finds no element equal
to it, and divides by that count of 0. Eager: [1.0859375, 0.0]. float32, sigmoid and no activation are right;
torch._inductor.config.emulate_precision_casts = True makes it right.
Exits 1 while the compiled gradient differs from eager's, 0 once fixed."""
import sys

import torch
import torch.nn.functional as F

def f(x):
    return torch.amin(F.gelu(x), dim=0)

print("torch", torch.__version__)
grads = []
for g in (f, torch.compile(f)):
    x = torch.tensor([[1.0], [2.0]], dtype=torch.bfloat16, requires_grad=True)
    g(x).sum().backward()
    grads.append(x.grad.flatten().tolist())
print("eager", grads[0], "compiled", grads[1])
sys.exit(0 if grads[0] == grads[1] else 1)
