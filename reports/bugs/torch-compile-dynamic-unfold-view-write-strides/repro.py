"""torch.compile(dynamic=True): an input's view returned after an in-place write, through a view op of symbolic size, is
rebuilt by AOTAutograd as input.as_strided() with the strides of inductor's dense output: out of bounds (unfold) or the
wrong elements (step-2 slice; broadcast_to + diagonal). aot_eager is right. CPU. Exits 1 while it differs from eager."""
import sys

import torch


def unfold(x, y):  # the campaign's crash: add_ through x.view(numel), unfold's overlapping windows returned
    n = x.view(x.numel()); w = n.unfold(0, 3, 1); n.add_(y); return w
def step2(x, y):  # the same mechanism, silent: a gapped view
    n = x.view(x.numel()); n.add_(y); return n[::2]
def diag(x, y):  # the campaign's mismatch
    x.copy_(y); return x.broadcast_to([3, x.shape[1], x.shape[2]]).diagonal(offset=1, dim1=0, dim2=2)
print("torch", torch.__version__, "(CPU)")
bad = False
for f, xs, ys in ((unfold, (2, 3), 1), (step2, (2, 4), 1), (diag, (1, 2, 5), 5)):
    args = lambda: (torch.arange(float(torch.Size(xs).numel())).view(xs), torch.arange(1.0, ys + 1))
    want, _ = f(*args()), torch._dynamo.reset()
    try:
        got = torch.compile(f, fullgraph=True, dynamic=True)(*args()); bad |= not torch.equal(got, want); got = got.tolist()
    except RuntimeError as error:
        bad, got = True, f"raised {str(error).splitlines()[0]}"
    print(f"{f.__name__:6s} eager {want.tolist()}\n       compiled {got}")
sys.exit(1 if bad else 0)
