"""Is a stored bug still in the latest release, and which releases have it? `fuzz replay ID --on ENV,...`.

In each environment named (fuzzer/running/envs.py; `here` is this interpreter) the case's finding
backends (those of its stored bug findings) run as KIND@ENV (`here`: KIND), in one isolated
worker, and the environment gets one outcome:

    present     a finding backend gives its stored finding again (triage.same_bucket, the stored
                finding re-signed for the backend it ran as)
    differs     none does, but one fails another way
    cannot-run  none fails, and one cannot run there: its framework is missing, its device, or an
                API or argument form the release lacks (the `unsupported` verdict)
    fixed       every finding backend agrees with the float64 reference now

Each outcome is recorded on the case's bucket with the versions the environment reports
(Corpus.record_release_checks, fuzzer/corpus/releases.py); `fuzz show`, `fuzz list --json` and
`fuzz export --format issue` show them.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from fuzzer import verdicts
from fuzzer.backend_names import BackendName
from fuzzer.corpus import Corpus, StoredCase
from fuzzer.corpus.releases import CANNOT_RUN, DIFFERS, FIXED, PRESENT
from fuzzer.errors import UserError
from fuzzer.records import CheckReply
from fuzzer.reproducers.reproducer import ENVIRONMENT_KEYS
from fuzzer.running import envs
from fuzzer.running.replay import Replayer, with_bases
from fuzzer.triaging.triage import current_signature, require_backends, same_bucket

HERE = "here"  # this interpreter, under the backends' plain names
FRAMEWORKS = ("torch", "jax")  # the releases an outcome names


@dataclass
class BackendCheck:
    """One finding backend in one environment: the name it ran as there, its outcome and why."""

    backend: str
    outcome: str  # '' until judged
    detail: str
    findings: list[dict] = field(default_factory=list, repr=False)  # the stored bug findings on its backend
    runs: list[str] = field(default_factory=list, repr=False)  # `backend` and the backends it derives from

    @property
    def runnable(self) -> bool:
        return self.outcome != CANNOT_RUN


@dataclass
class ReleaseCheck:
    """One environment's outcome, with its versions (python, numpy, torch, jax, jaxlib, cuda) as it reports them."""

    environment: str
    versions: dict
    outcome: str
    backends: list[BackendCheck]

    @property
    def detail(self) -> str:
        if len(self.backends) == 1:
            return self.backends[0].detail
        return "; ".join(f"{b.backend}: {b.detail}" for b in self.backends)

    def to_dict(self) -> dict:
        return {"environment": self.environment, "versions": self.versions, "outcome": self.outcome, "detail": self.detail,
                "backends": [{"backend": b.backend, "outcome": b.outcome, "detail": b.detail} for b in self.backends]}


@dataclass
class ReleaseReport:
    case_id: int
    bucket: str
    checks: list[ReleaseCheck]

    @property
    def reproduces(self) -> bool:
        """Whether the case fails in any environment asked (present or differs): `fuzz replay` exits 1."""
        return any(check.outcome in (PRESENT, DIFFERS) for check in self.checks)

    def to_dict(self) -> dict:
        return {"case": self.case_id, "bucket": self.bucket, "reproduces": self.reproduces,
                "checks": [check.to_dict() for check in self.checks]}


def check_on_releases(corpus: Corpus, case_id: int, environments: list[str], plugins: list[str],
                      timeout: float = 120.0) -> ReleaseReport:
    """Replay stored case `case_id`'s finding backends in each of `environments` (registered names or
    `here`) and record each outcome on its bucket. Every name is checked before anything runs."""
    stored = corpus.get_case(case_id)
    on_backend = finding_backends(stored)
    for name in environments:
        if name != HERE and name not in envs.load_all():
            raise UserError(f"No environment named '{name}'; `fuzz env list` shows the registered ones "
                            f"(and `{HERE}` is this interpreter).")
    if HERE in environments:  # a plugin's backend runs here only: name the plugin files it needs
        require_backends(corpus, stored, list(on_backend), plugins)
    planned = {name: [_planned(kind, findings, name, plugins) for kind, findings in on_backend.items()]
               for name in dict.fromkeys(environments)}
    runnable = sorted({run for items in planned.values() for item in items if item.runnable for run in item.runs})
    checks = []
    with contextlib.ExitStack() as stack:  # one worker for all: KIND@ENV runs in ENV's own process anyway
        replayer = stack.enter_context(Replayer(runnable, plugins, timeout)) if runnable else None
        for name, items in planned.items():
            runs = list(dict.fromkeys(run for item in items if item.runnable for run in item.runs))
            reply = replayer.check(stored.case, runs) if runs else None
            judged = [_judged(item, reply) if item.runnable else item for item in items]
            checks.append(ReleaseCheck(name, environment_versions(name), _environment_outcome(judged), judged))
    bucket = corpus.bucket(stored.signature)["signature"]
    corpus.record_release_checks(bucket, case_id, [{"environment": c.environment, "versions": c.versions,
                                                    "outcome": c.outcome, "detail": c.detail} for c in checks])
    return ReleaseReport(case_id, bucket, checks)


def finding_backends(stored: StoredCase) -> dict[str, list[dict]]:
    """The case's bug findings by the kind of their backend without its environment
    ('jax-jit:cpu:float32@jax-0.4.26' -> 'jax-jit:cpu:float32')."""
    found: dict[str, list[dict]] = {}
    for finding in stored.findings:
        if verdicts.is_bug(finding["verdict"]):
            found.setdefault(str(BackendName.parse(finding["backend"]).here), []).append(finding)
    if not found:
        raise UserError(f"Case {stored.id} has no finding to check in other releases; pick a case `fuzz list` shows.")
    return found


def _planned(kind: str, findings: list[dict], environment: str, plugins: list[str]) -> BackendCheck:
    """The backend to run for `kind` in `environment`, with the bases it derives from; its outcome is
    cannot-run already where it cannot run there (the detail says why)."""
    name = kind if environment == HERE else f"{kind}@{environment}"
    runs, why = with_bases([name], plugins)
    return BackendCheck(name, CANNOT_RUN if why else "", why, findings, runs)


def _judged(item: BackendCheck, reply: CheckReply) -> BackendCheck:
    """`item`'s outcome from the reply of its environment's run."""
    expected = [current_signature({**finding, "backend": item.backend}) for finding in item.findings]
    failures = [f.signature for f in reply.findings if f.backend in item.runs and verdicts.is_bug(f.verdict)]
    outcome, detail = FIXED, "agrees with the float64 reference"
    if any(same_bucket(signature, seen) for signature in expected for seen in failures):
        outcome, detail = PRESENT, ", ".join(failures)
    elif failures:
        outcome, detail = DIFFERS, f"fails another way: {', '.join(failures)}"
    else:
        own = next((v for v in reply.verdicts if v.backend == item.backend), None)
        if own is not None and own.verdict == verdicts.UNSUPPORTED:
            outcome, detail = CANNOT_RUN, own.detail
    return BackendCheck(item.backend, outcome, detail, item.findings, item.runs)


def _environment_outcome(items: list[BackendCheck]) -> str:
    """The first of present, differs, cannot-run that a finding backend has; fixed when every one is."""
    return next((outcome for outcome in (PRESENT, DIFFERS, CANNOT_RUN) if any(i.outcome == outcome for i in items)), FIXED)


def environment_versions(name: str) -> dict:
    """The versions environment `name` reports now (`here`: this process's); those recorded when it was
    registered if its interpreter no longer starts."""
    from fuzzer.backends.env_backend import EnvWorkerError, worker_for
    from fuzzer.running.environment import versions

    if name == HERE:
        reported = versions()
    else:
        environment = envs.get(name)
        try:  # its worker in this process, started already by the availability check (with_bases)
            reported = worker_for(environment).versions_now()
        except (EnvWorkerError, TimeoutError):
            reported = environment.versions
    return {key: str(reported[key]) for key in ENVIRONMENT_KEYS if reported.get(key)}


# -- in words ------------------------------------------------------------------------------------

def releases_text(versions: dict, python: bool = False) -> str:
    """'torch 2.13.0 / jax 0.10.2' (`python`: '... on Python 3.11.7'): the framework releases an environment has."""
    python_release = f"Python {versions.get('python', '?')}"
    frameworks = " / ".join(f"{pkg} {versions[pkg]}" for pkg in FRAMEWORKS if versions.get(pkg))
    if not frameworks:
        return f"{python_release} without torch or jax"
    return f"{frameworks} on {python_release}" if python else frameworks


# A release where the case agrees may be older than the bug or newer than its fix: the words say
# only what was seen ("fixed in jax 0.4.28" read as a fix in a release that predates the bug).
OUTCOME_WORDS = {PRESENT: "present in", FIXED: "not reproduced in", DIFFERS: "fails another way in",
                 CANNOT_RUN: "cannot run in"}


def check_phrase(check: dict, python: bool = False) -> str:
    """'present in torch 2.13.0 / jax 0.10.2': a recorded check's outcome and releases."""
    return f"{OUTCOME_WORDS[check['outcome']]} {releases_text(check['versions'], python)}"

