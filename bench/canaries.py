"""Time to find and shrink each canary, median over several seeds (the selftest, measured).

    python bench/canaries.py --seeds 5

For each canary and seed: a campaign against the canary backend alone (1 worker,
stop at the first finding), then the stored shrunk case's size. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from fuzzer.corpus import Corpus
from fuzzer.plugins import canary_names
from fuzzer.running.selftest import run_selftest


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--max-cases", type=int, default=300)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    runs = {name: [] for name in canary_names()}
    with tempfile.TemporaryDirectory() as folder:
        corpus = Corpus(Path(folder) / "canaries.db")
        for seed in range(args.seeds):
            for result in run_selftest(corpus, args.max_cases, seed, device=args.device):
                shrink_log = corpus.get_case(result["shrunk_case"]).shrink_log if result["shrunk_case"] else {}
                runs[result["canary"]].append({**result, "shrink_seconds": shrink_log.get("seconds")})
    summary = {}
    for name, results in runs.items():
        found = [r for r in results if r["found"]]
        def median(key):
            values = [r[key] for r in found if r[key] is not None]
            return statistics.median(values) if values else None

        summary[name] = {
            "found": f"{len(found)}/{len(results)}",
            "median_seconds_to_find": median("seconds"),
            "median_graphs_to_find": median("graphs"),
            "median_shrink_seconds": median("shrink_seconds"),
            "median_shrunk_nodes": median("shrunk_nodes"),
            "shrunk_ops": sorted({r["shrunk_ops"] for r in found if r["shrunk_ops"]}),
        }
    print(json.dumps({"device": args.device, "seeds": args.seeds, "canaries": summary}, indent=2))


if __name__ == "__main__":
    main()
