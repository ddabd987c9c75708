"""Test plugin: a CUDA sticky error, stood in for on the CPU.

A kernel that reads out of bounds on CUDA leaves the process's context unusable: that kernel
raises `torch.AcceleratorError: CUDA error: an illegal memory access was encountered`, and so
does every later CUDA call in the process, whichever backend makes it. Here:

- `plugin-sticky-tanh` raises that error when it runs a tanh, and from then on every op it runs
  in the process raises it too;
- `plugin-sticky-bystander` never triggers it, but once the process is poisoned its ops raise
  it as well (another backend on the same device);
- `plugin-sticky-tanh-late` poisons the process the same way, but only at a tanh that comes
  after POISON_AFTER ops in that process: a fresh process runs the same case cleanly (the
  poisoning needed the history of the process, as a stale allocation of an earlier case would).
"""

import torch

from fuzzer.ops import get_op

OPS = ("relu", "tanh", "add", "mul", "sigmoid")
POISON_AFTER = 40
ILLEGAL_ADDRESS = ("CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be asynchronously "
                   "reported at some other API call, so the stacktrace below might be incorrect.\nFor debugging "
                   "consider passing CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side "
                   "assertions.\n")
poisoned = False
ops_run = 0


def kernel(op, triggers_after=None):
    """`op`'s torch kernel, raising the sticky error once the process is poisoned; `triggers_after`
    (for tanh): poison the process when this many ops ran before it (None: never)."""

    def run(xs, ps, attrs):
        global poisoned, ops_run
        ops_run += 1
        if triggers_after is not None and ops_run > triggers_after:
            poisoned = True
        if poisoned:
            raise torch.AcceleratorError(ILLEGAL_ADDRESS)
        return get_op(op).torch(xs, ps, attrs)

    return run


def register(api):
    base = "torch-eager:cpu:float32"
    api.derive_backend("plugin-sticky-tanh", base=base,
                       overrides={op: kernel(op, 0 if op == "tanh" else None) for op in OPS})
    api.derive_backend("plugin-sticky-bystander", base=base, overrides={op: kernel(op) for op in OPS})
    api.derive_backend("plugin-sticky-tanh-late", base=base,
                       overrides={op: kernel(op, POISON_AFTER if op == "tanh" else None) for op in OPS})
