import json, sys
try:
    buckets = json.load(open(sys.argv[1]))
except ValueError:
    print(open(sys.argv[1]).read()[:500]); sys.exit()
for b in buckets:
    print(b["status"], b["count"], b["signature"], b.get("known_bug") or "", "case", b["representative"])
