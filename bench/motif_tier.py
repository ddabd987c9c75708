"""How soon a compiler meets a fault that lives in one motif (fuzzer/drawing/motifs.py): graphs and seconds
until a campaign finds the planted jax.jit addmm column-bias fault (tests/plugins/motif_faults.py),
per seed. Run it with the code before and after a change to the single-op tier, same seeds:

    python bench/motif_tier.py --seeds 1,2,3 --max-cases 120
    python bench/motif_tier.py --seeds 1,2,3 --ops default --time 300     # every op, derived ones aside

Each campaign: torch eager and the faulty jax.jit at the default compile share, one worker, a fresh
corpus. `graphs_to_find` is the number of graphs the campaign had stored when the fault's bucket was
new (None: not found within the limits); `motifs_compiled` the motif variants the faulty compiler
compiled, where the campaign counts them (the single-op tier's items).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from fuzzer.corpus import Corpus
from fuzzer.running.campaign import CampaignOptions, run_campaign
from fuzzer.running.workers import warm_template

PLUGIN = str(Path(__file__).resolve().parent.parent / "tests" / "plugins" / "motif_faults.py")
FAULT = "fault-jit-addmm-column-bias"
# tests/test_motifs.py's ops: 19 motif variants, 15 ops alone.
MOTIF_OPS = ["matmul", "linear", "bmm", "add", "mul", "sub", "relu", "gelu", "tanh", "sigmoid", "softmax", "mul_scalar",
             "div_scalar", "transpose", "sum"]


def find(seed: int, ops: list[str] | None, max_cases: int, seconds: float) -> dict:
    found: dict = {}

    def on_new_bucket(progress, finding, case_id):
        if FAULT in finding.signature and not found:
            found.update(graphs_to_find=progress.graphs, seconds_to_find=round(progress.elapsed, 1))

    with tempfile.TemporaryDirectory() as folder:
        options = CampaignOptions(backends=["torch-eager:cpu:float32", FAULT], ops=ops, seed=seed, max_cases=max_cases,
                                  time_limit=seconds, workers=1, plugins=[PLUGIN], shrink_time=5.0)
        start = time.monotonic()
        progress = run_campaign(Corpus(str(Path(folder) / "bench.db")), options, on_new_bucket=on_new_bucket)
    compiled = progress.alone_op_counts.get(FAULT, {})
    return {"seed": seed, "graphs_to_find": found.get("graphs_to_find"), "seconds_to_find": found.get("seconds_to_find"),
            "graphs": progress.graphs, "wall_s": round(time.monotonic() - start, 1),
            "fault_compiled_structures": progress.compiled_structures.get(FAULT, 0),
            "motifs_compiled": sorted(item for item in compiled if "motif=" in item)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--ops", default="motifs", help="'motifs': tests/test_motifs.py's 15 ops; 'default': every op")
    parser.add_argument("--max-cases", type=int, default=120)
    parser.add_argument("--time", type=float, default=600, help="seconds per campaign at most")
    args = parser.parse_args()
    warm_template()
    load = [round(x, 2) for x in os.getloadavg()]
    ops = MOTIF_OPS if args.ops == "motifs" else None
    runs = [find(int(seed), ops, args.max_cases, args.time) for seed in args.seeds.split(",")]
    print(json.dumps({"ops": args.ops, "max_cases": args.max_cases, "loadavg_at_start": load,
                      "loadavg_at_end": [round(x, 2) for x in os.getloadavg()], "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
