"""torch.compile on CUDA: an integer shift by a Python scalar at or past the dtype's width (x << 32 for int32,
x >> 65 for int64) returns garbage (int64: what look like memory addresses) where eager gives 0 or -1.
Exits 1 while the compiled results differ from eager's; 2 without a CUDA GPU."""
import sys

import torch

if not torch.cuda.is_available():
    print("This reproducer needs a CUDA GPU.", file=sys.stderr)
    sys.exit(2)
print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name())
bad = False
for dtype in (torch.int32, torch.int64, torch.int16, torch.uint8):
    x = torch.tensor([0, 1, -6, 8], device="cuda").to(dtype)
    bits = torch.iinfo(dtype).bits
    for name, f in ((f"x << {bits}", lambda x: x << bits), (f"x >> {bits + 1}", lambda x: x >> (bits + 1))):
        torch._dynamo.reset()
        eager, compiled = f(x).tolist(), torch.compile(f)(x).tolist()
        print(f"{str(dtype):12s} {name:9s} eager {eager}  compiled {compiled}")
        bad |= eager != compiled
sys.exit(1 if bad else 0)
