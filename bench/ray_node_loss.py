"""How a campaign lives through a lost Ray node: the README's `fuzz run --ray auto --workers 2
--time 45s` on a simulated two-node cluster (ray.cluster_utils.Cluster, one CPU per node), its worker
node removed once the campaign has run --remove-at seconds and checked a graph; killed abruptly (its
processes SIGKILLed, as a machine that loses power) unless --graceful. Prints one JSON object: when
the campaign ended (its own elapsed, and the wall clock from the start of `fuzz run`), its exit
code, its summary's counts and lost_nodes. A campaign still running after --give-up seconds gets
SIGABRT, whose Python traceback (stderr) says where it waits.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from ray.cluster_utils import Cluster

SUMMARY_KEYS = ("status", "elapsed", "graphs", "lost_nodes", "crashes", "abandoned", "internal_errors",
                "unrepeated_deaths", "finding_cases")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time", default="45s", help="the campaign's --time")
    parser.add_argument("--remove-at", type=float, default=15.0, help="campaign seconds before the node goes")
    parser.add_argument("--graceful", action="store_true", help="remove the node gracefully instead")
    parser.add_argument("--give-up", type=float, default=300.0, help="wall seconds before SIGABRT")
    args = parser.parse_args()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    worker_node = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        with TemporaryDirectory() as folder:
            result = run_campaign(cluster, worker_node, Path(folder) / "corpus.db", args)
    finally:
        cluster.shutdown()
    print(json.dumps(result, indent=1))


def run_campaign(cluster, worker_node, db: Path, args) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # the README's head-node form
    env["PYTHONFAULTHANDLER"] = "1"
    command = [str(Path(sys.executable).with_name("fuzz")), "run", "--db", str(db), "--ray", "auto",
               "--workers", "2", "--time", args.time, "--json"]
    began = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    abort = threading.Timer(args.give_up, process.send_signal, args=(signal.SIGABRT,))
    abort.start()
    stdout: list[str] = []
    reader = threading.Thread(target=lambda: stdout.append(process.stdout.read()))  # a full pipe would block it
    reader.start()
    removed_at = None
    for line in process.stderr:
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        print(f"[{time.monotonic() - began:6.1f} s] elapsed {event['elapsed']:.1f} graphs {event['graphs']} "
              f"lost {event['lost_nodes']}", file=sys.stderr)
        if removed_at is None and event["elapsed"] >= args.remove_at and event["graphs"] >= 1:
            removed_at = event["elapsed"]
            threading.Thread(target=cluster.remove_node, args=(worker_node,),
                             kwargs={"allow_graceful": args.graceful}).start()
    process.wait()
    reader.join()
    abort.cancel()
    try:
        summary = json.loads(stdout[0])
        summary = {key: summary.get(key) for key in SUMMARY_KEYS}
    except ValueError:
        summary = None  # no summary: frozen, then aborted
    return {"removal": "graceful" if args.graceful else "abrupt", "removed_at_elapsed_s": removed_at,
            "exit_code": process.returncode, "wall_s": round(time.monotonic() - began, 1), "summary": summary,
            "worker_node": worker_node.node_id}


if __name__ == "__main__":
    main()
