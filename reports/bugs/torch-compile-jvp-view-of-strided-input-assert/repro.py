"""torch.compile of torch.func.jvp of a slice of an input whose storage has gaps (x[::2]) fails to compile
(torch 2.15: INTERNAL ASSERT "!this_view_meta->has_fw_view()"), and leaves the process unable to run any
torch.func.jvp again, eager included ("Nested forward mode AD is not supported at the moment").
Exits 1 while either happens, 0 once fixed."""
import sys

import torch

print("torch", torch.__version__)
x, t = torch.randn(6, 2)[::2], torch.ones(3, 2)  # x: strides (4, 1), not dense
failed = False
try:
    torch.compile(lambda a, t: torch.func.jvp(lambda a: a[1:], (a,), (t,)), fullgraph=True)(x, t)
    print("compiled jvp: ok")
except Exception as e:
    failed = True
    print("compiled jvp:", type(e).__name__, "-", next(line for line in str(e).splitlines() if "Error" in line)[:160])
try:
    torch.func.jvp(torch.sin, (torch.ones(2),), (torch.ones(2),))
    print("eager torch.func.jvp afterwards: ok")
except RuntimeError as e:
    failed = True
    print("eager torch.func.jvp afterwards:", e)
sys.exit(1 if failed else 0)
