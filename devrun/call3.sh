. devrun/common.sh
ls -la /tmp/run/
/tmp/fuzz list --all --db /tmp/run/gpu10.db --json > /tmp/run/l.json
python3 - <<'X'
import json, subprocess
for b in json.load(open("/work/main/devrun/../devrun/l.json" if False else "/tmp/run/l.json")):
    if b["status"] != "known":
        print("=====", b["signature"], b["status"], b["count"], "case", b["representative"])
        r = subprocess.run(["/tmp/fuzz", "show", str(b["representative"]), "--db", "/tmp/run/gpu10.db"], capture_output=True, text=True)
        print(r.stdout[-4000:], r.stderr[-1500:])
        for fmt, name in (("script", "min"),):
            r = subprocess.run(["/tmp/fuzz", "export", str(b["representative"]), "--db", "/tmp/run/gpu10.db", "-o", f"/tmp/run/case{b['representative']}.py"], capture_output=True, text=True)
            print("export rc", r.returncode, r.stderr[-500:])
X
cp /tmp/run/case*.py $OUT/ 2>/dev/null; gzip -1 -c /tmp/run/gpu10.db > $OUT/gpu10.db.gz; ls -la $OUT
