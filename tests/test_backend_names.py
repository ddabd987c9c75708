"""A backend name parsed once (fuzzer/backend_names.py): every name the backend table makes reads
back as the same text and the same parts, and every built-in kind declares its compiler path."""

from __future__ import annotations

import pytest

from fuzzer.backend_names import BackendName
from fuzzer.backends import backend_sets, get_backend, kind_family, kind_path, table
from fuzzer.errors import UserError
from fuzzer.running.budget import _share_matches


def table_names() -> list[str]:
    """Every KIND:DEVICE:DTYPE the table builds, as `fuzz backends` lists them."""
    return [get_backend(f"{kind}:{device}:{dtype}").name
            for kind, cls in table().classes.items() for device in cls.devices for dtype in cls.dtypes]


def test_every_name_the_table_makes_round_trips_with_its_parts():
    names = table_names()
    assert len(names) > 50
    for text in names:
        backend, name = get_backend(text), BackendName.parse(text)
        assert str(name) == text
        assert (name.kind, name.device, name.dtype, name.env) == (backend.kind, backend.device, backend.dtype, None)
        assert name.full and kind_path(name) == type(backend).path and kind_family(name) == backend.family
        assert str(BackendName.parse(f"{text}@jax-0.4.26-py310").here) == text
        assert str(BackendName.parse(backend.strict_variant().name)) == backend.strict_variant().name
    for members in backend_sets().values():
        assert all(str(BackendName.parse(text)) == text for text in members)


def test_a_variants_name_resolves_to_that_variant(tmp_path, monkeypatch):
    """A worker that dies in a strict re-run names the variant it ran (its heartbeat); the parent
    reads that name back to replay and shrink the death. The GPU training campaign of 2026-12-02 ended
    at its summary on 'Backend 'torch-eager' does not support dtype 'float32+strict''."""
    for text in table_names():
        strict = get_backend(text).strict_variant()
        again = get_backend(strict.name)
        assert (again.name, again.strict, type(again)) == (strict.name, True, type(strict))
    cudnn = get_backend("torch-eager:cuda:float32").variant("strict-cudnn")
    assert get_backend(cudnn.name).keeps_cudnn and get_backend(cudnn.name).strict
    with pytest.raises(UserError, match="has no variant"):
        get_backend("jax-jit:cpu:float32+strict-cudnn")
    monkeypatch.setenv("FUZZ_ENV_HOME", str(tmp_path))  # an environment's name may hold a '+': no variant's
    with pytest.raises(UserError, match="No environment named 'jax-0.4.30\\+cpu'"):
        get_backend("jax-jit:cpu:float32@jax-0.4.30+cpu")


@pytest.mark.parametrize("text, parts", [
    ("torch-eager", ("torch-eager", None, None, None)),
    ("jax-jit:cpu", ("jax-jit", "cpu", None, None)),
    ("jax-jit:cpu:float64@jax-0.4.26-py310", ("jax-jit", "cpu", "float64", "jax-0.4.26-py310")),
    ("torch-compile@envs/torch-2.3", ("torch-compile", None, None, "envs/torch-2.3")),
    ("plugin-raise-relu", ("plugin-raise-relu", None, None, None)),
    ("a:b:c:d", ("a:b:c:d", None, None, None)),  # no built-in's name: a bare one, as buckets always took it
    ("", ("", None, None, None)),
])
def test_short_env_and_plugin_names_keep_their_text(text, parts):
    name = BackendName.parse(text)
    assert (name.kind, name.device, name.dtype, name.env) == parts and str(name) == text
    assert kind_path(name) is None or name.full


def test_every_built_in_kind_declares_its_compiler_path():
    # The shipped kinds only: other tests of this process register planted ones (a plugin inherits its base's path).
    paths = {kind: cls.path for kind, cls in table().classes.items() if cls.__module__.startswith("fuzzer.backends.")}
    assert all(paths.values()), [kind for kind, path in paths.items() if not path]
    assert {kind for kind, path in paths.items() if path == "torch/inductor"} == {
        "torch-compile", "torch-compile-dynamic", "torch-compile-frozen", "torch-compile-max-autotune", "torch-aoti",
        "torch-compile-grad", "torch-compile-grad-dynamic", "torch-compile-double-grad", "torch-compile-autocast-grad",
        "torch-compile-jvp", "torch-compile-hvp", "torch-compile-vmap", "torch-compile-strict", "torch-compile-batch-invariant",
        "torch-compile-capture", "torch-compile-breaks"}
    assert {kind for kind, path in paths.items() if path == "jax/xla"} == {
        "jax-jit", "jax-jit-const", "jax-jit-donate", "jax-vmap", "jax-grad", "jax-double-grad", "jax-jvp", "jax-hvp"}


def test_a_compile_share_name_covers_its_kind_device_and_environment():
    assert _share_matches("jax-jit", "jax-jit:cpu:float32") and _share_matches("jax-jit:cpu", "jax-jit:cpu:float64")
    assert _share_matches("torch-compile@old", "torch-compile:cpu:float32@old")
    assert not _share_matches("jax-jit", "jax-jit:cpu:float32@old"), "another environment's backend is named with its @ENV"
    assert not _share_matches("jax", "jax-jit:cpu:float32") and not _share_matches("jax-jit:cuda", "jax-jit:cpu:float32")
