python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD
cat > /tmp/fuzz <<'X'
#!/bin/sh
exec python3 -c 'import sys; from fuzzer.cli import main; sys.argv[0]="fuzz"; main()' "$@"
X
chmod +x /tmp/fuzz
mkdir -p /tmp/run
