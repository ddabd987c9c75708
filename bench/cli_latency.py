"""How long `fuzz` makes a person wait: each command timed as a whole process, start-up included.

Builds a corpus in a temp dir from two shipped cases (a torch-eager finding and a jax one), then
runs each command of COMMANDS with each checkout given by --code (its folder goes first on
PYTHONPATH), the checkouts in turn command by command, so that a drift of the machine's load hits
them alike:

    .venv/bin/python bench/cli_latency.py --code . --code /tmp/base --runs 1

`first-line` is the seconds until a campaign's first line on stderr (the process is then
interrupted); every other figure is the seconds until the command exited. Prints one JSON object:
per command and checkout, the median seconds, the exit codes seen and the load average at the start.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TORCH_CASE = REPO / "corpus" / "known" / "torch-cosh-overflow.json"  # imported as case 1
JAX_CASE = REPO / "corpus" / "regression" / "jax-cpu-max-nan-4096.json"  # case 2

COMMANDS = {  # name -> arguments after `fuzz` ({db}, {out}: the temp corpus and an output folder)
    "run --ops typo": ["run", "--db", "{db}", "--max-cases", "1", "--ops", "relux"],
    "run --time typo": ["run", "--db", "{db}", "--time", "5q"],
    "run --compile-share typo": ["run", "--db", "{db}", "--max-cases", "1", "--compile-share", "jax-jt=0.3"],
    "run --backends typo": ["run", "--db", "{db}", "--max-cases", "1", "--backends", "torch-eagr"],
    "show": ["show", "1", "--db", "{db}"],
    "replay (torch case)": ["replay", "1", "--db", "{db}"],
    "replay (jax case)": ["replay", "2", "--db", "{db}"],
    "replay cross-backend": ["replay", "1", "--db", "{db}", "--backends", "torch-eager,jax-jit"],
    "export": ["export", "1", "--db", "{db}", "-o", "{out}/repro.py"],
    "show --rerun": ["show", "1", "--db", "{db}", "--rerun"],
    "first-line": ["run", "--db", "{db}", "--time", "60s", "--workers", "1"],
}


def fuzz_command(code: Path) -> tuple[list[str], dict]:
    env = {**os.environ, "PYTHONPATH": str(code.resolve())}
    return [sys.executable, "-c", "import sys; from fuzzer.cli import main; sys.argv[0] = 'fuzz'; main()"], env


def time_command(code: Path, name: str, args: list[str]) -> tuple[float, int]:
    """(seconds, exit code); for `first-line`, the seconds to the first stderr line."""
    prefix, env = fuzz_command(code)
    started = time.monotonic()
    if name != "first-line":
        done = subprocess.run(prefix + args, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=600)
        return time.monotonic() - started, done.returncode
    process = subprocess.Popen(prefix + args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    process.stderr.readline()
    seconds = time.monotonic() - started
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=120)
    return seconds, process.returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", action="append", type=Path, help="A checkout to time (repeatable; default: this one).")
    parser.add_argument("--runs", type=int, default=1, help="Runs of each command with each checkout.")
    parser.add_argument("--only", help="Comma-separated command names to time (default: all).")
    args = parser.parse_args()
    codes = args.code or [REPO]
    names = args.only.split(",") if args.only else list(COMMANDS)
    results: dict = {"loadavg_at_start": [round(x, 2) for x in os.getloadavg()], "commands": {}}
    with tempfile.TemporaryDirectory() as folder:
        for code in codes:
            db = Path(folder) / f"{code.resolve().name}.db"
            for case in (TORCH_CASE, JAX_CASE):
                prefix, env = fuzz_command(code)
                subprocess.run(prefix + ["import", "--db", str(db), str(case)], env=env, check=True, capture_output=True)
        for name in names:
            per_code = {}
            for code in codes:
                seconds, codes_seen = [], set()
                for _ in range(args.runs):
                    db = Path(folder) / f"{code.resolve().name}.db"
                    out = Path(folder) / "out"
                    shutil.rmtree(out, ignore_errors=True)
                    out.mkdir()
                    filled = [a.format(db=db, out=out) for a in COMMANDS[name]]
                    took, code_seen = time_command(code, name, filled)
                    seconds.append(took)
                    codes_seen.add(code_seen)
                per_code[str(code)] = {"median_s": round(statistics.median(seconds), 1), "exit_codes": sorted(codes_seen)}
                print(f"{name:<26} {str(code):<30} {per_code[str(code)]}", file=sys.stderr)
            results["commands"][name] = per_code
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
