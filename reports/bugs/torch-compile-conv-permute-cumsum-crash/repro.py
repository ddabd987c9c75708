"""torch.compile (inductor) crashes on conv2d (stride (1, 2)) -> permute -> cumsum over the 129-long dim.

Eager gives the result; the compiled function raises InductorError: TypeError: list indices must be
integers or slices, not NoneType. Exit 1 while compiling raises (or the results differ), 0 once fixed,
2 on a machine without CUDA (the CPU inductor path is right, so a CPU run proves nothing).
"""
import sys

import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    print("This bug is in inductor's CUDA (Triton) code generation; this machine has no CUDA device.")
    sys.exit(2)
device = "cuda"


def f(x, weight, bias):
    y = F.conv2d(x, weight, bias, stride=(1, 2))  # (1, 2, 129, 2)
    return torch.cumsum(y.permute(0, 2, 3, 1), dim=-3)  # cumsum along the 129-long dim


torch.manual_seed(0)
x = torch.randn(1, 1, 129, 3, device=device)
weight, bias = torch.randn(2, 1, 1, 1, device=device), torch.randn(2, device=device)
print("torch", torch.__version__, "on", device)
expected = f(x, weight, bias)
try:
    actual = torch.compile(f)(x, weight, bias)
except Exception as exc:  # noqa: BLE001 - any compile failure is the bug
    print(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
    sys.exit(1)
print("max |compiled - eager|:", (actual - expected).abs().max().item())
sys.exit(0 if torch.allclose(actual, expected, rtol=1e-4, atol=1e-4) else 1)
