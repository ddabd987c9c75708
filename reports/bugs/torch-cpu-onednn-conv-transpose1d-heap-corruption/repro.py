"""torch CPU, oneDNN: F.conv_transpose1d with one intra-op thread, about 8,100-8,192 input channels, kernel 3,
stride 2 corrupts the heap ("double free or corruption", "free(): invalid pointer", or a segfault). The same
call with oneDNN off, or with 2 threads, is fine. Runs the call in a child process: exits 1 while the child
dies, 0 once fixed."""
import subprocess
import sys

CALL = """
import torch, torch.nn.functional as F
torch.set_num_threads(1)
y = F.conv_transpose1d(torch.randn(2, 8191, 1), torch.randn(8191, 1, 3), None, 2)
print(torch.__version__, tuple(y.shape), "ok")
"""
for label, flags in (("oneDNN on", ""), ("oneDNN off", "torch.backends.mkldnn.enabled = False\n")):
    run = subprocess.run([sys.executable, "-c", "import torch\n" + flags + CALL], capture_output=True, text=True)
    print(f"{label}: exit {run.returncode}", (run.stdout + run.stderr).strip().splitlines()[-1:])
    if label == "oneDNN on":
        died = run.returncode != 0
sys.exit(1 if died else 0)
