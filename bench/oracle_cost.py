"""What the oracle costs per graph: the float64 reference and its honest models, and judging.

Draws the default campaign's cases (its generator, regimes at their shares, `--inputs-per-graph`
input sets a graph, as fuzzer/running/pipeline.py does), runs the cheap tier in-process once (untimed),
then times `oracle.compute_reference` and the judging of every backend's outputs, as
check.check_case judges them (before its re-runs and localization), on two paths case by case in
alternating order: `full` computes every honest model (oracle.paths.LAZY off, the oracle before the lazy
path) and `lazy` only those a verdict needs (see "Cost" in fuzzer/oracle/paths.py). Each is split by phase:

    .venv/bin/python bench/oracle_cost.py --graphs 200 --seed 7
    .venv/bin/python bench/oracle_cost.py --graphs 200 --seed 7 --profile 25   # + cProfile top 25

Phases (wall time, summed over cases, per graph, from each Reference's model_costs): `float64`
(the float64 run), `overflow` (the longdouble run, only where some output is non-finite),
`same_dtype` (numpy in the backend's dtype, and float16's float32-opmath model), `rounding` (the
perturbed and the directed runs), `flush` (the flush-to-zero runs), `rest` (scales and
sensitivities, masks and rounding noise, judging the backends). Prints one JSON object: per path
the ms per graph and per case, the phases, each honest model's runs and ms per graph (models.MODELS),
the verdict counts and the cases whose honest models were computed; then lazy's time over full's,
and the cases whose verdicts differ (the one difference "Cost" documents: `invalid` with the
models, every backend agreeing at the floor without them).
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

from fuzzer import oracle
from fuzzer.arrays import materialize, regime_profiles
from fuzzer.backends import default_backends, parse_backend_list
from fuzzer.judging.backend_verdict import verdict_of
from fuzzer.running.execute import run_backend
from fuzzer.running.pipeline import WorkerConfig, case_generator, seed_for

PHASES = ("float64", "overflow", "same_dtype", "rounding", "flush", "rest")


# Which phase each of Reference.model_costs' entries is part of.
PHASE_OF = {"float64": "float64", "longdouble-overflow": "overflow", "same-dtype": "same_dtype",
            "float32-opmath": "same_dtype", "rounding": "rounding", "directed": "rounding", "flush-to-zero": "flush",
            "flush-in-range": "flush"}


def judge_case(case, backends, outcomes, lazy: bool) -> tuple[list[str], oracle.Reference]:
    """(the verdicts, the reference): what check.check_case does with the outcomes, up to its
    re-runs and localization."""
    reference = oracle.compute_reference(case, {b.dtype for b in backends})
    at_floor = lazy  # as check_case: a non-finite reference may agree at the floor too (its classes matched)
    if not at_floor and not reference.defines_anything:
        verdicts = ["invalid"]
    else:
        judged = [verdict_of(backend, case, outcome, reference, at_floor) for backend, outcome in zip(backends, outcomes)]
        invalid = at_floor and not all(v.at_floor for v in judged) and not reference.defines_anything
        verdicts = ["invalid"] if invalid else [v.verdict for v in judged]
    return verdicts, reference


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

    paths = ("full", "lazy")
    verdict_counts = {path: collections.Counter() for path in paths}
    seconds, with_models = collections.Counter(), collections.Counter()
    model_seconds, model_runs = collections.Counter(), collections.Counter()
    differing = 0
    profiler = cProfile.Profile() if args.profile else None
    print(f"judging {len(cases)} cases on both paths ...", file=sys.stderr)
    if profiler:
        profiler.enable()
    for index, (case, backends, outcomes) in enumerate(cases):
        verdicts = {}
        for path in (paths if index % 2 == 0 else paths[::-1]):  # alternating: drifts of load hit both alike
            start = time.perf_counter()
            verdicts[path], reference = judge_case(case, backends, outcomes, path == "lazy")
            seconds[path] += time.perf_counter() - start
            with_models[path] += reference.models_computed is not None
            for model, (runs, spent) in reference.model_costs.items():
                model_seconds[path, model] += spent
                model_runs[path, model] += runs
            verdict_counts[path].update(verdicts[path])
        differing += verdicts["full"] != verdicts["lazy"]
    if profiler:
        profiler.disable()

    per_graph, per_case = 1000.0 / args.graphs, 1000.0 / len(cases)
    report = {}
    for path in paths:
        phases = collections.Counter()
        for (on_path, model), spent in model_seconds.items():
            if on_path == path:
                phases[PHASE_OF[model]] += spent
        phases["rest"] = seconds[path] - sum(phases.values())
        report[path] = {
            "oracle_ms_per_graph": round(seconds[path] * per_graph, 2),
            "oracle_ms_per_case": round(seconds[path] * per_case, 2),
            "phase_ms_per_graph": {p: round(phases[p] * per_graph, 2) for p in PHASES},
            "model_runs_and_ms_per_graph": {model: [round(model_runs[path, model] / args.graphs, 2),
                                                    round(model_seconds[path, model] * per_graph, 2)]
                                            for (on_path, model) in sorted(model_seconds) if on_path == path},
            "cases_with_honest_models": with_models[path],
            "verdicts": dict(sorted(verdict_counts[path].items())),
        }
    result = {
        "graphs": args.graphs, "cases": len(cases), "seed": args.seed, "backends": args.backends.split(","),
        **report,
        "lazy_over_full": round(seconds["lazy"] / seconds["full"], 3),
        "cases_with_other_verdicts": differing,
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
