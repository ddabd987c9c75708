"""torch.compile (inductor, CUDA) vs eager: a pointwise op fused into adaptive_avg_pool2d whose
windows overlap (8 columns -> 3 windows: [0, 3), [2, 6), [5, 8)) gives wrong values for every
batch but the first, up to 1e18 and nan: the kernel reads memory that is not the batch's.
adaptive_avg_pool2d alone compiles right, and so do 4 output columns (windows that tile 8).
Exit 1 while the bug is present, 0 once fixed, 2 without a CUDA GPU.
"""
import sys

import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    print("This reproducer needs a CUDA GPU, and torch sees none here.", file=sys.stderr)
    sys.exit(2)

torch.manual_seed(0)
x = torch.randn(2, 1, 20, 8, device="cuda")


def fn(t):
    return F.adaptive_avg_pool2d(torch.relu(t), (2, 3))


eager = fn(x)
compiled = torch.compile(fn)(x)
wrong = ~torch.isclose(compiled, eager, rtol=1e-5, atol=1e-5)
print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}: batches wrong {wrong.flatten(1).any(1).tolist()}, "
      f"max |diff| {(compiled - eager).abs().max().item():.3g}")
sys.exit(1 if wrong.any() else 0)
