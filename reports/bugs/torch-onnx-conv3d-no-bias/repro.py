"""torch.onnx (dynamo exporter, onnxscript torchlib) gives conv3d without bias a zero bias of shape
[out_channels, 2]: onnxruntime refuses to run it ("bias must be a 1D tensor of size output_channels").

torchlib's aten_conv3d builds the bias shape as Concat(Shape(weight)[0:1], [2]) where conv1d/conv2d
use Expand(..., [1]). The exporter's own optimizer (optimize=True, the default) folds the zero bias
away and hides it; with optimize=False, or whenever the constant is not folded, the model is invalid.
Exits 1 while the exported model cannot run, 0 once fixed.
"""

import contextlib
import io
import sys

import numpy as np
import onnxruntime
import onnxscript
import torch


class Conv3d(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 3, 2, 2, 2))

    def forward(self, x):
        return torch.nn.functional.conv3d(x, self.weight)  # bias=None


model, x = Conv3d(), torch.randn(1, 3, 4, 4, 4)
with contextlib.redirect_stdout(io.StringIO()):  # the exporter's progress lines
    program = torch.onnx.export(model, (x,), dynamo=True, optimize=False)
print(f"torch {torch.__version__}, onnxscript {onnxscript.__version__}, onnxruntime {onnxruntime.__version__}")
session = onnxruntime.InferenceSession(program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
exported = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]  # raises while the bug is there
sys.exit(0 if np.allclose(exported, model(x).detach().numpy(), atol=1e-5) else 1)
