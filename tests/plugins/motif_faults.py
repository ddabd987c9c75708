"""A fault only one motif reaches (fuzzer/drawing/motifs.py), for tests/test_motifs.py.

- `fault-addmm-column-bias`: torch eager after a graph transformation that does what a fused addmm
  epilogue with an off-by-one row offset would: where an `add` reads a `matmul`'s (M, N) result
  (N > 1) and a graph input of shape (M, 1), a column bias, row i gets row i - 1's bias (the bias
  rolled by one row). Every other add is right: a row bias (1, N), a full one, a column bias added to
  anything but a matmul.
"""

from dataclasses import replace

import numpy as np

from fuzzer.ir import infer_shapes


def shift_column_bias(case):
    graph = case.graph
    shapes, producers = infer_shapes(graph), {node.name: node.op for node in graph.nodes}
    inputs = {spec.name for spec in graph.inputs}
    arrays = dict(case.arrays)
    for node in graph.nodes:
        if node.op != "add":
            continue
        for product, bias in (node.inputs, node.inputs[::-1]):
            rows_columns = tuple(shapes[product])
            if (producers.get(product) == "matmul" and bias in inputs and len(rows_columns) == 2 and rows_columns[1] > 1
                    and tuple(shapes[bias]) == (rows_columns[0], 1)):
                arrays[bias] = np.roll(arrays[bias], 1, axis=0)
    return replace(case, arrays=arrays)


def register(api):
    api.add_transformation("fault-addmm-column-bias", "torch-eager:cpu:float32", shift_column_bias)
