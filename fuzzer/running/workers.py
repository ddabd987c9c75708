"""Isolated, long-lived worker processes: a backend that segfaults, hangs, runs out of
memory or leaves its device unusable (a CUDA sticky error) ends only its worker, never the
campaign or the corpus.

A worker is forked from a warm template: a `forkserver` that imported torch, jax,
numpy, hypothesis and the op registry once, before any thread pool, CUDA context or
XLA client existed (those are created in the worker, after the fork), so a worker
starts in a fraction of a second instead of re-importing everything. A worker with
a memory limit below FORK_MIN_LIMIT_MB is started with `spawn` instead (the template's
imports alone would use most of a small address-space limit). Each worker runs one intra-op thread
(`threads`), loads the plugins, keeps its backends and compiled-graph caches warm,
and answers requests over a pipe. Before every backend run it reports what it is about to run,
so when it dies or goes silent the parent knows which backend and which case did it.

Each worker leads its own session: what its backends start (a plugin's helper, an environment's
interpreter) is killed with it (end_session), never left holding the campaign's stderr open.

Requests:  ("case", index, known_signatures, focus)  generate case `index` (steered toward the region
                                               key `focus`, or None), check it, shrink new findings
           ("check", case, backend_names)      check one given case (replay, regress)
           ("shrink", case, finding, seconds)  shrink a given case for one of its findings
           ("outputs", case, backend_name)     one backend's outputs (export --format issue)
           ("extra-reference", case, backend_name)  compute that backend's reference of its extra
                                               outputs (gradients: a framework's own float64 run) once,
                                               so that export knows it ends before computing it itself
           ("recheck", source, backend_name)   re-run a case that poisoned another worker (Pipeline.recheck)
           ("stop",)
Replies:   ("running", backend_name, compiles, source)  heartbeat before each backend run (compiles:
                                               the backend compiles graphs, so it gets the compile timeout;
                                               source: the pipeline.CaseSource of the case, as a list), and
                                               after it with backend_name None: the worker's own work again
           ("result", payload)                 the request's record (fuzzer/records.py: CaseReply,
                                               CheckReply, ShrinkReply); for "outputs" a dict
           ("user-error", message)             bad input (an unknown backend, a missing environment):
                                               the parent raises it as the UserError it was
           ("error", traceback_text)           a bug in us while handling the request
           ("poisoned", backend_name, error, source, culprit)
                                               a backend's error left the device unusable (errors.DevicePoisoned):
                                               the worker ends, the parent replaces it (WorkerPoisoned)
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import resource
import signal
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from fuzzer.backend_names import BackendName
from fuzzer.errors import DevicePoisoned, InternalError, UserError
from fuzzer.running import envs
from fuzzer.running.sessions import end_session

if TYPE_CHECKING:  # annotations only: importing the pipeline at once would hold up `warm_template`
    from fuzzer.running.pipeline import WorkerConfig
    from fuzzer.triaging.known import Registry

SPAWN = multiprocessing.get_context("spawn")
FORKSERVER = multiprocessing.get_context("forkserver")
# Imported once by the fork server; none of them starts a thread pool, a CUDA context or an
# XLA client on import (a module missing here is skipped by multiprocessing). Not dynamo and
# inductor: ~5 s more before the first graph, for a compiler the budget starts later anyway.
FORKSERVER.set_forkserver_preload(["numpy", "torch", "jax", "hypothesis", "fuzzer.ops", "fuzzer.running.pipeline"])


# A worker under a smaller limit starts with `spawn` and imports only what its backends need: the
# fork server's template holds torch and jax (~1.9 GB of address space) before any work is done.
FORK_MIN_LIMIT_MB = 4096
# Set by the replaying commands' --memory-limit (cli.memory_limit_option) for the workers they start.
MEMORY_LIMIT_VARIABLE = "FUZZ_MEMORY_LIMIT"


def within_hard_limit(limit_mb: int | None) -> int | None:
    """`limit_mb` lowered to this process's hard address-space limit (`ulimit -Hv`), which a worker may
    not raise: asking for more makes every worker fail to start. None (no limit of ours) stays None."""
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    if limit_mb is None or hard == resource.RLIM_INFINITY:
        return limit_mb
    return min(limit_mb, hard // 2**20)


def address_space_floor_mb() -> int:
    """The least address space a worker gets: torch and jax imported take ~2 GB of it, and each thread
    glibc gives a malloc arena reserves 64 MB (up to 8 arenas a core). On 16 cores, 14 workers' 7 GB
    shares made oneDNN fail ("could not create a primitive") and XLA abort on 1-element graphs."""
    return 4096 + 512 * (os.cpu_count() or 1)


def default_memory_limit_mb(workers: int, backends: list) -> int | None:
    """A worker's address-space limit: its share of 80% of the machine's memory, at least
    address_space_floor_mb (address space, not memory: reserved, mostly never touched), within the
    shell's hard limit. None with a GPU backend: CUDA reserves address space at start."""
    if any(backend.device != "cpu" for backend in backends):
        return None
    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    return within_hard_limit(max(address_space_floor_mb(), int(total_mb * 0.8 / max(1, workers))))


def require_within_hard_limit(memory_limit_mb: int) -> None:
    """An explicit --memory-limit above the shell's hard limit would make every worker fail to start: refuse it."""
    allowed = within_hard_limit(memory_limit_mb)
    if allowed < memory_limit_mb:
        raise UserError(f"--memory-limit {memory_limit_mb} is above this shell's hard address-space limit of {allowed} MB "
                        f"(ulimit -Hv); pass at most {allowed}, or 0 to keep the shell's limit.")


def replay_memory_limit_mb(backends: list) -> int | None:
    """The limit of a replaying command's one worker (replay, shrink, regress, export, show --rerun):
    its --memory-limit ($FUZZ_MEMORY_LIMIT, 0 for none of ours), else a campaign's default for one worker."""
    text = os.environ.get(MEMORY_LIMIT_VARIABLE, "")
    if not text:
        return default_memory_limit_mb(1, backends)
    try:
        limit = int(text)
    except ValueError:
        raise UserError(f"${MEMORY_LIMIT_VARIABLE} is {text!r}; set it to a number of MB such as 4096.") from None
    require_within_hard_limit(limit)
    return limit or None


def warm_template(threads: int = 1) -> None:
    """Start the fork server now, without waiting: its imports overlap with the caller's own."""
    from multiprocessing import forkserver

    size_numpy_blas(threads)
    forkserver.ensure_running()


def size_numpy_blas(threads: int) -> None:
    """numpy's OpenBLAS sizes its thread pool from OPENBLAS_NUM_THREADS when numpy is loaded: in the fork
    server's template, or in a spawned worker before `limit_threads` runs. So the variable is set here,
    for the processes this one starts; unset, every worker's BLAS calls (the float64 reference's matmuls
    and convolutions) ran on all cores: 14 workers on the H200 machine's 16 cores at load 53."""
    if threads > 0:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", str(threads))


def limit_threads(threads: int) -> None:
    """Run torch (eager and inductor's OpenMP code) and XLA's CPU client on `threads` threads.

    N workers on N cores with the default pools run N*N threads: measured 7.6-10.9x slower per
    graph for the torch backends under load. Must run before the first op: XLA reads XLA_FLAGS
    when it creates its CPU client (in the worker, after the fork), torch's pools start lazily.
    """
    if threads <= 0:
        return
    # Inductor compiles kernels in a pool of compile_threads processes, sized by the core count:
    # 14 workers on a 16-core machine could start 224. It reads the variable when its config is
    # first imported (in the worker: the fork server does not import it).
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS"):
        os.environ[variable] = str(threads)
    if threads == 1:  # XLA's CPU runtime has a switch for its Eigen pool, not a thread count
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_cpu_multi_thread_eigen=false".strip()
    # Only where torch is loaded already (the fork server's template): a spawned worker whose backends need
    # no torch does not pay its import, and one that imports it later takes OMP_NUM_THREADS, set above.
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
        with contextlib.suppress(RuntimeError):  # already set, or inter-op work already started
            torch.set_num_interop_threads(threads)


def hide_unused_accelerators(backends: list[str]) -> None:
    """A worker whose backends all run on the CPU leaves the GPUs alone: CUDA_VISIBLE_DEVICES empty for torch,
    jax's platforms set to cpu (JAX_PLATFORMS, and jax's config where the fork server imported jax). Each process that touches CUDA creates a context: on the H200 machine, 14 workers
    of a CPU campaign made jax's CUDA plugin fail cuInit (CUDA_ERROR_OUT_OF_MEMORY) in every worker, and
    torch.compile's CPU workers died by SIGSEGV. A backend whose device is not "cpu" (or a plugin's name
    without a device) keeps them visible. Must run before the first CUDA call and before the address-space limit."""
    if all(BackendName.parse(name).device == "cpu" for name in backends):
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        os.environ["JAX_PLATFORMS"] = "cpu"
        if "jax" in sys.modules:  # the fork server imported jax, which read JAX_PLATFORMS then
            sys.modules["jax"].config.update("jax_platforms", "cpu")


def _worker_main(conn, config: WorkerConfig, trusted_paths: str, known_bugs: Registry | None) -> None:
    """Entry point of the worker process."""
    # Its own session, whose id is its pid: every process its backends start (a plugin's helper, an
    # environment's interpreter) and their children join it, and end with the worker (end_session).
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    envs.adopt_trusted_paths(trusted_paths)
    os.dup2(2, 1)  # the parent's stdout is its summary (`--json`): a plugin's print or a library's C write goes to stderr
    hide_unused_accelerators(config.backends)
    if config.memory_limit_mb:
        limit = config.memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    limit_threads(config.threads)
    # The libraries' deprecation notices (torch.export's pytree FutureWarning, once per worker and
    # kind) would interleave with the campaign's progress lines on the shared stderr.
    warnings.simplefilter("ignore", FutureWarning)
    warnings.simplefilter("ignore", DeprecationWarning)
    from fuzzer.running.pipeline import Pipeline

    try:
        pipeline = Pipeline(config, heartbeat=lambda backend, source: conn.send(
            ("running", backend and backend.name, backend is not None and backend.expensive, source.to_list())),
            known_bugs=known_bugs)
        conn.send(("ready", os.getpid()))
    except UserError as exc:
        conn.send(("user-error", str(exc)))
        return
    except Exception:  # noqa: BLE001 - reported to the parent, which shows it to the user
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):  # the parent is gone (kill -9): no one else will end this session
            os.killpg(0, signal.SIGKILL)
        if request[0] == "stop":
            return
        try:
            conn.send(("result", pipeline.handle(request)))
        except DevicePoisoned as poisoned:
            conn.send(poisoned.reply())
            return  # nothing this process runs now can be trusted: the parent starts a fresh worker
        except UserError as exc:
            conn.send(("user-error", str(exc)))
        except Exception:  # noqa: BLE001
            conn.send(("error", traceback.format_exc()))


DIED_MESSAGE = "worker process "  # then how it ended: "killed by signal SIGSEGV", "exited with status 1"
# A worker silent while it holds its address-space limit ran out of memory, not time (issue 51: a memory
# hog under --memory-limit 3000 was filed as a `hang`): WorkerDied.message then starts with this.
AT_MEMORY_LIMIT = DIED_MESSAGE + "stopped answering at its memory limit"
# How near the limit the address space it holds must come: a refused allocation is at most this far below it.
AT_LIMIT_SHARE = 0.9
# The status multiprocessing gives a fork-server child whose end its fork server could not report:
# the fork server was killed too (CPython's popen_forkserver).
FORK_SERVER_LOST = 255


# The requests that check a case (the reference and oracle first, then the backends), or shrink one.
CHECKS = ("case", "check", "recheck", "shrink")
# How long a stopping worker may take to finish its request before it is killed.
STOP_GRACE_S = 5.0


class WorkerDied(Exception):
    """The worker process ended (crash) or stopped answering (hang) during a request."""

    culprit = "-"  # the worker died on the whole case: no op is named

    def __init__(self, kind: str, backend: str | None, message: str, source: list | None = None,
                 exit_code: int | None = None):
        super().__init__(message)
        self.kind = kind  # "crash" or "hang"
        self.backend = backend
        self.message = message
        self.source = source  # the CaseSource (as a list) of the case it was checking, when it said
        self.exit_code = exit_code  # the process's, where it is known (multiprocessing: -N for signal N)

    def finding(self, culprit: str | None = None):
        """The finding this is: the backend the worker was running crashed or hung (check.Finding),
        blamed on `culprit` where a shrink found the op that does it alone (fuzzer/shrinking/death_shrink.py)."""
        from fuzzer.judging.check import Finding
        from fuzzer.oracle import signature

        backend, culprit = self.backend or "unknown", culprit or self.culprit
        return Finding(backend=backend, verdict=self.kind, culprit=culprit,
                       signature=signature(self.kind, backend, culprit, self.message), detail=self.message, error=self.message)

    def from_outside(self) -> bool:
        """Did something outside the backend end the worker? SIGKILL, which no library sends itself (the
        OOM killer, a scheduler, a user); a death while no backend was running; or FORK_SERVER_LOST."""
        return self.kind == "crash" and (not self.backend or self.exit_code in (-signal.SIGKILL, FORK_SERVER_LOST))


class SlowCheck(WorkerDied):
    """The worker stopped answering outside any backend run: in the fuzzer's own drawing, reference,
    oracle or localization, which says nothing of a backend (a campaign counts the case as not checked)."""

    def __init__(self, limit: float, source):
        super().__init__("hang", None, f"the fuzzer's own work on the case (its float64 reference, the oracle's models or "
                                       f"a finding's localization; no backend was running) did not finish within {limit:g} s",
                         source)


def address_space_mb(pid: int) -> int | None:
    """The address space process `pid` holds now, in MB (Linux's VmSize, what RLIMIT_AS bounds); None
    where /proc does not say."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def ended_its_process(verdict: str, error: str) -> bool:
    """Is a finding with this verdict and error a crash that ended its worker process, by a signal or an
    exit, as WorkerDied.finding writes it ("worker process killed by signal SIGABRT")?"""
    return verdict == "crash" and error.startswith(DIED_MESSAGE)


def died_in_worker(finding) -> bool:
    """Is this finding (check.Finding) a worker's death, as WorkerDied.finding writes it: a hang, or a
    crash that ended its process (ended_its_process)?"""
    return finding.verdict == "hang" or ended_its_process(finding.verdict, finding.error)


class WorkerPoisoned(WorkerDied):
    """A backend's error left the worker's device context unusable (errors.DevicePoisoned); the worker
    was replaced by a fresh one. Its finding is a crash with that error, of `culprit` where a
    recheck ran the case's nodes alone."""

    def __init__(self, backend: str, error: str, source: list | None = None, culprit: str = "-"):
        super().__init__("crash", backend, error, source)
        self.culprit = culprit


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


class Worker:
    """Parent-side handle of one worker process; requests are asynchronous so a campaign
    can keep several workers busy (`submit`, then `collect` when its pipe is readable)."""

    def __init__(self, config: WorkerConfig, start_timeout: float = 300.0, wait: bool = True,
                 known_bugs: Registry | None = None, spawned: bool = False):
        """With wait=False the process is launched but not waited for: call `wait_ready`
        (a campaign launches all its workers first, so they start side by side). A `spawned` worker
        starts in a fresh interpreter that imports only what its backends need: a command with one
        worker (replay, export) would otherwise wait for the fork server to import torch and jax both."""
        self.config = config
        self.spawned = spawned
        self.known_bugs = known_bugs  # the campaign's registry: its bugs are never shrunk (Pipeline)
        self.start_timeout = start_timeout
        self.in_flight: tuple | None = None
        self.backend: str | None = None
        self.backend_compiles = False
        self.source: list | None = None
        self.last_heartbeat = 0.0
        # Deaths after a reply, before the next request (submit): no case was in flight, so none is a finding.
        self.deaths_between_requests = 0
        self._launch()
        if wait:
            self.wait_ready()

    def _start(self) -> None:
        self._launch()
        self.wait_ready()

    def _launch(self) -> None:
        small_limit = self.config.memory_limit_mb and self.config.memory_limit_mb < FORK_MIN_LIMIT_MB
        context = SPAWN if small_limit or self.spawned else FORKSERVER
        size_numpy_blas(self.config.threads)
        self.conn, child = context.Pipe()
        # The environment paths the command line named go explicitly: the fork server predates them.
        self.process = context.Process(target=_worker_main, args=(child, self.config, envs.trusted_paths(), self.known_bugs), daemon=True)
        self.process.start()
        child.close()

    def wait_ready(self, on_wait: Callable[[], None] | None = None) -> None:
        """`on_wait` is called every 2 s while the worker starts (its imports: tens of seconds under load)."""
        deadline = time.monotonic() + self.start_timeout
        while not self.conn.poll(max(0.0, min(2.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                self.kill()
                raise InternalError("a worker process did not start in time")
            if on_wait is not None:
                on_wait()
        message = self._recv()
        if message[0] == "user-error":
            self.kill()
            raise UserError(message[1])
        if message[0] != "ready":
            self.kill()
            detail = message[1] if message[0] == "error" else describe_exit(self.process.exitcode)
            raise InternalError(f"a worker process failed to start:\n{detail}")

    def _recv(self):
        try:
            return self.conn.recv()
        except (EOFError, ConnectionResetError, OSError):
            return ("died",)

    def recycle(self) -> None:
        """Replace an idle worker by a fresh process (to give back memory its caches hold)."""
        self.stop()
        self.in_flight = None
        self._start()

    def _restart(self) -> None:
        self.kill()
        self.in_flight = None
        self._start()

    def submit(self, message: tuple) -> None:
        self.in_flight = message
        self.backend = self.source = None
        self.backend_compiles = False
        self.last_heartbeat = time.monotonic()
        try:
            self.conn.send(message)
        except (BrokenPipeError, ConnectionResetError):
            # It died after its last reply: glibc aborting on a heap corruption it noticed at a later free ("double
            # free or corruption", a torch 2.15 campaign). The request never reached it: a fresh worker takes it.
            # Ending the campaign here ("Broken pipe", exit 2) lost the rest of it.
            self.deaths_between_requests += 1
            self._restart()
            self.in_flight = message
            self.conn.send(message)

    def collect(self):
        """Read what the worker sent; the request's result, or None if it is still working.

        Raises WorkerDied (after restarting the worker) if the process died.
        """
        while self.conn.poll():
            reply = self._recv()
            if reply[0] == "running":
                self.backend, self.backend_compiles, self.source = reply[1], reply[2], reply[3]
                self.last_heartbeat = time.monotonic()
                continue
            if reply[0] == "died":
                self.process.join(5)
                code = self.process.exitcode
                backend, source = self.backend, self.source
                self._restart()
                raise WorkerDied("crash", backend, f"{DIED_MESSAGE}{describe_exit(code)}", source, code)
            if reply[0] == "poisoned":
                self._restart()
                raise WorkerPoisoned(*reply[1:])
            request = self.in_flight
            self.in_flight = None
            if reply[0] == "user-error":
                raise UserError(reply[1])
            if reply[0] == "error":
                raise InternalError(f"worker failed while handling {request[0]!r}:\n{reply[1]}")
            return reply[1]
        return None

    def check_timeout(self, timeout: float, compile_timeout: float | None = None) -> None:
        """Kill and restart a worker silent for too long: `timeout` seconds, or `compile_timeout` during
        a compiling backend's run (torch.compile's first graph takes tens of seconds, more when several
        workers compile at once). Silent outside any backend run, in a check's own work, it is raised
        as SlowCheck: no backend's finding."""
        # Before its first backend, between backends and after them a check draws the case, computes its
        # references and honest models and localizes findings: our own work, also held to `timeout` (under
        # the compile timeout a jax-vmap campaign's one worker spent 9 of its 10 minutes in a reference).
        outside = self.backend is None and self.in_flight is not None and self.in_flight[0] in CHECKS
        limit = max(timeout, compile_timeout or 0.0) if self.backend_compiles else timeout
        if self.in_flight is not None and time.monotonic() - self.last_heartbeat > limit:
            backend, source = self.backend, self.source
            held, memory_limit = address_space_mb(self.process.pid), self.config.memory_limit_mb
            self._restart()
            if outside:
                raise SlowCheck(limit, source)
            if held is not None and memory_limit and held >= AT_LIMIT_SHARE * memory_limit:
                raise WorkerDied("crash", backend, f"{AT_MEMORY_LIMIT} ({held} of {memory_limit} MB) for {limit:g} s", source)
            raise WorkerDied("hang", backend, f"no answer within {limit:g} s", source)

    def request(self, message: tuple, timeout: float, compile_timeout: float | None = None):
        """Synchronous request (replay, regress): the result, or WorkerDied."""
        self.submit(message)
        while True:
            self.conn.poll(1.0)
            result = self.collect()
            if result is not None:
                return result
            self.check_timeout(timeout, compile_timeout)

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(10)
        end_session(self.process.pid)

    def stop(self) -> None:
        stop_all([self])

    def ask_to_stop(self) -> None:
        """Ask the worker to end once its request is done (stop_all waits for it)."""
        try:
            self.conn.send(("stop",))
        except (BrokenPipeError, OSError):
            pass


def stop_all(workers: list) -> None:
    """Stop a campaign's workers side by side: each is asked to, and those still busy after
    STOP_GRACE_S in all (a compile, a shrink) are killed; their cases stay unchecked, for a resume.
    One after the other, 14 busy workers took over a minute to end an interrupted campaign."""
    pipes = [worker for worker in workers if isinstance(worker, Worker)]
    for worker in pipes:
        worker.ask_to_stop()
    deadline = time.monotonic() + STOP_GRACE_S
    for worker in pipes:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        worker.kill()
    for worker in workers:
        if not isinstance(worker, Worker):  # a Ray actor: killed at once
            worker.stop()
