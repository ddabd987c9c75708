"""torch.compile (inductor, CPU) max_pool2d of a window holding several NaNs: eager's CPU kernel takes the
*last* NaN as the window's max ((val > maxval) || isnan(val)), inductor's lowering the *first*, so the
indices of return_indices=True differ and the backward routes the gradient to another element. The output
(NaN) agrees. Exits 1 while they differ."""
import sys

import torch

print("torch", torch.__version__)
x = torch.tensor([[[[float("nan")], [0.6], [float("nan")], [2.1]]]])  # N, C, H=4, W=1: one window of 3 rows


def pool(t):
    return torch.nn.functional.max_pool2d(t, kernel_size=(3, 1), stride=(4, 1), ceil_mode=True, return_indices=True)


eager_out, eager_index = pool(x)
compiled_out, compiled_index = torch.compile(pool)(x)
grads = []
for fn in (lambda t: pool(t)[0], torch.compile(lambda t: pool(t)[0])):
    t = x.clone().requires_grad_()
    fn(t).sum().backward()
    grads.append(t.grad.flatten().tolist())
print("output  eager", eager_out.flatten().tolist(), "compiled", compiled_out.flatten().tolist())
print("indices eager", eager_index.flatten().tolist(), "compiled", compiled_index.flatten().tolist())
print("grad    eager", grads[0], "compiled", grads[1])
sys.exit(1 if eager_index.tolist() != compiled_index.tolist() or grads[0] != grads[1] else 0)
