"""torch's CUDA group_norm in float16 turns a constant group into nan when eps < 6e-8 (float16's
smallest subnormal): the CPU kernel, float32, bfloat16 and layer_norm give 0. Exit 1 while the bug
is there, 0 once fixed, 2 without a CUDA GPU."""
import sys

import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    print("This reproducer needs a CUDA GPU, and torch sees none here.", file=sys.stderr)
    sys.exit(2)
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, GPU {torch.cuda.get_device_name()}")
x = torch.full((1, 2), 1.1748046875, dtype=torch.float16, device="cuda")  # a constant group of two
got = F.group_norm(x, 1, None, None, 1e-12)
print("cuda float16:", got.tolist(), " cpu float16:", F.group_norm(x.cpu(), 1, None, None, 1e-12).tolist(),
      " cuda layer_norm:", F.layer_norm(x, (2,), None, None, 1e-12).tolist())
sys.exit(1 if torch.isnan(got).any() else 0)
