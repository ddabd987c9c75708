"""Test plugin: a relu kernel that never returns (a hang)."""

import time


def relu_sleep(xs, ps, attrs):
    time.sleep(3600)


def register(api):
    api.derive_backend("plugin-sleep-relu", base="torch-eager:cpu:float32", overrides={"relu": relu_sleep})
