"""torch CUDA float16 / bfloat16 grouped conv1d: a nan in one group's input makes another group's output
nan. Group 0 (input channels 0-31) never reads channel 63, yet its output is nan; every weight is 0.
Exit 1 while the bug is there, 0 once fixed, 2 without a CUDA GPU."""
import sys

import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    print("This reproducer needs a CUDA GPU, and torch sees none here.", file=sys.stderr)
    sys.exit(2)
x = torch.zeros(1, 128, 2, dtype=torch.float16, device="cuda")
x[0, 63, 1] = float("nan")                 # channel 63 is in group 1 (channels 32-63)
w = torch.zeros(4, 32, 2, dtype=torch.float16, device="cuda")
y = F.conv1d(x, w, padding=1, dilation=2, groups=4)[0, :, 0].tolist()
print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}: "
      f"output column 0 per group {y}; expected [0, nan, 0, 0]")
sys.exit(1 if y[0] != 0 else 0)
