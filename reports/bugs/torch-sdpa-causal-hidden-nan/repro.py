"""F.scaled_dot_product_attention(..., is_causal=True) on CPU: a nan in a key that the causal mask hides
from every query poisons the visible rows when the math kernel runs. The math kernel adds -inf to hidden
scores (nan + -inf = nan) where the flash kernel drops them; which kernel runs depends on shapes (a value
head dim Ev != E, or rank-3 inputs, take the math kernel), so the same attention gives nan or the right answer.

Expected (and what the flash kernel gives): query 0 sees key 0 alone, so output row 0 = v[0].
Exit 1 while the bug is present, 0 once hidden keys cannot change the result.
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

torch.manual_seed(0)
L, S, E = 4, 9, 16
q, k = torch.randn(1, 1, L, E), torch.randn(1, 1, S, E)
k[0, 0, 5, 3] = float("nan")  # key 5 is hidden from every query: query i sees keys 0..i, i < 4
print("torch", torch.__version__)
bad = False
for label, value_dim, kernel in (("Ev == E, default kernel", E, None), ("Ev == E, MATH kernel", E, SDPBackend.MATH),
                                 ("Ev != E, default kernel", 33, None)):
    v = torch.randn(1, 1, S, value_dim)
    if kernel is None:
        row0 = F.scaled_dot_product_attention(q, k, v, is_causal=True)[0, 0, 0]
    else:
        with sdpa_kernel(kernel):
            row0 = F.scaled_dot_product_attention(q, k, v, is_causal=True)[0, 0, 0]
    ok = torch.allclose(row0, v[0, 0, 0], atol=1e-5)
    print(f"{label:24s} row 0 = {row0[:3].tolist()}  expected v[0] = {v[0, 0, 0, :3].tolist()}  {'ok' if ok else 'WRONG'}")
    bad |= not ok
sys.exit(1 if bad else 0)
