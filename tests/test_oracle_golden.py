"""The oracle gives, bit for bit, the verdicts it gave when the golden set was stored
(tests/data/oracle_golden/, built by tests/data/build_oracle_golden.py: campaign cases of every
regime, real backends' outputs in every float, integer, bool and complex dtype, ops derived from
torch's op database, and planted faults): the same verdict, signature, error, allowance, output and
detail per backend, judged lazily and in full, and the same honest models (r_d, judged and defined
masks, rounding noise; the exact references; the complex r_d, noise runs and judged entries) per
dtype and output.

No backend runs: the outputs are stored (the reference of a derived op without a numpy twin is
torch's float64 run on the CPU, as in a campaign). CI re-judges a sample of each part (its first
cases with a verdict other than agree, and an even spread of the rest); `pytest -m long` all of them.
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

from data.build_oracle_golden import FOLDER, PARTS, blas_rounding, judged_reference
from fuzzer.complex_dtypes import COMPLEX_DTYPES, is_complex
from fuzzer.drawing.regimes import BY_NAME
from fuzzer.exact_dtypes import EXACT_DTYPES, is_exact
from fuzzer.ir import Case, Graph
from fuzzer.ops import get_op
from fuzzer.ops.derived.ops import FAMILY as DERIVED_FAMILY
from fuzzer.verdicts import AGREE, ALL_ZEROS, CONSTANT, CRASH, MISMATCH, NAN_INF, UNSUPPORTED

# Per part (or the parts of a prefix, "small" for small-0..2): the first cases with another verdict than
# agree (or defining nothing), and an even spread of those where every backend agrees. The first parts keep
# the sample they had (the first 60 others of the set, in small-0); a derived op's case costs several times
# another's to judge (its reference may be torch's own float64 run, once per honest model): fewer of them.
SAMPLE_OTHERS = {"small-0": 60, "small": 0, "single": 0, "composed": 0, "derived": 6}
SAMPLE_AGREEING = {"small": 10, "single": 11, "composed": 10, "edges": 2, "derived": 6}
SAMPLE_DEFAULT = 12  # of either, where the tables above name neither the part nor its prefix


@cache
def golden() -> tuple[list[dict], dict]:
    """Every stored case (its part's name added to it as "part", and "strict": this machine's BLAS rounds as
    the one that judged the part did), and the arrays of every part by "PART/NAME"."""
    cases, arrays = [], {}
    for part in PARTS:
        with gzip.open(FOLDER / f"{part}.json.gz", "rt") as file:
            stored = json.load(file)
        strict = stored.get("blas") == blas_rounding()
        cases += [{**entry, "part": part, "number": number, "strict": strict} for number, entry in enumerate(stored["cases"])]
        with np.load(FOLDER / f"{part}.npz", allow_pickle=False) as stored_arrays:
            arrays.update({f"{part}/{name}": stored_arrays[name] for name in stored_arrays.files})
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
             backend["error"], backend.get("refused", False)) for b, backend in enumerate(entry["backends"])]
    return judged_reference(case, runs)


def sampled(table: dict, part: str) -> int:
    return table.get(part, table.get(part.rsplit("-", 1)[0], SAMPLE_DEFAULT))


def sample() -> list[int]:
    cases, _ = golden()
    chosen = []
    for part in PARTS:
        numbers = [n for n, entry in enumerate(cases) if entry["part"] == part]
        others = [n for n in numbers if unusual(cases[n])][:sampled(SAMPLE_OTHERS, part)]
        agreeing = [n for n in numbers if not unusual(cases[n])]
        count = sampled(SAMPLE_AGREEING, part)
        chosen += others + agreeing[::max(1, -(-len(agreeing) // count))]
    return sorted(chosen)


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
    """Bit for bit where this machine's BLAS rounds as the part's did (blas_rounding), else same_judgement."""
    entry = golden()[0][number]
    expected, now = entry["expected"], rejudged(number)
    assert now.keys() == expected.keys(), f"golden case {number} ({entry['part']}): {sorted(now)} != {sorted(expected)}"
    for key in expected:  # the first part whose judgement differs, named
        same = now[key] == expected[key] if entry["strict"] else same_judgement(now[key], expected[key])
        assert same, f"golden case {number} ({entry['part']} {entry['number']}): {key} differs" + (
            "" if entry["strict"] else " (its floats and hashes aside: this machine's BLAS rounds otherwise than the builder's)")


def family(dtype: str) -> str:
    """How a dtype's backends are judged: exactly, per complex component, or by the float model."""
    return "exact" if is_exact(dtype) else "complex" if is_complex(dtype) else "float"


def test_the_golden_set_holds_every_regime_dtype_and_verdict_of_each_way_of_judging():
    cases, _ = golden()
    regimes = collections.Counter(entry["graph"].get("regime") or "small" for entry in cases)
    # but the big contractions (every dim 128 .. 512: a megabyte a case), which the builder leaves out
    assert set(regimes) == {name for name, regime in BY_NAME.items() if not regime.contraction_dims}, regimes
    verdicts, dtypes = collections.defaultdict(set), set()
    for entry in cases:
        for stored, judged in zip(entry["backends"], entry["expected"]["backends"]):
            dtypes.add(stored["dtype"])
            verdicts[family(stored["dtype"])] |= {judged[path]["verdict"] for path in ("lazy", "full") if path in judged}
            verdicts[family(stored["dtype"])] |= {CRASH} if "crash" in judged else set()
    assert dtypes == {"float64", "float32", "float16", "bfloat16", *EXACT_DTYPES, *COMPLEX_DTYPES}
    assert {AGREE, MISMATCH, NAN_INF, ALL_ZEROS, CONSTANT, CRASH} <= verdicts["float"]
    assert {AGREE, MISMATCH, NAN_INF, UNSUPPORTED} <= verdicts["exact"]
    assert {AGREE, MISMATCH, NAN_INF, UNSUPPORTED} <= verdicts["complex"]
    assert any(not entry["expected"]["defines_anything"] for entry in cases)  # invalid cases
    derived = [entry for entry in cases if any(get_op(node["op"]).family == DERIVED_FAMILY for node in entry["graph"]["nodes"])]
    assert len(derived) >= 350
    assert len(cases) >= 2500


def test_the_oracle_judges_a_sample_of_the_golden_set_as_stored():
    for number in sample():
        assert_same(number)


@pytest.mark.long
def test_the_oracle_judges_the_whole_golden_set_as_stored():
    for number in range(len(golden()[0])):
        assert_same(number)
