"""Shared fixtures. Everything here is real: real torch, jax, sqlite files; no mocks."""

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import click.testing
import pytest

from fuzzer.cli import main
from fuzzer.plugins import canary_names, load_plugins

# Single-threaded math keeps CI (2 cores, parallel workers) predictable.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The suite's campaigns draw the same graphs every run (`fuzz run` draws a fresh seed without one).
os.environ.setdefault("FUZZ_SEED", "0")


@pytest.fixture(scope="session")
def canaries():
    """Every shipped canary registered in this process; returns their backend names."""
    load_plugins(canary_names())
    return {name: f"canary-{name}" for name in canary_names()}


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def _module_fixture_users(item) -> str | None:
    """The name of the module of `item` when it uses a module-scoped fixture of that module, else None."""
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})  # pytest's own record
    module = item.nodeid.split("::")[0]
    for name in item.fixturenames:
        if any(d.scope == "module" and d.baseid == module for d in definitions.get(name, ())):
            return Path(module).stem
    return None


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` skip cleanly on machines without CUDA (CI has none). Grouped tests go first:
    xdist hands out work in this order, and a group (release_checks' is 2 minutes) handed out last
    leaves the other worker idle until it ends."""
    items.sort(key=lambda item: item.get_closest_marker("xdist_group") is None)  # stable: files keep their order
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_itemcollected(item):
    """Tests that share a module-scoped fixture run on one xdist worker (--dist loadgroup), which
    builds it once: under `-n 2` both workers built release_checks' environments (35 s and 32 s),
    distribution's and regimes' draws, the end-to-end campaigns."""
    module = _module_fixture_users(item)
    if module is not None and item.get_closest_marker("xdist_group") is None:  # a group of its own wins (ray's)
        item.add_marker(pytest.mark.xdist_group(module))


@contextlib.contextmanager
def _read_only(path: Path):
    """A file or folder nobody may write, root included (root ignores permission bits: use chattr +i)."""
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
            pytest.skip("running as root on a file system without chattr +i")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            path.chmod(mode)


@pytest.fixture
def read_only():
    """`with read_only(path):` makes `path` unwritable for the block."""
    return _read_only


def fuzz(*args) -> subprocess.CompletedProcess:
    """The `fuzz` command of this Python environment, run with `args`. A campaign (`run`) runs in this process
    (click's CliRunner): its fork server has loaded torch and jax once for every campaign of the test process, where a
    `fuzz run` process imports them twice more (its command and its template). The others are quick processes."""
    if args and args[0] == "run":
        result = click.testing.CliRunner().invoke(main, [str(a) for a in args])
        return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)
    return subprocess.run([str(Path(sys.executable).with_name("fuzz")), *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def planted_fault_campaign(tmp_path, plugin, backends: str, ops: str | None, *options, max_cases: int = 40,
                           shrink_time: int = 20, seed: int = 0) -> tuple[list[dict], dict]:
    """A short campaign of a plugin's `backends` (one planted fault among them) restricted to `ops` (None:
    the default set; `options`, e.g. "--regimes", "programs"), which must exit 1: (the stored cases of its
    new buckets as `fuzz list --cases --json` gives them: a known bug of the frameworks may fill others,
    the smallest shrunk one as `fuzz show --json` gives it)."""
    db = tmp_path / "fuzz.db"
    result = fuzz("run", "--db", db, "--plugin", plugin, "--backends", backends, *(("--ops", ops) if ops else ()), *options,
                  "--max-cases", max_cases, "--workers", 1, "--shrink-time", shrink_time, "--seed", seed, "--json")
    assert result.returncode == 1, result.stderr[-2000:]
    new = {bucket["signature"] for bucket in json.loads(fuzz("list", "--db", db, "--json").stdout) if bucket["status"] == "new"}
    rows = [row for row in json.loads(fuzz("list", "--cases", "--db", db, "--json").stdout) if row["signature"] in new]
    shrunk = json.loads(fuzz("show", "--db", db, min(r["id"] for r in rows if r["shrunk_from"]), "--json").stdout)
    return rows, shrunk
