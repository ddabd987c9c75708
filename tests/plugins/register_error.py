"""Test plugin: imports fine, but its register(api) raises."""


def register(api):
    raise ValueError("register failed on purpose")
