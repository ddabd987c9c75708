"""CUDA depthwise conv3d (groups == in_channels) fails for an input whose size-1 dims have strides other than a
contiguous tensor's (x.transpose(-1, 2) of a (1, 4, 1, 1, 2) tensor: is_contiguous() is True): "an illegal
memory access was encountered" here (torch 2.11, H200), wrong values in other runs, with cuDNN on or off.
Exits 1 while it fails or differs from the same call on a freshly laid out copy, 0 once fixed, 2 without CUDA."""
import sys

import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    sys.exit(2)
print("torch", torch.__version__, "cuDNN", torch.backends.cudnn.version())
torch.manual_seed(0)
x = torch.rand(1, 4, 1, 1, 2, device="cuda").transpose(-1, 2)  # (1, 4, 2, 1, 1), strides (8, 2, 1, 2, 2)
fresh = torch.empty(x.shape, device="cuda").copy_(x)  # same values, strides (8, 2, 1, 1, 1)
w = torch.rand(4, 1, 2, 2, 3, device="cuda")
print("x.is_contiguous():", x.is_contiguous(), "strides", x.stride(), "vs", fresh.stride())
bad = False
for cudnn in (True, False):
    with torch.backends.cudnn.flags(enabled=cudnn):
        got, want = F.conv3d(x, w, padding=1, groups=4), F.conv3d(fresh, w, padding=1, groups=4)
        error = float((got - want).abs().max())
        print(f"cudnn {'on' if cudnn else 'off'}: max |difference| {error:.3g} (outputs up to {float(want.abs().max()):.3g})")
        bad |= error > 1e-5
sys.exit(1 if bad else 0)
