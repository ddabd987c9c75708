"""Memory layouts of graph inputs: the same logical values, stored another way.

Layout is a torch property: a torch backend receives an input marked `transposed`,
`strided`, `channels_last` or `expanded` as a tensor with those strides, and every
kernel must give the same answer as for a contiguous copy (seed bug 1 was statistics
taken over memory order). jax arrays have no strides, so jax backends and the float64
reference receive the plain values; a layout bug therefore shows up as a torch backend
disagreeing with all of them.

An `expanded` input is a stride-0 view along dim 0: its values must repeat along that
dim, which `fuzzer.arrays.materialize` guarantees when it fills the input.
"""

from __future__ import annotations

CONTIGUOUS = "contiguous"
LAYOUTS = (CONTIGUOUS, "transposed", "strided", "channels_last", "expanded")


def _transposed_dims(shape: tuple[int, ...]) -> list[int]:
    """The two dims a `transposed` layout swaps in memory: the last two of size > 1."""
    return [d for d in range(len(shape)) if shape[d] > 1][-2:]


def layouts_for(shape: tuple[int, ...]) -> tuple[str, ...]:
    """The non-default layouts that change the strides of a tensor of this shape."""
    choices = ["strided"]
    if len(_transposed_dims(shape)) == 2:
        choices.append("transposed")
    if len(shape) == 4 and shape[1] > 1 and shape[2] * shape[3] > 1:
        choices.append("channels_last")
    if len(shape) >= 2 and shape[0] > 1:
        choices.append("expanded")
    return tuple(choices)


def conform_values(values, layout: str):
    """The values an input stored in `layout` can hold: an expanded (stride-0 along dim 0)
    tensor repeats its first row, so that row is repeated; other layouts hold any values."""
    import numpy as np

    if layout == "expanded" and np.ndim(values) >= 1:
        return np.broadcast_to(values[:1], np.shape(values)).copy()
    return values


def layout_source(layout: str, shape: tuple[int, ...], name: str) -> str:
    """A torch expression that re-stores the contiguous tensor `name` of this shape in `layout`
    (values unchanged). Reproducers print it; `apply_layout` runs it."""
    if layout == CONTIGUOUS or layout not in layouts_for(tuple(shape)):
        return name  # e.g. a shrunk input whose dims no longer allow the layout
    if layout == "channels_last":
        return f"{name}.contiguous(memory_format=torch.channels_last)"
    if layout == "transposed":
        a, b = _transposed_dims(shape)
        return f"{name}.transpose({a}, {b}).contiguous().transpose({a}, {b})"
    if layout == "expanded":
        return f"{name}[:1].expand({name}.shape)"
    if layout == "strided":
        # Every other element of a buffer twice as long; the gaps hold NaN, so a kernel that
        # reads the storage as dense picks them up.
        return f"torch.stack([{name}, torch.full_like({name}, float('nan'))], dim=-1)[..., 0]"
    raise ValueError(f"unknown layout {layout!r}")


def _gap_value(tensor):
    """What fills the gaps of a strided input: NaN (a complex one's nan + 0j), or in an integer tensor its dtype's
    minimum (a bool's True)."""
    import torch

    if tensor.is_floating_point() or tensor.is_complex():
        return float("nan")
    return True if tensor.dtype == torch.bool else torch.iinfo(tensor.dtype).min


def apply_layout(tensor, layout: str):
    """`tensor` (contiguous) re-stored in `layout`; values unchanged."""
    import torch

    shape = tuple(tensor.shape)
    if layout == CONTIGUOUS or layout not in layouts_for(shape):
        return tensor
    if layout == "channels_last":
        return tensor.contiguous(memory_format=torch.channels_last)
    if layout == "transposed":
        a, b = _transposed_dims(shape)
        return tensor.transpose(a, b).contiguous().transpose(a, b)
    if layout == "expanded":
        return tensor[:1].expand(shape)
    if layout == "strided":
        return torch.stack([tensor, torch.full_like(tensor, _gap_value(tensor))], dim=-1)[..., 0]
    raise ValueError(f"unknown layout {layout!r}")
