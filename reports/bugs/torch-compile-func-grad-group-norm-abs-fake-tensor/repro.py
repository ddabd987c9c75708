"""torch.compile cannot trace torch.func.grad of a gradient norm over torch.func.vjp when the function is
group_norm followed by abs (a double backward): it raises "Please convert all Tensors to FakeTensors
first ... Found in aten.to.dtype_layout(tensor(..., device='meta' ...". Eager computes it; group_norm
alone, layer_norm then abs, and relu in place of abs compile.
Exits 1 while torch.compile raises, 0 once it computes what eager does."""
import sys

import torch
import torch.nn.functional as F

def grad_norm(x):
    out, vjp = torch.func.vjp(lambda x: F.group_norm(x, 1).abs(), x)
    (g,) = vjp(torch.ones_like(out))
    return (g * g).sum() / 2

print("torch", torch.__version__)
x = torch.randn(1, 1, 4, 7, generator=torch.Generator().manual_seed(0))
eager = torch.func.grad(grad_norm)(x)
try:
    compiled = torch.compile(torch.func.grad(grad_norm), fullgraph=True)(x)
except Exception as exc:
    print("torch.compile raised:", type(exc).__name__, str(exc).split("Found in")[-1][:90].strip())
    sys.exit(1)
sys.exit(0 if torch.allclose(eager, compiled, atol=1e-4) else 1)
