"""torch CPU float32: batch_norm (training) and group_norm are far less accurate on channels_last inputs.

Same values, same op: the contiguous kernels accumulate in double (batch_norm) or use Welford with a
cascade sum (group_norm); the channels_last kernels sum in float32 row by row (batch_norm) and compute
the variance as E[x^2] - mean^2 in float32 (group_norm). Exit 1 while channels_last is >100x worse.
"""
import sys

import torch
import torch.nn.functional as F

print("torch", torch.__version__, "threads", torch.get_num_threads())
torch.manual_seed(0)
near_constant = 1.7 + 1e-7 * torch.randn(64, 2, 64, 64, dtype=torch.float64)  # std 1e-7 per channel
offset = 1000 + torch.randn(64, 4, 32, 32, dtype=torch.float64)               # mean 1000, std 1
cases = [("batch_norm", near_constant.float(), lambda t: F.batch_norm(t, None, None, training=True, eps=1e-6)),
         ("group_norm", offset.float(), lambda t: F.group_norm(t, 4))]
bad = False
for name, x, op in cases:
    exact = op(x.double())  # float64 from the same float32 values
    err_contiguous = (op(x).double() - exact).abs().max().item()
    err_channels_last = (op(x.contiguous(memory_format=torch.channels_last)).double() - exact).abs().max().item()
    print(f"{name}: max error contiguous {err_contiguous:.2g}, channels_last {err_channels_last:.2g}")
    bad |= err_channels_last > 100 * err_contiguous + 1e-3
sys.exit(1 if bad else 0)
