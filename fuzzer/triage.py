"""Triage of a stored corpus: re-bucketing with this release's signature rules, a case's shrink
history in words, and what to pass when a stored backend came from a plugin."""

from __future__ import annotations

from fuzzer import oracle, verdicts
from fuzzer.backend_names import BackendName
from fuzzer.corpus import Corpus, StoredCase
from fuzzer.errors import UserError
from fuzzer.records import Signature, signature_error
from fuzzer.running.campaign_config import stored_plugins


def current_signature(finding: dict) -> str:
    """The finding's signature under this release's rules (oracle.signature, verdicts.bucket_verdict),
    from what the corpus stores: its verdict, backend and culprit, and its error text.

    The culprit is taken as stored: localizing it again needs the backends (`fuzz shrink` re-runs
    them). A finding stored without its raw error text (a worker that died in replay, an older
    release) keeps the error part of its old signature, normalized again.
    """
    error = finding.get("error") if isinstance(finding.get("error"), str) else ""
    error = error or signature_error(finding["signature"])
    return oracle.signature(verdicts.bucket_verdict(finding["verdict"]), finding["backend"], finding["culprit"], error)


def same_bucket(recorded: str, observed: str) -> bool:
    """Whether an observed signature finds the recorded bug again. Equal signatures do; so do a
    nondeterministic and a wrong-value verdict on the same backend and culprit: whether reruns of
    a nondeterministic kernel happen to differ is chance (dropout left on gives the same mask
    twice on a one-element input), so either verdict is the same bug."""
    if recorded == observed:
        return True
    a, b = Signature.parse(recorded), Signature.parse(observed)
    if a is None or b is None:
        return False
    pair = {a.verdict, b.verdict}
    return a.replaced(verdict="") == b.replaced(verdict="") and verdicts.NONDETERMINISTIC in pair and all(
        v == verdicts.NONDETERMINISTIC or verdicts.get(v).wrong_value for v in pair)


def rebucket(corpus: Corpus, dry_run: bool = False) -> dict:
    """Recompute every stored finding's signature and regroup the buckets under this release's rules
    (fuzzer/triaging/buckets.py), merging those that now share one (see Corpus.resign_findings)."""
    return corpus.resign_findings(current_signature, dry_run)


def shrink_history(corpus: Corpus, stored: StoredCase) -> str | None:
    """'shrunk from case 12: 6 nodes to 2, 4,096 elements to 12, 31 candidates tried in 4.2 s', from the stored log."""
    if stored.shrunk_from is None:
        return None
    log = stored.shrink_log if isinstance(stored.shrink_log, dict) else {}
    original = corpus.case_size(stored.shrunk_from)
    nodes, elements = len(stored.case.graph.nodes), sum(int(a.size) for a in stored.case.arrays.values())
    parts = [f"{original[0]} nodes to {nodes}" if original else f"to {nodes} nodes",
             f"{original[1]:,} elements to {elements:,}" if original else f"{elements:,} elements"]
    if isinstance(log.get("calls"), int) and isinstance(log.get("seconds"), (int, float)):
        parts.append(f"{log['calls']:,} candidates tried in {log['seconds']:.1f} s")
    text = f"shrunk from case {stored.shrunk_from}: {', '.join(parts)}"
    passes = log.get("passes") if isinstance(log.get("passes"), dict) else {}
    helped = [f"{name} {counts[1]} of {counts[0]}" for name, counts in passes.items()
              if isinstance(counts, list) and len(counts) == 2 and counts[1]]
    if helped:
        text += f"; passes that made it smaller (accepted of tried): {', '.join(helped)}"
    return text


def campaign_plugins(corpus: Corpus, stored: StoredCase) -> list[str]:
    """The --plugin values of the campaign that stored the case (none for an imported case), as names to
    show: a plugin is loaded only from the command line."""
    if stored.campaign_id is None:
        return []
    return stored_plugins(corpus.campaign(stored.campaign_id)["config"])


def unregistered_backends(names: list[str], plugins: list[str]) -> list[str]:
    """Load the plugins and the shipped canaries the names need; return the names still not registered."""
    from fuzzer.backends import table
    from fuzzer.plugins import canaries_for, load_plugins

    load_plugins(list(plugins) + canaries_for(names))
    registered = table()
    # A KIND@ENV name runs in another environment, whose worker checks it.
    return [name for name in dict.fromkeys(names)
            if name not in registered.derived and (parsed := BackendName.parse(name)).env is None
            and parsed.kind not in registered.classes]


def require_backends(corpus: Corpus, stored: StoredCase, names: list[str], plugins: list[str]) -> None:
    """UserError, naming the plugin files the case's campaign loaded, if a backend is not registered after loading `plugins`."""
    missing = unregistered_backends(names, plugins)
    if missing:
        raise UserError(missing_backend_sentence(missing[0], stored.id, campaign_plugins(corpus, stored)))


def missing_bucket_backends(corpus: Corpus, plugins: list[str]) -> list[str]:
    """One sentence per bucket whose backend is not registered after loading `plugins` (see missing_backend_sentence)."""
    buckets = corpus.buckets()
    missing = set(unregistered_backends([b["backend"] for b in buckets], plugins))
    sentences = []
    for bucket in buckets:
        if bucket["backend"] in missing and bucket["representative"] is not None:
            missing.discard(bucket["backend"])
            stored = corpus.get_case(bucket["representative"])
            sentences.append(missing_backend_sentence(bucket["backend"], stored.id, campaign_plugins(corpus, stored)))
    return sentences


def missing_backend_sentence(backend: str, case_id: int, plugins: list[str]) -> str:
    if not plugins:
        return (f"Backend '{backend}' is not registered, and the campaign that stored case {case_id} recorded no "
                f"plugin; pass --plugin with the file that registers it.")
    files = ", ".join(f"'{p}'" for p in plugins)
    flags = " ".join(f"--plugin {p}" for p in plugins)
    noun = "plugin file" if len(plugins) == 1 else "plugin files"
    return f"Backend '{backend}' is not registered; the campaign that stored case {case_id} loaded {noun} {files}: pass {flags}"
