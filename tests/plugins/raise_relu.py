"""Test plugin: a relu kernel that raises a Python exception."""


class KernelBug(RuntimeError):
    pass


def relu_raise(xs, ps, attrs):
    raise KernelBug("plugin relu kernel exploded")


def register(api):
    api.derive_backend("plugin-raise-relu", base="torch-eager:cpu:float32", overrides={"relu": relu_raise})
