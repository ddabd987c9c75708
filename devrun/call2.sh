. devrun/common.sh
for i in $(seq 40); do [ -f /tmp/run/gpu10.rc ] && break; sleep 2; done
echo "10-min rc=$(cat /tmp/run/gpu10.rc)"; tail -c 800 /tmp/run/gpu10.err; echo
cp /tmp/run/gpu10.db /tmp/run/gpu10.err $OUT/; gzip -c /tmp/run/gpu10.jsonl > $OUT/gpu10.jsonl.gz
python3 devrun/summ.py /tmp/run/gpu10.err 150 240 300 360 600; python3 devrun/summ.py /tmp/run/gpu10.jsonl
/tmp/fuzz list --all --db /tmp/run/gpu10.db --json > $OUT/gpu10-list.json 2>&1; python3 devrun/buckets.py $OUT/gpu10-list.json
ls -la ~/.cache/fuzzer/
