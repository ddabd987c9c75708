"""`fuzz bisect`: which release of a package broke a stored case.

The versions pip can install between --from and --to are searched like `git bisect`:
both ends are tested first (the old one must pass and the new one fail; with --find-fix
the other way round), then the middle of the remaining range, each version in its own cached environment
(`bisect-PACKAGE-VERSION`, fuzzer/running/envs.py). A version that cannot be tested (no wheel
for this Python, an op its release lacks) is skipped, and the next untested version
nearest the middle is tried instead; if only skipped versions separate the last old-behaving
release from the first new-behaving one, the answer is that range.

The search (`bisect_versions`) knows nothing of environments or of passing and failing:
it takes a function from a version to "old" (behaves like --from), "new" (like --to) or
"skip", which is how its tests drive it with made-up outcomes.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Callable

from packaging.version import InvalidVersion, Version

from fuzzer import oracle, verdicts
from fuzzer.errors import UserError
from fuzzer.ir import Case
from fuzzer.running import envs

OLD, NEW, SKIP = "old", "new", "skip"


@dataclass
class Step:
    version: str
    outcome: str  # old | new | skip
    detail: str = ""  # the case's verdict there, or why it could not be tested
    versions: dict = field(default_factory=dict)  # what the environment really had


@dataclass
class BisectResult:
    last_old: str | None
    first_new: str | None
    steps: list[Step]
    candidates: list[str]
    # Why the search could not start: an end of the range that does not pass or fail as it must.
    problem: str = ""

    @property
    def skipped_between(self) -> list[str]:
        """Untestable versions between last_old and first_new: the change is in one of them or first_new."""
        if self.last_old is None or self.first_new is None:
            return []
        low, high = self.candidates.index(self.last_old), self.candidates.index(self.first_new)
        return self.candidates[low + 1:high]

    def to_dict(self) -> dict:
        return {"last_old": self.last_old, "first_new": self.first_new, "skipped_between": self.skipped_between,
                "problem": self.problem, "candidates": self.candidates, "steps": [asdict(s) for s in self.steps]}


def bisect_versions(candidates: list[str], test: Callable[[str], Step]) -> BisectResult:
    """Search oldest-first `candidates` for the first version whose `test` says new."""
    steps: list[Step] = []

    def run(index: int) -> str:
        steps.append(test(candidates[index]))
        return steps[-1].outcome

    if len(candidates) < 2:
        return BisectResult(None, None, steps, candidates, "the range holds fewer than two versions")
    ends = {0: OLD, len(candidates) - 1: NEW}
    for index, expected in ends.items():
        outcome = run(index)
        if outcome != expected:
            which = "--from" if index == 0 else "--to"
            return BisectResult(None, None, steps, candidates, f"{which} {candidates[index]}: {steps[-1].detail}")
    old, new = 0, len(candidates) - 1
    skipped: set[int] = set()
    while True:
        untested = [i for i in range(old + 1, new) if i not in skipped]
        if not untested:
            return BisectResult(candidates[old], candidates[new], steps, candidates)
        middle = (old + new) / 2
        index = min(untested, key=lambda i: (abs(i - middle), i))
        outcome = run(index)
        if outcome == OLD:
            old = index
        elif outcome == NEW:
            new = index
        else:
            skipped.add(index)


# -- versions pip can install ------------------------------------------------------------

def available_versions(package: str, low: str, high: str, listed: list[str] | None = None,
                       python: str = sys.executable) -> list[str]:
    """Final releases of `package` from `low` to `high` inclusive, oldest first."""
    try:
        low_v, high_v = Version(low), Version(high)
    except InvalidVersion as exc:
        raise UserError(f"{exc}; give versions like 2.1.0.") from None
    if low_v >= high_v:
        raise UserError(f"--from {low} must be older than --to {high}.")
    found = listed if listed is not None else _pip_index_versions(package, python)
    by_public: dict[Version, str] = {}
    for text in found:
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        public = Version(version.public)  # 2.13.0+cpu and 2.13.0 are one release to pip's ==
        if not (version.is_prerelease or version.is_devrelease) and low_v <= public <= high_v:
            by_public.setdefault(public, str(public))
    return [by_public[v] for v in sorted(by_public)]


def _pip_index_versions(package: str, python: str) -> list[str]:
    done = subprocess.run([python, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"],
                          capture_output=True, text=True)
    match = re.search(r"^Available versions: (.+)$", done.stdout, re.MULTILINE)
    if done.returncode != 0 or not match:
        reason = (done.stderr.strip().splitlines() or ["no versions listed"])[-1]
        raise UserError(f"pip cannot list the versions of '{package}' ({reason}); give them with --versions.")
    return [v.strip() for v in match.group(1).split(",")]


# -- one version, in its own environment -------------------------------------------------

def env_for(package: str, version: str, extra: list[str], python: str, pip_args: list[str],
            progress: envs.Progress) -> envs.Environment:
    """The cached environment with `package==version` and `extra` (where {version} is filled in)."""
    wanted = [f"{package}=={version}", *(requirement.replace("{version}", version) for requirement in extra)]
    name = f"bisect-{package}-{version}"
    if extra or pip_args:
        name += "-" + hashlib.sha256(repr((wanted, pip_args)).encode()).hexdigest()[:6]
    existing = envs.load_all().get(name)
    if existing is not None:
        return existing
    progress(f"{package} {version}: creating environment {name}")
    return envs.create(name, wanted, python=python, pip_args=pip_args, progress=lambda line: progress(f"  {line}"))


def outcome_of(verdict: oracle.BackendVerdict, find_fix: bool) -> tuple[str, str]:
    """old / new / skip for the case's verdict on the bisected backend, and the verdict in words.

    Looking for a regression, passing is the old behaviour; looking for a fix, failing is."""
    if verdict.verdict == verdicts.UNSUPPORTED:
        return SKIP, f"untestable: {verdict.detail}"
    passes = verdicts.passes(verdict.verdict)
    error = f" (error {verdict.max_error:.3g}, allowed {verdict.allowed:.3g})" if verdict.allowed else ""
    text = f"{'passes' if passes else 'fails'}: {verdict.verdict}{error}{': ' + verdict.detail if verdict.detail else ''}"
    return (OLD if passes != find_fix else NEW), text


def bisect_case(case: Case, backend_spec: str, package: str, candidates: list[str], extra: list[str] | None = None,
                python: str = sys.executable, pip_args: list[str] | None = None, find_fix: bool = False,
                progress: envs.Progress = lambda line: None) -> BisectResult:
    """Bisect `candidates` of `package` for the first release where `backend_spec` gets `case`
    wrong (or, with `find_fix`, right again)."""
    from fuzzer.backends import get_backend
    from fuzzer.backends.env_backend import EnvBackend
    from fuzzer.judging.check import check_case

    base = get_backend(backend_spec)

    def test(version: str) -> Step:
        try:
            env = env_for(package, version, extra or [], python, pip_args or [], progress)
        except UserError as exc:
            step = Step(version, SKIP, f"untestable, no environment: {exc}")
        else:
            backend = EnvBackend(base, env)
            reason = backend.unavailable_reason()
            if reason:
                step = Step(version, SKIP, f"untestable: {reason}", env.versions)
            else:
                outcome, detail = outcome_of(check_case(case, [backend]).verdicts[0], find_fix)
                step = Step(version, outcome, detail, backend.other_environment()[1])
            backend.worker.close()  # each version is tested once: free its memory
        progress(f"{package} {version}: {step.detail}")
        return step

    return bisect_versions(candidates, test)
