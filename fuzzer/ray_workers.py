"""Campaign workers as Ray actors (`fuzz run --ray local|auto|HOST:PORT|ray://HOST:10001`).

`RayWorker` has the interface of `fuzzer.running.workers.Worker` (submit, collect, check_timeout,
recycle, stop, in_flight, backend), so `Campaign.run` drives either kind. Each actor holds
one `Pipeline`; the seed stream is the campaign's (the driver hands out indices), and the
driver stays the only corpus writer: actors return the pipeline's records (fuzzer/records.py),
a CaseReply tagged with their node (Ray's node id, hostname, ip).

Nothing here waits on the cluster: an actor is created without waiting for it to start (a
replacement may wait for a free CPU for good, if its node's CPUs are gone), a request sent to
it queues in Ray, and its time limit runs from when the actor started. Only `request` waits for
a reply (a death shrink, a recheck): it gives up on an actor that no node takes (PLACEMENT_WAIT).

Isolation: an actor process that dies (segfault, abort, OOM kill) surfaces as
`RayActorError`/`WorkerCrashedError`; the RayWorker then raises WorkerDied("crash") and creates
a fresh actor itself (`max_restarts=0`: Ray never replays a request that crashed). An actor
whose node left the cluster is not a finding about a backend: the RayWorker raises NodeLost
and the campaign runs that case again elsewhere. An actor whose device a backend's error left
unusable is replaced alike (WorkerPoisoned).

A node that dies abruptly (power lost, its raylet killed) first makes its actors unreachable
(`ActorUnavailableError`, within a second or two), while Ray's GCS still lists the node alive until
its health checks give up (~15 s by default). Unreachable is not dead: the RayWorker keeps the
request in flight, asks the actor for a sign of life once a second, and settles it with the first
answer: the node declared dead (NodeLost), the actor declared dead (a death, as above), or the actor
back (the request is sent again: Ray cannot say whether it ran). UNREACHABLE_LIMIT bounds the wait.

Differences from the pipe workers:
- Ray gives no per-backend heartbeat. A request is a hang only when the whole request
  (generate, check, shrink) has run longer than max(timeout, compile_timeout).
- Which backend was running when an actor died is read from a key the actor writes to
  Ray's GCS key-value store before every backend run, and with no backend after it (best effort: None
  if unreadable). A check past its limit outside any backend run is our own slowness (SlowCheck).
- `memory_limit_mb` (RLIMIT_AS) is not applied to actors: Ray's own memory monitor kills
  an actor that exhausts the node's memory, which becomes a crash finding.
- Every node needs this package (and any --plugin file, at the same path) installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from dataclasses import replace

from fuzzer import DISTRIBUTION
from fuzzer.errors import DevicePoisoned, InternalError, UserError
from fuzzer.records import CaseReply
from fuzzer.running import envs
from fuzzer.running.pipeline import WorkerConfig
from fuzzer.running.workers import CHECKS, SlowCheck, WorkerDied, WorkerPoisoned
from fuzzer.triaging.known import Registry

_HEARTBEAT_NAMESPACE = b"fuzzer-heartbeat"
# Seconds an unreachable actor may stay so, neither back nor declared dead, before its node counts as
# lost: several times Ray's default node-death detection (5 missed health checks, 3 s apart).
UNREACHABLE_LIMIT = 60.0
# Seconds a request the driver waits on (a death shrink, a recheck) lets a fresh actor wait for a node
# to take it before giving up: no node has a free CPU for it (one lost, Ray not saying so yet).
PLACEMENT_WAIT = 20.0
_actor_class = None


class NodeLost(Exception):
    """The node a Ray actor ran on left the cluster (a machine lost, its raylet killed); a fresh
    actor has replaced it. Not a finding: the case it was checking is run again."""

    def __init__(self, node: dict | None):
        super().__init__(f"Ray node {(node or {}).get('node_id', '?')} was lost")
        self.node = node


def _ray():
    try:
        import ray
    except ImportError:
        raise UserError(f"--ray needs Ray, which is not installed: pip install '{DISTRIBUTION}[ray]'") from None
    return ray


def start_ray(address: str) -> None:
    """Start a private Ray instance ("local") or join a cluster ("auto": RAY_ADDRESS, else the
    cluster `ray start` runs on this machine; "HOST:PORT"; "ray://HOST:PORT", Ray Client).
    A cluster that cannot be joined is a UserError, said before the campaign starts."""
    ray = _ray()
    if ray.is_initialized():
        return
    if address.startswith("ray://"):
        try:
            import grpc  # noqa: F401 - what Ray Client needs: ray[client]
        except ImportError:
            raise UserError(f"--ray {address} needs Ray Client, which is not installed: pip install 'ray[client]' "
                            "(or run `fuzz run --ray auto` on a machine of the cluster).") from None
    _keep_ray_messages_off_stdout()
    if address == "local":
        # address="local" starts a private instance even where another cluster runs on this machine
        # (with no address, ray.init joins that cluster).
        ray.init(address="local", log_to_driver=False, include_dashboard=False)
        return
    try:
        _require_listening(os.environ.get("RAY_ADDRESS", "") if address == "auto" else address)
        _join(ray, address)
    except ConnectionError as exc:
        raise UserError(f"Could not join the Ray cluster at --ray {address} ({str(exc).splitlines()[0]}); start one "
                        "with `ray start --head`, or pass --ray local.") from None


def _require_listening(address: str) -> None:
    """ConnectionError unless something listens at HOST:PORT ("" or "auto": Ray looks for a local cluster
    itself): Ray would retry a head that is gone for many minutes (20 tries of ~40 s)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {host}:{port}: {exc.strerror or exc}") from None


def _join(ray, address: str) -> None:
    """Join a running cluster with the authentication it uses. Given "auto", Ray turns token
    authentication on whenever a token file exists (~/.ray/auth_token, which any local `ray.init()`
    writes), whatever the cluster uses, and a cluster without it then cancels every actor. So,
    unless RAY_AUTH_MODE says, join without a token first, and with one if the cluster asks for it."""
    if "RAY_AUTH_MODE" in os.environ:
        ray.init(address=address, log_to_driver=False)
        return
    os.environ["RAY_AUTH_MODE"] = "disabled"
    try:
        with _environment(RAY_gcs_server_port_wait_time_s="2"):  # a live cluster without a token says so at once
            ray.init(address=address, log_to_driver=False)
    except ConnectionError as exc:
        if "InvalidAuthToken" not in str(exc.__cause__):
            raise
        ray.shutdown()
        os.environ["RAY_AUTH_MODE"] = "token"
        from ray._raylet import Config

        Config.initialize("")  # Ray reads RAY_AUTH_MODE once per process: what its own _enable_token_auth does
        ray.init(address=address, log_to_driver=False)


@contextlib.contextmanager
def _environment(**defaults: str):
    """os.environ with `defaults` for the variables the user has not set, restored after."""
    added = {name: value for name, value in defaults.items() if name not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def _keep_ray_messages_off_stdout() -> None:
    """Ray's driver prints the cluster's error messages (an actor died, the memory monitor's dump of
    its processes) to stdout even with log_to_driver=False (ray/_private/worker.py,
    listen_error_messages). stdout is for the summary (`--json`), so they go to stderr."""
    from ray._private import worker

    print_to_stdstream = getattr(worker, "print_to_stdstream", None)
    if print_to_stdstream is None or getattr(print_to_stdstream, "to_stderr", False):
        return

    def to_stderr(data, **kwargs):
        return print_to_stdstream({**data, "is_err": True}, **kwargs)

    to_stderr.to_stderr = True
    worker.print_to_stdstream = to_stderr


def _node() -> dict:
    import ray

    return {"node_id": ray.get_runtime_context().get_node_id(), "hostname": socket.gethostname(),
            "ip": ray.util.get_node_ip_address()}


def _pipeline_actor():
    """The actor class, defined on first use so that importing this module does not need Ray."""
    global _actor_class
    if _actor_class is not None:
        return _actor_class
    ray = _ray()

    @ray.remote(max_restarts=0, max_task_retries=0)
    class PipelineActor:
        def __init__(self, config: WorkerConfig, key: str, trusted_paths: str, known_bugs):
            from ray.experimental import internal_kv

            from fuzzer.running import envs
            from fuzzer.running.pipeline import Pipeline

            envs.adopt_trusted_paths(trusted_paths)  # Ray's workers have the variables of Ray's start, not the driver's now

            def heartbeat(backend, source):
                try:
                    internal_kv._internal_kv_put(key, json.dumps([backend and backend.name, backend is not None and backend.expensive, source.to_list()]), overwrite=True,
                                                 namespace=_HEARTBEAT_NAMESPACE)
                except Exception:  # noqa: BLE001 - attribution is best effort, the run is not
                    pass

            self.pipeline = Pipeline(config, heartbeat=heartbeat, known_bugs=known_bugs)
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

    def __init__(self, config: WorkerConfig, known_bugs: Registry | None = None):
        self.config = config
        self.known_bugs = known_bugs
        self.in_flight: tuple | None = None
        self.backend: str | None = None
        self._ref = None
        self._submitted = 0.0
        self._start()

    def _start(self) -> None:
        """Create the actor; it starts when the cluster has a CPU for it (see `starting`)."""
        self._key = f"fuzzer:{uuid.uuid4().hex}"
        self.actor = _pipeline_actor().options(num_cpus=1).remote(self.config, self._key, envs.trusted_paths(), self.known_bugs)
        self._created_at = time.monotonic()
        self._ready = self.actor.ready.remote()
        self._started_at: float | None = None
        self.node: dict | None = None
        self._unreachable_since: float | None = None  # when the actor stopped answering (_settle_unreachable)
        self._sign_of_life = None  # a `ready` call asking the unreachable actor whether it is back
        self._next_look = 0.0

    @property
    def starting(self) -> bool:
        """Whether the actor has not started yet (waiting for a CPU, importing the frameworks)."""
        return not self._poll_start()

    def _poll_start(self) -> bool:
        """Whether the actor's start is over (then `node` says where it runs: None if it died starting)."""
        if self._started_at is not None:
            return True
        ray = _ray()
        if not ray.wait([self._ready], timeout=0)[0]:
            return False
        try:
            self.node = ray.get(self._ready)
        except ray.exceptions.RayError:
            pass  # it died starting: the request sent to it fails too, and collect says why
        self._started_at = time.monotonic()
        return True

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
        self._submitted = time.monotonic()
        self._ref = self.actor.handle.remote(message)  # queued in Ray until the actor has started

    def collect(self):
        """The request's result, or None while it runs; after re-creating the actor: NodeLost if its
        node left the cluster, WorkerDied if the actor died, InternalError if it could not start."""
        if self._ref is None:
            return None
        if self._unreachable_since is not None:
            return self._settle_unreachable()
        ray = _ray()
        ready, _ = ray.wait([self._ref], timeout=0)
        if not ready:
            return None
        request = self.in_flight
        try:
            reply = ray.get(self._ref)
        except ray.exceptions.ActorUnavailableError:
            self._unreachable_since = time.monotonic()
            return None
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.ObjectLostError) as exc:
            raise self._death(exc) from None
        except ray.exceptions.RayTaskError as exc:
            self.in_flight = None
            self._ref = None
            raise InternalError(f"worker failed while handling {request[0]!r}:\n{exc}") from None
        self.in_flight = None
        self._ref = None
        if isinstance(reply, tuple) and reply[0] == "poisoned":
            raise self._replaced(WorkerPoisoned(*reply[1:])) from None
        return reply

    def _death(self, exc: Exception) -> Exception:
        """What the actor's death `exc` is, once a fresh actor has replaced it: InternalError if it could
        not start, NodeLost if its node left the cluster or it never ran the request, else WorkerDied."""
        if getattr(exc, "actor_init_failed", False):
            self._restart()
            return InternalError(f"a Ray worker actor failed to start:\n{exc}")
        if not self._poll_start() or self.node is None or not self._node_alive():
            return self._replaced(NodeLost(self.node))
        return self._died("crash", f"ray actor died: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")

    def _settle_unreachable(self) -> None:
        """None while the unreachable actor's fate is open; raises NodeLost or the death once Ray settles
        it (NodeLost after UNREACHABLE_LIMIT too); sends the request again if the actor is back."""
        if time.monotonic() < self._next_look:
            return None
        self._next_look = time.monotonic() + 1.0  # the node list is the GCS's to serve: once a second
        if self.node is None or not self._node_alive() or time.monotonic() - self._unreachable_since > UNREACHABLE_LIMIT:
            raise self._replaced(NodeLost(self.node))
        ray = _ray()
        if self._sign_of_life is not None and ray.wait([self._sign_of_life], timeout=0)[0]:
            try:
                ray.get(self._sign_of_life)
            except ray.exceptions.ActorUnavailableError:
                self._sign_of_life = None  # still unreachable: asked again below
            except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as exc:
                raise self._death(exc) from None
            else:
                self._unreachable_since = self._sign_of_life = None
                self.submit(self.in_flight)
                return None
        if self._sign_of_life is None:
            self._sign_of_life = self.actor.ready.remote()
        return None

    def _node_alive(self) -> bool:
        """Whether the node the actor ran on is still in the cluster (Ray's GCS knows of a node that
        left gracefully before it fails the actor's requests; of one that died, only after its health
        checks give up: _settle_unreachable)."""
        return any(n["NodeID"] == self.node["node_id"] and n["Alive"] for n in _ray().nodes())

    def _died(self, kind: str, message: str) -> WorkerDied:
        backend, source = self._last_heartbeat()
        return self._replaced(WorkerDied(kind, backend, message, source))

    def _replaced(self, died: WorkerDied | NodeLost) -> WorkerDied | NodeLost:
        """`died`, tagged with the node the actor ran on, once a fresh actor has replaced it."""
        died.node = self.node
        self._restart()
        return died

    def check_timeout(self, timeout: float, compile_timeout: float | None = None) -> None:
        """Kill and re-create an actor whose whole request ran past max(timeout, compile_timeout),
        counted from when both the request was sent and the actor had started: Ray gives no
        per-backend heartbeat, so the limit is per request, not per backend run."""
        if self.in_flight is None or self.starting or self._unreachable_since is not None:
            return  # an unreachable actor's request is bounded by UNREACHABLE_LIMIT instead
        limit = max(timeout, compile_timeout or 0.0)
        if time.monotonic() - max(self._submitted, self._started_at) > limit:
            backend, source = self._last_heartbeat()
            if backend is None and self.in_flight[0] in CHECKS:  # outside any backend run: our own work
                raise self._replaced(SlowCheck(limit, source))
            raise self._replaced(WorkerDied("hang", backend, f"no answer within {limit:g} s", source))

    def request(self, message: tuple, timeout: float, compile_timeout: float | None = None):
        """The reply, waited for; NodeLost where the actor finds no node to start on within PLACEMENT_WAIT
        (the campaign loop waits for nothing else meanwhile)."""
        self.submit(message)
        while True:
            result = self.collect()
            if result is not None:
                return result
            self.check_timeout(timeout, compile_timeout)
            if time.monotonic() - self._created_at > PLACEMENT_WAIT and self._unplaced():
                raise self._replaced(NodeLost(None))
            time.sleep(0.05)

    def _unplaced(self) -> bool:
        """Whether the actor is still waiting for a node with a free CPU (GCS's actor table: no worker
        process yet). False once it started, or where the table cannot say."""
        if not self.starting:
            return False
        try:
            from ray._private import state

            return state.actors(self.actor._actor_id.hex()).get("Pid") == 0
        except Exception:  # noqa: BLE001 - Ray's private table: without it, wait as before
            return False

    def kill(self) -> None:
        try:
            _ray().kill(self.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already dead
            pass
        self._clear_heartbeat()

    def stop(self) -> None:
        self.kill()
