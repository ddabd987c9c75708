"""onnxruntime CPU: GRU and LSTM turn a nan in the input sequence into finite outputs.

A nan in x at step t makes every gate nan from step t on, so Y[t:] must be nan (torch, numpy and
the ONNX spec's equations agree). Exits 1 while ORT's output is finite there, 0 once fixed.
"""

import sys

import numpy as np
try:
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    print("This reproducer needs onnx and onnxruntime (pip install onnx onnxruntime).", file=sys.stderr)
    sys.exit(2)

rng = np.random.default_rng(0)
steps, batch, features, hidden = 3, 1, 2, 3
x = rng.standard_normal((steps, batch, features)).astype(np.float32)
x[1, 0, 0] = np.nan  # one nan, at step 1

failed = False
for op, gates in (("GRU", 3), ("LSTM", 4)):
    weights = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.5, name)
               for name, shape in (("W", (1, gates * hidden, features)), ("R", (1, gates * hidden, hidden)),
                                   ("B", (1, 2 * gates * hidden)))]
    node = helper.make_node(op, ["x", "W", "R", "B"], ["y"], hidden_size=hidden)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y = session.run(None, {"x": x})[0]  # (steps, directions, batch, hidden)
    print(f"{op}: Y at steps 1-2 (expected all nan):\n{y[1:, 0, 0]}")
    failed |= not np.isnan(y[1:]).all()

print(f"onnxruntime {onnxruntime.__version__}, numpy {np.__version__}")
sys.exit(1 if failed else 0)
