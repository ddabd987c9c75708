"""cuDNN float32 conv2d: with a -inf in the input, outputs whose window never reads it come out nan.
A (1, 512, 11, 11) input whose pixel (0, 0) is -inf in every channel, an (80, 512, 3, 3) weight,
padding 1: every output is nan on CUDA, where the float64 reference is a finite number at all
outputs but the 4 whose window holds that pixel, and so is torch.backends.cudnn.enabled = False. Exit 1 while the bug is there, 0 once fixed, 2 without a
CUDA GPU."""
import sys

import numpy as np
import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    print("This reproducer needs a CUDA GPU, and torch sees none here.", file=sys.stderr)
    sys.exit(2)
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
rng = np.random.default_rng(0)
x = rng.standard_normal((1, 512, 11, 11))
x[0, :, 0, 0] = -np.inf
w = 0.03 * rng.standard_normal((80, 512, 3, 3))
want = F.conv2d(torch.tensor(x), torch.tensor(w), padding=1).numpy()  # float64 on the CPU


def nan_where_finite() -> int:
    got = F.conv2d(torch.tensor(x, dtype=torch.float32, device="cuda"), torch.tensor(w, dtype=torch.float32, device="cuda"), padding=1)
    return int(np.count_nonzero(np.isfinite(want) & ~np.isfinite(got.double().cpu().numpy())))


wrong = nan_where_finite()
torch.backends.cudnn.enabled = False
without_cudnn = nan_where_finite()
print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}: "
      f"{wrong} of {np.count_nonzero(np.isfinite(want))} finite outputs are not finite with cuDNN, {without_cudnn} without")
sys.exit(1 if wrong else 0)
