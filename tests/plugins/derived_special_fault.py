"""A fault in the ops derived from torch's op database that a default campaign draws at its derived
share: torch-eager's torch.special.* ops (every one the table has here) 1% high."""

from fuzzer.ops import derived, get_op


def one_percent_high(name):
    def run(xs, ps, attrs):
        return get_op(name).torch(xs, ps, attrs) * (1 + 1e-2)

    return run


def register(api):
    special = [name for name in derived.default_ops() if name.startswith("torch.special.")]
    api.derive_backend("derived-special-high", base="torch-eager:cpu:float32",
                       overrides={name: one_percent_high(name) for name in special})
