"""Nested `torch.autocast(enabled=False)` regions: an op that autocast runs in lower precision (its
CPU and CUDA lists put matmul and linear there), run instead with autocast off on its operands
widened to float32, as training code keeps a sensitive product in float32 inside an autocast region.

Outside autocast (every backend but torch-compile-autocast-grad) the region changes nothing: the op
is its plain op, same reference and numerics. Under autocast its forward and its backward run in
float32 (pytorch#179804: a region like this was ignored in backward, whose matmuls ran in bfloat16).
"""

from __future__ import annotations

from dataclasses import replace

from fuzzer.ops import OpDef
from fuzzer.ops.matmul import OPS as MATMUL


def _autocast_off(plain):
    def autocast_off(xs, ps, attrs):
        import torch

        def widen(tensor):  # a lower-precision value from the autocast region; a float64 one stays
            return tensor.float() if tensor.dtype in (torch.bfloat16, torch.float16) else tensor

        with torch.autocast(xs[0].device.type, enabled=False):
            return plain([widen(x) for x in xs], {name: widen(value) for name, value in ps.items()}, attrs)

    return autocast_off


def _region(op: OpDef) -> OpDef:
    return replace(op, name=f"autocast_off_{op.name}", torch=_autocast_off(op.torch), exact_dtypes=(),
                   exact_reference=None, family="", named_only=True,
                   notes=f"{op.name} in a nested torch.autocast(enabled=False) region, operands widened to float32")


REGION_OPS = ("matmul", "linear")
OPS = [_region(op) for op in MATMUL if op.name in REGION_OPS]
