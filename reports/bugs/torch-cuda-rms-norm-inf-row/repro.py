"""torch on CUDA: F.rms_norm of a row that holds an inf is nan in every entry.

rms_norm(x) = x / sqrt(mean(x^2) + eps): with an inf in the row, mean(x^2) is inf, so every finite
entry is x / inf = 0 and only the inf entry is inf / inf = nan. The CPU gives exactly that; CUDA gives
nan for the whole row, in float32 and float64. Exits 1 while CUDA differs, 0 once fixed (or without CUDA: 2).
"""

import sys

import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    print("needs a CUDA device")
    sys.exit(2)
failed = False
for dtype in (torch.float32, torch.float64):
    x = torch.tensor([[2.03, 2.52, 0.268, float("inf"), -1.157]], dtype=dtype)
    cpu = F.rms_norm(x, (5,), eps=0.1)
    cuda = F.rms_norm(x.cuda(), (5,), eps=0.1).cpu()
    print(f"{dtype}: cpu {cpu.tolist()}  cuda {cuda.tolist()}")
    failed |= not torch.equal(torch.nan_to_num(cpu, nan=7.0), torch.nan_to_num(cuda, nan=7.0))
print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())
sys.exit(1 if failed else 0)
