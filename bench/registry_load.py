"""Time to read a known-bug registry of many entries (fuzzer/triaging/known.py: linear in the entries).

    python bench/registry_load.py --entries 10000

Writes a registry of N entries (each with an op list and an error pattern) to a temporary folder
and prints one JSON object: the entries and the seconds load_registry took.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from fuzzer.triaging.known import load_registry


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=10000)
    args = parser.parse_args()
    entry = {"title": "t", "status": "open", "match": {"verdicts": ["crash"], "ops": ["sign"], "error": "^abc.*def"}}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "known-bugs.json"
        path.write_text(json.dumps([{"id": "warm-up", **entry}]))
        load_registry(path)  # imports the op and backend tables once, outside the timing
        path.write_text(json.dumps([{"id": f"bug-{i}", **entry} for i in range(args.entries)]))
        start = time.perf_counter()
        bugs = load_registry(path).bugs
        print(json.dumps({"entries": len(bugs), "load_seconds": round(time.perf_counter() - start, 3)}))


if __name__ == "__main__":
    main()
