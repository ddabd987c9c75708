"""torch CPU (oneDNN) grouped conv2d / conv3d are wrong for a channels_last input with a non-contiguous weight.

F.conv{2,3}d(x, w, groups=2) with x channels_last and w holding a contiguous weight's values with dims 1
and 2 stored transposed give errors of order 1; each layout alone and groups=1 are right, and so is the
same call with oneDNN off. Exit 1 while the discrepancy is present.
"""
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(0)
print("torch", torch.__version__)
worst = 0.0
for conv, shape, layout in ((F.conv2d, (1, 4, 3, 2), torch.channels_last), (F.conv3d, (1, 4, 3, 2, 2), torch.channels_last_3d)):
    x, w = torch.randn(shape), torch.randn(2, 2, 3, *(1,) * (len(shape) - 3))  # groups=2: (out, in / groups, k...)
    x_cl, w_strided = x.contiguous(memory_format=layout), w.transpose(1, 2).contiguous().transpose(1, 2)
    expected = conv(x.double(), w.double(), groups=2)
    for onednn in (True, False):
        with torch.backends.mkldnn.flags(enabled=onednn):
            error = (conv(x_cl, w_strided, groups=2).double() - expected).abs().max().item()
        print(f"{conv.__name__} channels_last x + strided w, oneDNN {'on ' if onednn else 'off'}: max |error| {error:.3g}")
        worst = max(worst, error)
sys.exit(1 if worst > 1e-4 else 0)
