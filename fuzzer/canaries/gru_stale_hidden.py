"""Seed bug 3: a GRU that feeds the *initial* hidden state to every time step.

Written out in torch ops, with torch's gate order (r, z, n) and reset-after-matmul;
the only fault is `h_prev` never advancing, so step 1 is right and steps 2.. are wrong.
"""


def gru_with_stale_hidden(xs, ps, attrs):
    import torch

    x = xs[0].transpose(0, 1) if attrs["batch_first"] else xs[0]
    layers, batch, hidden = attrs["num_layers"], x.shape[1], attrs["hidden_size"]
    h0 = ps["h0"] if attrs["initial_state"] else x.new_zeros((layers, batch, hidden))
    for layer in range(layers):
        w_ih, w_hh = ps[f"weight_ih_l{layer}"], ps[f"weight_hh_l{layer}"]
        b_ih = ps[f"bias_ih_l{layer}"] if attrs["bias"] else 0.0
        b_hh = ps[f"bias_hh_l{layer}"] if attrs["bias"] else 0.0
        initial, steps = h0[layer], []
        for t in range(x.shape[0]):
            i_r, i_z, i_n = (x[t] @ w_ih.T + b_ih).chunk(3, dim=-1)
            h_r, h_z, h_n = (initial @ w_hh.T + b_hh).chunk(3, dim=-1)  # the bug: always the initial state
            r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
            n = torch.tanh(i_n + r * h_n)
            steps.append((1 - z) * n + z * initial)
        x = torch.stack(steps)
    return x.transpose(0, 1) if attrs["batch_first"] else x


def register(api):
    api.derive_backend("canary-gru-stale-hidden", base="torch-eager:cpu:float32", overrides={"gru": gru_with_stale_hidden})
