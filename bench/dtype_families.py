"""What the dtype families cost the default campaign: `fuzz run --time T --seed S` with the default
--integer-share and --complex-share beside the same campaign with both at 0, started side by side so
that both share the machine's load (on a busy shared machine, runs one after the other measured the
neighbours' load more than ours). Each gets `--workers`; prints graphs/s of each (all graphs, and the
float ones), and the ratio of all graphs/s.

    python bench/dtype_families.py --time 120 --seed 4242 --workers 2
    python bench/dtype_families.py --time 120 --seed 4242 --workers 2 --shares 0.2,0.1   # other shares
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from fuzzer.running.dtype_families import DEFAULT_COMPLEX_SHARE, DEFAULT_INTEGER_SHARE


def start(folder: str, name: str, shares: tuple[float, float], args) -> subprocess.Popen:
    command = [sys.executable, "-m", "fuzzer.cli", "run", "--db", str(Path(folder) / f"{name}.db"), "--time", f"{args.time}s",
               "--seed", str(args.seed), "--workers", str(args.workers), "--localize-time", "0", "--json",
               "--integer-share", str(shares[0]), "--complex-share", str(shares[1])]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def summary(process: subprocess.Popen) -> dict:
    data = json.loads(process.communicate()[0])
    regimes = data["regime_counts"]
    family = sum(count for regime, count in regimes.items() if "integers" in regime or "complex" in regime)
    return {"graphs": data["graphs"], "elapsed_s": round(data["elapsed"], 1), "graphs_per_s": data["graphs_per_second"],
            "family_graphs": family, "float_graphs_per_s": round((data["graphs"] - family) / data["elapsed"], 2),
            "compiled_structures": sum(data["compiled_structures"].values()), "findings": data["finding_cases"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time", type=int, default=120)
    parser.add_argument("--seed", type=int, default=4242)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--float-first", action="store_true", help="start the float-only campaign first")
    parser.add_argument("--shares", default=f"{DEFAULT_INTEGER_SHARE},{DEFAULT_COMPLEX_SHARE}", help="INTEGER,COMPLEX")
    args = parser.parse_args()
    shares = tuple(float(part) for part in args.shares.split(","))
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory() as folder:
        # Which one starts first: their cold starts overlap, perhaps not equally; run both orders.
        order = ("float_only", "families") if args.float_first else ("families", "float_only")
        settings = {"families": shares, "float_only": (0.0, 0.0)}
        runs = {name: start(folder, name, settings[name], args) for name in order}
        result = {name: summary(process) for name, process in runs.items()}
    result["ratio"] = round(result["families"]["graphs_per_s"] / max(result["float_only"]["graphs_per_s"], 1e-9), 3)
    result.update(float_first=args.float_first, shares=shares, seed=args.seed, workers=args.workers, loadavg_at_start=load_at_start,
                  loadavg_at_end=[round(x, 2) for x in os.getloadavg()])
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
