"""Test plugin: a fault that lives only on complex tensors (fuzzer/complex_dtypes.py), which judging each
component must find.

- `fault-conj-mul`: torch eager's complex64 mul returning the conjugate of the product, as a kernel
  that flips the sign of the imaginary part would; on real
  values it is right (the conjugate of a real value is itself).
"""

import torch

from fuzzer.ops import get_op


def conjugated_mul(xs, ps, attrs):
    product = get_op("mul").torch(xs, ps, attrs)
    return torch.conj_physical(product) if product.is_complex() else product


def register(api):
    api.derive_backend("fault-conj-mul", base="torch-eager:cpu:complex64", overrides={"mul": conjugated_mul})
