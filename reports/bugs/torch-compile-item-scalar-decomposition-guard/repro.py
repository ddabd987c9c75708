"""torch.compile(fullgraph=True): a scalar read with .item() becomes an unbacked float, and the decompositions of
sub (alpha) and lerp (weight) branch on it in Python (`if alpha != 1`, `weight >= 0.5`):
GuardOnDataDependentSymNode, so the step does not compile. add_ with the same alpha compiles.
Exits 1 while either fails to compile, 0 once both do."""
import sys

import torch

steps = {"sub_": lambda x, y, s: x.sub_(y, alpha=s.item()), "lerp_": lambda x, y, s: x.lerp_(y, s.item()),
         "add_": lambda x, y, s: x.add_(y, alpha=s.item())}
print("torch", torch.__version__)
bad = False
for name, step in steps.items():
    x, y, s = torch.tensor([2.0]), torch.tensor([3.0]), torch.tensor(0.3)
    want = step(x.clone(), y, s)
    try:
        got = torch.compile(step, fullgraph=True)(x.clone(), y, s)
        print(f"{name}: compiled {got.tolist()}, eager {want.tolist()}")
    except Exception as exc:  # torch._dynamo.exc.BackendCompilerFailed
        print(f"{name}: does not compile: {str(exc).splitlines()[1][:120]}")
        bad |= name != "add_"
sys.exit(1 if bad else 0)
