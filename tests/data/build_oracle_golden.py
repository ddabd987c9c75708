"""Builds the oracle's golden set, tests/data/oracle_golden/: campaign cases, what real backends
gave on them, and what the oracle said, so that a change of the oracle's code that should not
change its behaviour is checked by tests/test_oracle_golden.py (which re-judges every stored case
with the oracle alone: no framework runs).

    PYTHONPATH=. .venv/bin/python tests/data/build_oracle_golden.py           # rewrites the set
    PYTHONPATH=. .venv/bin/python tests/data/build_oracle_golden.py single    # one part of it
    PYTHONPATH=. .venv/bin/python tests/data/build_oracle_golden.py --rejudge # what the oracle says now of the stored outputs

The set is stored in parts (PARTS: a name, its regimes and graphs), which separate processes can
build side by side: PART.json.gz and PART.npz each.

Rebuild it only when the oracle's behaviour changes on purpose, and say so in the commit.

What it stores, with a fixed seed: cases drawn by the campaign's generator (fuzzer/drawing/generate.py)
in every regime of fuzzer/drawing/regimes.py, kept where they are small (a few large ones per large
regime; none of the big-contraction regimes, whose every dim is 128 .. 512: a megabyte a case),
each run on the cheap backends of every float dtype (torch-eager in float32, float16, bfloat16
and float64, numpy-ref in float32 and float16, jax-eager in float32 on a share), and a
few hand-made edge cases (edge_cases: one defines nothing, so the case is `invalid`). A share
of the cases also gets a planted faulty output (one entry scaled, a nan or inf put in, the output
zeroed or made constant, an output dropped), so that every verdict is represented. Per case:
the reference's scales and sensitivities, and per dtype and output the allowance, the rounding
noise and a digest of the honest models (r_d, the judged and the defined non-finite masks);
per backend: the verdict judged lazily (at the floor first, as check.check_case does) and in
full, with its error, allowance, output and detail, and its signature. Floats are stored as
float.hex() strings (exact), in gzipped JSON; arrays in one .npz a part (read with allow_pickle=False).
"""

from __future__ import annotations

import collections
import gzip
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from fuzzer import oracle
from fuzzer.arrays import materialize, regime_profiles
from fuzzer.backends import parse_backend_list
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.drawing.regimes import BY_NAME, REGIMES, Regime
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.running.execute import OK, run_backend
from fuzzer.running.pipeline import campaign_ops, seed_for

FOLDER = Path(__file__).parent / "oracle_golden"
SEED = 49
BACKENDS = ("torch-eager:cpu:float32", "torch-eager:cpu:float16", "torch-eager:cpu:bfloat16", "torch-eager:cpu:float64",
            "numpy-ref:cpu:float32", "numpy-ref:cpu:float16")
SOMETIMES = ("jax-eager:cpu:float32",)  # run on every JAX_EVERY-th case (its first call of a shape compiles)
JAX_EVERY = 8
SMALL_GRAPHS = 330  # graphs drawn in the small regime (two input sets each), in three parts
OTHER_GRAPHS = 25  # ... and in each other regime
SMALL_CASE = 800  # stored entries (arrays and outputs) of a case kept in any number
LARGE_CASE = 6_000  # ... and of one of the few kept per regime beyond that
LARGE_PER_REGIME = 2
PLANTED_SHARE = 0.3
PLANTS = ("scale", "nan", "inf", "zeros", "constant", "drop")


def hexed(value: float) -> str:
    return float(value).hex()


def digest(*arrays) -> str:
    """The arrays' dtypes, shapes and bytes, hashed."""
    hashed = hashlib.sha256()
    for array in map(np.ascontiguousarray, arrays):
        hashed.update(str(array.dtype).encode() + str(array.shape).encode() + array.tobytes())
    return hashed.hexdigest()[:16]


def judged_reference(case: Case, backends: list[tuple[str, str, list[np.ndarray] | None, str]]) -> dict:
    """What the oracle says of `case` and the backends' (name, dtype, outputs or None, error)."""
    reference = oracle.compute_reference(case, {dtype for _, dtype, _, _ in backends})
    lazy = [oracle.judge_outputs(name, dtype, outputs, reference, at_floor=True)
            for name, dtype, outputs, _ in backends if outputs is not None]
    models_for_lazy = reference.models_computed is not None
    full = [oracle.judge_outputs(name, dtype, outputs, reference)
            for name, dtype, outputs, _ in backends if outputs is not None]
    culprit = case.graph.nodes[-1].op
    verdicts, judged = [], iter(zip(lazy, full))
    for name, dtype, outputs, error in backends:
        if outputs is None:
            verdicts.append({"backend": name, "crash": oracle.signature("crash", name, culprit, error)})
            continue
        entry = {"backend": name}
        for path, verdict in zip(("lazy", "full"), next(judged)):
            entry[path] = {"verdict": verdict.verdict, "max_error": hexed(verdict.max_error), "allowed": hexed(verdict.allowed),
                           "output": verdict.output, "detail": verdict.detail, "at_floor": verdict.at_floor,
                           "signature": oracle.signature(verdict.verdict, name, culprit)}
        verdicts.append(entry)
    models = {}
    for dtype in sorted(reference.same_dtype):
        models[dtype] = [{
            "allowed": hexed(oracle.allowed_error(reference, index, dtype)),
            "floor": hexed(oracle.floor_allowance(reference, index, dtype)),
            "rounding_noise": hexed(reference.rounding_noise[dtype][index]),
            "models": digest(np.asarray(reference.same_dtype[dtype][index], dtype=np.float64),
                             reference.judged[dtype][index], reference.defined_nonfinite[dtype][index]),
        } for index in range(len(reference.outputs))]
    return {"scales": [hexed(s) for s in reference.scales], "sensitivities": [hexed(s) for s in reference.sensitivities],
            "outputs": [digest(r64) for r64 in reference.outputs], "models_for_lazy": models_for_lazy,
            "defines_anything": reference.defines_anything, "backends": verdicts, "models": models}


def planted(outputs: list[np.ndarray], kind: str, rng: np.random.Generator) -> list[np.ndarray] | None:
    """A copy of `outputs` with one fault of `kind` in its first output; None where it has no finite entry."""
    outputs = [np.array(y, copy=True) for y in outputs]
    y = outputs[0]
    finite = np.flatnonzero(np.isfinite(y))
    if kind == "drop":
        return outputs[:-1] if len(outputs) > 1 else [y.reshape(-1)[:0]]
    if not finite.size:
        return None
    at = np.unravel_index(finite[rng.integers(finite.size)], y.shape) if y.ndim else ()
    if kind == "scale":
        y[at] = y[at] * rng.choice([1.0 + 1e-3, 1.0 + 1e-2, 1.5, -3.0]) + (0.0 if y[at] != 0 else 1.0)
    elif kind == "nan":
        y[at] = np.nan
    elif kind == "inf":
        y[at] = np.inf
    elif kind == "zeros":
        y[...] = 0
    else:  # constant
        y[...] = y[at]
    return outputs


def stored(array: np.ndarray) -> np.ndarray:
    """`array` as the .npz can hold it, exactly: bfloat16 (ml_dtypes, no numpy dtype) as float32."""
    array = np.asarray(array)
    return array.astype(np.float32) if array.dtype.name == "bfloat16" else array


def edge_cases() -> list[Case]:
    """Cases campaigns draw rarely: one no dtype defines anything of (float64 overflows where
    longdouble does not: `invalid`), computed zeros into ops that follow their sign, and values
    every narrow dtype flushes."""
    def case(nodes: list[Node], outputs: list[str], arrays: dict) -> Case:
        graph = Graph([TensorSpec(name, np.shape(value)) for name, value in arrays.items()], nodes, outputs, regime="special-values")
        built = materialize(graph, SEED)
        built.arrays.update({name: np.asarray(value, dtype=np.float64) for name, value in arrays.items()})
        return built

    rng = np.random.default_rng(SEED)
    return [
        case([Node("n0", "exp", ["x0"]), Node("n1", "log", ["n0"])], ["n1"], {"x0": [[1000.0, 1500.0]]}),
        case([Node("n0", "exp", ["x0"]), Node("n1", "log", ["n0"])], ["n1"], {"x0": [[1000.0, 0.5, -2.0]]}),
        case([Node("n0", "relu", ["x0"]), Node("n1", "atan2", ["n0", "x1"]), Node("n2", "logsigmoid", ["x0"]),
              Node("n3", "pow_scalar", ["n2"], {"exponent": -1}), Node("n4", "sqrt", ["n0"])], ["n1", "n3", "n4"],
             {"x0": np.concatenate([rng.normal(size=(4, 10)), rng.uniform(90, 120, (4, 5))], axis=1),
              "x1": rng.normal(size=(4, 15))}),
        case([Node("n0", "tanh", ["x0"]), Node("n1", "mul_scalar", ["n0"], {"value": 0.5})], ["n1"],
             {"x0": rng.uniform(-1e-39, 1e-39, (5, 7))}),
    ]


def build(part: str, regimes: list[Regime], graphs: range) -> None:
    """Writes the part `part` of the set: the cases of `regimes`, from the graphs `graphs` of each
    (no regime: edge_cases)."""
    backends = parse_backend_list(",".join(BACKENDS + SOMETIMES))
    ops = campaign_ops(None, backends)
    rng = np.random.default_rng([SEED, *map(ord, part)])
    entries, arrays, counts = [], {}, collections.Counter()

    def store(case: Case, regime: str) -> bool:
        """Runs the backends on `case` and stores it, unless their outputs are too large."""
        number, size = len(entries), sum(a.size for a in case.arrays.values())
        chosen = [b for b in backends if b.supports_graph(case.graph) and (b.name not in SOMETIMES or number % JAX_EVERY == 0)]
        runs = []
        for backend in chosen:
            outcome = run_backend(backend, case)
            outputs = [stored(y) for y in outcome.outputs] if outcome.status == OK else None
            runs.append((backend.name, backend.dtype, outputs, outcome.error or ""))
        if sum(y.size for _, _, outputs, _ in runs if outputs for y in outputs) + size > (
                SMALL_CASE if size <= SMALL_CASE else LARGE_CASE) * 3:
            return False
        if rng.random() < PLANTED_SHARE:
            kind = PLANTS[rng.integers(len(PLANTS))]
            name, dtype, outputs, _ = runs[rng.integers(len(runs))]
            faulty = planted(outputs, kind, rng) if outputs else None
            if faulty is not None:
                runs.append((f"planted-{kind}:{name}", dtype, faulty, ""))
        for name, array in case.arrays.items():
            arrays[f"{number}/array/{name}"] = array
        backend_entries = []
        for b, (name, dtype, outputs, error) in enumerate(runs):
            backend_entries.append({"name": name, "dtype": dtype, "outputs": None if outputs is None else len(outputs),
                                    "error": error})
            for k, y in enumerate(outputs or []):
                arrays[f"{number}/output/{b}/{k}"] = y
        expected = judged_reference(case, runs)
        entries.append({"graph": case.graph.to_dict(), "seed": case.seed, "arrays": sorted(case.arrays),
                        "backends": backend_entries, "expected": expected})
        counts[regime] += 1
        for entry in expected["backends"]:
            counts["verdict " + entry.get("full", {}).get("verdict", "crash")] += 1
        counts["invalid (defines nothing)"] += not expected["defines_anything"]
        return True

    for case in ([] if regimes else edge_cases()):
        store(case, "edge")
    for regime in regimes:
        generator = CaseGenerator(ops, 8, (regime,))
        large_kept = 0
        for index in graphs:
            graph_case = generator.case(seed_for(SEED, index))
            for variant in range(2):
                case = graph_case if variant == 0 else materialize(
                    graph_case.graph, graph_case.seed + variant, regime_profiles(graph_case.graph, graph_case.seed + variant))
                size = sum(a.size for a in case.arrays.values())
                if size > LARGE_CASE or (size > SMALL_CASE and large_kept >= LARGE_PER_REGIME):
                    continue
                if store(case, regime.name):
                    large_kept += size > SMALL_CASE
        print(regime.name, counts[regime.name], len(entries), file=sys.stderr, flush=True)
    FOLDER.mkdir(exist_ok=True)
    with gzip.open(FOLDER / f"{part}.json.gz", "wt") as file:
        json.dump({"version": 1, "seed": SEED, "cases": entries}, file, separators=(",", ":"))
    np.savez_compressed(FOLDER / f"{part}.npz", **arrays)
    print(part, json.dumps(dict(sorted(counts.items())), indent=1))


_DRAWN = [regime for regime in REGIMES if not regime.contraction_dims]
_THIRD = SMALL_GRAPHS // 3
PARTS = {**{f"small-{k}": ([BY_NAME["small"]], range(k * _THIRD, (k + 1) * _THIRD)) for k in range(3)},
         "single": ([regime for regime in _DRAWN if regime.name != "small" and "+" not in regime.name], range(OTHER_GRAPHS)),
         "composed": ([regime for regime in _DRAWN if "+" in regime.name], range(OTHER_GRAPHS)),
         "edges": ([], range(0))}


def rejudge(part: str) -> None:
    """Rewrites what the oracle said of part `part`'s stored cases ("expected"), from their stored
    outputs: for a change of the oracle alone (no framework runs, the cases and outputs stay)."""
    with gzip.open(FOLDER / f"{part}.json.gz", "rt") as file:
        stored_part = json.load(file)
    with np.load(FOLDER / f"{part}.npz", allow_pickle=False) as stored_arrays:
        arrays = {name: stored_arrays[name] for name in stored_arrays.files}
    changed = 0
    for number, entry in enumerate(stored_part["cases"]):
        case = Case(Graph.from_dict(entry["graph"]), {name: arrays[f"{number}/array/{name}"] for name in entry["arrays"]},
                    seed=entry["seed"])
        runs = [(backend["name"], backend["dtype"],
                 None if backend["outputs"] is None else [arrays[f"{number}/output/{b}/{k}"] for k in range(backend["outputs"])],
                 backend["error"]) for b, backend in enumerate(entry["backends"])]
        expected = judged_reference(case, runs)
        changed += expected != entry["expected"]
        entry["expected"] = expected
    with gzip.open(FOLDER / f"{part}.json.gz", "wt") as file:
        json.dump(stored_part, file, separators=(",", ":"))
    print(part, f"{changed} of {len(stored_part['cases'])} cases judged differently", file=sys.stderr)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--rejudge"]:
        for name in sys.argv[2:] or PARTS:
            rejudge(name)
    else:
        for name in sys.argv[1:] or PARTS:
            build(name, *PARTS[name])
