"""The canary zoo: plugins that re-create each seed bug class on purpose, so tests and
`fuzz selftest` can prove the fuzzer finds it. Load one with `--plugin NAME`.

Each canary derives from torch eager on the CPU ("canary-NAME") and, where torch sees a
GPU, on CUDA too ("canary-NAME-cuda").
"""


def on_every_device(register_one):
    """Call `register_one(suffix, base)` for the CPU and, if CUDA is there, for the GPU."""
    import torch

    register_one("", "torch-eager:cpu:float32")
    if torch.cuda.is_available():
        register_one("-cuda", "torch-eager:cuda:float32")


def derive_on_every_device(api, name, overrides):
    on_every_device(lambda suffix, base: api.derive_backend(f"{name}{suffix}", base=base, overrides=overrides))
