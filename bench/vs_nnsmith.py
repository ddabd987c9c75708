"""Our campaign's throughput against NNSmith 0.1.0's, same machine, same graph size, same workers, same wall time.

    python bench/vs_nnsmith.py --time 100 --workers 1
    python bench/vs_nnsmith.py --time 30 --nnsmith-only     # or --ours-only

NNSmith and ours run AT THE SAME TIME, each pinned to half the cores (sched_setaffinity), so load
from elsewhere hits both alike. Two such sessions: NNSmith against our default CPU set, then
NNSmith against our `torch-jit-trace` tier alone (the compiler NNSmith's torchjit backend uses:
apples to apples). Three ratios come out: default set graphs/s over NNSmith's, torch-jit-trace
graphs/s over NNSmith's, and each of our compilers' new structures/s over NNSmith's (every NNSmith
test case is one new structure compiled by torchjit). Ours is bench/throughput.py run as a
subprocess. One JSON object goes to stdout, progress to stderr. NNSmith lives in its own venv (default bench/.nnsmith-venv), which this script
creates when missing: torch==2.13.0 first (the CPU wheel on disk), then "nnsmith[torch]==0.1.0" with
torch constrained to 2.13.0 so pip cannot replace it.

What is counted (see bench/README.md):
- NNSmith: `python -m nnsmith.cli.fuzz model.type=torch backend.type=torchjit mgen.max_nodes=8
  fuzz.time=T`, one process per worker. A test case is one new graph with one input set: the graph is
  run in PyTorch eager to make the oracle (the reference), then traced+frozen+optimized by torchjit
  and run, and the two are compared. Counts come from its own log (`Total N testcases generated.`,
  the per-test `Timing:` lines, hydra's timestamps). So per test case: 1 graph, 1 backend execution
  (torchjit compile+run), 2 executions counting the reference.
- Ours: `measure()`: per graph `inputs_per_graph` cases; every case runs the float64 reference
  and the cheap backends; each compiling backend (jax-jit, torch.compile, jax eager) runs on the
  graphs its share of worker time buys (`--compile-share`, fuzzer/running/budget.py), and its count of new
  structures compiled comes back from the workers. Its jax and inductor disk caches start empty
  (`--cold`): with the same seed a second run would otherwise count cache hits as compiles.
- graphs/s is the headline. NNSmith's is given over its fuzzing loop (its own `fuzz.time` clock,
  start-up excluded: favourable to NNSmith) and over the process wall time (start-up included);
  ours over measure's wall time, which includes worker start-up. `ratio` uses NNSmith's loop rate.

Exit status 2, with one line saying why, when NNSmith 0.1.0 cannot be installed or run here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_VENV = REPO / "bench" / ".nnsmith-venv"
NNSMITH_VERSION = "0.1.0"
TORCH_VERSION = "2.13.0"
MAX_NODES = 8
STARTUP_ALLOWANCE_S = 600  # beyond --time, before an NNSmith process is declared hung


class Unavailable(Exception):
    """NNSmith cannot be installed or run here; the message is the one line printed."""


def log(message: str) -> None:
    print(f"[vs_nnsmith] {message}", file=sys.stderr, flush=True)


def one_line(text: str, limit: int = 300) -> str:
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "no output")[:limit]


# -- NNSmith's venv -------------------------------------------------------------------------

def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def probe(venv: Path) -> dict | None:
    """Versions in the venv, or None when it lacks a working nnsmith."""
    python = venv_python(venv)
    if not python.exists():
        return None
    code = ("import json, torch, nnsmith, numpy, z3; from nnsmith.narrow_spec import NNSMITH_CACHE_DIR; "
            "print(json.dumps({'torch': torch.__version__, 'nnsmith': nnsmith.__version__, "
            "'numpy': numpy.__version__, 'z3': z3.get_version_string(), 'cache_dir': NNSMITH_CACHE_DIR}))")
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return None
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def pip(venv: Path, *args: str) -> None:
    command = [str(venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check", *args]
    log("$ " + " ".join(command))
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise Unavailable(f"`pip install {' '.join(args)}` failed: {one_line(done.stderr or done.stdout)}")


def ensure_nnsmith(venv: Path, install: bool) -> dict:
    versions = probe(venv)
    if versions is None:
        if not install:
            raise Unavailable(f"no working NNSmith in {venv} and --no-install was given")
        log(f"installing NNSmith {NNSMITH_VERSION} into {venv} (one time)")
        if not venv_python(venv).exists():
            # The interpreter running this script: same minor version as the torch CPU wheel on disk.
            done = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
            if done.returncode != 0:
                raise Unavailable(f"`python -m venv {venv}` failed: {one_line(done.stderr or done.stdout)}")
        # torch first: a bare `torch` requirement (nnsmith[torch]) could otherwise pull a CUDA build.
        pip(venv, f"torch=={TORCH_VERSION}")
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as constraints:
            constraints.write(f"torch=={TORCH_VERSION}\n")
        try:
            pip(venv, "-c", constraints.name, f"nnsmith[torch]=={NNSMITH_VERSION}")
        finally:
            os.unlink(constraints.name)
        versions = probe(venv)
        if versions is None:
            python = venv_python(venv)
            done = subprocess.run([str(python), "-c", "import nnsmith.cli.fuzz"], capture_output=True, text=True)
            raise Unavailable(f"nnsmith installed but does not import: {one_line(done.stderr)}")
    if versions["nnsmith"] != NNSMITH_VERSION:
        raise Unavailable(f"{venv} has nnsmith {versions['nnsmith']}, not {NNSMITH_VERSION}; remove the venv to reinstall")
    if not versions["torch"].startswith(TORCH_VERSION):
        raise Unavailable(f"{venv} has torch {versions['torch']}, not {TORCH_VERSION}; remove the venv to reinstall")
    return versions


# -- running NNSmith -----------------------------------------------------------------------

STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[(\w+)\]\[(\w+)\] - (.*)$")
TIMING = re.compile(r"Timing: gen: ([\d.]+)ms, eval: ([\d.]+)ms")


def parse_fuzz_log(path: Path) -> dict:
    """Counts and loop times from NNSmith's hydra file log (fuzz.log)."""
    result = {"testcases": None, "bugs": None, "failed_make": None, "timing_lines": 0, "gen_ms": 0.0,
              "eval_ms": 0.0, "loop_start": None, "loop_end": None, "last_line": None, "errors": []}
    if not path.exists():
        return result
    for line in path.read_text(errors="replace").splitlines():
        match = STAMP.match(line)
        if not match:
            continue
        stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        logger, level, message = match.group(2), match.group(3), match.group(4)
        result["last_line"] = stamp
        if "Test success info supressed" in message:
            result["loop_start"] = stamp
        elif timing := TIMING.search(message):
            result["timing_lines"] += 1
            result["gen_ms"] += float(timing.group(1))
            result["eval_ms"] += float(timing.group(2))
            result["loop_end"] = stamp
        elif total := re.search(r"Total (\d+) testcases generated", message):
            result["testcases"] = int(total.group(1))
            result["loop_end"] = stamp
        elif total := re.search(r"Total (\d+) bugs found", message):
            result["bugs"] = int(total.group(1))
        elif total := re.search(r"Total (\d+) failed to make testcases", message):
            result["failed_make"] = int(total.group(1))
        if level in ("ERROR", "CRITICAL") and len(result["errors"]) < 5:
            result["errors"].append(f"[{logger}] {message[:200]}")
    return result


def nnsmith_command(python: Path, seconds: int, root: Path, hydra_dir: Path, seed: int) -> list[str]:
    return [str(python), "-m", "nnsmith.cli.fuzz", f"fuzz.time={seconds}s", "model.type=torch",
            "backend.type=torchjit", f"fuzz.root={root}", f"mgen.max_nodes={MAX_NODES}", f"fuzz.seed={seed}",
            f"hydra.run.dir={hydra_dir}"]


def warm_topset_cache(venv: Path, versions: dict, folder: Path) -> float:
    """NNSmith infers which ops/dtypes the backend supports once and caches it (~15 s); do that untimed."""
    cache = Path(versions["cache_dir"])
    if any(cache.glob("*torchjit*cpu*.yaml")):
        return 0.0
    log(f"NNSmith: first run on this machine, inferring its op/dtype table into {cache} (untimed)")
    start = time.monotonic()
    run = folder / "warmup"
    with open(folder / "warmup.out", "w") as out:
        done = subprocess.run(nnsmith_command(venv_python(venv), 1, run / "root", run / "hydra", 1),
                              stdout=out, stderr=subprocess.STDOUT, cwd=folder, timeout=STARTUP_ALLOWANCE_S)
    if done.returncode != 0:
        raise Unavailable(f"NNSmith's first run failed (exit {done.returncode}): "
                          f"{one_line((folder / 'warmup.out').read_text(errors='replace'))}")
    return time.monotonic() - start


def pin_to(cores: list[int] | None):
    """A preexec_fn running the child on these cores only (None: anywhere)."""
    if not cores or not hasattr(os, "sched_setaffinity"):
        return None
    return lambda: os.sched_setaffinity(0, cores)


def split_cores() -> tuple[list[int], list[int]]:
    """Half the usable cores for NNSmith, half for ours (one each on a 2-core machine)."""
    usable = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    half = max(1, len(usable) // 2)
    return usable[:half], usable[half:] or usable[:half]


def nnsmith_worker(venv: Path, folder: Path, worker: int, seconds: float, seed: int, outcome: dict,
                   cores: list[int] | None = None) -> None:
    """One NNSmith fuzzing process for `seconds` of fuzzing; restarted for the rest of the time if it dies
    (NNSmith's default, fuzz.crash_safe=false, runs backends in-process, so a backend crash ends it)."""
    runs, start = [], time.monotonic()
    deadline = start + seconds
    while True:
        remaining = int(round(deadline - time.monotonic()))
        if remaining < 2 and runs:
            break
        remaining = max(remaining, 1)
        run = folder / f"w{worker}-r{len(runs)}"
        command = nnsmith_command(venv_python(venv), remaining, run / "root", run / "hydra", seed + 1000 * len(runs))
        run_start = time.monotonic()
        with open(folder / f"w{worker}-r{len(runs)}.out", "w") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=folder, preexec_fn=pin_to(cores))
            try:
                code = process.wait(timeout=remaining + STARTUP_ALLOWANCE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                code = "hung (killed)"
        parsed = parse_fuzz_log(run / "hydra" / "fuzz.log")
        parsed.update(exit=code, wall_s=time.monotonic() - run_start,
                      tail=one_line((folder / f"w{worker}-r{len(runs)}.out").read_text(errors="replace")))
        runs.append(parsed)
        if code != 0 and not parsed["timing_lines"]:
            break  # it fails before its first test case: restarting would only repeat that
        if code == 0:
            break
        log(f"NNSmith worker {worker} exited with {code} after {parsed['timing_lines']} test cases "
            f"({parsed['tail']}); restarting for the remaining time")
    outcome[worker] = {"runs": runs, "wall_s": time.monotonic() - start}


def run_nnsmith(venv: Path, versions: dict, seconds: float, workers: int, seed: int, keep: Path | None,
                cores: list[int] | None = None) -> dict:
    folder = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="vs-nnsmith-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        warmup_s = warm_topset_cache(venv, versions, folder)
        log(f"NNSmith: {workers} process(es), {seconds:g} s of fuzzing each, max_nodes={MAX_NODES}, backend torchjit, "
            f"cores {cores or 'any'}")
        outcome: dict = {}
        start = time.monotonic()
        threads = [threading.Thread(target=nnsmith_worker, args=(venv, folder, w, seconds, seed + w + 1, outcome, cores))
                   for w in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.monotonic() - start
        runs = [run for w in range(workers) for run in outcome[w]["runs"]]
        if not any(run["timing_lines"] for run in runs):
            first = runs[0]
            raise Unavailable(f"NNSmith ran no test case (exit {first['exit']}): "
                              f"{first['errors'][0] if first['errors'] else first['tail']}")
        # Its own total where it printed one; the Timing lines (one per finished test case) where it died first.
        testcases = sum(run["testcases"] if run["testcases"] is not None else run["timing_lines"] for run in runs)
        timed = sum(run["timing_lines"] for run in runs) or 1
        loop_s = [sum((run["loop_end"] or run["last_line"] or 0) - (run["loop_start"] or run["last_line"] or 0)
                      for run in outcome[w]["runs"]) for w in range(workers)]
        loop_rate = sum(
            sum(run["testcases"] if run["testcases"] is not None else run["timing_lines"] for run in outcome[w]["runs"])
            / max(loop_s[w], 1e-9) for w in range(workers))
        return {
            "tool": f"NNSmith {versions['nnsmith']} (nnsmith.cli.fuzz, model.type=torch, backend.type=torchjit, "
                    f"cmp against its torch-eager oracle)",
            "workers": workers, "cores": cores, "max_nodes": MAX_NODES, "fuzz_time_s": seconds, "wall_s": round(wall, 1),
            "fuzz_loop_s": [round(s, 1) for s in loop_s],
            "startup_s": round(wall - max(loop_s), 1),
            "testcases": testcases, "graphs": testcases,
            "bugs_reported": sum(run["bugs"] or 0 for run in runs),
            "failed_to_make_testcase": sum(run["failed_make"] or 0 for run in runs),
            "process_restarts": len(runs) - workers,
            "exits": [run["exit"] for run in runs],
            "graphs_per_s": round(loop_rate, 2),
            "graphs_per_s_incl_startup": round(testcases / wall, 2),
            "backend_executions_per_s": round(loop_rate * 1, 2),
            "executions_incl_reference_per_s": round(loop_rate * 2, 2),
            "mean_gen_ms": round(sum(run["gen_ms"] for run in runs) / timed, 1),
            "mean_eval_ms": round(sum(run["eval_ms"] for run in runs) / timed, 1),
            "untimed_topset_warmup_s": round(warmup_s, 1),
            "counted": "per test case: 1 new graph, 1 input set; 1 backend execution (torchjit trace+freeze+"
                       "optimize_for_inference, then run) + 1 reference execution (PyTorch eager oracle)",
            "logs": str(folder) if keep else None,
            "versions": {k: v for k, v in versions.items() if k != "cache_dir"},
        }
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


# -- ours ----------------------------------------------------------------------------------

def run_ours(backends: list[str] | None, seconds: float, workers: int, inputs_per_graph: int, compile_share: str,
             seed: int, cores: list[int] | None = None) -> dict:
    """bench/throughput.py in a subprocess pinned to `cores` (its workers inherit the affinity)."""
    sys.path.insert(0, str(REPO))
    from fuzzer.backends import default_backends

    backends = list(backends or default_backends())
    log(f"ours: {workers} worker(s), {seconds:g} s, max_nodes={MAX_NODES}, cores {cores or 'any'}, "
        f"backends {','.join(backends)}")
    command = [sys.executable, str(REPO / "bench" / "throughput.py"), "--time", str(seconds), "--workers", str(workers),
               "--backends", ",".join(backends), "--inputs-per-graph", str(inputs_per_graph),
               "--compile-share", compile_share, "--seed", str(seed), "--cold"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, preexec_fn=pin_to(cores),
                          timeout=seconds + STARTUP_ALLOWANCE_S)
    if done.returncode != 0:
        raise RuntimeError(f"bench/throughput.py failed (exit {done.returncode}): {one_line(done.stderr)}")
    detail = json.loads(done.stdout)
    return {
        "tool": "ours (bench/throughput.py measure, real campaign: isolated workers, sqlite corpus, shrinking on)",
        "workers": workers, "cores": cores, "max_nodes": MAX_NODES, "fuzz_time_s": seconds, "wall_s": detail["wall_s"],
        "backends": backends, "inputs_per_graph": inputs_per_graph, "compile_share": compile_share,
        "graphs": detail["graphs"], "cases": detail["cases"], "findings": detail.get("findings"),
        "graphs_per_s": detail["graphs_per_s"], "cases_per_s": detail["cases_per_s"],
        "structures_per_s": detail["structures_per_s"],
        "counted": f"per graph {inputs_per_graph} cases (input/weight sets); per case 1 float64 reference + every cheap "
                   "backend; each compiling backend on the graphs its share of worker time buys",
        "detail": detail,
    }


def run_session(args, versions: dict, backends: list[str] | None) -> dict:
    """NNSmith and ours side by side, each on half the cores; returns both results."""
    nnsmith_cores, our_cores = split_cores()
    results: dict = {}

    def nnsmith_side():
        results["nnsmith"] = run_nnsmith(args.venv, versions, args.time, args.workers, args.seed, args.keep_logs,
                                         nnsmith_cores)

    side = threading.Thread(target=nnsmith_side)
    side.start()
    results["ours"] = run_ours(backends, args.time, args.workers, args.inputs_per_graph, args.compile_share, args.seed,
                               our_cores)
    side.join()
    if "nnsmith" not in results:
        raise Unavailable("the NNSmith side ended without a result (see the messages above)")
    return results


def ratio(ours: float, theirs: float) -> float | None:
    return round(ours / theirs, 2) if theirs else None


# -- the machine ---------------------------------------------------------------------------

def machine(nnsmith_versions: dict | None) -> dict:
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    info = {"cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else os.cpu_count(), "cpu": cpu, "platform": platform.platform(), "python": platform.python_version(),
            }
    try:
        import torch
        info["torch_ours"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    except ImportError:
        pass
    if nnsmith_versions:
        info["torch_nnsmith"] = nnsmith_versions["torch"]
    return info


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time", type=float, default=100, help="seconds of fuzzing for each side (default 100)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes for each side (default 1)")
    side = parser.add_mutually_exclusive_group()
    side.add_argument("--ours-only", action="store_true")
    side.add_argument("--nnsmith-only", action="store_true")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help=f"NNSmith's venv (default {DEFAULT_VENV})")
    parser.add_argument("--no-install", action="store_true", help="fail instead of creating NNSmith's venv")
    parser.add_argument("--backends", default=None, help="ours: comma-separated (default: our CPU default set)")
    parser.add_argument("--inputs-per-graph", type=int, default=2)
    parser.add_argument("--compile-share", default="0.6", help="ours: as `fuzz run --compile-share` (its default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-logs", type=Path, default=None, help="keep NNSmith's logs and outputs in this folder")
    args = parser.parse_args()
    if args.time < 2 or args.workers < 1:
        parser.error("--time must be >= 2 and --workers >= 1")

    result: dict = {"time_s": args.time, "workers": args.workers, "max_nodes": MAX_NODES}
    loadavg_at_start = [round(x, 2) for x in os.getloadavg()]
    backends = args.backends.split(",") if args.backends else None
    versions = None
    try:
        if args.ours_only:
            result["ours"] = run_ours(backends, args.time, args.workers, args.inputs_per_graph, args.compile_share, args.seed)
        else:
            versions = ensure_nnsmith(args.venv, install=not args.no_install)
            if args.nnsmith_only:
                result["nnsmith"] = run_nnsmith(args.venv, versions, args.time, args.workers, args.seed, args.keep_logs)
            else:
                warm_topset_cache(args.venv, versions, Path(tempfile.mkdtemp(prefix="vs-nnsmith-warmup-")))
                default = run_session(args, versions, backends)
                trace = run_session(args, versions, ["torch-jit-trace:cpu:float32"])
                result["sessions"] = {"default_set": default, "torch_jit_trace_tier": trace}
                theirs = default["nnsmith"]["graphs_per_s"]
                result["ratios"] = {
                    "default_set_graphs_per_s_over_nnsmith": ratio(default["ours"]["graphs_per_s"], theirs),
                    "torch_jit_trace_graphs_per_s_over_nnsmith": ratio(trace["ours"]["graphs_per_s"],
                                                                        trace["nnsmith"]["graphs_per_s"]),
                    # Every NNSmith test case is one new structure compiled by torchjit.
                    "structures_per_s_over_nnsmith": {name: ratio(rate, theirs) for name, rate in
                                                      default["ours"]["structures_per_s"].items()},
                }
    except Unavailable as why:
        print(f"NNSmith {NNSMITH_VERSION} unavailable: {why}", file=sys.stderr, flush=True)
        return 2
    except (OSError, subprocess.SubprocessError) as why:
        print(f"NNSmith {NNSMITH_VERSION} unavailable: {type(why).__name__}: {one_line(str(why))}",
              file=sys.stderr, flush=True)
        return 2
    result["machine"] = machine(versions)
    result["machine"]["loadavg_at_start"] = loadavg_at_start
    result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
