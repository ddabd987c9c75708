"""Seed bug 3a: a GRU that applies the reset gate *before* the hidden matmul.

That is the original paper's form (ONNX linear_before_reset=0):
    n = tanh(W_in x + b_in + W_hn (r * h) + b_hn)
where torch and cuDNN compute n = tanh(W_in x + b_in + r * (W_hn h + b_hn)). The two agree
only when r = 1 or h = 0 and b_hn = 0, so the first step with a zero state can hide it.
"""

from fuzzer.canaries import derive_on_every_device
from fuzzer.canaries._gru import gru_with_step


def reset_before_step(x_t, h_prev, h_initial, weights):
    import torch

    w_ih, w_hh, b_ih, b_hh = weights
    hidden = h_prev.shape[-1]
    i_r, i_z, i_n = (x_t @ w_ih.T + b_ih).chunk(3, dim=-1)
    h_r, h_z, _ = (h_prev @ w_hh.T + b_hh).chunk(3, dim=-1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    b_hn = b_hh[2 * hidden :] if torch.is_tensor(b_hh) else 0.0
    n = torch.tanh(i_n + (r * h_prev) @ w_hh[2 * hidden :].T + b_hn)  # the bug: reset before the matmul
    return (1 - z) * n + z * h_prev


def register(api):
    derive_on_every_device(api, "canary-gru-reset-before", {"gru": lambda xs, ps, attrs: gru_with_step(xs, ps, attrs, reset_before_step)})
