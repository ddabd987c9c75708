"""Typed records: what a worker replies about the cases it checked, and what the corpus stores.

    CaseReply    ("case", index, known): one generated graph, checked on every input set; its
                 input sets with findings (FoundCase), each with the shrunk cases (ShrinkReply)
                 of its new findings, and what the campaign counts (ops, regime, seconds, ...)
    CheckReply   ("check", case, backends): replay, regress, `fuzz show --rerun`
    ShrinkReply  ("shrink", case, finding, seconds), and each shrunk case of a FoundCase
    CaseRecord   one case as `Corpus.add_case` stores it

Their parts live here too, below the checker and the oracle that make them, so that the corpus
and the replies need neither: Finding (one backend's disagreement) and its Signature,
BackendVerdict (one backend's verdict, fuzzer/oracle/) and CaseResult (one case checked, check.py). Worker replies cross the pipe (or Ray) pickled, as these objects; dicts
appear only at the edges: `to_dict()` is a record's JSON form (`--json` outputs, the corpus's
JSON columns) and `from_dict()` reads it back. A case in a JSON form is {"graph", "arrays"
(base64 .npy), "seed"}, as `fuzz export` writes it.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field, fields, replace
from typing import Any, ClassVar

from fuzzer import jsonform
from fuzzer.arrays import from_base64, to_base64
from fuzzer.errors import UserError
from fuzzer.ir import Case, Graph, infer_shapes, param_shapes


class Signature(str):
    """What a finding is, independent of its size, as the corpus stores it: "VERDICT | BACKEND |
    CULPRIT[ | ERROR]" ("nan-inf | torch-eager:cpu:float16 | sinh"; oracle.signature makes it). A
    bucket's signature has the same form with the backend's path (fuzzer/triaging/buckets.py). `error` is
    None when the text has no error part.

    It is the stored text itself (a str: compared, hashed, written to JSON and sqlite byte for byte
    as stored) carrying its parsed parts, so a Finding holds it typed and nobody splits it again."""

    SEPARATOR: ClassVar[str] = " | "
    verdict: str
    backend: str
    culprit: str
    error: str | None

    def __new__(cls, verdict: str, backend: str, culprit: str, error: str | None = None) -> Signature:
        parts = [verdict, backend, culprit] + ([] if error is None else [error])
        signature = super().__new__(cls, cls.SEPARATOR.join(parts))
        for name, value in zip(("verdict", "backend", "culprit", "error"), (verdict, backend, culprit, error)):
            object.__setattr__(signature, name, value)
        return signature

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"a Signature is its stored text and never changes; use replaced() for '{name}'")

    def __getnewargs__(self) -> tuple:  # pickled across the worker pipe and Ray by its parts
        return self.verdict, self.backend, self.culprit, self.error

    def __repr__(self) -> str:
        return f"Signature({str(self)!r})"

    @classmethod
    def parse(cls, text: str) -> Signature | None:
        """The parts of a stored signature; None for a text this fuzzer did not write (under three parts)."""
        if isinstance(text, Signature):
            return text
        parts = text.split(cls.SEPARATOR, 3)  # the error, last, may hold the separator itself
        return cls(*parts) if len(parts) >= 3 else None

    def replaced(self, **parts: str) -> Signature:
        """This signature with some parts changed (a bucket's has the backend's path)."""
        return Signature(**{"verdict": self.verdict, "backend": self.backend, "culprit": self.culprit, "error": self.error,
                            **parts})


def signature_error(text: str) -> str:
    """The error part of a stored signature; "" when it has none."""
    parsed = Signature.parse(text)
    return (parsed.error or "") if parsed is not None else ""


@dataclass
class BackendVerdict:
    backend: str
    verdict: str
    max_error: float = 0.0
    allowed: float = 0.0
    output: int | None = None  # index of the worst output
    detail: str = ""
    # `allowed` is the floor term alone: every output was finite and within it, so the verdict is
    # agree without the honest models, which were not computed for it (fuzzer/oracle/paths.py, "Cost").
    at_floor: bool = False

    def to_dict(self) -> dict:
        return jsonform.written(self, {
            "backend": self.backend,
            "verdict": self.verdict,
            "max_error": self.max_error,
            "allowed": self.allowed,
            "output": self.output,
            "detail": self.detail,
            **({"at_floor": True} if self.at_floor else {}),  # written only when set
        })

    @classmethod
    def from_dict(cls, data: dict) -> BackendVerdict:
        """The verdict `data` describes (fuzzer/jsonform.py: to_dict gives `data` back as it was)."""
        return jsonform.read(cls, data)


_WRITTEN_WHEN_SET = ("node", "compiler_pass")  # a Finding's fields that most findings lack: absent, not null, in JSON


@dataclass
class Finding:
    """One backend's disagreement on one case. Its JSON form (to_dict / from_dict) is what the
    corpus stores in `cases.findings` and what `--json` outputs show."""

    backend: str
    verdict: str
    culprit: str
    signature: Signature | str  # a str only where this fuzzer did not write it (Signature.parse)
    max_error: float = 0.0
    allowed: float = 0.0
    detail: str = ""
    error: str = ""
    node: dict | None = None  # Ray campaigns: the node it was found on ({"hostname", "ip"}); written only when set
    # The compiler pass `fuzz localize` named for this case where it differs from its bucket's: the finding
    # is then a bucket of its own (fuzzer/triaging/buckets.py, own_bucket); written only when set
    compiler_pass: str | None = None

    def __post_init__(self):
        self.signature = Signature.parse(self.signature) or self.signature  # typed where it enters, text or not

    def to_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _WRITTEN_WHEN_SET}
        data["signature"] = str(self.signature)
        for name in _WRITTEN_WHEN_SET:
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        return jsonform.written(self, data)

    @classmethod
    def from_dict(cls, data: dict) -> Finding:
        """The finding `data` describes (fuzzer/jsonform.py: to_dict gives `data` back as it was)."""
        return jsonform.read(cls, data)


@dataclass
class CaseResult:
    """One case checked on its backends (check.check_case): its worst verdict, every backend's verdict and the findings."""

    verdict: str
    verdicts: list[BackendVerdict] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    judged: list[str] = field(default_factory=list)  # the backends of `verdicts`, in order
    seconds: dict[str, float] = field(default_factory=dict)

    def finding_for(self, signature: str) -> Finding | None:
        return next((f for f in self.findings if f.signature == signature), None)


def case_to_dict(case: Case) -> dict:
    return {"graph": case.graph.to_dict(), "arrays": {name: to_base64(value) for name, value in case.arrays.items()},
            "seed": int(case.seed)}


def needed_arrays(graph: Graph) -> dict[str, tuple[int, ...]]:
    """Every array a case of `graph` needs, by name, with its shape (checking the shape rules and resource bounds)."""
    shapes = infer_shapes(graph)
    needed = {spec.name: spec.shape for spec in graph.inputs}
    needed.update(param_shapes(graph, shapes))
    return needed


def case_from_dict(data: dict, what: str = "The case") -> Case:
    """The case `data` ({"graph", "arrays", "seed"}) describes, fully validated: the graph's shape rules
    and resource bounds before any array is decoded, arrays without pickles. UserError, naming `what`,
    if anything is malformed."""
    graph = Graph.from_dict(data["graph"])
    needed = needed_arrays(graph)  # the shape rules and resource bounds, before any array is decoded
    arrays_data = data.get("arrays")
    if not isinstance(arrays_data, dict) or not all(
        isinstance(name, str) and isinstance(text, str) for name, text in arrays_data.items()
    ):
        raise UserError(f"{what}'s 'arrays' must be an object mapping names to base64 .npy strings.")
    extra = sorted(set(arrays_data) - set(needed))
    if extra:
        raise UserError(f"{what} carries arrays the graph does not use: {extra}.")
    arrays = {name: from_base64(text, f"array '{name}'", needed[name]) for name, text in arrays_data.items()}
    seed = data.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:  # a sqlite INTEGER, a numpy seed
        raise UserError(f"{what}'s 'seed' must be a whole number from 0 to 2**63-1, not {str(seed)[:40]!r}.")
    case = Case(graph, arrays, seed)
    case.validate()
    return case


def with_node(findings: list[Finding], node: dict | None) -> list[Finding]:
    """`findings` tagged with the Ray node they came from (untouched without one)."""
    return list(findings) if node is None else [replace(finding, node=node) for finding in findings]


@dataclass
class CaseRecord:
    """One case as the corpus stores it (Corpus.add_case): the case, the campaign that found it
    (None: imported), its verdict, the backends it ran on, its findings and every backend's verdict,
    and for a shrunk case the case it was shrunk from and the shrinker's log."""

    case: Case
    _: KW_ONLY
    campaign_id: int | None = None
    verdict: str
    backends: list[str]
    findings: list[Finding] = field(default_factory=list)
    verdicts: list[BackendVerdict] = field(default_factory=list)
    shrunk_from: int | None = None
    shrink_log: Any = None
    created: str | None = None  # None: now; a merged case keeps its original time

    def to_dict(self) -> dict:
        return {
            "case": case_to_dict(self.case), "campaign_id": self.campaign_id, "verdict": self.verdict,
            "backends": list(self.backends), "findings": [f.to_dict() for f in self.findings],
            "verdicts": [v.to_dict() for v in self.verdicts], "shrunk_from": self.shrunk_from,
            "shrink_log": self.shrink_log, "created": self.created,
        }

    @classmethod
    def from_dict(cls, data: dict) -> CaseRecord:
        return cls(
            case_from_dict(data["case"]), campaign_id=data.get("campaign_id"), verdict=data["verdict"],
            backends=list(data["backends"]), findings=[Finding.from_dict(f) for f in data.get("findings", [])],
            verdicts=[BackendVerdict.from_dict(v) for v in data.get("verdicts", [])], shrunk_from=data.get("shrunk_from"),
            shrink_log=data.get("shrink_log"), created=data.get("created"),
        )


@dataclass
class CheckReply:
    """The reply to ("check", case, backends): the case's verdict (its worst backend's), its
    findings and every backend's verdict. A worker that died on the case leaves no verdict judged
    against the reference: its one finding (WorkerDied.finding) stands in `verdicts` as well."""

    verdict: str
    findings: list[Finding] = field(default_factory=list)
    verdicts: list[BackendVerdict | Finding] = field(default_factory=list)

    @classmethod
    def of(cls, result: CaseResult) -> CheckReply:
        return cls(result.verdict, list(result.findings), list(result.verdicts))

    @classmethod
    def died(cls, finding: Finding) -> CheckReply:
        return cls(finding.verdict, [finding], [finding])

    def to_dict(self) -> dict:
        return {"verdict": self.verdict, "findings": [f.to_dict() for f in self.findings],
                "verdicts": [v.to_dict() for v in self.verdicts]}

    @classmethod
    def from_dict(cls, data: dict) -> CheckReply:
        return cls(data["verdict"], [Finding.from_dict(f) for f in data.get("findings", [])],
                   [Finding.from_dict(v) if "signature" in v else BackendVerdict.from_dict(v) for v in data.get("verdicts", [])])


@dataclass
class ShrinkReply:
    """The reply to ("shrink", case, finding, seconds), and each shrunk case of a FoundCase: the
    smallest case found that keeps finding `signature`, the shrinker's log, and that case checked
    on the finding's backend (`backends`, its only one)."""

    signature: str
    case: Case
    log: dict
    verdict: str
    findings: list[Finding]
    verdicts: list[BackendVerdict]
    backends: list[str]

    def record(self, *, campaign_id: int | None, shrunk_from: int, node: dict | None = None) -> CaseRecord:
        return CaseRecord(self.case, campaign_id=campaign_id, verdict=self.verdict, backends=self.backends,
                          findings=with_node(self.findings, node), verdicts=self.verdicts, shrunk_from=shrunk_from,
                          shrink_log=self.log)

    def to_dict(self) -> dict:
        return {"signature": self.signature, "case": case_to_dict(self.case), "log": self.log, "verdict": self.verdict,
                "findings": [f.to_dict() for f in self.findings], "verdicts": [v.to_dict() for v in self.verdicts],
                "backends": list(self.backends)}

    @classmethod
    def from_dict(cls, data: dict) -> ShrinkReply:
        return cls(data["signature"], case_from_dict(data["case"]), data["log"], data["verdict"],
                   [Finding.from_dict(f) for f in data["findings"]], [BackendVerdict.from_dict(v) for v in data["verdicts"]],
                   list(data["backends"]))


@dataclass
class FoundCase:
    """One input set of a generated graph that has findings (CaseReply.found): the case, its
    verdict, findings and every backend's verdict, the backends it ran on, and the shrunk cases
    of the findings that were new to the campaign."""

    case: Case
    verdict: str
    findings: list[Finding]
    backends: list[str]
    verdicts: list[BackendVerdict]
    shrunk: list[ShrinkReply] = field(default_factory=list)

    def record(self, *, campaign_id: int | None, node: dict | None = None) -> CaseRecord:
        return CaseRecord(self.case, campaign_id=campaign_id, verdict=self.verdict, backends=self.backends,
                          findings=with_node(self.findings, node), verdicts=self.verdicts)

    def to_dict(self) -> dict:
        return {"case": case_to_dict(self.case), "verdict": self.verdict, "findings": [f.to_dict() for f in self.findings],
                "backends": list(self.backends), "verdicts": [v.to_dict() for v in self.verdicts],
                "shrunk": [s.to_dict() for s in self.shrunk]}

    @classmethod
    def from_dict(cls, data: dict) -> FoundCase:
        return cls(case_from_dict(data["case"]), data["verdict"], [Finding.from_dict(f) for f in data["findings"]],
                   list(data["backends"]), [BackendVerdict.from_dict(v) for v in data["verdicts"]],
                   [ShrinkReply.from_dict(s) for s in data.get("shrunk", [])])


@dataclass
class CaseReply:
    """The reply to ("case", index, known_signatures): generated graph `index`, checked on
    `inputs_per_graph` input sets by `backends` (the cheap tier and the compilers the budget gave
    it), the one-op and small graphs compilers took instead (fuzzer/running/budget.py), the further input
    sets of each compiled graph, and what the campaign counts of them."""

    index: int
    ops: list[str]
    regime: str
    backends: list[str]
    checked: int = 0  # input sets checked
    invalid: int = 0  # ... of which the reference defined nothing
    backend_graphs: dict[str, int] = field(default_factory=dict)  # per backend: graphs it ran
    backend_cases: dict[str, int] = field(default_factory=dict)  # ... input sets it was judged on
    backend_ops: dict[str, dict[str, int]] = field(default_factory=dict)  # per backend: op -> graphs with it that it ran
    alone_ops: dict[str, dict[str, int]] = field(default_factory=dict)  # ... op -> one-op graphs of it that it ran
    found: list[FoundCase] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # per backend, every run of the graph (reruns included)
    worker_seconds: float = 0.0
    peak_rss_mb: int = 0
    compiled_structures: list[str] = field(default_factory=list)  # compilers that compiled a new structure
    not_compiled: list[str] = field(default_factory=list)  # ... that could not compile the graph
    budget_skipped: list[str] = field(default_factory=list)  # ... that the compile budget did not give it
    regions: list[str] = field(default_factory=list)  # the region keys its checked cases exercised (fuzzer/drawing/regions.py)
    pairs: list[str] = field(default_factory=list)  # ... and the pairs of keys of one node (fuzzer/drawing/region_pairs.py)
    judged_share: dict[str, dict[str, int]] = field(default_factory=dict)  # what the oracle judged of them (fuzzer/judging/judged_share.py)
    node: dict | None = None  # Ray: the node that answered

    def count(self, backends: list[str], ops: list[str], first_set: bool) -> None:
        """One input set of a graph with `ops`, judged on `backends` (its first set: a graph they ran)."""
        self.checked += 1
        for name in backends:
            self.backend_cases[name] = self.backend_cases.get(name, 0) + 1
            if first_set:
                self.backend_graphs[name] = self.backend_graphs.get(name, 0) + 1
                counts = self.backend_ops.setdefault(name, {})
                for op in set(ops):
                    counts[op] = counts.get(op, 0) + 1
                if len(ops) == 1:
                    alone = self.alone_ops.setdefault(name, {})
                    alone[ops[0]] = alone.get(ops[0], 0) + 1

    def to_dict(self) -> dict:
        return {**{name: getattr(self, name) for name in _CASE_REPLY_PLAIN}, "found": [f.to_dict() for f in self.found]}

    @classmethod
    def from_dict(cls, data: dict) -> CaseReply:
        return cls(**{name: data[name] for name in _CASE_REPLY_PLAIN if name in data},
                   found=[FoundCase.from_dict(f) for f in data.get("found", [])])


_CASE_REPLY_PLAIN = ("index", "ops", "regime", "backends", "checked", "invalid", "backend_graphs", "backend_cases", "backend_ops", "alone_ops",
                     "seconds", "worker_seconds", "peak_rss_mb",
                     "compiled_structures", "not_compiled", "budget_skipped", "regions", "pairs", "judged_share", "node")
