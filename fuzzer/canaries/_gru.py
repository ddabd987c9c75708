"""A GRU written out in torch ops with a pluggable step, for the two GRU canaries."""


def gru_with_step(xs, ps, attrs, step):
    """torch.nn.GRU's layout and gate order (r, z, n); `step(x_t, h_prev, h0, weights)` -> h."""
    x = xs[0].transpose(0, 1) if attrs["batch_first"] else xs[0]
    layers, batch, hidden = attrs["num_layers"], x.shape[1], attrs["hidden_size"]
    h0 = ps["h0"] if attrs["initial_state"] else x.new_zeros((layers, batch, hidden))
    for layer in range(layers):
        weights = (
            ps[f"weight_ih_l{layer}"],
            ps[f"weight_hh_l{layer}"],
            ps[f"bias_ih_l{layer}"] if attrs["bias"] else 0.0,
            ps[f"bias_hh_l{layer}"] if attrs["bias"] else 0.0,
        )
        import torch

        h, steps = h0[layer], []
        for t in range(x.shape[0]):
            h = step(x[t], h, h0[layer], weights)
            steps.append(h)
        x = torch.stack(steps)
    return x.transpose(0, 1) if attrs["batch_first"] else x
