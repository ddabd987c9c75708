"""Test plugin: a relu kernel that allocates without bound, 100 MB at a time.

Run with a worker memory limit (`memory_limit_mb`, i.e. RLIMIT_AS on the worker): an
allocation fails once the worker's address space reaches the limit, and the finding's
message says how much the kernel had got by then, so a test can check the limit was
the worker's. Reserving address space is what RLIMIT_AS limits, so the arrays are
left untouched (np.empty): the test costs no physical memory and no time, and stays
fast on a loaded machine. Without a limit, allocation goes on until the kernel refuses
(thousands of MB, far above any limit a test sets).
"""

import numpy as np

CHUNK_MB = 100


def relu_hog(xs, ps, attrs):
    hoard = []
    try:
        while True:
            hoard.append(np.empty(CHUNK_MB * 1024 * 1024, dtype=np.uint8))
    except MemoryError as exc:
        got = len(hoard) * CHUNK_MB
        hoard.clear()
        raise MemoryError(f"hog gave up after {got} MB ({exc})") from None


def register(api):
    api.derive_backend("plugin-hog-relu", base="torch-eager:cpu:float32", overrides={"relu": relu_hog})
