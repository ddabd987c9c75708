"""Seed bug 3b: a GRU that feeds the *initial* hidden state to every time step.

torch's gate order (r, z, n) and reset-after-matmul; the only fault is that the previous
step's output is never used, so step 1 is right and steps 2.. are wrong.
"""

from fuzzer.canaries import derive_on_every_device
from fuzzer.canaries._gru import gru_with_step


def stale_step(x_t, h_prev, h_initial, weights):
    import torch

    w_ih, w_hh, b_ih, b_hh = weights
    i_r, i_z, i_n = (x_t @ w_ih.T + b_ih).chunk(3, dim=-1)
    h_r, h_z, h_n = (h_initial @ w_hh.T + b_hh).chunk(3, dim=-1)  # the bug: h_initial, not h_prev
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h_initial


def register(api):
    derive_on_every_device(api, "canary-gru-stale-hidden", {"gru": lambda xs, ps, attrs: gru_with_step(xs, ps, attrs, stale_step)})
