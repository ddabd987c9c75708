"""Campaign workers as Ray actors (`fuzz run --ray local|auto|ray://host:port`).

`RayWorker` has the interface of `fuzzer.workers.Worker` (submit, collect, check_timeout,
recycle, stop, in_flight, backend), so `Campaign.run` drives either kind. Each actor holds
one `Pipeline`; the seed stream is the campaign's (the driver hands out indices), and the
driver stays the only corpus writer: actors return the pipeline's records (fuzzer/records.py),
a CaseReply tagged with their node.

Isolation: an actor process that dies (segfault, abort, OOM kill, its node lost) surfaces
as `RayActorError`/`WorkerCrashedError`; the RayWorker then raises WorkerDied("crash") and
creates a fresh actor itself (`max_restarts=0`: Ray never replays a request that crashed),
which Ray places on any node still alive, so a lost node does not stop the campaign. An actor
whose device a backend's error left unusable is replaced alike (WorkerPoisoned).

Differences from the pipe workers:
- Ray gives no per-backend heartbeat. A request is a hang only when the whole request
  (generate, check, shrink) has run longer than max(timeout, compile_timeout).
- Which backend was running when an actor died is read from a key the actor writes to
  Ray's GCS key-value store before every backend run (best effort: None if unreadable).
- `memory_limit_mb` (RLIMIT_AS) is not applied to actors: Ray's own memory monitor kills
  an actor that exhausts the node's memory, which becomes a crash finding.
- Every node needs this package (and any --plugin file, at the same path) installed.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace

from fuzzer import DISTRIBUTION
from fuzzer.errors import DevicePoisoned, InternalError, UserError
from fuzzer.pipeline import WorkerConfig
from fuzzer.records import CaseReply
from fuzzer.workers import WorkerDied, WorkerPoisoned

_HEARTBEAT_NAMESPACE = b"fuzzer-heartbeat"
_actor_class = None


def _ray():
    try:
        import ray
    except ImportError:
        raise UserError(f"--ray needs Ray: pip install '{DISTRIBUTION}[ray]'") from None
    return ray


def start_ray(address: str) -> None:
    """Start a local Ray instance ("local") or join a cluster ("auto", "ray://host:port", "host:port")."""
    ray = _ray()
    if ray.is_initialized():
        return
    ray.init(address=None if address == "local" else address, ignore_reinit_error=True,
             log_to_driver=False, include_dashboard=False)


def _node() -> dict:
    import socket

    import ray

    return {"hostname": socket.gethostname(), "ip": ray.util.get_node_ip_address()}


def _pipeline_actor():
    """The actor class, defined on first use so that importing this module does not need Ray."""
    global _actor_class
    if _actor_class is not None:
        return _actor_class
    ray = _ray()

    @ray.remote(max_restarts=0, max_task_retries=0)
    class PipelineActor:
        def __init__(self, config: WorkerConfig, key: str):
            from ray.experimental import internal_kv

            from fuzzer.pipeline import Pipeline

            def heartbeat(backend, source):
                try:
                    internal_kv._internal_kv_put(key, json.dumps([backend.name, backend.expensive, source.to_list()]), overwrite=True,
                                                 namespace=_HEARTBEAT_NAMESPACE)
                except Exception:  # noqa: BLE001 - attribution is best effort, the run is not
                    pass

            self.pipeline = Pipeline(config, heartbeat=heartbeat)
            self.node = _node()

        def ready(self) -> dict:
            return self.node

        def handle(self, message: tuple):
            try:
                reply = self.pipeline.handle(message)
            except DevicePoisoned as poisoned:
                return poisoned.reply()  # the driver replaces this actor (RayWorker.collect)
            return replace(reply, node=self.node) if isinstance(reply, CaseReply) else reply

    _actor_class = PipelineActor
    return _actor_class


class RayWorker:
    """Driver-side handle of one Ray actor running a Pipeline; same interface as workers.Worker."""

    conn = None  # no pipe to wait on: the campaign polls (see campaign._wait_for)

    def __init__(self, config: WorkerConfig, start_timeout: float = 300.0):
        self.config = config
        self.start_timeout = start_timeout
        self.in_flight: tuple | None = None
        self.backend: str | None = None
        self.node: dict | None = None
        self._ref = None
        self._started = 0.0
        self._start()

    def _start(self) -> None:
        ray = _ray()
        self._key = f"fuzzer:{uuid.uuid4().hex}"
        self.actor = _pipeline_actor().options(num_cpus=1).remote(self.config, self._key)
        try:
            self.node = ray.get(self.actor.ready.remote(), timeout=self.start_timeout)
        except ray.exceptions.GetTimeoutError:
            self.kill()
            raise InternalError("a Ray worker actor did not start in time (are CPUs free in the cluster?)") from None
        except ray.exceptions.RayError as exc:
            self.kill()
            raise InternalError(f"a Ray worker actor failed to start:\n{exc}") from None

    def _last_heartbeat(self) -> tuple[str | None, list | None]:
        """(backend, case source) the actor last said it was running."""
        try:
            from ray.experimental import internal_kv

            value = internal_kv._internal_kv_get(self._key, namespace=_HEARTBEAT_NAMESPACE)
            return tuple(json.loads(value)[0:3:2]) if value else (None, None)
        except Exception:  # noqa: BLE001
            return None, None

    def _clear_heartbeat(self) -> None:
        try:
            from ray.experimental import internal_kv

            internal_kv._internal_kv_del(self._key, namespace=_HEARTBEAT_NAMESPACE)
        except Exception:  # noqa: BLE001
            pass

    def _restart(self) -> None:
        self.kill()
        self.in_flight = None
        self._ref = None
        self._start()

    def recycle(self) -> None:
        self._restart()

    def submit(self, message: tuple) -> None:
        self.in_flight = message
        self.backend = None
        self._started = time.monotonic()
        self._ref = self.actor.handle.remote(message)

    def collect(self):
        """The request's result, or None while it runs; WorkerDied (after re-creating the actor) if the actor died."""
        if self._ref is None:
            return None
        ray = _ray()
        ready, _ = ray.wait([self._ref], timeout=0)
        if not ready:
            return None
        request = self.in_flight
        try:
            reply = ray.get(self._ref)
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.ObjectLostError) as exc:
            died = self._died("crash", f"ray actor died: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            raise died from None
        except ray.exceptions.RayTaskError as exc:
            self.in_flight = None
            self._ref = None
            raise InternalError(f"worker failed while handling {request[0]!r}:\n{exc}") from None
        self.in_flight = None
        self._ref = None
        if isinstance(reply, tuple) and reply[0] == "poisoned":
            raise self._replaced(WorkerPoisoned(*reply[1:])) from None
        return reply

    def _died(self, kind: str, message: str) -> WorkerDied:
        backend, source = self._last_heartbeat()
        return self._replaced(WorkerDied(kind, backend, message, source))

    def _replaced(self, died: WorkerDied) -> WorkerDied:
        """`died`, tagged with the node the actor ran on, once a fresh actor has replaced it."""
        died.node = self.node
        self._restart()
        return died

    def check_timeout(self, timeout: float, compile_timeout: float | None = None) -> None:
        """Kill and re-create an actor whose whole request ran past max(timeout, compile_timeout):
        Ray gives no per-backend heartbeat, so the limit is per request, not per backend run."""
        limit = max(timeout, compile_timeout or 0.0)
        if self.in_flight is not None and time.monotonic() - self._started > limit:
            raise self._died("hang", f"no answer within {limit:g} s")

    def request(self, message: tuple, timeout: float, compile_timeout: float | None = None):
        self.submit(message)
        while True:
            result = self.collect()
            if result is not None:
                return result
            self.check_timeout(timeout, compile_timeout)
            time.sleep(0.05)

    def kill(self) -> None:
        try:
            _ray().kill(self.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already dead
            pass
        self._clear_heartbeat()

    def stop(self) -> None:
        self.kill()
