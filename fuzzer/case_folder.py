"""The on-disk case protocol: one folder with case.json, arrays/*.npy in and outputs/*.npy out.

External commands (docs/external-backends.md) and backends running in another Python
environment (fuzzer/running/env_worker.py) both speak it. Only numpy and the standard library
are used: the worker side runs in interpreters that have nothing else of ours.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from fuzzer.arrays import from_npy_bytes, to_npy_bytes
from fuzzer.errors import UserError
from fuzzer.ir import NAME_PATTERN, Case, Graph, split_arrays

CASE_FILE = "case.json"


def write_case(case: Case, root: Path, dtype: str = "float64") -> None:
    """Write `case` into the empty folder `root`, its arrays cast to `dtype`."""
    inputs, params = split_arrays(case)
    (root / "arrays").mkdir()
    (root / "outputs").mkdir()
    for name, array in case.arrays.items():
        # Array names become file names: only "<input>" or "<node>.<param>" identifiers, never a path.
        if not all(NAME_PATTERN.fullmatch(part) for part in name.split(".", 1)):
            raise UserError(f"Array name {name!r} is not an identifier (or NODE.PARAM); refusing to write it to a case folder.")
        (root / "arrays" / f"{name}.npy").write_bytes(to_npy_bytes(array.astype(dtype)))
    description = {
        "graph": case.graph.to_dict(),
        "dtype": dtype,
        "inputs": list(inputs),
        "params": {node: sorted(names) for node, names in params.items()},
        "seed": case.seed,
    }
    (root / CASE_FILE).write_text(json.dumps(description, sort_keys=True))


def read_case(root: Path) -> Case:
    """The case a folder written by `write_case` holds (never unpickles)."""
    description = json.loads((root / CASE_FILE).read_text())
    arrays = {
        path.stem: from_npy_bytes(path.read_bytes(), f"array {path.stem}")
        for path in sorted((root / "arrays").glob("*.npy"))
    }
    return Case(Graph.from_dict(description["graph"]), arrays, seed=description.get("seed", 0))


def write_outputs(outputs: list[np.ndarray], root: Path) -> None:
    for index, array in enumerate(outputs):
        (root / "outputs" / f"{index}.npy").write_bytes(to_npy_bytes(np.asarray(array)))


def read_outputs(root: Path, count: int, producer: str) -> list[np.ndarray]:
    """outputs/0.npy .. outputs/{count-1}.npy; a missing file is the producer's failure."""
    outputs = []
    for index in range(count):
        path = root / "outputs" / f"{index}.npy"
        if not path.exists():
            raise MissingOutputError(f"{producer} wrote no outputs/{index}.npy")
        outputs.append(from_npy_bytes(path.read_bytes(), f"output {index} of {producer}"))
    return outputs


class MissingOutputError(RuntimeError):
    """The command or worker reported success but left an output out (a crash finding)."""
