"""Test plugin: torch eager with extra outputs whose float64 reference takes an hour to compute (as
jax-vmap's reference of its batch copies took over 9 minutes for two adaptive pools on 4,097 rows).
The backend itself answers at once; the fuzzer's own work after it, judging its outputs, is what
is slow: `--timeout` bounds it, and it is no finding of the backend."""

import time


def slow_extra_reference(case):
    time.sleep(3600)


def register(api):
    backend = api.derive_backend("plugin-slow-extra-reference", base="torch-eager:cpu:float32", overrides={})
    backend.extra_reference = slow_extra_reference
