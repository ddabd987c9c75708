"""torch CPU (oneDNN) F.conv2d with a channels_last input of many channels (not a multiple of 16) reads memory
outside its operands: NaN in the result when neighbouring memory holds NaN (finite neighbours leave it right,
as if the padded channel tail were multiplied by zero weights). oneDNN off is right. Exit 1 while present."""
import math
import sys

import torch
import torch.nn.functional as F

C = int(sys.argv[1]) if len(sys.argv) > 1 else 4097
torch.manual_seed(0)
print("torch", torch.__version__, "in_channels", C)
x = torch.randn(1, C, 5, 1).contiguous(memory_format=torch.channels_last)
w = (torch.randn(8, C, 2, 1) / math.sqrt(C)).contiguous(memory_format=torch.channels_last)
expected = F.conv2d(x.double(), w.double())
bad = {}
for onednn in (True, False):
    bad[onednn] = 0
    for trial in range(100):
        walls = [torch.full((size,), math.nan) for size in (C * 5, C * 16) for _ in range(8)]
        del walls[::2]  # holes between NaN-filled blocks, where the next tensors are allocated
        with torch.backends.mkldnn.flags(enabled=onednn):
            got = F.conv2d(x, w)
        bad[onednn] += not bool(torch.isfinite(got).all())
    print(f"oneDNN {'on ' if onednn else 'off'}: {bad[onednn]} of 100 results non-finite (the float64 result is finite: "
          f"{bool(torch.isfinite(expected).all())})")
sys.exit(1 if bad[True] or bad[False] else 0)
