"""The judged-share table of every op: what the oracle judges of one-op graphs, per dtype and eager backend.

Draws `--cases` one-op graphs per op (the campaign's one-op generator, every regime at its share),
checks each on torch-eager and jax-eager in float32, float16 and bfloat16 (CPU, in-process, as
check.check_case does in a campaign) and meters them (fuzzer/judged_share.py): the share of output
entries judged and the median allowance in units of the dtype's unit roundoff u. Prints one JSON
object (the rows, the meter's own time against check_case's) and writes a Markdown table, least
judged first:

    .venv/bin/python bench/judged_share.py --cases 10 --out reports/judged-share/table.md

A one-op graph makes the attribution exact: every entry counted for an op is that op's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from fuzzer import judged_share
from fuzzer.backends import get_backend
from fuzzer.check import check_case
from fuzzer.errors import InternalError
from fuzzer.generate import CaseGenerator
from fuzzer.ops import registry
from fuzzer.regimes import parse_regime_list

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
    args = parser.parse_args()

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
