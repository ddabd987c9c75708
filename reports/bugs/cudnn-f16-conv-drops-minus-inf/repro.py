"""cuDNN float16 conv2d: an output that reads -inf with weight 1 (and 0 * 0 elsewhere) is 0.0, not -inf,
from 400 rows on (cuDNN's sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_f16f16 kernel). +inf, nan and
-65504 come out right, and so does every float32, bfloat16 or cudnn.enabled=False run.
Exit 1 while the bug is there, 0 once fixed, 2 without a CUDA GPU."""
import sys

import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    print("This reproducer needs a CUDA GPU, and torch sees none here.", file=sys.stderr)
    sys.exit(2)
x = torch.zeros(1, 3, 400, 1, dtype=torch.float16, device="cuda")
x[0, 2, 5, 0] = -float("inf")
w = torch.zeros(2, 3, 2, 1, dtype=torch.float16, device="cuda")
w[1, 2, 1, 0] = 1.0                      # output row 5 of channel 1 is 0 * x[4] + 1 * x[5] = -inf
got = F.conv2d(x, w, padding=(1, 0))[0, 1, 5, 0].item()
want = F.conv2d(x.cpu().double(), w.cpu().double(), padding=(1, 0))[0, 1, 5, 0].item()
print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}: got {got}, want {want}")
sys.exit(1 if got != want else 0)
