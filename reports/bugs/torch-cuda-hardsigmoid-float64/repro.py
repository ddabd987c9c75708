"""F.hardsigmoid / F.hardswish in float64 on CUDA are computed with float32 constants.

hardsigmoid(3.0) is 1.0000000298023224 in float64 on CUDA (out of its [0, 1] range) and
hardswish(4.0) is 4.00000011920929; the CPU kernels are exact. Exit 1 while the bug is there,
0 once CUDA matches the float64 definitions, 2 without a CUDA device.
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    print("needs a CUDA device")
    sys.exit(2)
x = np.linspace(-4.0, 4.0, 100001)
definitions = {"hardsigmoid": np.clip(x / 6 + 0.5, 0, 1), "hardswish": x * np.clip(x + 3, 0, 6) / 6}
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
worst = 0.0
for name, expected in definitions.items():
    for device in ("cpu", "cuda"):
        y = getattr(F, name)(torch.tensor(x, dtype=torch.float64, device=device)).cpu().numpy()
        err = np.abs(y - expected)
        print(f"{name:12s} float64 {device:4s} max |error| {err.max():.3g} at x = {x[err.argmax()]:+.4f}: "
              f"{y[err.argmax()]!r} (expected {expected[err.argmax()]!r})")
        if device == "cuda":
            worst = max(worst, err.max())
sys.exit(1 if worst > 1e-12 else 0)
