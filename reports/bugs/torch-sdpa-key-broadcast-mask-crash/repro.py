"""torch CUDA float32 scaled_dot_product_attention with an attn_mask of shape (1, 1), which
broadcasts to (N, H, L, S) as the documentation allows, raises "(*bias): last dimension must be
contiguous": the default dispatch picks the memory-efficient kernel and hands it the expanded,
stride-0 mask. A (1, S) mask, float16, and the math backend are fine. Exit 1 while the bug is
there, 0 once fixed, 2 without a CUDA GPU."""
import sys

import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    print("This reproducer needs a CUDA GPU, and torch sees none here.", file=sys.stderr)
    sys.exit(2)
q = torch.randn(4, 7, 1, 16, device="cuda")
k = torch.randn(4, 7, 5, 16, device="cuda")
v = torch.randn(4, 7, 5, 4, device="cuda")
mask = torch.zeros(1, 1, device="cuda")  # an additive mask of zeros: the answer is sdpa without a mask
print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
try:
    got = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
except RuntimeError as exc:
    print(f"RuntimeError: {exc}")
    sys.exit(1)
want = F.scaled_dot_product_attention(q, k, v)
sys.exit(0 if torch.allclose(got, want, atol=1e-5) else 1)
