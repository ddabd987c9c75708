"""Test plugin: faults that live only in the integer or complex form of ops derived from torch's op database
(fuzzer/ops/derived/), each a derived backend of a lane's torch eager, which the lanes' judging must find.

- `fault-int-remainder-as-fmod`: an int32 torch.remainder that keeps the dividend's sign (C's %, torch.fmod)
  where torch documents the divisor's (Python's %): -7 remainder 3 gives -1, not 2. On floats it is right.
- `fault-conj-sin`: a complex64 torch.sin that returns the conjugate of its result, as a kernel that flips
  the sign of the imaginary part would; on real values it is right.
"""

import torch


def remainder_as_fmod(xs, ps, attrs):
    if xs[0].is_floating_point():
        return torch.remainder(*xs, **attrs)
    return torch.fmod(*xs, **attrs)


def conjugated_sin(xs, ps, attrs):
    result = torch.sin(*xs, **attrs)
    return torch.conj_physical(result) if result.is_complex() else result


def register(api):
    api.derive_backend("fault-int-remainder-as-fmod", base="torch-eager:cpu:int32", overrides={"torch.remainder": remainder_as_fmod})
    api.derive_backend("fault-conj-sin", base="torch-eager:cpu:complex64", overrides={"torch.sin": conjugated_sin})
