"""torch.compile on CUDA: the backward of conv_transpose2d (65 input channels, 1 output channel, contiguous) fails
assert_size_stride on convolution_backward. Exits 1 while it raises, 0 when the gradients match eager's, 2 without a GPU."""
import sys

import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    print("This reproducer needs a CUDA GPU.", file=sys.stderr)
    sys.exit(2)
print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name())
f = lambda x, w: F.conv_transpose2d(x, w, None, stride=2)  # noqa: E731
x = torch.randn(1, 65, 2, 2, device="cuda", requires_grad=True)
w = torch.randn(65, 1, 1, 1, device="cuda", requires_grad=True)
g = torch.randn(1, 1, 3, 3, device="cuda")
eager = torch.autograd.grad(f(x, w), (x, w), g)
try:
    compiled = torch.autograd.grad(torch.compile(f)(x, w), (x, w), g)
except AssertionError as error:
    print("compiled backward raised:", str(error).splitlines()[0])
    sys.exit(1)
print("gradients match eager:", all(torch.allclose(a, b, atol=1e-4) for a, b in zip(eager, compiled)))
sys.exit(0)
