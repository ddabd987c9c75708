. devrun/common.sh
nvidia-smi --query-gpu=name --format=csv,noheader; python3 -c "import torch,jax;print(torch.__version__,jax.__version__)"
setsid nohup sh -c '/tmp/fuzz run --backends cpu,gpu --workers 14 --time 10m --seed 307 --db /tmp/run/gpu10.db --json > /tmp/run/gpu10.jsonl 2> /tmp/run/gpu10.err < /dev/null; echo $? > /tmp/run/gpu10.rc' > /dev/null 2>&1 &
sleep 545
uptime; tail -c 600 /tmp/run/gpu10.err; echo
python3 devrun/summ.py /tmp/run/gpu10.jsonl 60 120 180 240 300 420 540
