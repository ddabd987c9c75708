"""torch.compile (inductor) does not wrap -x and abs(x) of the dtype's minimum integer as eager does (eager:
-INT_MIN is INT_MIN). CPU int32: (-x) <= 0 is False compiled, True eager; CUDA int16: (-x) // -3 and
(-x).prod(0) are computed on +32768. Exits 1 while compiled differs from eager, 0 once fixed."""
import sys

import torch

gpu = torch.cuda.is_available()
print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name() if gpu else "(no GPU)")
bad = False
for device, dtype in [("cpu", torch.int32)] + ([("cuda", torch.int16)] if gpu else []):
    x = torch.tensor([torch.iinfo(dtype).min], dtype=dtype, device=device)
    for name, g in (("-x", torch.neg), ("x.abs()", torch.abs)):
        f = lambda x, g=g: (g(x) // -3, g(x) <= 0, g(x).prod(0))  # prod of an int: an int64 result
        torch._dynamo.reset()
        eager, compiled = ([t.tolist() for t in h(x)] for h in (f, torch.compile(f)))
        print(f"{device:4s} {str(dtype):11s} {name:8s} eager {eager}  compiled {compiled}")
        bad |= eager != compiled
sys.exit(1 if bad else 0)
