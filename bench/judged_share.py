"""The judged-share table of every op: what the oracle judges of one-op graphs, per dtype and eager backend.

Draws `--cases` one-op graphs per op (the campaign's one-op generator, every regime at its share),
checks each on torch-eager and jax-eager in float32, float16 and bfloat16 (CPU, in-process, as
check.check_case does in a campaign) and meters them (fuzzer/judging/judged_share.py): the share of output
entries judged and the median allowance in units of the dtype's unit roundoff u. Prints one JSON
object (the rows, the meter's own time against check_case's) and writes a Markdown table, least
judged first:

    .venv/bin/python bench/judged_share.py --cases 10 --out reports/judged-share/table.md

A one-op graph makes the attribution exact: every entry counted for an op is that op's. `--why
OP,...` says instead where those ops' entries go (non-finite in float64, undefined in an honest
model, loosened, judged), every honest model computed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from fuzzer import oracle
from fuzzer.backends import get_backend
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.drawing.regimes import parse_regime_list
from fuzzer.errors import InternalError
from fuzzer.judging import judged_share
from fuzzer.judging.check import check_case
from fuzzer.ops import registry

DTYPES = ("float32", "float16", "bfloat16")
KINDS = ("torch-eager", "jax-eager")


def meter_op(op: str, cases: int, seed: int, timing: dict) -> dict:
    """The judged-share rows of `cases` one-op graphs of `op` on every (kind, dtype) that supports them."""
    generator = CaseGenerator([op], 1, parse_regime_list(""))
    backends = [get_backend(f"{kind}:cpu:{dtype}") for dtype in DTYPES for kind in KINDS]
    rows: dict = {}
    for index in range(cases):
        try:
            case = generator.case(seed + index)
        except InternalError:  # no valid one-op graph for this seed (conv3d's shapes)
            continue
        chosen = [b for b in backends if b.supports_graph(case.graph)]
        seen = []
        start = time.perf_counter()
        result = check_case(case, chosen, on_reference=seen.append)
        checked = time.perf_counter()
        judged_share.tally(rows, judged_share.measure(case.graph, seen[0], result, chosen))
        timing["check_s"] += checked - start
        timing["meter_s"] += time.perf_counter() - checked
        timing["cases"] += 1
    return rows


def why_not_judged(op: str, cases: int, seed: int) -> dict:
    """Per dtype, where the entries of `op`'s one-op cases go, with every honest model computed (the
    campaign's meter never forces them): non-finite in float64, undefined or non-finite in some
    honest model, in an output loosened past LOOSENED_FACTOR floors, or judged."""
    generator = CaseGenerator([op], 1, parse_regime_list(""))
    counts = {dtype: dict.fromkeys(("entries", "nonfinite_r64", "undefined", "loosened", "judged"), 0) for dtype in DTYPES}
    for index in range(cases):
        try:
            case = generator.case(seed + index)
        except InternalError:
            continue
        dtypes = [d for d in DTYPES if get_backend(f"torch-eager:cpu:{d}").supports_graph(case.graph)]
        reference = oracle.compute_reference(case, set(dtypes))
        for dtype in dtypes:
            for output, r64 in enumerate(reference.outputs):
                finite, judged = np.isfinite(r64), reference.judged_finite(dtype, output)
                allowed, floor = oracle.allowed_error(reference, output, dtype), oracle.floor_allowance(reference, output, dtype)
                loose = judged_share.loosened(allowed, floor)
                row = counts[dtype]
                row["entries"] += r64.size
                row["nonfinite_r64"] += int(np.count_nonzero(~finite))
                row["undefined"] += int(np.count_nonzero(finite & ~judged))
                row["loosened" if loose else "judged"] += int(np.count_nonzero(judged))
    return counts


def why_markdown(why: dict, cases: int) -> str:
    """why_not_judged's counts as shares of the entries, one line per op and dtype, least judged first."""
    lines = ["| op | dtype | entries | judged | non-finite in float64 | undefined in a model | loosened |", "|---|---|---|---|---|---|---|"]
    rows = [(op, dtype, counts) for op, per_dtype in why.items() for dtype, counts in per_dtype.items() if counts["entries"]]
    for op, dtype, c in sorted(rows, key=lambda row: (row[2]["judged"] / row[2]["entries"], row[0], row[1])):
        shares = " | ".join(f"{c[key] / c['entries']:.0%}" for key in ("judged", "nonfinite_r64", "undefined", "loosened"))
        lines.append(f"| {op} | {dtype} | {c['entries']} | {shares} |")
    return (f"Where the entries of {cases} one-op cases per op go with every honest model computed (no backend run), "
            "least judged first.\n\n" + "\n".join(lines) + "\n")


def markdown(table: list[dict], cases: int) -> str:
    """One line per op, least judged first (by its lowest share): share and median allowance per (dtype, kind)."""
    by_op: dict[str, dict] = {}
    for entry in table:
        by_op.setdefault(entry["op"], {})[entry["dtype"], entry["kind"]] = entry
    columns = [(dtype, kind) for dtype in DTYPES for kind in KINDS]

    def lowest(op: str) -> float:
        return min((e["share"] for e in by_op[op].values() if e["share"] is not None), default=1.0)

    def cell(entry: dict | None) -> str:
        if entry is None or entry["share"] is None:
            return "-"
        median = "-" if entry["median_allowance_u"] is None else f"{entry['median_allowance_u']:.0f}"
        return f"{entry['share']:.0%} ({median})"

    lines = [f"| op | {' | '.join(f'{dtype} {kind}' for dtype, kind in columns)} |",
             "|---|" + "---|" * len(columns)]
    for op in sorted(by_op, key=lambda name: (lowest(name), name)):
        lines.append(f"| {op} | " + " | ".join(cell(by_op[op].get(column)) for column in columns) + " |")
    return (f"Judged share of output entries (median allowance in units of u, relative to the output's scale), "
            f"{cases} one-op cases per op; `-`: the backend does not run the op in that dtype.\n\n" + "\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10, help="one-op cases per op")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ops", help="comma-separated ops (default: all)")
    parser.add_argument("--out", help="write the Markdown table here")
    parser.add_argument("--why", help="comma-separated ops, or all: where their entries go with every honest model computed, "
                                      "instead of the table")
    args = parser.parse_args()

    if args.why:
        ops = sorted(registry()) if args.why == "all" else args.why.split(",")
        why = {}
        for number, op in enumerate(ops):
            print(f"[{number + 1}/{len(ops)}] {op}", file=sys.stderr)
            why[op] = why_not_judged(op, args.cases, args.seed)
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(why_markdown(why, args.cases), encoding="utf-8")
        print(json.dumps(why, indent=1))
        return
    loadavg_at_start = [round(x, 2) for x in os.getloadavg()]
    ops = args.ops.split(",") if args.ops else sorted(registry())
    rows: dict = {}
    timing = {"check_s": 0.0, "meter_s": 0.0, "cases": 0}
    began = time.perf_counter()
    for number, op in enumerate(ops):
        print(f"[{number + 1}/{len(ops)}] {op}", file=sys.stderr)
        judged_share.tally(rows, meter_op(op, args.cases, args.seed, timing))
    table = judged_share.table(rows)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(markdown(table, args.cases), encoding="utf-8")
    print(json.dumps({
        "ops": len(ops), "cases_per_op": args.cases, "cases": timing["cases"], "seconds": round(time.perf_counter() - began, 1),
        "check_ms_per_case": round(1000 * timing["check_s"] / max(timing["cases"], 1), 2),
        "meter_ms_per_case": round(1000 * timing["meter_s"] / max(timing["cases"], 1), 3),
        "loadavg_at_start": loadavg_at_start, "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        "rows": table,
    }, indent=1))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
