"""torch.onnx (dynamo exporter, onnxscript torchlib) drops avg_pool2d's divisor_override.

F.avg_pool2d(x, 2, divisor_override=2) sums each 2x2 window and divides by 2; the exported
AveragePool divides by 4 (the window size), silently: onnxruntime then computes half the answer.
Exits 1 while the exported model differs from torch, 0 once fixed.
"""

import contextlib
import io
import sys

import numpy as np
try:
    import onnxruntime
    import onnxscript
except ImportError:
    print("This reproducer needs onnxruntime and onnxscript (pip install onnxruntime onnxscript).", file=sys.stderr)
    sys.exit(2)
import torch


class Pool(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.avg_pool2d(x, kernel_size=2, divisor_override=2)


x = torch.arange(1.0, 17.0).reshape(1, 1, 4, 4)
with contextlib.redirect_stdout(io.StringIO()):  # the exporter's progress lines
    program = torch.onnx.export(Pool(), (x,), dynamo=True)
print("exported:", [(n.op_type, [a.name for a in n.attribute]) for n in program.model_proto.graph.node])
session = onnxruntime.InferenceSession(program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
exported = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
expected = Pool()(x).numpy()
print("torch:      ", expected.ravel())
print("onnxruntime:", exported.ravel())
print(f"torch {torch.__version__}, onnxscript {onnxscript.__version__}, onnxruntime {onnxruntime.__version__}")
sys.exit(0 if np.allclose(exported, expected) else 1)
