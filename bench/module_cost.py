"""What a model-level backend costs per graph with the nested module tree and with one flat module.

Draws the campaign's graphs for the backends (its generator, regimes at their shares), then runs
each backend on each graph twice in one process, nested (fuzzer/running/model.py's tree) and flat
(model.FlatGraphModule), in alternating order so that drifts of load hit both alike, and times
the whole `run` (build the module, transform it, run it):

    .venv/bin/python bench/module_cost.py --graphs 100 --seed 7
    .venv/bin/python bench/module_cost.py --graphs 20 --backends torch-jit-trace,torch-export

Prints one JSON object: per backend the mean and median ms per graph of each, flat's total time
over nested's, and the graphs whose outputs differ in any bit between the two (the
transformation's math must not care).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
import warnings

import numpy as np

from fuzzer.backends import parse_backend_list
from fuzzer.running.execute import run_backend
from fuzzer.running.pipeline import WorkerConfig, case_generator, seed_for


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--backends", default="torch-jit-trace", help="model-level backends (fuzzer/backends/torch_module.py)")
    args = parser.parse_args()

    loadavg_at_start = [round(x, 2) for x in os.getloadavg()]
    backends = parse_backend_list(args.backends)
    generator = case_generator(WorkerConfig(backends=[b.name for b in backends]), backends)
    cases = [generator.case(seed_for(args.seed, index)) for index in range(args.graphs)]
    result = {"graphs": args.graphs, "seed": args.seed}
    for backend in backends:
        print(f"{backend.name}: {len(cases)} graphs, nested and flat ...", file=sys.stderr)
        seconds, ran, differing = collections.defaultdict(list), 0, 0
        run_backend(backend, cases[0])  # warm-up (imports, first trace): not timed
        for index, case in enumerate(cases):
            if not backend.supports_graph(case.graph):
                continue
            outputs = {}
            for flat in ((False, True) if index % 2 == 0 else (True, False)):
                backend.flat = flat
                start = time.perf_counter()
                outcome = run_backend(backend, case)
                seconds[flat].append(time.perf_counter() - start)
                outputs[flat] = outcome.outputs if outcome.status == "ok" else outcome.status
            ran += 1
            same = (outputs[False] == outputs[True] if isinstance(outputs[False], str) else
                    len(outputs[False]) == len(outputs[True])
                    and all(np.array_equal(a, b, equal_nan=True) for a, b in zip(outputs[False], outputs[True])))
            differing += not same
        del backend.flat  # back to the class's choice
        result[backend.name] = {
            "graphs_run": ran,
            "nested_ms_per_graph": round(1000 * float(np.mean(seconds[False])), 2) if ran else None,
            "flat_ms_per_graph": round(1000 * float(np.mean(seconds[True])), 2) if ran else None,
            "nested_median_ms": round(1000 * float(np.median(seconds[False])), 2) if ran else None,
            "flat_median_ms": round(1000 * float(np.median(seconds[True])), 2) if ran else None,
            "flat_over_nested": round(sum(seconds[True]) / sum(seconds[False]), 3) if ran else None,
            "graphs_with_other_outputs": differing,
        }
    result["loadavg_at_start"] = loadavg_at_start
    result["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    np.seterr(all="ignore")
    warnings.simplefilter("ignore")
    main()
