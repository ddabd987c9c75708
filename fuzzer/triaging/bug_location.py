"""Where a bug lives: a shrunk case run on every default backend (`fuzz show ID --rerun`), and one
sentence saying which of them is wrong, in the terms an engineer triages by.

A backend is wrong on the case when its verdict is a bug or `inherited` (it computes its base's wrong
answer). The places, tried in this order:

    nowhere          no backend is wrong now
    every float32    every float32 backend of two or more frameworks is wrong: float32 itself, or
                     the reference, rather than one framework's code
    eager only       one framework's eager kind (the kind with no base: torch-eager, jax-eager) is
                     wrong, and only kinds that inherit its answer with it; a compiler or
                     transformation of it that computes its own answer gets it right
    one compiler     one derived kind (a compiler, a transformation) is wrong with an answer of its
                     own, and nothing else is
    one framework    several kinds of one framework (torch, jax, a plugin's) are wrong, no other's
    several          kinds of several frameworks are wrong
"""

from __future__ import annotations

from fuzzer import verdicts
from fuzzer.backends import Backend, default_backends, get_backend
from fuzzer.ir import Graph


def rerun_backends(stored: list[str], graph: Graph) -> tuple[list[str], list[str]]:
    """(the backends to run the case on: every default backend available here and those the case
    was found on, the case's stored ones first; the default ones left out, each with why)."""
    names, left_out = list(stored), []
    for name in default_backends():
        if name in names:
            continue
        backend = get_backend(name)
        why = backend.unavailable_reason() or ("" if backend.supports_graph(graph) else "does not support an op of the case")
        if why:
            left_out.append(f"{name}: {why}")
        else:
            names.append(name)
    return names, left_out


def _wrong(verdict: dict) -> bool:
    return verdicts.is_bug(verdict["verdict"]) or verdict["verdict"] == verdicts.INHERITED


def _family(backend: Backend) -> str:
    return backend.family or backend.kind  # a plugin's kind without a family is a framework of its own


def locate(ran: list[dict]) -> dict:
    """Where the bug lives, from every backend's verdict on the case (their JSON form): {place (a
    module docstring's name), summary (one sentence), wrong, right (backend names)}."""
    backends = {v["backend"]: get_backend(v["backend"]) for v in ran}
    wrong = [v["backend"] for v in ran if _wrong(v)]
    right = [v["backend"] for v in ran if not _wrong(v)]
    own = [v["backend"] for v in ran if _wrong(v) and v["verdict"] != verdicts.INHERITED]
    families = {_family(backends[name]) for name in wrong}
    float32 = [name for name in backends if backends[name].dtype == "float32"]
    roots = [name for name in own if backends[name].derived_from is None]
    if not wrong:
        return _place("nowhere", "no backend is wrong on this case now", wrong, right)
    if set(float32) <= set(wrong) and len({_family(backends[name]) for name in float32}) > 1:
        return _place("every float32", f"every float32 backend ({len(float32)}, of several frameworks) is wrong: float32 "
                                       "itself or the reference, not one framework's code", wrong, right)
    if len(families) == 1:
        family = families.pop()
        same_family_right = [name for name in right if _family(backends[name]) == family]
        if roots and set(own) == set(roots) and same_family_right:
            inherited = [name for name in wrong if name not in own]
            return _place("eager only", f"{family} eager only ({', '.join(own)}"
                          + (f"; inherited by {', '.join(inherited)}" if inherited else "")
                          + f"); right on {', '.join(same_family_right)}", wrong, right)
        if len(own) == 1 and not roots and len(wrong) == 1:
            return _place("one compiler", f"{own[0]} only: an answer of its own (a compiler's or transformation's), "
                                          "every other backend is right", wrong, right)
        which = f"{family} only" if same_family_right else f"every {family} backend"
        return _place("one framework", f"{which} ({', '.join(wrong)}); no other framework's backend is wrong", wrong, right)
    return _place("several", f"several frameworks: {', '.join(wrong)}", wrong, right)


def _place(place: str, summary: str, wrong: list[str], right: list[str]) -> dict:
    return {"place": place, "summary": summary, "wrong": wrong, "right": right}
