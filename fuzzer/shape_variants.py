"""Shape variants of a graph: the same structure at other input sizes, for dynamic-shape compilers.

A compiler that compiles with symbolic sizes (torch.compile(dynamic=True)) generates code that must
be right at every size; the sizes where such code goes wrong are those its guards and kernels switch
on: size 1 (dynamo specializes it), sizes off powers of two (tails of vectorized and tiled loops),
and sizes just past a block or a reduction threshold. A variant renames one size of the graph's
inputs, everywhere it occurs, so that dims that must agree (a matmul's inner dim, broadcast
partners) keep agreeing; a variant the shape rules refuse (an attribute encodes the old size, a
kernel no longer fits) is skipped. Variants are drawn from a seed, so a case source names one.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fuzzer.drawing.regimes import BATCH_THRESHOLD_DIMS
from fuzzer.errors import UserError
from fuzzer.ir import Graph, infer_shapes, param_shapes

# The sizes a size is renamed to, besides 1 and its neighbours: either side of the block sizes of
# vectorized CPU loops and Triton kernels and of the batch sizes where libraries switch algorithm.
THRESHOLD_SIZES = (17, *BATCH_THRESHOLD_DIMS)
# A variant may hold at most this many times the original's elements, or SMALL_CASE if more: it
# should cost about what its case costs (65,536 float64 values are half a megabyte).
GROWTH = 8
SMALL_CASE = 65_536
ATTEMPTS = 12


def _elements(graph: Graph) -> int:
    shapes = infer_shapes(graph)
    sizes = [shapes[spec.name] for spec in graph.inputs] + list(param_shapes(graph, shapes).values())
    return sum(int(np.prod(shape, dtype=np.int64)) for shape in sizes)


def renamed(graph: Graph, old: int, new: int) -> Graph:
    """`graph` with every input dim of size `old` given size `new`."""
    inputs = tuple(replace(spec, shape=tuple(new if dim == old else dim for dim in spec.shape)) for spec in graph.inputs)
    return replace(graph, inputs=inputs)


def shape_variant(graph: Graph, seed: int) -> Graph | None:
    """A valid variant of `graph` at other input sizes drawn from `seed`, or None where a few tries
    find none (every size is fixed by an attribute, or every renaming breaks a shape rule)."""
    sizes = sorted({dim for spec in graph.inputs for dim in spec.shape if dim > 0})
    if not sizes:
        return None
    limit = max(GROWTH * _elements(graph), SMALL_CASE)
    rng = np.random.default_rng([seed, 29])
    for _ in range(ATTEMPTS):
        old = int(rng.choice(sizes))
        choices = [size for size in (1, old + 1, max(old - 1, 1), 2 * old + 1, *THRESHOLD_SIZES) if size != old]
        variant = renamed(graph, old, int(rng.choice(choices)))
        try:
            if _elements(variant) <= limit:
                return variant
        except UserError:  # a shape rule refuses the new size
            continue
    return None
