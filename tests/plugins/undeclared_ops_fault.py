"""The control of the undeclared-ops campaign: torch-eager with one undeclared op's kernel wrong (trunc
rounding down, as floor does: wrong for every negative non-integer). Load after undeclared_ops.py."""


def trunc_as_floor(xs, ps, attrs):
    import torch

    return torch.floor(xs[0])


def register(api):
    api.derive_backend("undeclared-trunc-as-floor", base="torch-eager:cpu:float32", overrides={"trunc": trunc_as_floor})
