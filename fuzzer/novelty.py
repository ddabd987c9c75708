"""Is a finding new? The checks that decide it before anyone claims it: three upstream searches, ready
to run, and the nearest entries of our own known-bug registry.

The searches go to the issue trackers of the backend's framework (pytorch/pytorch; jax-ml/jax and
openxla/xla; microsoft/onnxruntime), one short query each:

  by op       the culprit op and where it ran ("layer_norm inductor", "softmax jit cuda")
  by symptom  the op and what it does wrong ("layer_norm nan"); a crash: its error's words, quoted
  by pass     the compiler pass `fuzz localize` named for the bucket and the symptom ("algsimp nan"),
              in the compiler's tracker; none until a pass is named

Nothing runs them here (no network): a report lists them, and whoever files it says what each
returned. The nearest registry entries rank every entry of corpus/known-bugs.json by what it shares
with the finding: the op (weight 4), the backend it covers (2) and the symptom (1); an entry that
shares neither the op nor both of the others is not near.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from urllib.parse import urlencode

from fuzzer import verdicts
from fuzzer.backend_names import BackendName
from fuzzer.backends import kind_family, kind_path
from fuzzer.errors import error_headline, normalize_error
from fuzzer.ir import Graph
from fuzzer.running.workers import ended_its_process
from fuzzer.triaging.known import Registry, culprit_ops
from fuzzer.triaging.pass_bisect import LOCALIZABLE_PATHS, stored_localization

# The trackers of a framework family (Backend.family), searched by op and by symptom.
TRACKERS = {"torch": ("pytorch/pytorch",), "jax": ("jax-ml/jax", "openxla/xla"),
            "onnxruntime": ("microsoft/onnxruntime",)}
# The tracker of a compiler `fuzz localize` bisects (PassVerdict.compiler), searched by pass.
PASS_TRACKERS = {"inductor": "pytorch/pytorch", "xla": "openxla/xla", "ort": "microsoft/onnxruntime"}
# A word for where the op ran, where the tracker's own issues use one (Backend.path).
PATH_WORDS = {"torch/inductor": "inductor", "jax/xla": "jit"}
GPU_DEVICES = ("cuda", "gpu")  # named in the op's search: a CPU finding's issues rarely say "cpu"
# What the finding does wrong, in the words issues use (a crash: its own error text).
SYMPTOM_WORDS = {verdicts.NAN_INF: "nan", verdicts.MISMATCH: "wrong", verdicts.ALL_ZEROS: "zeros",
                 verdicts.NONDETERMINISTIC: "nondeterministic", verdicts.HANG: "hang"}
ERROR_WORDS = 6  # words of a crash's message in its quoted search
# A crash that ended its worker has our words for an error ("worker process killed by signal SIGABRT"): issues use these.
SIGNAL_WORDS = {"SIGABRT": "abort", "SIGSEGV": "segfault", "SIGFPE": "SIGFPE", "SIGBUS": "bus error", "SIGILL": "illegal instruction"}
NEAREST = 3
OP_WEIGHT, BACKEND_WEIGHT, SYMPTOM_WEIGHT = 4, 2, 1


@dataclass(frozen=True)
class Search:
    by: str  # "op", "symptom" or "pass"
    repository: str  # "pytorch/pytorch"
    query: str

    @property
    def url(self) -> str:
        """The tracker's issue search (open and closed issues) for the query, every character encoded."""
        return f"https://github.com/{self.repository}/issues?" + urlencode({"q": f"is:issue {self.query}"})


@dataclass(frozen=True)
class NearEntry:
    """A registry entry near the finding and what it shares with it ("op", "backend", "symptom")."""

    id: str
    title: str
    status: str
    link: str | None
    shares: tuple[str, ...]


@dataclass
class NoveltyChecks:
    searches: list[Search] = field(default_factory=list)
    no_pass_search: str = ""  # why there is no search by pass, where one could be
    nearest: list[NearEntry] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The JSON form (`fuzz show --json`): each search with its link."""
        return {"searches": [{**asdict(search), "url": search.url} for search in self.searches],
                "no_pass_search": self.no_pass_search, "nearest": [asdict(entry) for entry in self.nearest]}

    def lines(self) -> list[str]:
        """The checks as `fuzz show` prints them (the issue export gives the searches as links)."""
        lines = ["Upstream searches that decide whether it is new (`fuzz export --format issue` links them):"]
        lines += [f"  by {search.by}, {search.repository}: {search.query}" for search in self.searches] or ["  none: no tracker known"]
        lines += [f"  no search by pass: {self.no_pass_search}"] if self.no_pass_search else []
        return lines + [f"Nearest known bug: {entry.id} ({entry.status}; same {', '.join(entry.shares)}; "
                        f"{entry.link or 'not reported upstream'})" for entry in self.nearest]


def search_op_name(culprit: str) -> str:
    """The culprit's op as a tracker knows it: "softmax@fused" and "torch.softmax" are softmax, "pow_scalar"
    pow; "" for the graph as a whole (culprit "-")."""
    op = culprit.partition("@")[0]
    return "" if op == "-" else op.removeprefix("torch.").removesuffix("_scalar")


def symptom_words(finding: dict) -> str:
    """A crash: the first words of its error message, quoted ('"view size is not compatible with"'), or how
    it ended its process ("abort"); otherwise one word for its verdict ("nan")."""
    verdict = str(finding.get("verdict"))
    if verdict != verdicts.CRASH:
        return SYMPTOM_WORDS.get(verdict) or SYMPTOM_WORDS.get(verdicts.bucket_verdict(verdict), "")
    error = str(finding.get("error") or finding.get("detail") or "")
    if ended_its_process(verdicts.CRASH, error):
        return next((words for name, words in SIGNAL_WORDS.items() if name in error), "crash")
    message = normalize_error(error_headline(error))
    words = re.findall(r"[A-Za-z][A-Za-z'_]*", message.partition(": ")[2] or message)
    return f'"{" ".join(words[:ERROR_WORDS])}"' if words else ""


def pass_words(localization: dict) -> str:
    """The pass `fuzz localize` named as search words: an HLO pass or ORT level as named, an inductor
    subsystem and its item ("inductor/lowerings: var" -> "lowerings var"), dynamo for backend eager."""
    named = localization["passes"][0]
    if named == "eager":
        return "dynamo"
    return " ".join(named.rpartition("/")[2].replace(":", " ").split())


def upstream_searches(finding: dict, localization: dict | None) -> tuple[list[Search], str]:
    """(the searches, why there is no search by pass or "") for a finding, in the trackers of its backend's
    framework (none for a plugin's backend: its bug is the plugin's); `localization`: the bucket's stored
    `fuzz localize` result, or None."""
    name = BackendName.parse(str(finding.get("backend") or ""))
    family, path, device = kind_family(name), kind_path(name), name.device if name.full else None
    op = search_op_name(str(finding.get("culprit") or ""))
    symptom = symptom_words(finding)
    where = " ".join(word for word in (PATH_WORDS.get(path or ""), device if device in GPU_DEVICES else "") if word)
    searches = []
    for repository in TRACKERS.get(family or "", ()):
        if op:
            searches.append(Search("op", repository, f"{op} {where}".strip()))
        if symptom:  # a crash's quoted words find it whatever op the message names
            searches.append(Search("symptom", repository, symptom if symptom.startswith('"') else f"{op} {symptom}".strip()))
    if localization is None:  # an eager kind has no pass to search by
        return searches, "fuzz localize has named no pass for this bucket yet" if path in LOCALIZABLE_PATHS else ""
    if len(localization["passes"]) != 1 or localization["passes"][0] == "ORT_DISABLE_ALL":
        return searches, f"fuzz localize named no single pass ({localization['summary']})"
    tracker = PASS_TRACKERS.get(str(localization.get("compiler")))
    if tracker:
        searches.append(Search("pass", tracker, f"{pass_words(localization)} {symptom}".strip()))
    return searches, ""


def nearest_entries(registry: Registry, finding: dict, graph: Graph | None, limit: int = NEAREST) -> list[NearEntry]:
    """The registry's entries nearest the finding, nearest first (see the module docstring)."""
    ops = culprit_ops(str(finding.get("culprit") or ""), graph)
    ranked = []
    for position, bug in enumerate(registry.bugs):
        shares = tuple(word for word, shared in (
            ("op", bool(bug.rule.ops) and not ops.isdisjoint(bug.rule.ops)),
            ("backend", bug.rule.covers_backend(str(finding.get("backend") or ""))),
            ("symptom", bug.rule.covers_verdict(str(finding.get("verdict") or "")))) if shared)
        if "op" in shares or len(shares) == 2:
            score = sum({"op": OP_WEIGHT, "backend": BACKEND_WEIGHT, "symptom": SYMPTOM_WEIGHT}[word] for word in shares)
            ranked.append((-score, position, NearEntry(bug.id, bug.entry.get("title", ""), bug.status,
                                                       bug.entry.get("link"), shares)))
    return [entry for *_, entry in sorted(ranked, key=lambda row: row[:2])[:limit]]


def bucket_novelty(stored, bucket: dict, registry: Registry) -> NoveltyChecks | None:
    """novelty_checks of a stored case's finding in `bucket` (a member's), or None where it has none there."""
    members = {member["signature"] for member in bucket["members"]}
    finding = next((f for f in stored.findings if f.get("signature") in members), None)
    return None if finding is None else novelty_checks(finding, stored.case.graph,
                                                       stored_localization(bucket.get("localization")), registry)


def novelty_checks(finding: dict, graph: Graph | None, localization: dict | None, registry: Registry) -> NoveltyChecks:
    """Everything that decides whether `finding` (on a case of `graph`) is new: its upstream searches and
    nearest registry entries."""
    searches, no_pass_search = upstream_searches(finding, localization)
    return NoveltyChecks(searches, no_pass_search, nearest_entries(registry, finding, graph))
