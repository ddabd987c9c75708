"""A tiny external-process backend: reads a fuzzer case folder, runs it with numpy, writes outputs.

    python numpy_runner.py [--bug] CASE_FOLDER

Implements a few ops only (declare them with `ops=` when registering). `--bug` makes relu
leak negative values, to see a finding. Uses numpy alone: no fuzzer import.
"""

import json
import sys
from pathlib import Path

import numpy as np


def run_node(op, xs, ps, attrs, bug):
    if op == "relu":
        # np.maximum keeps nan as nan; np.where(x > 0, x, 0) would turn it into 0, which the
        # fuzzer's special-values regime reports (relu(nan) is nan in torch, jax and the reference).
        return np.where(xs[0] > 0, xs[0], 0.1 * xs[0]) if bug else np.maximum(xs[0], 0.0)
    if op == "tanh":
        return np.tanh(xs[0])
    if op == "sigmoid":
        return 1.0 / (1.0 + np.exp(-xs[0]))
    if op == "add":
        return xs[0] + xs[1]
    if op == "mul":
        return xs[0] * xs[1]
    if op == "matmul":
        return np.matmul(xs[0], xs[1])
    if op == "linear":
        out = xs[0] @ ps["weight"].T
        return out + ps["bias"] if attrs["bias"] else out
    if op == "transpose":
        return np.swapaxes(xs[0], attrs["dim0"], attrs["dim1"])
    raise SystemExit(f"numpy_runner: op {op!r} is not implemented")


def main():
    folder, bug = Path(sys.argv[-1]), "--bug" in sys.argv[1:-1]  # the fuzzer appends the folder last
    case = json.loads((folder / "case.json").read_text())
    graph, dtype = case["graph"], np.dtype(case["dtype"])
    load = lambda name: np.load(folder / "arrays" / f"{name}.npy", allow_pickle=False)  # noqa: E731
    values = {name: load(name) for name in case["inputs"]}
    for node in graph["nodes"]:
        params = {p: load(f"{node['name']}.{p}") for p in case["params"].get(node["name"], [])}
        xs = [values[ref] for ref in node["inputs"]]
        values[node["name"]] = np.asarray(run_node(node["op"], xs, params, node["attrs"], bug), dtype=dtype)
    for index, name in enumerate(graph["outputs"]):
        np.save(folder / "outputs" / f"{index}.npy", values[name], allow_pickle=False)


if __name__ == "__main__":
    main()
