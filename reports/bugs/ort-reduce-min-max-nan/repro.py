"""onnxruntime CPU: ReduceMin / ReduceMax keep a nan only when it comes first in the reduced run.

numpy, torch (amin/amax, min/max over a dim) and IEEE's minimum/maximum give nan for a run
holding a nan; ORT gives the min/max of the other entries unless the nan is first. Exits 1
while that is so, 0 once fixed.
"""

import sys

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

x = np.array([[1.0, np.nan], [np.nan, 2.0], [0.0, 3.0]], np.float32)  # columns: nan second, nan first
failed = False
for op, reference in (("ReduceMin", np.min), ("ReduceMax", np.max)):
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y = session.run(None, {"x": x})[0]
    print(f"{op} over axis 0: onnxruntime {y}, numpy {reference(x, axis=0)}")
    failed |= not np.array_equal(y, reference(x, axis=0), equal_nan=True)

print(f"onnxruntime {onnxruntime.__version__}, numpy {np.__version__}")
sys.exit(1 if failed else 0)
