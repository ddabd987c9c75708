"""Throughput on a GPU machine: start-up, the eager tier's graphs/s, the compiled tier's structures/s.

    python bench/gpu.py --workers 14 --time 60 --out reports/gpu-throughput.json

Three real campaigns (bench/throughput.py's `measure`: isolated workers, sqlite corpus in a temp
dir), each for --time seconds on --workers workers:
- eager:     torch eager on cuda float32 and float16 and on cpu float32 (no compiler): start-up
             (`first_graph_s`, seconds from the start to the first checked graph) and graphs/s;
- cpu,gpu:   the full cpu and gpu sets with the compile budget: graphs/s, new structures compiled
             per second per compiler, each backend's share of worker time, and `wall_s` against
             --time (a campaign must end within a few seconds of it);
- threads:   the eager tier again with the libraries' default thread pools (`--threads 0`), to
             show what one intra-op thread per worker buys.
The issue's targets (14 workers, H100): first graph <= 5 s, eager tier >= 1000 graphs/s, a 60 s
cpu,gpu campaign over by 65 s with hundreds of graphs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.throughput import measure  # noqa: E402
from fuzzer.backends import parse_backend_list  # noqa: E402
from fuzzer.errors import UserError  # noqa: E402
from fuzzer.running.budget import DEFAULT_SHARE  # noqa: E402

EAGER_TIER = ["torch-eager:cuda:float32", "torch-eager:cuda:float16", "torch-eager:cpu:float32"]


def gpu_name() -> str:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30)
        return done.stdout.strip() or done.stderr.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi failed: {exc}"


def versions() -> dict:
    found = {}
    for module in ("torch", "jax", "jaxlib"):
        try:
            found[module] = __import__(module).__version__
        except ImportError:
            found[module] = None
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    parser.add_argument("--time", type=float, default=60)
    parser.add_argument("--compile-share", default=DEFAULT_SHARE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip", nargs="*", default=[], choices=["eager", "cpu,gpu", "threads"])
    parser.add_argument("--out", type=Path, help="also write the JSON here (e.g. reports/gpu-throughput.json)")
    args = parser.parse_args()

    try:
        full_set = [b.name for b in parse_backend_list("cpu,gpu")]
    except UserError as why:  # no CUDA, or jax without its CUDA plugin
        sys.exit(f"bench/gpu.py needs a GPU machine: {why}")
    runs = {"eager": (EAGER_TIER, 1), "cpu,gpu": (full_set, 1), "threads": (EAGER_TIER, 0)}
    result = {"machine": {"gpu": gpu_name(), "cores": os.cpu_count(), "loadavg_at_start": os.getloadavg(),
                          **versions()},
              "workers": args.workers, "time_s": args.time}
    for name, (backends, threads) in runs.items():
        if name in args.skip:
            continue
        print(f"[gpu bench] {name}: {len(backends)} backends, {args.workers} workers, {args.time:g} s, "
              f"threads {threads or 'default'}", file=sys.stderr, flush=True)
        detail = measure(backends, args.time, args.workers, compile_share=args.compile_share, seed=args.seed,
                         threads=threads)
        result[name] = {key: detail[key] for key in (
            "first_graph_s", "wall_s", "graphs", "cases", "graphs_per_s", "cases_per_s", "structures_per_s",
            "not_compiled", "abandoned_at_deadline", "findings", "backend_time_share", "loadavg_at_end")}
    result["machine"]["loadavg_at_end"] = os.getloadavg()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
