"""Print the progress event nearest each mark (seconds) and the final summary of a --json stream."""
import json, sys
events = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
for mark in map(float, sys.argv[2:]):
    e = min(events, key=lambda e: abs(e.get("elapsed", 0) - mark))
    print(f"at {e.get('elapsed', 0):.0f}s graphs={e.get('graphs')} structures={e.get('compiled_structures')} new_buckets={e.get('new_buckets')}")
final = events[-1]
keys = ["graphs", "checked", "new_buckets", "known_findings", "finding_cases", "crashes", "unrepeated_hangs", "poisoned_restarts",
        "internal_errors", "last_internal_error", "elapsed", "first_graph_s", "status", "compiled_structures", "cases_per_structure"]
print(json.dumps({k: final.get(k) for k in keys}))
