"""How long the minimal reproducers are (`fuzz export`'s default, fuzzer/reproducers/minimal_reproducer.py).

Exports, as `fuzz export` does, every finding of corpus/regression and corpus/known (the canaries
loaded) and `--cases` generated cases of one or two ops, each on the next backend of the default
CPU set that supports its ops, plus `--norm-cases` cases of `norm` alone on jax-eager and jax-jit
(the mix holds too few for a median of their own). A generated case has no finding: it is
exported as a mismatch of its backend.

    .venv/bin/python bench/reproducer_length.py --cases 300 --norm-cases 40 --seed 0

Prints one JSON object: the median and largest line count of the scripts of one or two ops
(after `failing_part`), over the findings and the mix together (`overall`) and apart
(`framework_findings`, `canary_findings`, `mix`), their torch-layout scripts (`torch_layout`)
and the jax `norm` scripts of every group (`jax_norm`); the cases whose backend has no standalone script (`refused`, as
`fuzz export` refuses them); and each finding's line count by file name (`finding_lines`).
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
from pathlib import Path

from fuzzer.backends import default_backends, get_backend
from fuzzer.corpus import Corpus, load_case_file
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.errors import UserError
from fuzzer.plugins import canary_names, load_plugins
from fuzzer.reproducers.minimal_reproducer import build_minimal_script, failing_part

ROOT = Path(__file__).resolve().parents[1]
CASE_FILES = sorted((ROOT / "corpus" / "regression").glob("*.json")) + sorted((ROOT / "corpus" / "known").glob("*.json"))
NORM_BACKENDS = ("jax-eager:cpu:float32", "jax-jit:cpu:float32")


def _record(group: str, name: str, case, backend, finding: dict) -> dict:
    try:
        script = build_minimal_script(case, backend, name, finding)
    except UserError:  # `fuzz export`'s one-sentence refusal: torch-bnfold has no standalone form
        return {"group": group, "name": name, "backend": backend.kind, "refused": True}
    return {"group": group, "name": name, "backend": backend.kind, "family": backend.family,
            "ops": list(failing_part(case, finding).graph.op_names()), "lines": len(script.splitlines())}


def findings(corpus_path: Path) -> list[dict]:
    """One record per case file with a finding, as `fuzz export ID` writes it: a framework's
    finding, or a canary's (our planted bug: its script carries the canary's code)."""
    load_plugins(canary_names())
    corpus, records = Corpus(corpus_path), []
    for path in CASE_FILES:
        stored = corpus.get_case(corpus.import_case(load_case_file(path)))
        finding = next((f for f in stored.findings if f.get("verdict") != "agree"), None)
        if finding:
            group = "canary" if finding["backend"].startswith("canary-") else "finding"
            records.append(_record(group, path.name, stored.case, get_backend(finding["backend"]), finding))
    return records


def generated(count: int, seed: int, op_names: list[str] | None, backend_names) -> list[dict]:
    """`count` cases of at most two ops, case i on the first backend from position i of
    `backend_names` (round robin) that supports its ops."""
    generator, backends, records = CaseGenerator(op_names, max_nodes=2), [get_backend(n) for n in backend_names], []
    for index in range(count):
        case = generator.case(seed + index)
        ops = case.graph.op_names()
        turn = backends[index % len(backends):] + backends[:index % len(backends)]
        backend = next((b for b in turn if all(b.supports(op) for op in ops)), None)
        if backend is not None:
            records.append(_record("norm" if op_names else "mix", f"seed {seed + index}", case, backend,
                                   {"verdict": "mismatch", "culprit": ops[-1]}))
        print(f"\r{index + 1}/{count} generated", end="", file=sys.stderr)
    print(file=sys.stderr)
    return records


def _summary(records: list[dict]) -> dict:
    lines = [r["lines"] for r in records if "lines" in r and len(r["ops"]) <= 2]
    return {"scripts": len(lines), "median_lines": statistics.median(lines) if lines else None,
            "max_lines": max(lines, default=None)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=300, help="generated cases of one or two ops, on the default CPU set")
    parser.add_argument("--norm-cases", type=int, default=40, help="generated cases of norm alone, on jax")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        records = findings(Path(folder) / "cases.db")
    records += generated(args.cases, args.seed, None, default_backends())
    records += generated(args.norm_cases, args.seed, ["norm"], NORM_BACKENDS)
    overall = [r for r in records if r["group"] != "norm"]
    refused = collections.Counter(r["backend"] for r in records if r.get("refused"))
    print(json.dumps({
        "overall": _summary(overall),
        "framework_findings": _summary([r for r in records if r["group"] == "finding"]),
        "canary_findings": _summary([r for r in records if r["group"] == "canary"]),
        "mix": _summary([r for r in records if r["group"] == "mix"]),
        "torch_layout": _summary([r for r in overall if r["backend"] == "torch-layout"]),
        "jax_norm": _summary([r for r in records if r.get("family") == "jax" and "norm" in r["ops"]]),
        "refused": dict(refused),
        "finding_lines": {r["name"]: r.get("lines") for r in records if r["group"] in ("finding", "canary")},
    }, indent=1))


if __name__ == "__main__":
    main()
