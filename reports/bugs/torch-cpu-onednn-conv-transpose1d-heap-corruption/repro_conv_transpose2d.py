"""torch 2.15 CPU: F.conv_transpose2d with one intra-op thread, 8184 input channels, kernel (2, 3), stride 2 aborts (heap corruption); oneDNN off is fine."""
import sys
import torch
torch.set_num_threads(1)
torch.backends.mkldnn.enabled = sys.argv[1] == "onednn"
x = torch.randn(1, 8184, 7, 1)
w = torch.randn(8184, 1, 2, 3)
y = torch.nn.functional.conv_transpose2d(x, w, stride=2)
print(torch.__version__, sys.argv[1], "ok", tuple(y.shape))
