"""jax (CPU, float64): a grouped convolution spreads a nan from one group into every group.

Each output channel of a depthwise conv (feature_group_count = channels) reads only its own input
channel, so a nan in channel 1 must stay in channel 1 (float32 does that). In float64 on CPU every
channel comes out nan. Exit 1 while the bug is present, 0 once fixed."""
import sys

import jax
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)
print(f"jax {jax.__version__}, jaxlib {jax.lib.__version__}, device {jax.devices()[0].platform}")

failed = False
for dtype in (np.float32, np.float64):
    x = np.zeros((1, 3, 1, 2), dtype)  # NCHW: 3 channels, 1 x 2 pixels
    x[0, 1, 0, 0] = np.nan  # a nan in channel 1 only
    w = np.ones((3, 1, 1, 1), dtype)  # OIHW: one 1x1 filter per channel
    def depthwise(x, w):
        return lax.conv_general_dilated(x, w, window_strides=(1, 1), padding="VALID", feature_group_count=3)

    for name, conv in (("eager", depthwise), ("jit", jax.jit(depthwise))):
        out = np.asarray(conv(x, w))
        nan_channels = [c for c in range(3) if np.isnan(out[0, c]).any()]
        ok = nan_channels == [1]
        failed |= not ok
        print(f"{np.dtype(dtype).name:8} {name:6} channels holding nan: {nan_channels} (expected [1]) {'ok' if ok else 'WRONG'}")
sys.exit(1 if failed else 0)
