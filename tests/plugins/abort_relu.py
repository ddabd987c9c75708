"""Test plugin: a relu kernel that kills its process like a segfault would (SIGABRT)."""

import os


def relu_abort(xs, ps, attrs):
    os.abort()


def register(api):
    api.derive_backend("plugin-abort-relu", base="torch-eager:cpu:float32", overrides={"relu": relu_abort})
