"""The oracle gives, bit for bit, the verdicts it gave when the golden set was stored
(tests/data/oracle_golden/, built by tests/data/build_oracle_golden.py: campaign cases of every
regime, real backends' outputs in every float dtype, and planted faults): the same verdict,
signature, error, allowance, output and detail per backend, judged lazily and in full, and the
same honest models (r_d, judged and defined masks, rounding noise) per dtype and output.

No framework runs: the outputs are stored. CI re-judges a sample (every case with a verdict other
than agree among the first ones, and an even spread of the rest); `pytest -m long` all of them.
A change that should change the oracle's behaviour rebuilds the set and says so. On a CPU whose
OpenBLAS rounds float64 products otherwise, the judgements are compared without their floats (same_judgement).
"""

import collections
import gzip
import json
import re
from functools import cache

import numpy as np
import pytest

from data.build_oracle_golden import FOLDER, PARTS, judged_reference
from fuzzer.drawing.regimes import REGIMES
from fuzzer.ir import Case, Graph
from fuzzer.verdicts import AGREE, ALL_ZEROS, CONSTANT, MISMATCH, NAN_INF

SAMPLE_EVERY = 12  # of the cases where every backend agrees
SAMPLE_OTHERS = 60  # cases with another verdict (or defining nothing), the first ones


@cache
def golden() -> tuple[list[dict], dict]:
    """Every stored case (its part's name added to it as "part"), and the arrays of every part by
    "PART/NAME"."""
    cases, arrays = [], {}
    for part in PARTS:
        with gzip.open(FOLDER / f"{part}.json.gz", "rt") as file:
            cases += [{**entry, "part": part, "number": number} for number, entry in enumerate(json.load(file)["cases"])]
        with np.load(FOLDER / f"{part}.npz", allow_pickle=False) as stored:
            arrays.update({f"{part}/{name}": stored[name] for name in stored.files})
    return cases, arrays


def verdicts_of(entry: dict) -> set[str]:
    return {backend[path]["verdict"] for backend in entry["expected"]["backends"] for path in ("lazy", "full") if path in backend}


def unusual(entry: dict) -> bool:
    return verdicts_of(entry) != {AGREE} or not entry["expected"]["defines_anything"]


def rejudged(number: int) -> dict:
    """What the oracle says now of stored case `number`."""
    cases, arrays = golden()
    entry = cases[number]
    key = f"{entry['part']}/{entry['number']}"
    case = Case(Graph.from_dict(entry["graph"]), {name: arrays[f"{key}/array/{name}"] for name in entry["arrays"]},
                seed=entry["seed"])
    runs = [(backend["name"], backend["dtype"],
             None if backend["outputs"] is None else [arrays[f"{key}/output/{b}/{k}"] for k in range(backend["outputs"])],
             backend["error"]) for b, backend in enumerate(entry["backends"])]
    return judged_reference(case, runs)


def sample() -> list[int]:
    cases, _ = golden()
    others = [n for n, entry in enumerate(cases) if unusual(entry)][:SAMPLE_OTHERS]
    return sorted(set(others) | {n for n in range(0, len(cases), SAMPLE_EVERY) if not unusual(cases[n])})


HASH = re.compile(r"[0-9a-f]{16}")


def same_judgement(now, stored) -> bool:
    """`now` is `stored` in every verdict, signature, output index and detail, its floats (stored as hex)
    and hashes of exact bits aside: what a CPU whose OpenBLAS rounds float64 products otherwise changes (it
    picks its kernels by the CPU: a Sapphire Rapids machine rounds 39 of the sample's 108 cases' references
    a few ulps off the machine that built the set, and with them the allowances and errors)."""
    if isinstance(stored, dict):
        # Which output errs most where all agree is a float of its own (a float64 backend's error is of ulps).
        noise = {"output"} if stored.get("verdict") == AGREE and isinstance(now, dict) and now.get("verdict") == AGREE else set()
        return isinstance(now, dict) and now.keys() == stored.keys() and all(
            same_judgement(now[k], stored[k]) for k in stored if k not in noise)
    if isinstance(stored, list):
        return isinstance(now, list) and len(now) == len(stored) and all(map(same_judgement, now, stored))
    if isinstance(stored, str) and isinstance(now, str) and (
            HASH.fullmatch(stored) and HASH.fullmatch(now) or stored.startswith(("0x", "-0x")) and now.startswith(("0x", "-0x"))):
        return True
    return now == stored


def assert_same(number: int) -> None:
    expected, now = golden()[0][number]["expected"], rejudged(number)
    if now == expected:  # bit for bit: this CPU's float64 BLAS rounds as the builder's did
        return
    for key in expected:  # the first part whose judgement differs, named
        assert same_judgement(now[key], expected[key]), f"golden case {number} ({golden()[0][number]['part']}): {key} differs"


def test_the_golden_set_holds_every_regime_and_verdict():
    cases, _ = golden()
    regimes = collections.Counter(entry["graph"].get("regime") or "small" for entry in cases)
    # but the big contractions (every dim 128 .. 512: a megabyte a case), which the builder leaves out, and
    # the ladder (axes of up to 2^17 + 1 elements) and the branch points, which came after the set was built
    assert set(regimes) == {regime.name for regime in REGIMES
                            if not regime.contraction_dims and not regime.ladder and not regime.branch_points}, regimes
    found = set().union(*map(verdicts_of, cases))
    assert {AGREE, MISMATCH, NAN_INF, ALL_ZEROS, CONSTANT} <= found
    assert any(not entry["expected"]["defines_anything"] for entry in cases)  # invalid cases
    dtypes = {backend["dtype"] for entry in cases for backend in entry["backends"]}
    assert dtypes == {"float64", "float32", "float16", "bfloat16"}
    assert len(cases) >= 800


def test_the_oracle_judges_a_sample_of_the_golden_set_as_stored():
    for number in sample():
        assert_same(number)


@pytest.mark.long
def test_the_oracle_judges_the_whole_golden_set_as_stored():
    for number in range(len(golden()[0])):
        assert_same(number)
