"""Campaign throughput on this machine: graphs/s, cases/s, backend executions/s and where time goes.

Runs a real campaign (isolated workers, real sqlite file in a temp dir) for a fixed wall time.

    python bench/throughput.py --time 60 --workers 2
    python bench/throughput.py --time 60 --workers 1 --backends torch-eager,jax-jit
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from fuzzer.backends import DEFAULT_BACKENDS
from fuzzer.campaign import CampaignOptions, run_campaign
from fuzzer.corpus import Corpus


def measure(backends: list[str], seconds: float, workers: int, inputs_per_graph: int, compile_every: int,
            max_nodes: int = 8, seed: int = 0) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        corpus = Corpus(Path(folder) / "bench.db")
        options = CampaignOptions(backends=backends, time_limit=seconds, workers=workers, max_nodes=max_nodes, seed=seed,
                                  inputs_per_graph=inputs_per_graph, expensive_every=compile_every, shrink_time=10)
        start = time.monotonic()
        progress = run_campaign(corpus, options)
        wall = time.monotonic() - start
    busy = sum(progress.backend_seconds.values()) or 1.0
    executions = progress.checked * len(backends)  # upper bound: expensive backends run on a sample
    return {
        "backends": backends, "workers": workers, "inputs_per_graph": inputs_per_graph, "wall_s": round(wall, 1),
        "graphs": progress.graphs, "cases": progress.checked, "findings": progress.finding_cases,
        "graphs_per_s": round(progress.graphs / wall, 2), "cases_per_s": round(progress.checked / wall, 2),
        "backend_executions_per_s_upper": round(executions / wall, 1),
        "backend_time_share": {k: round(v / busy, 3) for k, v in sorted(progress.backend_seconds.items())},
        "backend_seconds": {k: round(v, 1) for k, v in sorted(progress.backend_seconds.items())},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time", type=float, default=60)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backends", default=",".join(DEFAULT_BACKENDS))
    parser.add_argument("--inputs-per-graph", type=int, default=2)
    parser.add_argument("--compile-every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cold", action="store_true",
                        help="Empty jax and inductor compilation caches (a first campaign on a new machine); "
                             "without it, re-running a seed measures warm disk caches.")
    args = parser.parse_args()
    if args.cold:
        cache = tempfile.mkdtemp(prefix="fuzz-bench-cache-")
        os.environ["FUZZ_JAX_CACHE"] = os.path.join(cache, "jax")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
    result = measure(args.backends.split(","), args.time, args.workers, args.inputs_per_graph, args.compile_every,
                     seed=args.seed)
    result["seed"], result["cold_caches"] = args.seed, args.cold
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
