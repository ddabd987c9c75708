"""Test plugin: faults of one ulp that only a zero-tolerance contract can see (the oracle's allowance
is far wider): an exp one ulp up only inside a torch.compile trace, under numerics="strict" (eager
runs the same function exactly), and a relu one ulp up only where the batch has one row, under
batch_invariant=True."""


def exp_one_ulp_up_when_compiled(xs, ps, attrs):
    import torch

    y = torch.exp(xs[0])
    return torch.nextafter(y, torch.full_like(y, float("inf"))) if torch.compiler.is_compiling() else y


def relu_one_ulp_up_on_one_row(xs, ps, attrs):
    import torch

    y = torch.relu(xs[0])
    return torch.nextafter(y, torch.full_like(y, float("inf"))) if xs[0].shape[0] == 1 else y


def register(api):
    api.derive_backend("strict-exp-ulp", base="torch-compile-strict:cpu:float32",
                       overrides={"exp": exp_one_ulp_up_when_compiled})
    api.derive_backend("batch-size-relu", base="torch-compile-batch-invariant:cpu:float32",
                       overrides={"relu": relu_one_ulp_up_on_one_row})
