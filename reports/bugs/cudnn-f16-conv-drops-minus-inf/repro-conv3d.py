"""conv3d on torch-eager:cuda:float16 (torch eager, op by op), graph conv3d: 1 entries differ from a non-finite reference, e.g. at [0, 0, 0, 0, 0]: 0.0 where the reference is -inf. Exit 1 while the bug is there, 0 once fixed, 2 where the device it needs is missing."""
import sys

import numpy as np
import torch
import torch.nn.functional as F


if not torch.cuda.is_available():
    print('This reproducer needs a CUDA GPU, and torch sees none here.', file=sys.stderr)
    sys.exit(2)

def graph(x0, n3_weight):
    return [F.conv3d(x0, n3_weight, None, [2, 2, 2], [0, 0, 0], [1, 1, 1], 1)]


print(f'torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, GPU {(torch.cuda.get_device_name() if torch.cuda.is_available() else None)}')
x0 = torch.full((1, 4, 1, 1, 1), 0.0)
x0[0, 1, 0, 0, 0] = np.inf
n3_weight = torch.full((1, 4, 1, 1, 1), 0.0)
n3_weight[0, 1, 0, 0, 0] = -1.0
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
with torch.no_grad():
    outputs = [o.detach().to('cpu', torch.float64).numpy() for o in graph(*[torch.as_tensor(a).to('cuda', torch.float16) for a in (x0, n3_weight,)])]
expected = [o.numpy() for o in graph(*[torch.as_tensor(a, dtype=torch.float64) for a in (x0, n3_weight,)])]  # float64 reference: torch on the CPU
for got, want, allowed in zip(outputs, expected, [0.0302]):  # allowed: the largest error of a correct float16 implementation here (the fuzzer's tolerance model)
    if got.shape != want.shape:
        raise SystemExit(f'MISMATCH: shape {got.shape}, float64 reference {want.shape}')
    wrong = ~np.isclose(got, want, rtol=0, atol=allowed, equal_nan=True)  # inf == inf, nan == nan
    if wrong.any():
        at = np.unravel_index(np.argmax(np.nan_to_num(abs(np.subtract(got, want, where=wrong, out=np.zeros(got.shape))), nan=np.inf)), got.shape)
        raise SystemExit(f'MISMATCH: {wrong.sum()} of {wrong.size} entries differ, worst at {[int(k) for k in at]}: got {float(got[at])}, float64 reference {float(want[at])} (allowed error {allowed:.3g})')
print('OK: every entry within the allowed error of the float64 reference')
