"""GRU and LSTM over a sequence, torch conventions (gate order, weight layout, batch_first).

The output is the last layer's hidden state at every step, shaped like the
input's layout: (T, B, H), or (B, T, H) with batch_first. Every step's output is
compared, so an implementation that feeds the *initial* hidden state to every
step (seed bug 3b) is wrong from step 2 on.
"""

from __future__ import annotations

import warnings

import numpy as np

from fuzzer.ops import OpDef
from fuzzer.ops._common import check, st
from fuzzer.ops.numerics import Numerics

GATES = {"gru": 3, "lstm": 4}


def _draw(draw, shapes):
    return {
        "hidden_size": draw(st.sampled_from([1, 2, 3, 4, 5, 8])),
        "num_layers": draw(st.integers(1, 2)),
        "batch_first": draw(st.booleans()),
        "initial_state": draw(st.booleans()),
        "bias": draw(st.integers(0, 3)) > 0,
    }


def _accepts(shape):
    return len(shape) == 3 and shape[0] * shape[1] <= 64 and shape[2] <= 17


def _dims(attrs, shape):
    """(seq_len, batch, input_size) whatever the layout."""
    seq_len, batch = (shape[1], shape[0]) if attrs["batch_first"] else (shape[0], shape[1])
    return seq_len, batch, shape[2]


def _infer(attrs, shapes):
    shape = shapes[0]
    check(len(shape) == 3, f"takes a 3-d sequence, got {list(shape)}")
    check(attrs["hidden_size"] >= 1 and attrs["num_layers"] >= 1, "hidden_size and num_layers must be >= 1")
    return tuple(shape[:2]) + (attrs["hidden_size"],)


def _params(kind):
    def params(attrs, shapes):
        seq_len, batch, input_size = _dims(attrs, shapes[0])
        hidden, gates = attrs["hidden_size"], GATES[kind]
        out = {}
        for layer in range(attrs["num_layers"]):
            layer_input = input_size if layer == 0 else hidden
            out[f"weight_ih_l{layer}"] = (gates * hidden, layer_input)
            out[f"weight_hh_l{layer}"] = (gates * hidden, hidden)
            if attrs["bias"]:
                out[f"bias_ih_l{layer}"] = (gates * hidden,)
                out[f"bias_hh_l{layer}"] = (gates * hidden,)
        if attrs["initial_state"]:
            out["h0"] = (attrs["num_layers"], batch, hidden)
            if kind == "lstm":
                out["c0"] = (attrs["num_layers"], batch, hidden)
        return out

    return params


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _layer_weights(ps, attrs, layer, dtype):
    w_ih, w_hh = ps[f"weight_ih_l{layer}"], ps[f"weight_hh_l{layer}"]
    zeros = np.zeros(w_ih.shape[0], dtype=dtype)
    b_ih = ps.get(f"bias_ih_l{layer}", zeros) if attrs["bias"] else zeros
    b_hh = ps.get(f"bias_hh_l{layer}", zeros) if attrs["bias"] else zeros
    return w_ih, w_hh, b_ih, b_hh


def _initial(ps, attrs, name, batch, dtype):
    shape = (attrs["num_layers"], batch, attrs["hidden_size"])
    return ps[name] if attrs["initial_state"] else np.zeros(shape, dtype=dtype)


def _gru_reference(xs, ps, attrs):
    """PyTorch / cuDNN GRU (ONNX linear_before_reset=1); gate rows ordered r, z, n:
        r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)
        z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
        n = tanh(W_in x + b_in + r * (W_hn h + b_hn))   # reset gate AFTER the hidden matmul
        h = (1 - z) * n + z * h_prev                      # h_prev: the previous step's output
    """
    x = xs[0] if not attrs["batch_first"] else np.swapaxes(xs[0], 0, 1)
    seq_len, batch, _ = x.shape
    h0 = _initial(ps, attrs, "h0", batch, x.dtype)
    layer_input = x
    for layer in range(attrs["num_layers"]):
        w_ih, w_hh, b_ih, b_hh = _layer_weights(ps, attrs, layer, x.dtype)
        h, steps = h0[layer], []
        for t in range(seq_len):
            gi = layer_input[t] @ w_ih.T + b_ih
            gh = h @ w_hh.T + b_hh
            i_r, i_z, i_n = np.split(gi, 3, axis=-1)
            h_r, h_z, h_n = np.split(gh, 3, axis=-1)
            r, z = _sigmoid(i_r + h_r), _sigmoid(i_z + h_z)
            n = np.tanh(i_n + r * h_n)
            h = (1 - z) * n + z * h
            steps.append(h)
        layer_input = np.stack(steps)
    out = layer_input if not attrs["batch_first"] else np.swapaxes(layer_input, 0, 1)
    return out.astype(x.dtype)


def _gru_error(xs, ps, attrs):
    """torch's and cuDNN's GRU write the last line as h = n + z * (h_prev - n): where z rounds to 1
    and h_prev is small, h_prev - n rounds h_prev away (1.4e-8 - 1 is -1 in float32), so h is
    off by a roundoff of |n| (at most 1) or |h_prev|, not of |h|. Each step and layer adds its own."""
    x = xs[0]
    out_shape = _infer(attrs, [np.shape(x)])
    seq_axis = 1 if attrs["batch_first"] else 0
    scale = max(1.0, float(np.max(np.abs(ps["h0"]), initial=0.0))) if attrs["initial_state"] else 1.0
    steps = np.arange(1, out_shape[seq_axis] + 1, dtype=np.float64) * attrs["num_layers"] * scale
    return np.broadcast_to(np.expand_dims(steps, [a for a in range(3) if a != seq_axis]), out_shape)


def _lstm_reference(xs, ps, attrs):
    """PyTorch LSTM; gate rows ordered i, f, g, o:
        i, f, o = sigmoid(W_i* x + b_i* + W_h* h + b_h*);  g = tanh(W_ig x + b_ig + W_hg h + b_hg)
        c = f * c_prev + i * g;  h = o * tanh(c)
    """
    x = xs[0] if not attrs["batch_first"] else np.swapaxes(xs[0], 0, 1)
    seq_len, batch, _ = x.shape
    h0, c0 = _initial(ps, attrs, "h0", batch, x.dtype), _initial(ps, attrs, "c0", batch, x.dtype)
    layer_input = x
    for layer in range(attrs["num_layers"]):
        w_ih, w_hh, b_ih, b_hh = _layer_weights(ps, attrs, layer, x.dtype)
        h, c, steps = h0[layer], c0[layer], []
        for t in range(seq_len):
            gates = layer_input[t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh
            i, f, g, o = np.split(gates, 4, axis=-1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
            steps.append(h)
        layer_input = np.stack(steps)
    out = layer_input if not attrs["batch_first"] else np.swapaxes(layer_input, 0, 1)
    return out.astype(x.dtype)


def _torch_flat_weights(ps, attrs):
    names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if attrs["bias"] else [])
    return [ps[f"{name}_l{layer}"] for layer in range(attrs["num_layers"]) for name in names]


def _torch_initial(xs, ps, attrs, name):
    x = xs[0]
    batch = x.shape[0] if attrs["batch_first"] else x.shape[1]
    if attrs["initial_state"]:
        return ps[name]
    return x.new_zeros((attrs["num_layers"], batch, attrs["hidden_size"]))


# cuDNN warns on every call that per-tensor weights are not one flat buffer (it compacts
# them, correctly); in a campaign that is thousands of lines of noise. Filtered once here, not
# per call: torch.compile(fullgraph=True) cannot trace warnings.catch_warnings().
warnings.filterwarnings("ignore", message="RNN module weights are not part of single contiguous chunk")


def _torch_gru(xs, ps, attrs):
    import torch

    # torch._VF.gru is exactly what nn.GRU.forward calls; using it directly avoids
    # building a module per call while keeping torch's own kernel.
    out, _ = torch._VF.gru(
        xs[0], _torch_initial(xs, ps, attrs, "h0"), _torch_flat_weights(ps, attrs),
        attrs["bias"], attrs["num_layers"], 0.0, False, False, attrs["batch_first"],
    )
    return out


def _torch_lstm(xs, ps, attrs):
    import torch

    hx = (_torch_initial(xs, ps, attrs, "h0"), _torch_initial(xs, ps, attrs, "c0"))
    out, _, _ = torch._VF.lstm(
        xs[0], hx, _torch_flat_weights(ps, attrs),
        attrs["bias"], attrs["num_layers"], 0.0, False, False, attrs["batch_first"],
    )
    return out


def _jax_layer_params(ps, attrs, layer):
    import jax.numpy as jnp

    w_ih, w_hh = ps[f"weight_ih_l{layer}"], ps[f"weight_hh_l{layer}"]
    if attrs["bias"]:
        return w_ih, w_hh, ps[f"bias_ih_l{layer}"], ps[f"bias_hh_l{layer}"]
    zeros = jnp.zeros(w_ih.shape[0], dtype=w_ih.dtype)
    return w_ih, w_hh, zeros, zeros


def _jax_initial(ps, attrs, name, batch, dtype):
    import jax.numpy as jnp

    shape = (attrs["num_layers"], batch, attrs["hidden_size"])
    return ps[name] if attrs["initial_state"] else jnp.zeros(shape, dtype=dtype)


def _jax_rnn(kind):
    def run(xs, ps, attrs):
        import jax
        import jax.numpy as jnp

        x = xs[0] if not attrs["batch_first"] else jnp.swapaxes(xs[0], 0, 1)
        batch = x.shape[1]
        h0 = _jax_initial(ps, attrs, "h0", batch, x.dtype)
        c0 = _jax_initial(ps, attrs, "c0", batch, x.dtype) if kind == "lstm" else None
        for layer in range(attrs["num_layers"]):
            w_ih, w_hh, b_ih, b_hh = _jax_layer_params(ps, attrs, layer)

            def gru_step(h, x_t):
                i_r, i_z, i_n = jnp.split(x_t @ w_ih.T + b_ih, 3, axis=-1)
                h_r, h_z, h_n = jnp.split(h @ w_hh.T + b_hh, 3, axis=-1)
                r, z = jax.nn.sigmoid(i_r + h_r), jax.nn.sigmoid(i_z + h_z)
                n = jnp.tanh(i_n + r * h_n)
                h = (1 - z) * n + z * h
                return h, h

            def lstm_step(carry, x_t):
                h, c = carry
                i, f, g, o = jnp.split(x_t @ w_ih.T + b_ih + h @ w_hh.T + b_hh, 4, axis=-1)
                c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
                h = jax.nn.sigmoid(o) * jnp.tanh(c)
                return (h, c), h

            if kind == "gru":
                _, x = jax.lax.scan(gru_step, h0[layer], x)
            else:
                _, x = jax.lax.scan(lstm_step, (h0[layer], c0[layer]), x)
        return x if not attrs["batch_first"] else jnp.swapaxes(x, 0, 1)

    return run


RECURRENCE = "each step's matmuls and gates round, and the next step carries it"

OPS = [
    OpDef(
        name=kind,
        attrs=('hidden_size', 'num_layers', 'bias', 'batch_first', 'initial_state'),
        infer=_infer,
        reference=reference,
        torch=torch_impl,
        jax=_jax_rnn(kind),
        accepts=_accepts,
        draw_attrs=_draw,
        params=_params(kind),
        numerics=numerics,
        buffers=frozenset({"h0", "c0"} if kind == "lstm" else {"h0"}),
        # On cuDNN's RNN kernels (torch 2.11, cuDNN 9.19), which refuse a non-contiguous hx by an
        # explicit check ("rnn: hx is not contiguous") and fail on non-contiguous weights inside their
        # path ("view size is not compatible with input tensor's size and stride"); the CPU kernels
        # accept both.
        cudnn_rnn=True,
    )
    for kind, reference, torch_impl, numerics in (
        ("gru", _gru_reference, _torch_gru, Numerics(sensitivity=4.0, forward_error=_gru_error, why={
            "sensitivity": RECURRENCE,
            "forward_error": "h = n + z * (h_prev - n) rounds a small h_prev away where z rounds to 1 (_gru_error)"})),
        ("lstm", _lstm_reference, _torch_lstm, Numerics(sensitivity=4.0, why={"sensitivity": RECURRENCE})),
    )
]
