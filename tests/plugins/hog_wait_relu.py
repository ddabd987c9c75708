"""Test plugin: a relu kernel that takes address space 100 MB at a time until refused, then waits,
holding it (as a kernel filling memory page by page, or retrying a refused allocation, stops
answering at its worker's limit). Reserving is what RLIMIT_AS limits, so the arrays are left
untouched (np.empty): the test costs no physical memory."""

import time

import numpy as np

CHUNK_MB = 100


def relu_hog_wait(xs, ps, attrs):
    hoard = []
    try:
        while True:
            hoard.append(np.empty(CHUNK_MB * 1024 * 1024, dtype=np.uint8))
    except MemoryError:
        time.sleep(3600)


def register(api):
    api.derive_backend("plugin-hog-wait-relu", base="torch-eager:cpu:float32", overrides={"relu": relu_hog_wait})
