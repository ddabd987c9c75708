"""One cause, one bucket: which bucket a finding is in, and how buckets regroup when the rules change.

A finding's signature (records.Signature, made by oracle.signature) names its exact backend,
"nan-inf | torch-eager:cpu:float16 | sinh": it is what the shrinker keeps. A bucket groups the
findings of one cause under a signature of its own,

    VERDICT | PATH | CULPRIT[ | ERROR]        "nan-inf | torch-eager:cpu | sinh"

    VERDICT  the verdict the finding is bucketed under (verdicts.bucket_verdict: all-zeros,
             constant and accuracy-regression are mismatches)
    PATH     the framework path: the backend's kind and device, without its dtype and release
             ("torch-eager:cpu" for torch-eager:cpu:float16, "jax-jit:cpu" for
             jax-jit:cpu:float32@jax-0.4.30; a plugin's backend: its whole name). One kernel
             wrong the same way in float32 and float16, or in this release and an older one, is
             one cause; another device or kind runs other code (a CUDA kernel, inductor's
             generated code, a model transformation): another bucket.
    CULPRIT  the op the finding is localized to, as it has it ("softmax@fused", "sin@grad"); for a
             compiler's finding that `fuzz localize` placed in another pass than its bucket's, the
             pass follows ("var [pass inductor/lowerings: var]"): see "The pass" below
    ERROR    a crash's or hang's normalized error text (errors.normalize_error)

An `inherited` finding (a derived backend computing exactly its base's wrong answer:
check._inherited) is a member of the bucket of its base's finding in the same case, following
derivations (jax-grad -> jax-jit -> jax-eager): torch-module, torch-jit-trace and torch-export
repeating torch eager's answer are listed with torch eager's bucket, not as buckets of their own.
One whose base has no finding in the case, or whose base is a plugin not loaded here, keeps a
bucket of its own, with verdict `inherited` (no bug: `fuzz list --all` shows it). A derived
kind's own finding, one that differs from its base's answer, is a bug of that kind (its
transformation, its compiler): its own bucket, even where the base is wrong on the same op.

A bucket's members are the finding signatures it holds, each counted (fuzzer/corpus/, table
`members`), so `fuzz list` and `fuzz show` say which backend:device:dtype it was found on, how
often, and which members are inherited. Triage belongs to the bucket, so to all its members.

The pass. A compiler's bucket is also the pass that breaks it: two bugs of one op in different passes
are two bugs. `fuzz localize` (fuzzer/triaging/pass_bisect.py; a campaign runs it on each new compiler bucket)
names the pass on the bucket's smallest case and keeps it on the bucket (`localization`), whose
signature stays as it was: every later finding of that signature joins it without a localization of
its own, as before. Localizing another case of the bucket that names another pass gives that case's
findings the pass (Finding.compiler_pass), and with it a bucket of their own, "... | var [pass X]",
triaged afresh (fuzzer/corpus/triage.py, record_localization). A corpus from before has no pass on
any finding, so its buckets regroup as they were.

`plan_regroup` is `fuzz rebucket` (and the corpus's upgrade to schema 6): it recomputes every
stored finding's signature and bucket and says how buckets, their triage and their counts move.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from fuzzer import verdicts
from fuzzer.backend_names import BackendName
from fuzzer.errors import UserError
from fuzzer.records import Signature

# A bucket's triage status, which all its members share. `known`: a bug the known-bug registry lists (or one a person says is known); `fuzz run` does not fail for it.
STATUSES = ("new", "confirmed", "reported", "fixed", "wontfix", "flaky", "known")

# When buckets that now share a signature were triaged differently, an open status wins: the merged
# bug still needs work if any part of it does, and a closed status would hide its new findings.
TRIAGE_PRECEDENCE = ("reported", "confirmed", "flaky", "known", "wontfix", "fixed", "new")


def check_status(status: str) -> None:
    if status not in STATUSES:
        raise UserError(f"Unknown triage status '{status}'; use one of: {', '.join(STATUSES)}.")


# More passes than this, together and no fewer, is a pipeline that went wrong, not a culprit to file a bug under.
MOST_PASSES_IN_A_LABEL = 3


def pass_label(passes: list[str]) -> str | None:
    """The passes `fuzz localize` named as part of a bucket's identity ("The pass" above): the pass, or the
    two or three that only together explain it; None where none was named or the set is too large."""
    return ", ".join(passes) if 0 < len(passes) <= MOST_PASSES_IN_A_LABEL else None


def bucket_path(backend: str) -> str:
    """'torch-eager:cpu:float16' -> 'torch-eager:cpu'; 'jax-jit:cpu:float32@jax-0.4.30' -> 'jax-jit:cpu';
    a plugin's backend -> its name."""
    name = BackendName.parse(backend)
    return f"{name.kind}:{name.device}" if name.full else backend


def own_bucket(finding: dict) -> str:
    """The bucket of a finding by its own signature: its backend part replaced by the path, and its
    culprit followed by the compiler pass it was localized to where that differs from its bucket's."""
    parsed = Signature.parse(finding["signature"])
    if parsed is None:  # not a signature this fuzzer wrote: a bucket of its own
        return finding["signature"]
    culprit = parsed.culprit + (f" [pass {finding['compiler_pass']}]" if finding.get("compiler_pass") else "")
    return str(parsed.replaced(backend=bucket_path(parsed.backend), culprit=culprit))


def derived_base(backend: str) -> str | None:
    """The backend `backend` derives from (Backend.derived_from); None when it derives from none,
    runs in another environment (never `inherited`), or is not registered here (a plugin not loaded)."""
    from fuzzer.backends import get_backend

    if BackendName.parse(backend).env is not None:
        return None
    try:
        return get_backend(backend).derived_from
    except UserError:
        return None


def bucket_roots(findings: list[dict]) -> list[int | None]:
    """For each of a case's findings (their JSON form), the index of the finding whose own bucket it
    is in: itself, or for an `inherited` one its base's finding; None for an inherited finding
    whose base has no finding in the case."""
    first_of: dict[str, int] = {}
    for index, finding in enumerate(findings):
        first_of.setdefault(finding["backend"], index)

    def root(index: int, seen: frozenset[int]) -> int | None:
        if findings[index]["verdict"] != verdicts.INHERITED:
            return index
        base = first_of.get(derived_base(findings[index]["backend"]) or "")
        return None if base is None or base in seen else root(base, seen | {base})

    return [root(index, frozenset({index})) for index in range(len(findings))]


def bucket_signatures(findings: list[dict]) -> list[str]:
    """The bucket of each of a case's findings (module docstring)."""
    return [own_bucket(findings[index if root is None else root]) for index, root in enumerate(bucket_roots(findings))]


def describing(findings: list[dict]) -> dict:
    """Of a bucket's findings in one case, the one whose verdict, backend and culprit the bucket
    row shows: its first own finding (an inherited copy is its base's)."""
    return next((f for f in findings if f["verdict"] != verdicts.INHERITED), findings[0])


def merged_triage(buckets: list[dict], merged_by: str = "`fuzz rebucket`") -> tuple[str, str | None]:
    """(status, note) of the bucket that `buckets` merge into; their notes are all kept, and
    triage statuses that lost are said in the note."""
    if not buckets:
        return "new", None
    rank = {status: index for index, status in enumerate(TRIAGE_PRECEDENCE)}
    status = min((b["status"] for b in buckets), key=lambda s: rank.get(s, len(rank)))
    notes = list(dict.fromkeys(b["note"] for b in buckets if b["note"]))
    triaged = [b for b in buckets if b["status"] != "new"]
    if len({b["status"] for b in triaged}) > 1:
        notes.append(f"merged by {merged_by} from " + ", ".join(f"'{b['signature']}' ({b['status']})" for b in triaged))
    return status, "; ".join(notes) or None


# ---------------------------------------------------------------- regrouping


@dataclass
class Tally:
    """Findings counted somewhere: in all, and per campaign id (a string, as the corpus's JSON has it)."""

    count: int = 0
    campaigns: dict[str, int] = field(default_factory=dict)

    def add(self, count: int, campaigns: dict[str, int], sign: int = 1) -> None:
        self.count += sign * count
        for campaign, n in campaigns.items():
            self.campaigns[campaign] = self.campaigns.get(campaign, 0) + sign * n

    def clamped(self) -> Tally:
        """Never below zero: a count an older release kept inexactly cannot make one negative."""
        return Tally(max(0, self.count), {c: n for c, n in self.campaigns.items() if n > 0})


@dataclass
class Regrouping:
    """What `plan_regroup` decided: each stored case's findings and their buckets, the buckets
    (triage, seen, counts) and members (counts) after, and the old buckets each new one takes."""

    findings: dict[int, list[dict]]  # case id -> its findings, resigned
    keys: dict[int, list[str]]  # case id -> the bucket of each of them
    changed: list[int]  # cases whose findings' signatures changed
    sources: dict[str, list[str]]  # new bucket -> the old buckets it takes
    buckets: dict[str, dict]  # new bucket -> status, note, known_bug, first_seen, last_seen, tally, described
    members: dict[tuple[str, str], dict]  # (bucket, signature) -> tally, described
    old_buckets: list[str]  # every old bucket the plan replaces

    def summary(self, cases: int, buckets_before: int, dry_run: bool) -> dict:
        return {
            "dry_run": dry_run, "cases": cases, "cases_changed": len(self.changed), "buckets_before": buckets_before,
            "buckets_after": buckets_before - len(self.old_buckets) + len(self.buckets),
            "changes": [{"signature": new, "from": old, "status": self.buckets[new]["status"]}
                        for new, old in sorted(self.sources.items()) if old != [new]],
        }


def plan_regroup(cases: list[dict], buckets: dict[str, dict], members: list[dict], resign: Callable[[dict], str],
                 merged_by: str = "`fuzz rebucket`") -> Regrouping:
    """Give every stored finding the signature `resign(finding)` and its bucket under this
    release's rules; buckets whose findings now share one merge, keeping their triage
    (merged_triage) and their counts.

    `cases`: the stored cases in the order they were stored (id, campaign_id, shrunk_from and
    findings); `buckets`: the bucket rows by signature; `members`: the member rows (bucket,
    signature, verdict, backend, culprit, count, campaigns). The findings a bounded corpus did not
    keep are counted on their bucket's and members' rows only, so those counts move as a whole,
    each to its home: where the first stored finding of that member or bucket goes (a member with
    no stored finding: its own bucket, an inherited one its old bucket's home). Then each stored
    generated case moves its own one finding, so that findings that now part ways are counted
    exactly. An inherited finding whose base is not known here stays with its old bucket."""
    member_of: dict[str, list[str]] = {}
    for member in members:
        member_of.setdefault(member["signature"], []).append(member["bucket"])
    plan = Regrouping({}, {}, [], {}, {}, {}, [])
    old_keys: dict[int, list[str]] = {}
    for case in cases:
        old = case["findings"]
        new = [{**finding, "signature": resign(finding)} for finding in old]
        old_keys[case["id"]] = stored_buckets(old, member_of)
        plan.findings[case["id"]] = new
        plan.keys[case["id"]] = [None if root is None else own_bucket(new[root]) for root in bucket_roots(new)]
        if new != old:
            plan.changed.append(case["id"])
    stored = [(case, before, old_key, after, index) for case in cases for index, (before, old_key, after)
              in enumerate(zip(case["findings"], old_keys[case["id"]], plan.findings[case["id"]]))]
    bucket_home: dict[str, str] = {}
    for case, _, old_key, _, index in stored:
        if plan.keys[case["id"]][index] is not None:
            bucket_home.setdefault(old_key, plan.keys[case["id"]][index])
    for case, _, old_key, after, index in stored:  # an inherited finding with no base finding here
        if plan.keys[case["id"]][index] is None:
            plan.keys[case["id"]][index] = bucket_home.setdefault(old_key, own_bucket(after))
    member_home: dict[tuple[str, str], tuple[str, str]] = {}
    for case, before, old_key, after, index in stored:
        member_home.setdefault((old_key, before["signature"]), (plan.keys[case["id"]][index], after["signature"]))
    described: dict[tuple[str, str], dict] = {}  # members with no stored finding: what their rows show
    for member in members:
        old = (member["bucket"], member["signature"])
        if old not in member_home:
            finding = {key: member[key] for key in ("signature", "verdict", "backend", "culprit")}
            finding["signature"] = resign(finding)
            key = own_bucket(finding)
            if member["verdict"] == verdicts.INHERITED:
                key = bucket_home.get(member["bucket"], key)
            member_home[old] = (key, finding["signature"])
            described[member_home[old]] = finding
        bucket_home.setdefault(member["bucket"], member_home[old][0])
    member_tallies, bucket_tallies = _moved_counts(cases, old_keys, plan, buckets, members, member_home, bucket_home)
    sources: dict[str, set[str]] = {}
    for old, new in bucket_home.items():
        sources.setdefault(new, set()).add(old)
    for case, _, old_key, _, index in stored:  # a bucket whose findings part ways: its triage goes with each
        sources.setdefault(plan.keys[case["id"]][index], set()).add(old_key)
    for new, olds in sorted(sources.items()):
        taken = [buckets[old] for old in sorted(olds) if old in buckets]
        status, note = merged_triage(taken, merged_by)
        own = [finding for pair, finding in described.items() if pair[0] == new]
        plan.sources[new] = sorted(olds)
        plan.buckets[new] = {
            "status": status, "note": note, "known_bug": next((b["known_bug"] for b in taken if b.get("known_bug")), None),
            "localization": next((b["localization"] for b in taken if b.get("localization")), None),
            "first_seen": min((b["first_seen"] for b in taken), default=None),
            "last_seen": max((b["last_seen"] for b in taken), default=None),
            "tally": bucket_tallies.get(new, Tally()).clamped(), "described": describing(own) if own else None,
        }
    plan.members = {pair: {"tally": tally.clamped(), "described": described.get(pair)} for pair, tally in member_tallies.items()}
    plan.old_buckets = sorted(set(bucket_home) & set(buckets))
    return plan


def _moved_counts(cases: list[dict], old_keys: dict[int, list[str]], plan: Regrouping, buckets: dict[str, dict],
                  members: list[dict], member_home: dict[tuple[str, str], tuple[str, str]],
                  bucket_home: dict[str, str]) -> tuple[dict[tuple[str, str], Tally], dict[str, Tally]]:
    """(member tallies, bucket tallies) after the regrouping (see plan_regroup): the old rows' counts
    at their homes, then each stored generated case's one finding moved from the homes of its
    old member and bucket to its new ones."""
    member_tallies: dict[tuple[str, str], Tally] = {}
    bucket_tallies: dict[str, Tally] = {}
    for member in members:
        home = member_home[(member["bucket"], member["signature"])]
        member_tallies.setdefault(home, Tally()).add(member["count"], member["campaigns"] or {})
    for signature, row in buckets.items():
        if signature in bucket_home:
            bucket_tallies.setdefault(bucket_home[signature], Tally()).add(row["count"], row["campaigns"] or {})
    counted = {(member["bucket"], member["signature"]) for member in members}
    for case in cases:
        if case["shrunk_from"] is not None:
            continue  # a shrunk copy is never counted
        campaign = {} if case["campaign_id"] is None else {str(case["campaign_id"]): 1}
        before = dict.fromkeys(zip(old_keys[case["id"]], (f["signature"] for f in case["findings"])))
        after = dict.fromkeys(zip(plan.keys[case["id"]], (f["signature"] for f in plan.findings[case["id"]])))
        for pair in before:
            if pair in counted:
                member_tallies[member_home[pair]].add(1, campaign, sign=-1)
        for pair in after:
            member_tallies.setdefault(pair, Tally()).add(1, campaign)
        for key in dict.fromkeys(key for key, _ in before):
            if key in buckets:
                bucket_tallies[bucket_home[key]].add(1, campaign, sign=-1)
        for key in dict.fromkeys(key for key, _ in after):
            bucket_tallies.setdefault(key, Tally()).add(1, campaign)
    return member_tallies, bucket_tallies


def stored_buckets(findings: list[dict], member_of: dict[str, list[str]]) -> list[str]:
    """The bucket each stored finding of a case is counted in now: the one the rules give, if the
    finding is its member; else the first bucket its signature is a member of (a corpus grouped
    by other rules, or an inherited finding whose base's plugin is not loaded here)."""
    return [key if key in member_of.get(finding["signature"], [key]) else member_of[finding["signature"]][0]
            for finding, key in zip(findings, bucket_signatures(findings))]
