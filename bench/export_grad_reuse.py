"""torch-export-grad's cost a case, exporting the joint for every case against reusing the one stored for
the structure (fuzzer/backends/torch_export_grad.py), over cases of one structure with other values.

    python bench/export_grad_reuse.py --cases 10

Prints one JSON object: seconds a case each way, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import time

from fuzzer.arrays import materialize
from fuzzer.backends import get_backend
from fuzzer.backends.torch_export_grad import JOINTS
from fuzzer.ir import Graph, Node, TensorSpec

GRAPH = Graph([TensorSpec("x", (4, 8))],
              [Node("n0", "linear", ["x"], {"out_features": 6, "bias": True}), Node("n1", "tanh", ["n0"], {}),
               Node("n2", "layer_norm", ["n1"], {"normalized_shape": [6], "eps": 1e-5, "affine": True})], ["n2"])


def seconds_a_case(backend, cases: int, reuse: bool) -> float:
    start = time.perf_counter()
    for seed in range(cases):
        if not reuse:
            JOINTS.entries.clear()
        backend.run(materialize(GRAPH, seed))
    return (time.perf_counter() - start) / cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10)
    cases = parser.parse_args().cases
    backend = get_backend("torch-export-grad:cpu:float32")
    backend.run(materialize(GRAPH, cases))  # imports and first-export costs out of both figures
    each, reused = seconds_a_case(backend, cases, reuse=False), seconds_a_case(backend, cases, reuse=True)
    print(json.dumps({"export_each_s": round(each, 3), "reuse_s": round(reused, 3), "ratio": round(each / reused, 1)}))


if __name__ == "__main__":
    main()
