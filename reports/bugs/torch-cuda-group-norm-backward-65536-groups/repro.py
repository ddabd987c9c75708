"""F.group_norm's backward on CUDA fails with "CUDA error: invalid argument" from 65536 groups on: the
forward runs, and 65535 groups run both ways. GroupNormBackwardKernelImplInternal launches
ComputeBackwardFusedParamsCUDAKernel on a grid of dim3(N, G), and a grid's y dimension is at most 65535.
Exits 1 while the backward fails, 0 once it runs, 2 without a CUDA GPU."""
import sys

import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    print("needs a CUDA GPU", file=sys.stderr)
    sys.exit(2)
print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name())
for groups in (65535, 65536):
    x = torch.randn(1, groups, 2, device="cuda", requires_grad=True)
    y = F.group_norm(x, groups)
    try:
        y.sum().backward()
        torch.cuda.synchronize()
        print(f"{groups} groups: backward ran")
    except Exception as exc:  # torch.AcceleratorError (a RuntimeError)
        print(f"{groups} groups: backward failed: {type(exc).__name__}: {str(exc).splitlines()[0]}")
        sys.exit(1)
sys.exit(0)
