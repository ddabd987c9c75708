"""Does each compiler keep to its share of worker time? Runs `fuzz run --json` as a user would, under
any interpreter (a venv of an old release that runs the fuzzer itself: its jax-jit-const took 52% of
worker time on jax 0.4.28 once), and sets each compiling backend's measured share of worker time
(the summary's `backend_time_share`) beside the share the compile budget declared for it
(fuzzer/running/budget.py, from the campaign's stored --compile-share).

    python bench/compile_shares.py --time 300 --seed 11
    python bench/compile_shares.py --python ~/venvs/jax-0.4.28/bin/python --time 300 --seed 11

jax's persistent compilation cache starts empty (a re-run of a seed would otherwise hit the first
run's compiles); `--inductor-cache DIR` copies DIR in as inductor's cache, so that two runs (before
and after a change) start from the same warm cache instead of each paying torch.compile's cold start.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from fuzzer.backends import name_backend_list
from fuzzer.corpus import Corpus
from fuzzer.running.budget import parse_shares

REPOSITORY = Path(__file__).resolve().parent.parent


def run(python: str, seconds: float, seed: int, workers: int, backends: str | None, inductor_cache: str | None,
        keep: str | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="fuzz-shares-") as folder:
        db = Path(keep or Path(folder) / "bench.db")
        if inductor_cache:
            shutil.copytree(inductor_cache, Path(folder) / "inductor")
        variables = {**os.environ, "FUZZ_JAX_CACHE": str(Path(folder) / "jax"), "PYTHONPATH": str(REPOSITORY),
                     **({"TORCHINDUCTOR_CACHE_DIR": str(Path(folder) / "inductor")} if inductor_cache else {})}
        command = [python, "-m", "fuzzer.cli", "run", "--db", str(db), "--time", f"{seconds:g}s", "--seed", str(seed),
                   "--workers", str(workers), "--localize-time", "0", "--json", *(["--backends", backends] if backends else [])]
        load = [round(x, 2) for x in os.getloadavg()]
        done = subprocess.run(command, capture_output=True, text=True, env=variables, cwd=REPOSITORY)
        if done.returncode not in (0, 1):
            sys.exit(f"fuzz run exited {done.returncode}: {done.stderr[-2000:]}")
        summary = json.loads(done.stdout)
        config = Corpus(str(db)).campaign(summary["campaign_id"])["config"]
    compiling = [b for b in name_backend_list(",".join(config["backends"])) if b.expensive]
    declared = parse_shares(config["compile_share"], [b.name for b in compiling], {b.name: b.compile_weight for b in compiling})
    measured = summary["backend_time_share"]
    return {"python": python, "seed": seed, "seconds": seconds, "workers": workers, "graphs": summary["graphs"],
            "graphs_per_second": summary["graphs_per_second"], "compile_share": config["compile_share"],
            "new_buckets": summary["new_buckets"], "known_findings": summary["known_findings"],
            "compilers": {name: {"declared": round(share, 3), "measured": measured.get(name, 0.0),
                                 "structures": summary["compiled_structures"].get(name, 0)} for name, share in declared.items()},
            "loadavg_at_start": load, "loadavg_at_end": [round(x, 2) for x in os.getloadavg()]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs `fuzz run` (its torch and jax)")
    parser.add_argument("--time", type=float, default=300, help="seconds")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--backends", help="as `fuzz run --backends` (default: its default set)")
    parser.add_argument("--inductor-cache", help="a warm inductor cache folder, copied in for this run")
    parser.add_argument("--keep", metavar="DB", help="keep the campaign's corpus in this sqlite file (to triage its findings)")
    args = parser.parse_args()
    print(json.dumps(run(args.python, args.time, args.seed, args.workers, args.backends, args.inductor_cache, args.keep), indent=2))


if __name__ == "__main__":
    main()
