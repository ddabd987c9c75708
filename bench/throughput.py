"""Campaign throughput on this machine: graphs/s, cases/s, new structures compiled per second per
compiler, and where worker time goes.

Runs a real campaign (isolated workers, real sqlite file in a temp dir) for a fixed wall time.

    python bench/throughput.py --time 60 --workers 2
    python bench/throughput.py --time 60 --workers 1 --backends torch-eager,jax-jit
    python bench/throughput.py --time 60 --workers 2 --threads 0     # the libraries' default thread pools
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from fuzzer.backends import default_backends
from fuzzer.corpus import Corpus
from fuzzer.running.budget import DEFAULT_SHARE
from fuzzer.running.campaign import CampaignOptions, run_campaign
from fuzzer.running.workers import warm_template


def measure(backends: list[str], seconds: float, workers: int, inputs_per_graph: int = 2, compile_share: str = DEFAULT_SHARE,
            max_nodes: int = 8, seed: int = 0, threads: int = 1, regimes: list[str] | None = None) -> dict:
    warm_template()  # as `fuzz run` does: the fork server imports while this process does
    with tempfile.TemporaryDirectory() as folder:
        corpus = Corpus(Path(folder) / "bench.db")
        options = CampaignOptions(backends=backends, time_limit=seconds, workers=workers, max_nodes=max_nodes, seed=seed,
                                  inputs_per_graph=inputs_per_graph, compile_share=compile_share, shrink_time=10,
                                  threads=threads, regimes=regimes)
        start = time.monotonic()
        progress = run_campaign(corpus, options)
        wall = time.monotonic() - start
    executions = progress.checked * len(backends)  # upper bound: compiling backends run on a share
    return {
        "backends": backends, "workers": workers, "threads": threads, "compile_share": compile_share,
        "inputs_per_graph": inputs_per_graph, "wall_s": round(wall, 1),
        "graphs": progress.graphs, "cases": progress.checked, "findings": progress.finding_cases,
        "abandoned_at_deadline": progress.abandoned, "first_graph_s": progress.first_graph_s,
        "graphs_per_s": round(progress.graphs / wall, 2), "cases_per_s": round(progress.checked / wall, 2),
        "structures_per_s": {k: round(v / wall, 3) for k, v in sorted(progress.compiled_structures.items())},
        "not_compiled": progress.not_compiled, "budget_skipped": progress.budget_skipped,
        "backend_executions_per_s_upper": round(executions / wall, 1),
        "backend_time_share": progress.backend_time_share(),
        "backend_seconds": {k: round(v, 1) for k, v in sorted(progress.backend_seconds.items())},
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time", type=float, default=60)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backends", default=",".join(default_backends()))
    parser.add_argument("--inputs-per-graph", type=int, default=2)
    parser.add_argument("--compile-share", default=DEFAULT_SHARE, help="as `fuzz run --compile-share`")
    parser.add_argument("--threads", type=int, default=1, help="as `fuzz run --threads` (0: library defaults)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--regimes", help="as `fuzz run --regimes` (default: all, at their shares); 'small' is last round's region")
    parser.add_argument("--cold", action="store_true",
                        help="Empty jax and inductor compilation caches and inductor's ISA answers (a first campaign on a new machine); "
                             "without it, re-running a seed measures warm disk caches.")
    args = parser.parse_args()
    if args.cold:
        cache = tempfile.mkdtemp(prefix="fuzz-bench-cache-")
        os.environ["FUZZ_JAX_CACHE"] = os.path.join(cache, "jax")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
        os.environ["FUZZ_INDUCTOR_ISA_CACHE"] = os.path.join(cache, "inductor-isa.json")
    loadavg_at_start = [round(x, 2) for x in os.getloadavg()]
    result = measure(args.backends.split(","), args.time, args.workers, args.inputs_per_graph, args.compile_share,
                     seed=args.seed, threads=args.threads, regimes=args.regimes.split(",") if args.regimes else None)
    result["loadavg_at_start"] = loadavg_at_start
    result["seed"], result["cold_caches"] = args.seed, args.cold
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
