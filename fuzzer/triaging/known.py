"""Known bugs, shipped as data: the registry file (corpus/known-bugs.json), checked when it is
read, which entry a finding is, and adding an entry.

The registry is a strict JSON list (no NaN or Infinity tokens) of one object per bug:

    id        a short name: lowercase letters, digits, '.' and '-' ("torch-sign-nan")
    title     one line saying what is wrong
    match     which findings are this bug; every key given must hold:
                verdicts    the finding's verdict, or the verdict it is bucketed under (required)
                ops         its culprit op ("softmax@fused" counts as softmax, and so does every op
                            that fused output depends on: see culprit_ops)
                paths       its backend's compiler path ("torch/inductor": every torch.compile
                            and AOTInductor kind, gradients included; "jax/xla", "torch/eager",
                            "jax/eager", "onnx/ort": `Backend.path`); a plugin's backend has none
                kinds       its backend's kind ("torch-eager" of "torch-eager:cpu:float32";
                            a plugin backend's kind is its whole name); with `paths`, a backend
                            on either is matched
                except_kinds  kinds that a path given does not cover for this bug
                frameworks  the framework of its backend's kind ("torch", "jax", "onnxruntime");
                            never a plugin's backend, whose findings differ from its base's
                devices, dtypes
                error       a pattern searched in the normalized error text (errors.normalize_error:
                            numbers are N, shapes "(...)"); the part of regular-expression syntax
                            that cannot backtrack (fuzzer/triaging/error_patterns.py): literal text,
                            backslash-escaped punctuation, '.', '.*', '|', '^' and '$'
                releases    the releases the bug is in, per package, as version specifiers compared
                            with the versions the finding ran with (the campaign's record,
                            fuzzer/running/environment.py; for KIND@ENV, that environment's): {"torch":
                            ">=2.11,<2.13"}; a finding from a release outside is new. A package whose
                            version the finding did not record places no condition
    status    "open"; "convention", a result the framework documents (not a bug to report);
              or "fixed-in RELEASE", which matches nothing: a finding of a fixed bug is a
              regression or an old release, worth a look either way
    link      the upstream issue, or null while nobody has reported it
    affected  the releases seen affected, as text, or null
    cases     stored cases (`fuzz export --format json`), relative to the registry's folder
    report    our write-up, relative to the registry's folder, or null
              (both inside the folder that holds the registry's folder: the repository of
              corpus/known-bugs.json, whose write-ups are in reports/bugs/)

A key given twice in one object is refused, as are paths leading out of those folders: the registry
is data a pull request can change, so no entry can make the fuzzer read elsewhere or stall it.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from fuzzer import jsonform, verdicts
from fuzzer.backend_names import BackendName
from fuzzer.backends import kind_family, kind_path
from fuzzer.complex_dtypes import COMPLEX_DTYPES
from fuzzer.errors import UserError, normalize_error
from fuzzer.exact_dtypes import EXACT_DTYPES
from fuzzer.ir import Graph, check_json_depth
from fuzzer.records import Finding, signature_error
from fuzzer.triaging.error_patterns import ErrorPattern, UnsafePattern, compile_pattern

REGISTRY_ENV = "FUZZ_KNOWN_BUGS"
SHIPPED_REGISTRY = Path(__file__).resolve().parents[2] / "corpus" / "known-bugs.json"
CASES_FOLDER = "known"  # where `fuzz known add` writes an entry's case, beside the registry

ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9.\-]*")
STATUS_PATTERN = re.compile(r"open|convention|fixed-in \S+")
DEVICES = ("cpu", "cuda", "gpu")
DTYPES = ("float16", "bfloat16", "float32", "float64", *EXACT_DTYPES, *COMPLEX_DTYPES)
ENTRY_KEYS = ("id", "title", "match", "status", "link", "affected", "cases", "report")
REQUIRED_KEYS = ("id", "title", "match", "status")
MATCH_LISTS = ("verdicts", "ops", "paths", "kinds", "except_kinds", "frameworks", "devices", "dtypes")
# The packages a `releases` condition may name: those fuzzer/running/environment.py records with every campaign.
RELEASE_PACKAGES = ("torch", "jax", "jaxlib", "numpy", "python", "cuda")


class _Malformed(Exception):
    """What is wrong with one entry; load_registry says which entry of which file."""


@dataclass(frozen=True)
class Rule:
    """An entry's `match`: an empty tuple or None places no condition."""

    verdicts: tuple[str, ...]
    ops: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    except_kinds: tuple[str, ...] = ()
    frameworks: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    error: ErrorPattern | None = None
    releases: tuple[tuple[str, SpecifierSet], ...] = ()

    def matches(self, verdict: str, backend: str, ops: set[str], error_text: str, versions: dict | None = None) -> bool:
        """`ops`: the ops the finding may be charged to (culprit_ops); `versions`: those it ran with
        (a campaign's record; None: this process's, looked up only when a range is to be checked)."""
        return (self.covers_verdict(verdict)
                and (not self.ops or not ops.isdisjoint(self.ops))
                and self.covers_backend(backend)
                and (self.error is None or self.error.search(normalize_error(error_text)))
                and (not self.releases or self.in_releases(ran_with(BackendName.parse(backend), versions))))

    def covers_verdict(self, verdict: str) -> bool:
        return verdict in self.verdicts or verdicts.bucket_verdict(verdict) in self.verdicts

    def covers_backend(self, backend: str) -> bool:
        """Do the entry's kinds, paths, frameworks, devices and dtypes take in this backend?"""
        name = BackendName.parse(backend)
        kind, device, dtype = (name.kind, name.device, name.dtype) if name.full else (backend, None, None)
        return ((not (self.kinds or self.paths) or kind in self.kinds or kind_path(name) in self.paths)
                and kind not in self.except_kinds
                and (not self.frameworks or kind_family(name) in self.frameworks)
                and (not self.devices or device in self.devices)
                and (not self.dtypes or dtype in self.dtypes))

    def in_releases(self, versions: dict) -> bool:
        """Is every recorded version of a package the entry names inside its range?"""
        for package, specifier in self.releases:
            try:
                release = Version(str(versions[package]))
            except (KeyError, InvalidVersion):
                continue  # not recorded, or not a version: no condition
            if not specifier.contains(release, prereleases=True):
                return False
        return True


@dataclass(frozen=True)
class KnownBug:
    id: str
    rule: Rule
    status: str
    cases: tuple[Path, ...]  # resolved
    entry: dict  # as the file has it: what `fuzz known list --json` prints and `fuzz known add` writes back

    @property
    def fixed(self) -> bool:
        return self.status.startswith("fixed-in")

    def matches(self, finding: Finding, graph: Graph | None = None, versions: dict | None = None) -> bool:
        """Whether a finding on a case of `graph`, run with `versions` (None: here), is this bug by its
        match rule, whatever its status."""
        return self.rule.matches(finding.verdict, finding.backend, culprit_ops(finding.culprit, graph), error_text(finding),
                                 versions)


@dataclass(frozen=True)
class Registry:
    path: Path | None  # None: no registry file (an installation without the repository)
    bugs: tuple[KnownBug, ...]

    def match(self, finding: Finding, graph: Graph | None = None, versions: dict | None = None) -> KnownBug | None:
        """The first entry a finding on a case of `graph`, run with `versions` (a campaign's record;
        None: this process's), is, or None; a fixed bug is never matched."""
        return next((bug for bug in self.bugs if not bug.fixed and bug.matches(finding, graph, versions)), None)

    def entry(self, bug_id: str) -> KnownBug | None:
        """The entry with this id (a bucket's `known_bug`), or None where the registry has none."""
        return next((bug for bug in self.bugs if bug.id == bug_id), None)


def mark_known_cases(corpus, registry: Registry, case_ids) -> dict[str, str]:
    """Mark the buckets of stored cases' findings that are registry bugs as known, as a campaign
    does when it stores them: a case re-shrunk (`fuzz shrink`, whose localization may name another
    culprit now) or imported lands in its bug's bucket. Returns {bucket: bug id}."""
    from fuzzer.triaging.buckets import bucket_signatures

    marked = {}
    for case_id in case_ids:
        stored = corpus.get_case(case_id)
        versions = corpus.campaign(stored.campaign_id)["versions"] if stored.campaign_id else None
        for data, bucket in zip(stored.findings, bucket_signatures(stored.findings)):
            finding = Finding.from_dict(data)
            bug = registry.match(finding, stored.case.graph, versions) if verdicts.is_bug(finding.verdict) else None
            if bug is not None and bucket not in marked:
                corpus.mark_known(bucket, bug.id)
                marked[bucket] = bug.id
    return marked


def culprit_ops(culprit: str, graph: Graph | None) -> set[str]:
    """The ops a finding is charged to: its culprit's op ("sin@grad" is sin) and, for a fusion's
    culprit ("layer_norm@fused": no op was wrong alone, fuzzer/judging/check.py), every op that the fused
    output depends on in `graph`. A known bug of an op that the compiler fused into its consumer
    (a minimum fused into a sum under jax.jit) is found only as the consumer's fusion."""
    op, *how = culprit.split("@")  # "matmul@fused@jvp": a fusion under a transformation is a fusion too
    if "fused" not in how or graph is None:
        return {op}
    fused = [node.name for node in graph.nodes if node.op == op]
    needed = graph.ancestors(fused)
    return {op} | {node.op for node in graph.nodes if node.name in needed}


def ran_with(name: BackendName, recorded: dict | None) -> dict:
    """The versions a finding of backend `name` ran with: `recorded` (a campaign's, fuzzer/running/environment.py)
    or this process's, and for a backend of another environment that environment's ({} where it is
    not known here: no range is checked)."""
    recorded = recorded if recorded is not None else _versions_here()
    if name.env is None:
        return recorded
    if name.env in (recorded.get("environments") or {}):
        return recorded["environments"][name.env]
    from fuzzer.backends import get_backend

    try:
        other = get_backend(str(name)).other_environment()
    except UserError:  # an environment not registered here (a case stored elsewhere)
        return {}
    return other[1] if other is not None else {}


@functools.cache
def _versions_here() -> dict:
    from fuzzer.running.environment import versions

    return versions()


def release_of(backend: str, versions: dict | None) -> tuple[str, str] | None:
    """(package, version) of the framework a finding of `backend` ran with, e.g. ("torch",
    "2.13.0+cpu"); None for a plugin's backend or a framework whose version is not recorded."""
    name = BackendName.parse(backend)
    version = ran_with(name, versions or {}).get(kind_family(name) or "")
    return (kind_family(name), version) if version else None


def error_text(finding: Finding) -> str:
    """The finding's error, or the error part of its signature when the raw text was not kept."""
    return finding.error or signature_error(finding.signature)


# -- reading ------------------------------------------------------------------------------------

def registry_path(path: str | Path | None) -> Path:
    """The registry to use: `path`, else $FUZZ_KNOWN_BUGS, else the one shipped in the repository."""
    return Path(path or os.environ.get(REGISTRY_ENV) or SHIPPED_REGISTRY)


def load_registry(path: str | Path | None = None) -> Registry:
    """The registry at registry_path(path), every entry checked; UserError in one sentence if the file
    is malformed or a registry that was asked for does not exist. The shipped default may be absent
    (an installation without the repository): then no bug is known."""
    chosen = registry_path(path)
    if not chosen.exists():
        if path is None and os.environ.get(REGISTRY_ENV) is None:
            return Registry(None, ())
        raise UserError(f"No known-bug registry at '{chosen}'; pass --known-bugs with an existing file.")
    return Registry(chosen, tuple(_parse_entries(chosen, _read_list(chosen))))


def _refusal(path: Path, what: str) -> UserError:
    return UserError(f"The known-bug registry '{path}' is malformed: {what}; fix the file or pass --known-bugs "
                     "with another registry.")


def _refuse_constant(token: str):
    raise ValueError(f"{token} is not strict JSON")


def _read_list(path: Path) -> list:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"Cannot read the known-bug registry '{path}' ({getattr(exc, 'strerror', None) or exc}); "
                        "check the path.") from None
    try:
        data = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=jsonform.unique_keys)
    except json.JSONDecodeError as exc:
        raise _refusal(path, f"it is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except jsonform.DuplicateKey as exc:
        raise _refusal(path, str(exc)) from None
    except (ValueError, RecursionError) as exc:
        raise _refusal(path, f"it is not strict JSON ({exc})") from None
    if not isinstance(data, list):
        raise _refusal(path, f"it holds a JSON {type(data).__name__}, not a list of entries")
    check_json_depth(data, f"known-bug registry '{path}'")
    return data


def _parse_entries(path: Path, entries: list) -> list[KnownBug]:
    bugs: list[KnownBug] = []
    ids: set[str] = set()
    allowed = allowed_names()
    for index, data in enumerate(entries, start=1):
        name = data.get("id") if isinstance(data, dict) else None
        where = f"entry {index}" + (f" ('{name}')" if isinstance(name, str) else "")
        try:
            bug = parse_entry(data, path.parent, allowed)
        except _Malformed as exc:
            raise _refusal(path, f"{where} {exc}") from None
        if bug.id in ids:
            raise _refusal(path, f"{where} repeats the id of an earlier entry")
        ids.add(bug.id)
        bugs.append(bug)
    return bugs


def _inside(folder: Path, name: str, what: str) -> Path:
    """`folder / name`, a path inside the folder that holds `folder` (links resolved: the repository of
    corpus/known-bugs.json); _Malformed if it leads elsewhere. The file need not be there: a registry
    copied without its folder still matches findings (`fuzz known check` says which cases it lacks)."""
    path, within = folder / name, folder.parent
    if Path(name).is_absolute() or not path.resolve().is_relative_to(within.resolve()):
        raise _Malformed(f"names {what} '{name}', which leads out of '{within}'")
    return path


def parse_entry(data: Any, folder: Path, allowed: dict[str, dict[str, None]] | None = None) -> KnownBug:
    """One entry, checked (its match's names against `allowed`, default allowed_names()); _Malformed
    saying what is wrong ("has ...")."""
    if not isinstance(data, dict):
        raise _Malformed(f"is a JSON {type(data).__name__}, not an object")
    unknown = sorted(set(data) - set(ENTRY_KEYS))
    if unknown:
        raise _Malformed(f"has unknown key '{unknown[0]}' (the keys are {', '.join(ENTRY_KEYS)})")
    missing = [key for key in REQUIRED_KEYS if key not in data]
    if missing:
        raise _Malformed(f"has no '{missing[0]}'")
    if not isinstance(data["id"], str) or not ID_PATTERN.fullmatch(data["id"]):
        raise _Malformed(f"has id {data['id']!r}, which is not lowercase letters, digits, '.' and '-'")
    if not isinstance(data["title"], str) or not data["title"].strip():
        raise _Malformed("has an empty or non-text title")
    if not isinstance(data["status"], str) or not STATUS_PATTERN.fullmatch(data["status"]):
        raise _Malformed(f"has status {data['status']!r} (use open, convention or 'fixed-in RELEASE')")
    link = data.get("link")
    if link is not None and not (isinstance(link, str) and re.fullmatch(r"https?://\S+", link)):
        raise _Malformed(f"has link {link!r}, which is not an http(s) address or null")
    for key in ("affected", "report"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise _Malformed(f"has a '{key}' that is not text or null")
    if data.get("report") is not None:
        _inside(folder, data["report"], "report")
    cases = data.get("cases", [])
    if not isinstance(cases, list) or not all(isinstance(c, str) for c in cases):
        raise _Malformed("has 'cases' that is not a list of file names")
    paths = tuple(_inside(folder, case, "case file") for case in cases)
    return KnownBug(data["id"], _parse_rule(data["match"], allowed or allowed_names()), data["status"], paths, data)


def _parse_rule(match: Any, allowed: dict[str, dict[str, None]]) -> Rule:
    if not isinstance(match, dict):
        raise _Malformed("has a 'match' that is not an object")
    unknown = sorted(set(match) - set(MATCH_LISTS) - {"error", "releases"})
    if unknown:
        raise _Malformed(f"has unknown match key '{unknown[0]}' (use {', '.join(MATCH_LISTS)}, error, releases)")
    if not match.get("verdicts"):
        raise _Malformed("matches no verdict (its match needs a non-empty 'verdicts')")
    lists = {}
    for key in MATCH_LISTS:
        values = match.get(key, [])
        if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
            raise _Malformed(f"has match '{key}' that is not a list of names")
        wrong = [v for v in values if key in allowed and v not in allowed[key]]
        if wrong:
            shown = ", ".join(allowed[key]) if len(allowed[key]) < 20 else f"`fuzz {key}` lists them"
            raise _Malformed(f"has unknown {key[:-1]} '{wrong[0]}' in its match ({shown})")
        lists[key] = tuple(values)
    error = match.get("error")
    if error is not None and not isinstance(error, str):
        raise _Malformed(f"has match 'error' {error!r}, which is not text")
    try:
        pattern = None if error is None else compile_pattern(error)
    except UnsafePattern as exc:
        raise _Malformed(f"has match 'error' {error!r}, which uses {exc}: outside what a pattern may use (literal text, "
                         "backslash-escaped punctuation, '.', '.*', '|', and '^' and '$' at an alternative's ends)") from None
    return Rule(error=pattern, releases=_parse_releases(match.get("releases", {})), **lists)


def _parse_releases(releases: Any) -> tuple[tuple[str, SpecifierSet], ...]:
    """A match's `releases`: {package: version specifiers}, e.g. {"torch": ">=2.11,<2.13"}."""
    if not isinstance(releases, dict):
        raise _Malformed("has match 'releases' that is not an object of package: version range")
    parsed = []
    for package, text in releases.items():
        if package not in RELEASE_PACKAGES:
            raise _Malformed(f"has a release range for '{package}', which no finding records (use {', '.join(RELEASE_PACKAGES)})")
        try:
            if not (isinstance(text, str) and text.strip()):
                raise InvalidSpecifier(text)
            parsed.append((package, SpecifierSet(text)))
        except InvalidSpecifier:
            raise _Malformed(f"has release range {text!r} for '{package}', which is not version specifiers "
                             "such as '>=2.11,<2.13'") from None
    return tuple(parsed)


def allowed_names() -> dict[str, dict[str, None]]:
    """The names each match list may hold now (plugins add backends), in the order a refusal lists them;
    dicts, quick to look up. Taken once per registry read, not per entry."""
    from fuzzer.backends import table
    from fuzzer.ops import known_op_names
    from fuzzer.ops.derived import shipped_names

    names = {
        "verdicts": [v.name for v in verdicts.TABLE if v.is_bug],
        "ops": sorted(known_op_names() | shipped_names()),
        "paths": sorted({cls.path for cls in table().classes.values() if cls.path}),
        "frameworks": sorted({cls.family for cls in table().classes.values()}),
        "devices": list(DEVICES),
        "dtypes": list(DTYPES),
    }
    return {key: dict.fromkeys(values) for key, values in names.items()}


# -- writing ------------------------------------------------------------------------------------

def entry_for_bucket(bucket: dict, bug_id: str, link: str, status: str, title: str | None,
                     affected: str | None, release: tuple[str, str] | None = None) -> dict:
    """A registry entry matching exactly what a stored bucket is: its verdict and culprit op, the
    compiler paths (a plugin's backend: its name), devices and dtypes of its own members
    (fuzzer/triaging/buckets.py: an inherited member is its base's finding, never matched), its normalized
    error text (an anchored, escaped pattern), and releases from `release` (release_of) on."""
    from fuzzer.ops import known_op_names

    own = [BackendName.parse(m["backend"]) for m in bucket.get("members", []) if m["verdict"] != verdicts.INHERITED]
    own = own or [BackendName.parse(bucket["backend"])]
    match: dict[str, Any] = {"verdicts": [verdicts.bucket_verdict(bucket["verdict"])]}
    op = bucket["culprit"].partition("@")[0]
    if op in known_op_names():
        match["ops"] = [op]
    paths = sorted({kind_path(name) for name in own if kind_path(name)})
    kinds = sorted({str(name) for name in own if not kind_path(name)})  # a plugin's backend: its whole name
    match.update({"paths": paths} if paths else {})
    match.update({"kinds": kinds} if kinds else {})
    devices, dtypes = (sorted({part for part in parts if part}) for parts in zip(*((n.device, n.dtype) for n in own)))
    match.update({"devices": devices, "dtypes": dtypes} if devices else {})
    error = signature_error(bucket["signature"])
    if error:
        match["error"] = "^" + re.escape(error)
    if release is not None:  # from this release on: an older release's finding is new
        match["releases"] = {release[0]: f">={Version(release[1]).base_version}"}
    return {"id": bug_id, "title": title or bucket["signature"], "match": match, "status": status, "link": link,
            "affected": affected, "cases": [], "report": None}


def add_bug(path: Path, entry: dict, case_json: str) -> Path:
    """Write `entry` into the registry file at `path` (created if absent), with its case beside it in
    known/ID.json; returns the case file. Checked before anything is written; the registry is
    replaced atomically."""
    bugs = load_registry(path).bugs if path.exists() else ()
    bug_id = entry.get("id")
    try:
        parse_entry(entry, path.parent)
    except _Malformed as exc:
        raise UserError(f"The new known bug {exc}.") from None
    if any(bug.id == bug_id for bug in bugs):
        raise UserError(f"The known-bug registry '{path}' has an entry '{bug_id}' already; choose another --id.")
    case_file = path.parent / CASES_FOLDER / f"{bug_id}.json"
    if case_file.exists():
        raise UserError(f"'{case_file}' exists already; choose another --id or remove that file.")
    case_file.parent.mkdir(parents=True, exist_ok=True)
    case_file.write_text(case_json + "\n", encoding="utf-8")
    entries = [bug.entry for bug in bugs] + [{**entry, "cases": [f"{CASES_FOLDER}/{bug_id}.json"]}]
    partial = path.with_name(path.name + ".partial")
    partial.write_text(registry_text(entries), encoding="utf-8")
    os.replace(partial, path)
    return case_file


def registry_text(entries: list[dict]) -> str:
    """The registry file: one key of an entry a line, its value on that line, so a diff shows one bug."""
    blocks = ["  {\n" + ",\n".join(f"    {json.dumps(key)}: {json.dumps(value, allow_nan=False, ensure_ascii=False)}" for key, value in entry.items())
              + "\n  }" for entry in entries]
    return "[\n" + ",\n".join(blocks) + "\n]\n"
