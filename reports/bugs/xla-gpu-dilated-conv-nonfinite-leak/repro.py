"""XLA:GPU: a dilated convolution puts nan at an output that no kernel tap reaches, when the input holds
inf or nan (as if the holes of the dilated kernel were zeros multiplied in: 0 * inf = nan).
Exit 1 while the bug is there, 0 once fixed, 2 without a GPU."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

if jax.default_backend() != "gpu":
    print("This reproducer needs a GPU, and jax sees none here.", file=sys.stderr)
    sys.exit(2)


def conv(x, w):  # conv_transpose1d(stride=3, padding=1, dilation=2, output_padding=1) as jax writes it
    return lax.conv_general_dilated(x, w, window_strides=[1], padding=[(1, 2)], lhs_dilation=[3], rhs_dilation=[2],
                                    dimension_numbers=("NCH", "OIH", "NCH"))


x, w = np.full((1, 1, 1), np.inf, np.float32), np.ones((1, 1, 2), np.float32)
gpu = np.asarray(conv(x, w)).ravel()                                               # [nan, inf] on jax 0.11.2, H100
cpu = np.asarray(conv(*(jax.device_put(a, jax.devices("cpu")[0]) for a in (x, w)))).ravel()  # [0, inf]: output 0 reads no input
print(f"jax {jax.__version__} {jax.devices()[0].device_kind}: gpu {gpu}, cpu {cpu}")
sys.exit(1 if np.isnan(gpu[0]) and cpu[0] == 0 else 0)
