"""A fault only an op derived from torch's op database exposes: torch-eager's torch.special.erfcx 1% high."""


def erfcx_one_percent_high(xs, ps, attrs):
    import torch

    return torch.special.erfcx(xs[0]) * (1 + 1e-2)


def register(api):
    api.derive_backend("derived-erfcx-high", base="torch-eager:cpu:float32",
                       overrides={"torch.special.erfcx": erfcx_one_percent_high})
