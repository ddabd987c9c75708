"""Do results change with the intra-op thread count? Bits, and the oracle's verdict.

Runs the same generated cases in two worker-like processes, one with `--threads A` and one with
`--threads B` (fuzzer.running.workers.limit_threads), and compares every backend's outputs bit for bit;
where they differ it says whether both still agree with the float64 reference (the tolerance model).

    python bench/thread_bits.py --cases 200 --threads 1 0      # 0: the libraries' defaults
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import sys
from pathlib import Path
from queue import Empty

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BACKENDS = ["torch-eager:cpu:float32", "torch-eager:cpu:float64", "jax-jit:cpu:float32", "jax-eager:cpu:float32",
            "torch-module:cpu:float32", "torch-layout:cpu:float32"]


def run_cases(threads: int, cases: int, seed: int, backends: list[str]) -> dict:
    from fuzzer.running.workers import limit_threads

    limit_threads(threads)
    from fuzzer import oracle, verdicts
    from fuzzer.backends import parse_backend_list
    from fuzzer.drawing.generate import CaseGenerator
    from fuzzer.running.execute import OK, run_backend
    from fuzzer.running.pipeline import campaign_ops, seed_for

    parsed = parse_backend_list(",".join(backends))
    generator = CaseGenerator(campaign_ops(None, parsed), 8)
    results = {}
    for index in range(cases):
        case = generator.case(seed_for(seed, index))
        reference = oracle.compute_reference(case, {b.dtype for b in parsed})
        for backend in parsed:
            if not backend.supports_graph(case.graph):
                continue
            outcome = run_backend(backend, case)
            if outcome.status != OK:
                continue
            digest = hashlib.sha256(b"".join(o.tobytes() for o in outcome.outputs)).hexdigest()
            agrees = reference.defines_anything and oracle.judge_outputs(backend.name, backend.dtype, outcome.outputs,
                                                                reference).verdict == verdicts.AGREE
            results[f"{index}/{backend.name}"] = (digest, bool(agrees))
    return results


def _child(threads, cases, seed, backends, queue):
    queue.put(run_cases(threads, cases, seed, backends))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, nargs=2, default=[1, 0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")  # each side sets its threads before torch/jax start
    runs = []
    for threads in args.threads:
        queue = context.Queue()
        process = context.Process(target=_child, args=(threads, args.cases, args.seed, args.backends.split(","), queue))
        process.start()
        while True:
            try:
                runs.append(queue.get(timeout=5))
                break
            except Empty:
                if not process.is_alive():
                    sys.exit(f"the threads={threads} side died ({process.exitcode})")
        process.join()
    first, second = runs
    common = sorted(set(first) & set(second))
    differ = [key for key in common if first[key][0] != second[key][0]]
    per_backend: dict = {}
    for key in common:
        name = key.split("/", 1)[1]
        entry = per_backend.setdefault(name, {"runs": 0, "bits_differ": 0, "verdict_differs": 0})
        entry["runs"] += 1
        entry["bits_differ"] += key in differ
        entry["verdict_differs"] += first[key][1] != second[key][1]
    print(json.dumps({"threads": args.threads, "cases": args.cases, "cpu_count": os.cpu_count(),
                      "runs_compared": len(common), "bits_differ": len(differ),
                      "verdict_differs": sum(e["verdict_differs"] for e in per_backend.values()),
                      "per_backend": per_backend, "examples": differ[:10]}, indent=2))


if __name__ == "__main__":
    main()
