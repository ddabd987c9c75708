"""Builds the oracle's golden set, tests/data/oracle_golden/: campaign cases, what real backends
gave on them, and what the oracle said, so that a change of the oracle's code that should not
change its behaviour is checked by tests/test_oracle_golden.py (which re-judges every stored case
with the oracle alone: no framework runs).

    PYTHONPATH=. .venv/bin/python tests/data/build_oracle_golden.py           # rewrites the set
    PYTHONPATH=. .venv/bin/python tests/data/build_oracle_golden.py single    # one part of it
    PYTHONPATH=. .venv/bin/python tests/data/build_oracle_golden.py --rejudge # what the oracle says now of the stored outputs

The set is stored in parts (PARTS: each a Part, its regimes, graphs, backends and faults), which
separate processes can build side by side: PART.json.gz and PART.npz each.

Rebuild it only when the oracle's behaviour changes on purpose, and say so in the commit.

What it stores, with a fixed seed: cases drawn by the campaign's generator (fuzzer/drawing/generate.py)
in every regime of fuzzer/drawing/regimes.py (the float ones, motifs and programs; the integer and the
complex ones), kept where they are small (a few large ones per large regime; none of the
big-contraction regimes, whose every dim is 128 .. 512: a megabyte a case; the ladder's rungs up to
2^9 + 1), and a few hand-made edge cases (edge_cases: one defines nothing, so the case is `invalid`).
The parts and their backends:

    small-0..2, single, composed, edges, later   the hand-written ops: torch-eager in float32, float16,
                                                  bfloat16 and float64, numpy-ref in float32 and
                                                  float16, jax-eager in float32 on every JAX_EVERY-th case
    derived-0..1    the ops derived from torch's op database alone (`fuzz run --ops derived`), on the
                    same backends but jax (most have no jax twin); a derived op's reference may be
                    torch's float64 run, as in a campaign
    integers-0..2   the integer regimes, torch-eager and jax-eager in every integer and bool dtype
                    (judged exactly: fuzzer/oracle/exact.py)
    complex-0..2    the complex regimes, torch-eager and jax-eager in complex64 and complex128
                    (judged per component: fuzzer/oracle/complex.py)

A share of the cases also gets a planted faulty output (PLANTS, per way of judging: one entry
scaled, off by one or conjugated, a nan or inf put in, an integer result made float, the output
zeroed or made constant, an output dropped), so that every verdict of each way is represented.
Per case: the reference's scales and sensitivities, and per dtype and output the allowance, the
rounding noise and a digest of the honest models (r_d, the judged and the defined non-finite
masks; for an exact dtype its reference, for a complex one r64, r_d, the noise runs and the judged
entries); per backend: its verdict (backend_verdict.verdict_of) judged lazily (at the floor first,
as check.check_case does) and in full, with its error, allowance, output and detail, and its
signature, or its crash's signature. Floats are stored as float.hex() strings (exact), in gzipped
JSON; arrays in one .npz a part (read with allow_pickle=False).
"""

from __future__ import annotations

import collections
import functools
import gzip
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

# One thread, as tests/conftest.py runs the test: a derived op's reference may be torch's float64 run, whose
# reductions round otherwise on two threads (softmin of a 4 x 8 tensor, in its last bits).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402 - after the thread count, which numpy's BLAS and torch read when imported

from fuzzer import oracle
from fuzzer.arrays import materialize, regime_profiles
from fuzzer.backends import Backend, get_backend, parse_backend_list
from fuzzer.complex_dtypes import COMPLEX_DTYPES, is_complex
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.drawing.regimes import BY_NAME, COMPLEX_REGIMES, INTEGER_REGIMES, MOTIFS, PROGRAMS, REGIMES, Regime
from fuzzer.exact_dtypes import EXACT_DTYPES, is_exact
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.judging.backend_verdict import verdict_of
from fuzzer.ops.derived import derived_registry
from fuzzer.running.execute import ERROR, OK, UNSUPPORTED, Outcome, run_backend
from fuzzer.running.pipeline import campaign_ops, seed_for
from fuzzer.verdicts import CRASH

FOLDER = Path(__file__).parent / "oracle_golden"
SEED = 49
BACKENDS = ("torch-eager:cpu:float32", "torch-eager:cpu:float16", "torch-eager:cpu:bfloat16", "torch-eager:cpu:float64",
            "numpy-ref:cpu:float32", "numpy-ref:cpu:float16")
SOMETIMES = ("jax-eager:cpu:float32",)  # run on every JAX_EVERY-th case (its first call of a shape compiles)
JAX_EVERY = 8
EXACT_BACKENDS = tuple(f"{kind}:cpu:{dtype}" for kind in ("torch-eager", "jax-eager") for dtype in EXACT_DTYPES)
COMPLEX_BACKENDS = tuple(f"{kind}:cpu:{dtype}" for kind in ("torch-eager", "jax-eager") for dtype in COMPLEX_DTYPES)
SMALL_GRAPHS = 330  # graphs drawn in the small regime (two input sets each), in three parts
OTHER_GRAPHS = 25  # ... and in each other regime
SMALL_CASE = 800  # stored entries (arrays and outputs) of a case kept in any number
LARGE_CASE = 6_000  # ... and of one of the few kept per regime beyond that
LARGE_PER_REGIME = 2
LATER_GRAPHS = 40  # graphs drawn in each regime of the part "later"
TYPED_GRAPHS = 40  # ... in each integer and each complex regime, per part
DERIVED_GRAPHS = 25  # ... in each regime of the derived ops, per part
DERIVED_REGIMES = tuple(BY_NAME[name] for name in ("small", "special-values", "magnitudes", "size-1", "layout"))
PLANTED_SHARE = 0.3
# The faults planted, per way of judging (the dtype's family): each verdict of that way among what they give.
PLANTS = {"float": ("scale", "nan", "inf", "zeros", "constant", "drop"),
          "exact": ("flip", "kind", "nan", "zeros", "constant", "drop"),  # nan: into a mixed graph's float output
          "complex": ("scale", "conjugate", "nan", "inf", "zeros", "drop")}


def hexed(value: float) -> str:
    return float(value).hex()


def digest(*arrays) -> str:
    """The arrays' dtypes, shapes and bytes, hashed."""
    hashed = hashlib.sha256()
    for array in map(np.ascontiguousarray, arrays):
        hashed.update(str(array.dtype).encode() + str(array.shape).encode() + array.tobytes())
    return hashed.hexdigest()[:16]


@functools.cache
def backend_of(name: str) -> Backend:
    """The backend of a stored run: a planted run's ("planted-KIND:NAME") is the one whose outputs it altered."""
    return get_backend(name.partition(":")[2] if name.startswith("planted-") else name)


def blas_rounding() -> str:
    """A digest of float64 products as this machine's BLAS rounds them. OpenBLAS picks its kernels by the
    CPU, and one that rounds otherwise moves the last bits of the references, allowances and errors (a
    Sapphire Rapids machine: 39 of 108 cases); a part stores the digest of the machine that judged it,
    and tests/test_oracle_golden.py compares bit for bit where it is the same."""
    rng = np.random.default_rng(SEED)
    return digest(*(rng.normal(size=(m, k)) @ rng.normal(size=(k, n))
                    for m, k, n in ((1, 7, 1), (3, 17, 5), (8, 64, 8), (33, 129, 31), (128, 255, 64))))


def judged_reference(case: Case, backends: list[tuple[str, str, list[np.ndarray] | None, str, bool]]) -> dict:
    """What the oracle (backend_verdict.verdict_of) says of `case` and the backends' runs: (name, dtype,
    outputs or None, error, refused: the backend declined the case, as its OpUnsupported says)."""
    reference = oracle.compute_reference(case, {dtype for _, dtype, _, _, _ in backends})
    outcomes = [(backend_of(name), Outcome(name, OK, outputs=outputs) if outputs is not None else
                 Outcome(name, UNSUPPORTED if refused else ERROR, error=error)) for name, _, outputs, error, refused in backends]
    lazy = [verdict_of(backend, case, outcome, reference, at_floor=True) for backend, outcome in outcomes]
    models_for_lazy = reference.models_computed is not None
    full = [verdict_of(backend, case, outcome, reference) for backend, outcome in outcomes]
    culprit = case.graph.nodes[-1].op
    verdicts = []
    for (name, _, _, error, _), judged in zip(backends, zip(lazy, full)):
        if judged[1].verdict == CRASH:
            verdicts.append({"backend": name, "crash": oracle.signature(CRASH, name, culprit, error)})
            continue
        entry = {"backend": name}
        for path, verdict in zip(("lazy", "full"), judged):
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
    judged = {"scales": [hexed(s) for s in reference.scales], "sensitivities": [hexed(s) for s in reference.sensitivities],
              "outputs": [digest(r64) for r64 in reference.outputs], "models_for_lazy": models_for_lazy,
              "defines_anything": reference.defines_anything, "backends": verdicts, "models": models}
    dtypes = sorted({dtype for _, dtype, _, _, _ in backends})
    if reference.exact is not None:
        judged["exact"] = {dtype: exact_models(reference.exact, dtype) for dtype in dtypes if is_exact(dtype)}
    if reference.complex is not None:
        judged["complex"] = {dtype: complex_models(reference.complex, dtype) for dtype in dtypes if is_complex(dtype)}
    return judged


def exact_models(exact, dtype: str) -> str | list[dict]:
    """What the exact oracle judges a `dtype` backend against: per output, a digest of its reference
    and its float outputs' scale and sensitivity; or the sentence saying why the graph is ill-typed."""
    expected = exact.outputs(dtype)
    if isinstance(expected, str):
        return expected
    return [{"reference": digest(y), "scale": [hexed(value) for value in exact.scale(dtype, index)]}
            for index, y in enumerate(expected)]


def complex_models(reference, dtype: str) -> str | list[dict]:
    """What the complex oracle judges a `dtype` backend against: per output, digests of r64, r_d and the
    noise runs, of the judged entries, and the scale and sensitivity; or why the graph is ill-typed."""
    if reference.ill_typed():
        return reference.ill_typed()
    names = reference.case.graph.outputs
    return [{"r64": digest(reference.r64[index]), "same": digest(reference.outputs(dtype)[index]),
             "noise": digest(*(run[name] for run in reference.noise_runs(dtype))),
             "judged": digest(reference.judged(dtype, index)),
             "scale": [hexed(value) for value in reference.scale(index)]} for index, name in enumerate(names)]


def planted(outputs: list[np.ndarray], kind: str, rng: np.random.Generator) -> list[np.ndarray] | None:
    """A copy of `outputs` with one fault of `kind` (PLANTS) in the first output it fits (nan and inf a float or
    complex one, flip and kind an integer or bool one, conjugate a complex one); None where none fits or it has no finite entry."""
    outputs = [np.array(y, copy=True) for y in outputs]
    if kind == "drop":
        return outputs[:-1] if len(outputs) > 1 else [outputs[0].reshape(-1)[:0]]
    kinds = {"nan": "fc", "inf": "fc", "flip": "biu", "kind": "biu", "conjugate": "c"}.get(kind, "biufc")
    fits = [index for index, y in enumerate(outputs) if y.dtype.kind in kinds]
    if not fits:
        return None
    y = outputs[fits[0]]
    finite = np.flatnonzero(np.isfinite(y))
    if not finite.size:
        return None
    at = np.unravel_index(finite[rng.integers(finite.size)], y.shape) if y.ndim else ()
    if kind == "scale":
        y[at] = y[at] * rng.choice([1.0 + 1e-3, 1.0 + 1e-2, 1.5, -3.0]) + (0.0 if y[at] != 0 else 1.0)
    elif kind == "flip":  # the lowest bit: an integer off by one, a bool negated
        y[at] = ~y[at] if y.dtype == bool else y[at] ^ y.dtype.type(1)
    elif kind == "kind":  # a type-promotion bug: a float where the result is an integer, an integer where a bool
        outputs[fits[0]] = y.astype(np.int64 if y.dtype == bool else np.float64)
    elif kind == "conjugate":
        outputs[fits[0]] = np.conj(y)
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


@dataclass(frozen=True)
class Part:
    """One part of the set: the cases of `regimes` drawn from `graphs` (none: edge_cases), run on
    `backends` (and on `sometimes` every JAX_EVERY-th case), with faults of PLANTS[family]. `derived`:
    drawn from the derived ops alone, as `fuzz run --ops derived` draws."""

    regimes: tuple[Regime, ...]
    graphs: range
    backends: tuple[str, ...] = BACKENDS
    sometimes: tuple[str, ...] = SOMETIMES
    family: str = "float"
    derived: bool = False


def build(name: str, part: Part) -> None:
    """Writes the part `name` of the set."""
    backends = parse_backend_list(",".join(part.backends + part.sometimes))
    ops = campaign_ops(sorted(derived_registry()) if part.derived else None, backends)
    rng = np.random.default_rng([SEED, *map(ord, name)])
    entries, arrays, counts = [], {}, collections.Counter()

    def store(case: Case, regime: str) -> bool:
        """Runs the backends on `case` and stores it, unless their outputs are too large."""
        number, size = len(entries), sum(a.size for a in case.arrays.values())
        chosen = [b for b in backends if b.supports_graph(case.graph) and (b.name not in part.sometimes or number % JAX_EVERY == 0)]
        runs = []
        for backend in chosen:
            outcome = run_backend(backend, case)
            outputs = [stored(y) for y in outcome.outputs] if outcome.status == OK else None
            runs.append((backend.name, backend.dtype, outputs, outcome.error or "", outcome.status == UNSUPPORTED))
        if sum(y.size for _, _, outputs, _, _ in runs if outputs for y in outputs) + size > (
                SMALL_CASE if size <= SMALL_CASE else LARGE_CASE) * 3:
            return False
        if rng.random() < PLANTED_SHARE:
            plants = PLANTS[part.family]
            kind = plants[rng.integers(len(plants))]
            backend_name, dtype, outputs, _, _ = runs[rng.integers(len(runs))]
            faulty = planted(outputs, kind, rng) if outputs else None
            if faulty is not None:
                runs.append((f"planted-{kind}:{backend_name}", dtype, faulty, "", False))
        try:
            expected = judged_reference(case, runs)
        except Exception as exc:  # noqa: BLE001 - an op's reference refusing the graph's values: a campaign's internal error
            counts[f"left out: the reference raised {type(exc).__name__}: {str(exc)[:80]} ({' '.join(case.graph.op_names())})"] += 1
            return False
        for array_name, array in case.arrays.items():
            arrays[f"{number}/array/{array_name}"] = array
        backend_entries = []
        for b, (backend_name, dtype, outputs, error, refused) in enumerate(runs):
            backend_entries.append({"name": backend_name, "dtype": dtype, "outputs": None if outputs is None else len(outputs),
                                    "error": error, **({"refused": True} if refused else {})})
            for k, y in enumerate(outputs or []):
                arrays[f"{number}/output/{b}/{k}"] = y
        entries.append({"graph": case.graph.to_dict(), "seed": case.seed, "arrays": sorted(case.arrays),
                        "backends": backend_entries, "expected": expected})
        counts[regime] += 1
        for entry in expected["backends"]:
            counts["verdict " + entry.get("full", {}).get("verdict", "crash")] += 1
        counts["invalid (defines nothing)"] += not expected["defines_anything"]
        return True

    for case in ([] if part.regimes else edge_cases()):
        store(case, "edge")
    for regime in part.regimes:
        generator = CaseGenerator(ops, 8, (regime,))
        large_kept = 0
        for index in part.graphs:
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
    with gzip.open(FOLDER / f"{name}.json.gz", "wt") as file:
        json.dump({"version": 1, "seed": SEED, "blas": blas_rounding(), "cases": entries}, file, separators=(",", ":"))
    np.savez_compressed(FOLDER / f"{name}.npz", **arrays)
    print(name, json.dumps(dict(sorted(counts.items())), indent=1))


_DRAWN = [regime for regime in REGIMES if not regime.contraction_dims]
_THIRD = SMALL_GRAPHS // 3
PARTS = {**{f"small-{k}": Part((BY_NAME["small"],), range(k * _THIRD, (k + 1) * _THIRD)) for k in range(3)},
         "single": Part(tuple(regime for regime in _DRAWN if regime.name != "small" and "+" not in regime.name
                              and not regime.ladder and not regime.branch_points), range(OTHER_GRAPHS)),
         "composed": Part(tuple(regime for regime in _DRAWN if "+" in regime.name), range(OTHER_GRAPHS)),
         "edges": Part((), range(0)),
         # The regimes that came after the parts above: the ladder keeps its lower rungs (up to 2^9 + 1, and
         # LARGE_PER_REGIME larger), as every part keeps its cases small.
         "later": Part(tuple(regime for regime in _DRAWN if regime.ladder or regime.branch_points) + (MOTIFS, PROGRAMS),
                       range(LATER_GRAPHS)),
         **{f"integers-{k}": Part(INTEGER_REGIMES, range(k * TYPED_GRAPHS, (k + 1) * TYPED_GRAPHS), EXACT_BACKENDS, (), "exact")
            for k in range(3)},
         **{f"complex-{k}": Part(COMPLEX_REGIMES, range(k * TYPED_GRAPHS, (k + 1) * TYPED_GRAPHS), COMPLEX_BACKENDS, (), "complex")
            for k in range(3)},
         **{f"derived-{k}": Part(DERIVED_REGIMES, range(k * DERIVED_GRAPHS, (k + 1) * DERIVED_GRAPHS), sometimes=(), derived=True)
            for k in range(2)}}


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
                 backend["error"], backend.get("refused", False)) for b, backend in enumerate(entry["backends"])]
        expected = judged_reference(case, runs)
        changed += expected != entry["expected"]
        entry["expected"] = expected
    if changed:  # else the file stays as it is (a rewrite changes the gzip header's time: a diff of nothing)
        stored_part["blas"] = blas_rounding()
        with gzip.open(FOLDER / f"{part}.json.gz", "wt") as file:
            json.dump(stored_part, file, separators=(",", ":"))
    print(part, f"{changed} of {len(stored_part['cases'])} cases judged differently", file=sys.stderr)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--rejudge"]:
        for name in sys.argv[2:] or PARTS:
            rejudge(name)
    else:
        for name in sys.argv[1:] or PARTS:
            build(name, PARTS[name])
