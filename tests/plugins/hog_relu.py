"""Test plugin: a relu kernel that allocates without bound (100 MB at a time, each page touched).

Run with a worker memory limit (`memory_limit_mb`, RLIMIT_AS): the allocation fails
and the worker must be reported as a crash finding without taking the campaign down.
"""

import numpy as np


def relu_hog(xs, ps, attrs):
    hoard = []
    while True:
        hoard.append(np.ones(100 * 1024 * 1024, dtype=np.uint8))


def register(api):
    api.derive_backend("plugin-hog-relu", base="torch-eager:cpu:float32", overrides={"relu": relu_hog})
