"""torch.compile raises on masked_fill_ through a transposed view of an input, then .view() of that input:
AOTAutograd's functionalization gives the updated input the transposed strides (1, 2), and the view of a
[2, 5] tensor as (10,) fails. Eager runs it (the input itself stays contiguous). Exits 1 while it raises."""
import sys

import torch


def f(x):
    t = x.swapaxes(0, 1)
    t.masked_fill_(t > 0, -1.0)  # add_, mul_, zero_, fill_ through the same view compile fine
    return x.view(10)


print("torch", torch.__version__)
print("eager", f(torch.zeros(2, 5)).tolist())
for backend in ("eager", "aot_eager", "inductor"):
    torch._dynamo.reset()
    try:
        torch.compile(f, backend=backend, fullgraph=True)(torch.zeros(2, 5))
        print(f"{backend:10s} ok")
    except Exception as error:  # BackendCompilerFailed
        print(f"{backend:10s} raised: {str(error).strip().splitlines()[1][:120]}")
        sys.exit(1)
