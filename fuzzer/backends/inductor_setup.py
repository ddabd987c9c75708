"""Inductor set up once per process for a campaign: its CPU vector-ISA probes run once per machine
instead of once per process, and its own reports of a failure stay off the campaign's stderr.

Before its first CPU compile, inductor checks every vector ISA the CPU lists (avx2, avx512 and its
vnni, bf16, amx and amx-fp16 variants) by compiling a small probe and loading it in a child Python.
Before torch 2.13 that child imports torch: measured on the GPU machine (Sapphire Rapids, torch
2.11), about a dozen probes of ~4 s each, most of a 55-68 s first compile, and each campaign worker
that compiles pays it again (2.5 minutes with 14 busy workers). The answers depend only on the
machine, the compiler and the torch build, so they are kept in a JSON file keyed by those, and
computed under a file lock: one process probes, the others wait for it and read its answers.
The one process that probes uses a torch-free child where inductor's imports torch (as torch 2.13's
does on Linux): it loads torch's own libraries with ctypes, then the probe (0.56 s against 3.45 s
for `import torch` here, idle). A probe that fails that way is asked again as inductor asks it, so
every answer is inductor's own.

`FUZZ_INDUCTOR_ISA_CACHE` names the file ("" switches this off). Only the probe's answer (does
code built with these flags load) is remembered: the code inductor generates is unchanged.

A worker's stderr is the campaign's progress line (or its --json stream). Inductor logs the whole IR
of a node at CRITICAL level when its codegen fails (740 lines in a 9-minute GPU campaign) and warns
about its own performance choices; the failure itself is the case's outcome, stored with the
finding, and its reproducer shows the rest. With TORCH_LOGS set, torch's logging is left as asked.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import shutil
import sys
import warnings
from pathlib import Path

_PREPARED = False


def cache_path() -> Path | None:
    text = os.environ.get("FUZZ_INDUCTOR_ISA_CACHE", str(Path.home() / ".cache" / "fuzzer" / "inductor-isa.json"))
    return Path(text) if text else None


def _machine_key() -> str:
    """What a probe's answer depends on: the CPU's flags, the compiler, the torch build, the Python."""
    import torch
    import torch._inductor.config as config

    flags = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        flags = next((line for line in cpuinfo if line.startswith("flags")), "")
    compilers = [os.environ.get("CXX", ""), repr(getattr(config.cpp, "cxx", ""))]
    for name in ("g++", "clang++"):  # where it is, and which build: an upgraded compiler probes again
        path = shutil.which(name)
        compilers.append(f"{path}:{os.stat(path).st_mtime_ns}" if path else "")
    parts = [flags, *compilers, torch.__version__, torch.__file__, sys.executable]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def _read(path: Path) -> dict:
    try:
        memo = json.loads(path.read_text())
    except (OSError, ValueError):  # none yet, or not ours: probe again
        return {}
    return memo if isinstance(memo, dict) else {}


# The libraries a probe links against (torch/lib, which the child would find through `import torch`),
# loaded globally so the probe's own dlopen resolves them.
_TORCH_FREE_LOAD = """
import ctypes, os
for name in ("libc10.so", "libtorch_cpu.so", "libtorch.so"):
    path = os.path.join(__torch_lib__, name)
    if os.path.exists(path):
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
ctypes.cdll.LoadLibrary("__lib_path__")
"""


def _imports_torch(loader: str) -> bool:
    """Whether inductor's probe child (VecISA._avx_py_load) imports torch on every platform."""
    return any(line.strip() == "import torch" for line in loader.splitlines())


def _torch_free_first(check_build, vec_isa):
    """`check_build` with the torch-free probe child; a False answer asked again with inductor's own."""
    import torch

    own_loader = vec_isa._avx_py_load
    fast_loader = _TORCH_FREE_LOAD.replace("__torch_lib__", repr(str(Path(torch.__file__).parent / "lib")))

    def check_build_torch_free_first(self, code: str) -> bool:
        try:
            vec_isa._avx_py_load = fast_loader
            if check_build(self, code):
                return True
        finally:
            vec_isa._avx_py_load = own_loader
        return check_build(self, code)

    return check_build_torch_free_first


def _remembered(check_build, path: Path, machine: str):
    """`check_build` (VecISA.check_build) answered from `path`, probing under its lock when it has no answer."""

    @functools.wraps(check_build)
    def remembered_check_build(self, code: str) -> bool:
        flags = f"{getattr(self, '_arch_flags', '')}|{self.build_arch_flags() if hasattr(self, 'build_arch_flags') else ''}"
        probe = hashlib.sha256(f"{type(self).__name__}\n{flags}\n{code}".encode()).hexdigest()[:24]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = open(path.with_name(path.name + ".lock"), "a")
        except OSError:  # a cache we may not write (a read-only home): probe as inductor does, never fail the compile
            return check_build(self, code)
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            memo = _read(path)
            answers = memo.get(machine) if isinstance(memo.get(machine), dict) else {}
            if isinstance(answers.get(probe), bool):
                return answers[probe]
            answer = bool(check_build(self, code))
            memo[machine] = {**answers, probe: answer}
            spare = path.with_name(f"{path.name}.{os.getpid()}")
            with contextlib.suppress(OSError):  # a full disk: the answer holds, only not remembered
                spare.write_text(json.dumps(memo))
                spare.replace(path)  # whole or not at all: a reader never sees half a file
            return answer

    return remembered_check_build


def prepare_inductor() -> None:
    """Set inductor up for this process (once): quiet, and its ISA probes answered from the cache."""
    global _PREPARED
    if _PREPARED:
        return
    _PREPARED = True
    if not os.environ.get("TORCH_LOGS"):
        # fake_tensor logs a traceback for every meta kernel that refuses an ill-typed graph (a complex bmm's
        # dtype check); the backend's exception says it once, as the case's verdict.
        for logger in ("torch._inductor", "torch._subclasses.fake_tensor"):
            logging.getLogger(logger).setLevel(logging.CRITICAL + 1)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\._inductor")
    _remember_isa_probes()


def _remember_isa_probes() -> None:
    """Answer inductor's ISA probes from the machine's cache from now on (nothing to do on a torch
    whose inductor has no such probe, or with the cache switched off)."""
    path = cache_path()
    try:
        from torch._inductor.cpu_vec_isa import VecISA
    except ImportError:  # an older torch keeps its probe elsewhere (codecache): left as it is
        return
    if path is None or not hasattr(VecISA, "check_build"):
        return
    check_build = VecISA.check_build
    if _imports_torch(getattr(VecISA, "_avx_py_load", "")):
        check_build = _torch_free_first(check_build, VecISA)
    VecISA.check_build = _remembered(check_build, path, _machine_key())
