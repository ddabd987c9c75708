"""What the oracle costs per graph: the float64 reference and its honest models, and judging.

Draws the default campaign's cases (its generator, regimes at their shares, `--inputs-per-graph`
input sets a graph, as fuzzer/pipeline.py does), runs the cheap tier in-process once (untimed),
then times `oracle.compute_reference` and the judging of every backend's outputs, split by phase:

    .venv/bin/python bench/oracle_cost.py --graphs 200 --seed 7
    .venv/bin/python bench/oracle_cost.py --graphs 200 --seed 7 --profile 25   # + cProfile top 25

Phases (wall time inside compute_reference, summed over cases, per graph): `float64` (the float64
run, scales and sensitivities), `overflow` (the longdouble run, only where some output is
non-finite), `same_dtype` (numpy in the backend's dtype), `rounding` (the NOISY_RUNS perturbed
runs), `flush` (the flush-to-zero run), `masks` (judged / defined masks and rounding noise);
`judge` is judge_outputs over the backends. Prints one JSON object; verdict counts come with it,
so two runs (before/after a change of the oracle) can be compared.
"""

from __future__ import annotations

import argparse
import cProfile
import collections
import io
import json
import os
import pstats
import sys
import time

import numpy as np

from fuzzer import check, oracle
from fuzzer.arrays import materialize, regime_profiles
from fuzzer.backends import default_backends, parse_backend_list
from fuzzer.execute import run_backend
from fuzzer.pipeline import WorkerConfig, case_generator, seed_for

PHASES = ("float64", "overflow", "same_dtype", "rounding", "flush", "rest", "judge")


class PhaseTimer:
    """Wraps oracle's module functions (and NumpyReference.execute_all) to sum their wall time."""

    def __init__(self):
        self.seconds = collections.Counter()
        self.depth = 0

    def wrap(self, owner, attribute: str, phase):
        original = getattr(owner, attribute)

        def timed(*args, **kwargs):
            name = phase(*args) if callable(phase) else phase
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start

        setattr(owner, attribute, timed)


def cheap_tier() -> list[str]:
    return [b.name for b in parse_backend_list(",".join(default_backends())) if not b.expensive]


def draw(graphs: int, seed: int, inputs_per_graph: int, backend_names: list[str]):
    backends = parse_backend_list(",".join(backend_names))
    generator = case_generator(WorkerConfig(backends=backend_names), backends)
    for index in range(graphs):
        case = generator.case(seed_for(seed, index))
        chosen = [b for b in backends if b.supports_graph(case.graph)]
        for variant in range(inputs_per_graph):
            current = case if variant == 0 else materialize(case.graph, case.seed + variant,
                                                            regime_profiles(case.graph, case.seed + variant))
            yield current, chosen, [run_backend(b, current) for b in chosen]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--inputs-per-graph", type=int, default=2)
    parser.add_argument("--backends", default=",".join(cheap_tier()),
                        help="judged backends (default: the default set's cheap tier)")
    parser.add_argument("--profile", type=int, default=0, help="print cProfile's top N by cumulative time to stderr")
    args = parser.parse_args()

    loadavg_at_start = [round(x, 2) for x in os.getloadavg()]
    print("drawing cases and running backends ...", file=sys.stderr)
    cases = list(draw(args.graphs, args.seed, args.inputs_per_graph, args.backends.split(",")))

    timer = PhaseTimer()
    execute_all = oracle.NumpyReference.execute_all
    timer.wrap(oracle.NumpyReference, "execute_all", lambda self, *rest: "float64" if self.dtype == "float64" else "same_dtype")
    timer.wrap(oracle, "_float64_overflow", "overflow")
    timer.wrap(oracle, "_rounding_runs", "rounding")
    timer.wrap(oracle, "_flush_to_zero_run", "flush")
    # The fast path's functions (oracle.FAST), where this oracle has them.
    if hasattr(oracle, "_rounding_runs_shared"):
        timer.wrap(oracle, "_rounding_runs_shared", "rounding")
        timer.wrap(oracle, "_flush_to_zero_shared", "flush")

    verdict_counts = collections.Counter()
    profiler = cProfile.Profile() if args.profile else None
    total_reference = total_judge = 0.0
    print(f"judging {len(cases)} cases ...", file=sys.stderr)
    if profiler:
        profiler.enable()
    for case, backends, outcomes in cases:
        start = time.perf_counter()
        reference = oracle.compute_reference(case, {b.dtype for b in backends})
        middle = time.perf_counter()
        total_reference += middle - start
        if not reference.defines_anything:
            verdict_counts["invalid"] += 1
            continue
        for backend, outcome in zip(backends, outcomes):
            verdict_counts[check._verdict_of(backend, case, outcome, reference).verdict] += 1
        total_judge += time.perf_counter() - middle
    if profiler:
        profiler.disable()
    oracle.NumpyReference.execute_all = execute_all

    timer.seconds["judge"] = total_judge
    timer.seconds["rest"] = total_reference - sum(timer.seconds[p] for p in PHASES if p not in ("rest", "judge"))
    per_graph = 1000.0 / args.graphs
    result = {
        "graphs": args.graphs, "cases": len(cases), "seed": args.seed, "backends": args.backends.split(","),
        "oracle_ms_per_graph": round((total_reference + total_judge) * per_graph, 2),
        "reference_ms_per_graph": round(total_reference * per_graph, 2),
        "phase_ms_per_graph": {p: round(timer.seconds[p] * per_graph, 2) for p in PHASES},
        "verdicts": dict(sorted(verdict_counts.items())),
        "loadavg_at_start": loadavg_at_start,
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    if profiler:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(args.profile)
        print(text.getvalue(), file=sys.stderr)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
