"""Known bugs as shipped data (fuzzer/triaging/known.py, corpus/known-bugs.json): a campaign stores a known
bug's findings as `known` without a new-bucket line or exit 1, a planted bug outside the registry
still gets both, triage settles a bucket, and `fuzz known list / check / add` work on real files."""

from __future__ import annotations

import json
import shutil
import random
import re
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from fuzzer.backends import get_backend
from fuzzer.corpus import Corpus
from fuzzer.drawing.generate import generate_case
from fuzzer.errors import UserError
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.judging.check import Finding, check_case
from fuzzer.oracle import signature
from fuzzer.records import CaseRecord
from fuzzer.triaging.error_patterns import UnsafePattern, compile_pattern
from fuzzer.triaging.known import SHIPPED_REGISTRY, Registry, load_registry, parse_entry, registry_text
from test_cli_errors import assert_user_error, fuzz

PLUGIN = str(Path(__file__).resolve().parent / "plugins" / "raise_relu.py")
REGRESSION = Path(__file__).resolve().parents[1] / "corpus" / "regression"
REPORTS = Path(__file__).resolve().parents[1] / "reports" / "bugs"
SIGN = "nan-inf | torch-eager:cpu:float32 | sign"
SIGN_BUCKET = "nan-inf | torch-eager:cpu | sign"
SIGN_RUN = ["--ops", "sign", "--backends", "torch-eager:cpu:float32,torch-module:cpu:float32", "--regimes", "special-values"]
PLANTED_RUN = ["--plugin", PLUGIN, "--ops", "relu", "--backends", "torch-eager:cpu:float32,plugin-raise-relu"]


def campaign(db: Path, *args, graphs: int = 1) -> tuple[int, dict, list[str]]:
    """(exit status, JSON summary, new-bucket events) of a tiny `fuzz run`, in this process and without a
    memory limit: its workers fork from one warm forkserver instead of each starting an interpreter."""
    run = fuzz("run", "--db", db, "--max-cases", graphs, "--workers", 1, "--shrink-time", 1, "--memory-limit", 0,
               "--json", *args)
    assert run.exit_code in (0, 1), (run.exception, run.stderr[-2000:])
    events = [json.loads(line) for line in run.stderr.splitlines() if line.startswith("{")]
    return run.exit_code, json.loads(run.stdout), [e["signature"] for e in events if e["event"] == "new-bucket"]


# -- the registry file ----------------------------------------------------------------------------

def test_every_shipped_entry_matches_the_findings_of_its_stored_cases():
    registry = load_registry(SHIPPED_REGISTRY)
    folders = {path.name for path in REPORTS.iterdir() if path.is_dir()}
    assert folders <= {bug.id for bug in registry.bugs}, "an entry for every bug report of ours"
    for bug in registry.bugs:  # the others are bugs reported upstream by someone else (their link says where) or conventions
        assert bug.id in folders or bug.status == "convention" or bug.entry["link"].startswith("https://github.com/"), bug.id
    assert {bug.id for bug in registry.bugs if bug.status == "convention"} == {
        "torch-sign-nan", "torch-sinh-cosh-overflow", "torch-sdpa-causal-hidden-nan", "jax-cpu-daz-atan2-nan",
        "torch-compile-dropout-p1-nan", "inductor-triton-fma-contraction", "cudnn-conv-nonfinite-leak"}
    for bug in registry.bugs:
        for path in bug.cases:
            findings = [Finding.from_dict(f) for f in json.loads(path.read_text())["findings"]]
            assert findings and all(registry.match(f) is bug for f in findings), (bug.id, path)


def test_the_shipped_registry_is_in_the_form_known_add_writes():
    """`fuzz known add` rewrites the whole file: an entry formatted by hand would show as changed in that diff."""
    entries = [bug.entry for bug in load_registry(SHIPPED_REGISTRY).bugs]
    assert SHIPPED_REGISTRY.read_text(encoding="utf-8") == registry_text(entries)


def test_a_match_needs_every_condition_of_the_rule():
    sign = load_registry(SHIPPED_REGISTRY).match
    finding = Finding("torch-eager:cpu:float32", "nan-inf", "sign", SIGN)
    assert sign(finding).id == "torch-sign-nan"
    assert sign(Finding("torch-layout:cpu:float64", "nan-inf", "sign@fused", "")).id == "torch-sign-nan"
    assert sign(Finding("torch-compile:cpu:float32", "nan-inf", "sign", "")).id == "torch-sign-nan", "inductor keeps the convention"
    assert sign(Finding("ort:cpu:float32", "nan-inf", "sign", "")) is None, "onnxruntime is another path"
    assert sign(Finding("torch-eager:cuda:float32", "nan-inf", "sign", "")).id == "torch-sign-nan", "seen on CUDA (torch 2.11)"
    assert sign(Finding("torch-eager:cpu:float16", "nan-inf", "sign", "")) is None, "a dtype it was not seen in"
    assert sign(Finding("torch-eager:cpu:float32", "mismatch", "sign", "")) is None
    assert sign(Finding("my-plugin-sign", "nan-inf", "sign", "")) is None, "a plugin's backend differs from its base"
    crash = "crash | torch-compile:cpu:float32 | - | torch._inductor.exc.InductorError: AssertionError: vr must not be None for symbol qN"
    assert sign(Finding("torch-compile:cpu:float32", "crash", "-", crash)).id == "torch-compile-roll-pad-crash"
    assert sign(Finding("torch-compile:cpu:float32", "crash", "-", "crash | torch-compile:cpu:float32 | - | other")) is None


def test_a_path_entry_matches_every_kind_on_that_compiler_path_but_its_exceptions():
    rule = {"verdicts": ["nan-inf"], "ops": ["erf"], "paths": ["torch/inductor"]}
    inductor = Registry(None, (parse_entry(entry(id="erf", match=rule), REGRESSION),))
    excepting = Registry(None, (parse_entry(entry(id="erf", match={**rule, "except_kinds": ["torch-compile-grad"]}), REGRESSION),))
    for kind in ("torch-compile", "torch-compile-frozen", "torch-aoti", "torch-compile-grad", "torch-compile-max-autotune:cuda"):
        name = kind if ":" in kind else f"{kind}:cpu"
        assert inductor.match(Finding(f"{name}:float32", "nan-inf", "erf", "")) is not None, kind
    assert inductor.match(Finding("torch-compile-grad:cpu:float32", "nan-inf", "erf@grad", "")) is not None, \
        "a kind derived from torch-compile, never listed by hand"
    assert excepting.match(Finding("torch-compile-grad:cpu:float32", "nan-inf", "erf@grad", "")) is None, "excluded"
    assert excepting.match(Finding("torch-compile-dynamic:cpu:float32", "nan-inf", "erf", "")) is not None
    for other in ("torch-eager:cpu:float32", "jax-jit:cpu:float32", "ort:cpu:float32", "my-plugin-erf"):
        assert inductor.match(Finding(other, "nan-inf", "erf", "")) is None, other


def test_a_finding_from_a_release_outside_the_entrys_range_is_new():
    """The two real findings of old releases that were once filed under the wrong entry: asinh(-inf)
    of torch 2.2.2's compiled kernel, and jax 0.4.26's softmax under jit (another bug, fixed in 0.4.27)."""
    registry = load_registry(SHIPPED_REGISTRY)
    asinh = Finding("torch-compile:cpu:float32", "nan-inf", "asinh", "nan-inf | torch-compile:cpu:float32 | asinh")
    assert registry.match(asinh, versions={"torch": "2.11.0+cu130"}).id == "torch-compile-cpu-asinh-overflow"
    assert registry.match(asinh, versions={"torch": "2.2.2"}) is None
    softmax = Finding("jax-jit:cpu:float32", "nan-inf", "softmax", "nan-inf | jax-jit:cpu:float32 | softmax")
    assert registry.match(softmax, versions={"jax": "0.10.2"}).id == "jax-jit-scaled-softmax-nan"
    assert registry.match(softmax, versions={"jax": "0.4.26"}) is None
    in_old_env = Finding("jax-jit:cpu:float32@jax-0.4.26-py310", "nan-inf", "softmax", "")
    recorded = {"jax": "0.10.2", "environments": {"jax-0.4.26-py310": {"jax": "0.4.26"}}}
    assert registry.match(in_old_env, versions=recorded) is None, "the environment's release, not this process's"
    assert registry.match(softmax, versions={"torch": "2.13.0"}) is not None, "a release not recorded places no condition"


def test_known_add_writes_the_buckets_path_and_release_and_an_old_release_is_new_again(tmp_path):
    db, path = tmp_path / "fuzz.db", tmp_path / "registry" / "known.json"
    crash = Finding("torch-compile-dynamic:cpu:float32", "crash", "relu",
                    signature("crash", "torch-compile-dynamic:cpu:float32", "relu", "RuntimeError: boom"), error="RuntimeError: boom")
    with Corpus(db) as corpus:
        campaign_id = corpus.start_campaign({}, 0, {"torch": "2.13.0+cpu"}, lease=False)
        case_id = corpus.add_case(CaseRecord(generate_case(1, ["relu"]), campaign_id=campaign_id, verdict="crash",
                                             backends=["torch-compile-dynamic:cpu:float32"], findings=[crash]))
    fuzz("triage", "--db", db, case_id, "--status", "reported")
    added = fuzz("known", "add", "--db", db, case_id, "--id", "inductor-relu-crash", "--link", "https://x.org/1",
                 "--known-bugs", path)
    assert added.exit_code == 0, added.output
    bug = load_registry(path).bugs[0]
    assert bug.entry["match"]["paths"] == ["torch/inductor"] and "kinds" not in bug.entry["match"]
    assert bug.entry["match"]["releases"] == {"torch": ">=2.13.0"} and bug.entry["affected"] == "torch 2.13.0+cpu"
    assert bug.matches(Finding("torch-aoti:cpu:float32", "crash", "relu", "", error="RuntimeError: boom"), versions={"torch": "2.15.0"})
    assert not bug.matches(crash, versions={"torch": "2.12.1"}), "a release before the one it was found on"


def write_registry(tmp_path: Path, entries, name: str = "known.json") -> Path:
    path = tmp_path / name
    path.write_text(entries if isinstance(entries, str) else json.dumps(entries))
    return path


def entry(**changes) -> dict:
    return {"id": "torch-sign-nan", "title": "sign(nan) is 0", "status": "convention",
            "match": {"verdicts": ["nan-inf"], "ops": ["sign"], "kinds": ["torch-eager"]}, **changes}


@pytest.mark.parametrize("content, needle", [
    ("[{", "is not JSON"),
    ('[{"id": NaN}]', "is not strict JSON"),
    ({"id": "x"}, "holds a JSON dict, not a list of entries"),
    ([entry(match={"verdicts": ["nan-inf"], "op": ["sign"]})], "entry 1 ('torch-sign-nan') has unknown match key 'op'"),
    ([entry(match={"verdicts": ["nan"]})], "has unknown verdict 'nan' in its match (crash, hang,"),
    ([entry(match={"verdicts": ["crash"], "ops": ["sgn"]})], "has unknown op 'sgn' in its match (`fuzz ops` lists them)"),
    ([entry(match={"verdicts": ["crash"], "error": "("})], "has match 'error' '(', which uses '(' at character 0"),
    ([entry(match={"verdicts": ["crash"], "error": "(a+)+$"})], "which uses '(' at character 0: outside what a pattern"),
    ([entry(match={"verdicts": ["crash"], "error": "a|"})], "which uses an alternative that matches every error"),
    ('[{"id": "torch-sign-nan", "id": "x", "title": "t", "status": "open", "match": {"verdicts": ["crash"]}}]',
     "an object gives the key 'id' twice"),
    ([entry(cases=["../../../etc/hostname"])], "names case file '../../../etc/hostname', which leads out of"),
    ([entry(report="/etc/hostname")], "names report '/etc/hostname', which leads out of"),
    ([entry(match={"ops": ["sign"]})], "matches no verdict"),
    ([entry(status="closed")], "has status 'closed' (use open, convention or 'fixed-in RELEASE')"),
    ([entry(link="pytorch#1")], "which is not an http(s) address or null"),
    ([entry(), entry()], "entry 2 ('torch-sign-nan') repeats the id of an earlier entry"),
    ([entry(id="Torch Sign")], "has id 'Torch Sign'"),
    ([entry(match={"verdicts": ["crash"], "paths": ["torch/inductr"]})], "has unknown path 'torch/inductr' in its match"),
    ([entry(match={"verdicts": ["crash"], "releases": {"onnxruntime": ">=1.2"}})],
     "has a release range for 'onnxruntime', which no finding records (use torch, jax,"),
    ([entry(match={"verdicts": ["crash"], "releases": {"torch": "2.11 - 2.13"}})],
     "has release range '2.11 - 2.13' for 'torch', which is not version specifiers such as '>=2.11,<2.13'"),
])
def test_a_malformed_registry_is_refused_in_one_sentence(tmp_path, content, needle):
    path = write_registry(tmp_path, content)
    with pytest.raises(UserError) as refused:
        load_registry(path)
    message = str(refused.value)
    assert needle in message and str(path) in message and "\n" not in message, message
    assert message.endswith("fix the file or pass --known-bugs with another registry.")
    assert_user_error(fuzz("known", "list", "--known-bugs", path), needle)
    assert_user_error(fuzz("run", "--db", tmp_path / "new.db", "--max-cases", 1, "--known-bugs", path), needle)
    assert not (tmp_path / "new.db").exists(), "refused before the corpus is created"


def test_an_error_pattern_means_what_re_search_means_and_cannot_backtrack():
    """The subset (fuzzer/triaging/error_patterns.py) against `re` on random patterns and texts; and the
    pattern that stalled `fuzz import` for minutes either refused or, written in the subset, instant."""
    rng = random.Random(0)
    tokens = ["a", "b", ".", ".*", "\\.", "\\(", " "]
    compared = 0
    for _ in range(3000):
        alternatives = ["^" * (rng.random() < .3) + "".join(rng.choices(tokens, k=rng.randint(1, 4))) + "$" * (rng.random() < .3)
                        for _ in range(rng.randint(1, 2))]
        pattern = "|".join(alternatives)
        try:
            compiled = compile_pattern(pattern)
        except UnsafePattern:
            assert any(set(a) <= set("^$.*") for a in alternatives), f"only an alternative matching everything: {pattern}"
            continue
        for text in ("".join(rng.choices("ab.( ", k=rng.randint(0, 6))) for _ in range(5)):
            assert compiled.search(text) == (re.search(pattern, text) is not None), (pattern, text)
            compared += 1
    assert compared > 10000
    for pattern in ("(a+)+$", "a+", "[ab]", "\\d", "a{2}", "a?", "x^", "a$b", ".*", ""):
        with pytest.raises(UnsafePattern):
            compile_pattern(pattern)
    assert compile_pattern("^a.*a.*a.*b$").search("a" * 100_000) is False
    shipped = [bug.entry["match"]["error"] for bug in load_registry(SHIPPED_REGISTRY).bugs if "error" in bug.entry["match"]]
    assert len(shipped) >= 6, "every shipped pattern is in the subset (load_registry above read them all)"


def test_a_registry_entry_cannot_stall_an_import(tmp_path):
    """Issue 51: an entry `(a+)+$` with a crash text of 60 a's kept `fuzz import` busy past 90 s. It is
    refused when the registry is read, before the corpus is touched; the same intent in the subset matches."""
    error = "a" * 60 + "!"
    case = json.loads((REGRESSION.parent / "known" / "torch-sign-nan.json").read_text())
    case.pop("expect")
    case.update(verdict="crash", findings=[{**case["findings"][0], "verdict": "crash", "error": error, "max_error": 0.0,
                                           "signature": f"crash | torch-eager:cpu:float32 | sign | {error}"}])
    (tmp_path / "crash.json").write_text(json.dumps(case))
    stalling = write_registry(tmp_path, [entry(match={"verdicts": ["crash"], "error": "(a+)+$"})])
    assert_user_error(fuzz("import", tmp_path / "crash.json", "--db", tmp_path / "c.db", "--known-bugs", stalling),
                      "which uses '(' at character 0")
    assert not (tmp_path / "c.db").exists()
    linear = write_registry(tmp_path, [entry(match={"verdicts": ["crash"], "error": "^a.*a!$"})], name="linear.json")
    imported = fuzz("import", tmp_path / "crash.json", "--db", tmp_path / "c.db", "--known-bugs", linear)
    assert imported.exit_code == 0 and imported.stdout.rstrip().endswith("known bugs: torch-sign-nan"), imported.output


def test_list_shows_each_entry_and_its_rule(tmp_path):
    path = write_registry(tmp_path, [entry(link="https://github.com/pytorch/pytorch/issues/41245")])
    text = fuzz("known", "list", "--known-bugs", path).stdout
    assert text.splitlines()[0].split()[:3] == ["torch-sign-nan", "convention", "sign(nan)"]
    assert "https://github.com/pytorch/pytorch/issues/41245; matches nan-inf of sign on torch-eager" in text
    assert json.loads(fuzz("known", "list", "--known-bugs", path, "--json").stdout) == [entry(
        link="https://github.com/pytorch/pytorch/issues/41245")]
    assert_user_error(fuzz("known", "list", "--known-bugs", tmp_path / "none.json"), "No known-bug registry at")
    ranged = write_registry(tmp_path, [entry(match={"verdicts": ["nan-inf"], "paths": ["torch/inductor"],
                                                    "except_kinds": ["torch-aoti"], "releases": {"torch": ">=2.11,<2.13"}})])
    assert "matches nan-inf on torch/inductor except torch-aoti, torch >=2.11,<2.13" in fuzz("known", "list", "--known-bugs", ranged).stdout


# -- campaigns ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_known_bugs_do_not_fail_a_campaign_and_a_planted_bug_does(tmp_path):
    db = tmp_path / "fuzz.db"
    # torch.sign(nan) = 0, in the shipped registry: stored as known, no new-bucket line, exit 0; and
    # torch-module's copy of it (inherited: the same wrong answer) is a member of that bucket.
    code, summary, new = campaign(db, *SIGN_RUN, graphs=2)
    assert (code, new) == (0, []) and summary["known_findings"] >= 1 and summary["new_buckets"] == 0
    with Corpus(db) as corpus:
        buckets = {b["signature"]: (b["status"], b["known_bug"], [m["signature"] for m in b["members"]])
                   for b in corpus.buckets()}
    assert buckets == {SIGN_BUCKET: ("known", "torch-sign-nan", [SIGN, "inherited | torch-module:cpu:float32 | sign"])}

    # A plugin's relu that raises is in no registry: its line, and exit 1.
    code, summary, new = campaign(db, *PLANTED_RUN)
    assert code == 1 and len(new) == 1 and new[0].startswith("crash | plugin-raise-relu | relu")
    assert summary["unknown_finding_cases"] >= 1

    # Triaged wontfix, it no longer fails the next run, and the summary says why.
    case_id = json.loads(fuzz("list", "--db", db, "--status", "new", "--json").stdout)[0]["representative"]
    assert fuzz("triage", "--db", db, case_id, "--status", "wontfix").exit_code == 0
    code, summary, new = campaign(db, *PLANTED_RUN, "--seed", 1)
    assert (code, new) == (0, []) and summary["triaged_findings"] >= 1 and summary["unknown_finding_cases"] == 0

    # --fail-on any: today's behaviour, exit 1 for any stored finding.
    code, summary, new = campaign(db, *SIGN_RUN, "--seed", 3, "--fail-on", "any")  # seed 3 draws sign of a nan
    assert code == 1 and summary["finding_cases"] >= 1 and summary["unknown_finding_cases"] == 0


# -- fuzz known check and add -----------------------------------------------------------------------

@pytest.mark.slow
def test_check_replays_each_entry_and_says_which_reproduce_here(tmp_path):
    # sign(nan) stored for torch-module alone: its copy of torch eager's wrong answer is only `inherited`,
    # so the check runs the base too, whose own finding is the known bug coming back.
    sign = json.loads((REGRESSION.parent / "known" / "torch-sign-nan.json").read_text())
    (tmp_path / "sign.json").write_text(json.dumps({**sign, "backends": ["torch-module:cpu:float32"]}))
    clean = json.loads((REGRESSION / "layout-layernorm-clean.json").read_text())
    (tmp_path / "clean.json").write_text(json.dumps({**clean, "backends": ["torch-eager:cpu:float32"]}))
    path = write_registry(tmp_path, [
        entry(cases=["sign.json"]),
        entry(id="old-layer-norm", status="fixed-in 2.0", cases=["clean.json"],
              match={"verdicts": ["mismatch"], "ops": ["layer_norm"], "kinds": ["torch-eager"]}),
        entry(id="gpu-only", match={"verdicts": ["crash"], "devices": ["cuda"]}),
    ])
    result = fuzz("known", "check", "--known-bugs", path)
    assert result.exit_code == 0, result.output
    assert [line.split()[:2] for line in result.stdout.splitlines()[:3]] == [
        ["reproduces", "torch-sign-nan"], ["fixed", "here"], ["no", "case"]]
    assert result.stdout.splitlines()[-1] == "3 cases: 1 reproduces, 1 fixed here, 0 differs, 0 not run, 1 no case"


def test_add_turns_a_triaged_bucket_into_an_entry_with_its_case(tmp_path):
    db, path = tmp_path / "fuzz.db", tmp_path / "registry" / "known.json"
    error = "RuntimeError: bad shape (2, 3) at 0x7f00"
    crash = Finding("torch-eager:cpu:float32", "crash", "relu", signature("crash", "torch-eager:cpu:float32", "relu", error),
                    error=error)
    with Corpus(db) as corpus:
        case_id = corpus.add_case(CaseRecord(generate_case(1, ["relu"]), verdict="crash",
                                             backends=["torch-eager:cpu:float32"], findings=[crash]))
    link = "https://github.com/pytorch/pytorch/issues/1"
    assert_user_error(fuzz("known", "add", "--db", db, case_id, "--id", "torch-relu-crash", "--link", link,
                           "--known-bugs", path), "not triaged yet", "fuzz triage B1 --status confirmed")
    fuzz("triage", "--db", db, case_id, "--status", "reported")
    assert_user_error(fuzz("known", "add", "--db", db, case_id, "--id", "Bad Id", "--link", link, "--known-bugs", path),
                      "has id 'Bad Id'")
    added = fuzz("known", "add", "--db", db, case_id, "--id", "torch-relu-crash", "--link", link, "--known-bugs", path)
    assert added.exit_code == 0, added.output
    bug = load_registry(path).bugs[0]
    assert (bug.id, bug.status, bug.entry["link"]) == ("torch-relu-crash", "open", link)
    assert bug.cases == (path.parent / "known" / "torch-relu-crash.json",)
    assert json.loads(bug.cases[0].read_text())["expect"] == "disagree"
    again = Finding("torch-eager:cpu:float32", "crash", "relu", "", error="RuntimeError: bad shape (4, 5, 6) at 0x1")
    assert load_registry(path).match(again).id == bug.id, "the entry matches the bucket's normalized error"
    with Corpus(db) as corpus:
        bucket = corpus.bucket(crash.signature)
        assert (bucket["status"], bucket["known_bug"]) == ("known", "torch-relu-crash")
    assert_user_error(fuzz("known", "add", "--db", db, case_id, "--id", "torch-relu-crash", "--link", link,
                           "--known-bugs", path), "has an entry 'torch-relu-crash' already")


def fused_minimum_case(nan_at: tuple[int, ...] | None) -> Case:
    """The README set-up campaign's case: a minimum that jax.jit fuses into the sum after it, then a
    layer_norm. With a nan in 4,284 elements the jit drops it (jax-cpu-max-nan-4096), and since no op is
    wrong alone the finding is the fusion's, `layer_norm@fused`."""
    graph = Graph(inputs=[TensorSpec("x1", (1, 1, 1)), TensorSpec("x2", (2, 2, 7, 9, 17))],
                  nodes=[Node("n1", "minimum", ("x2", "x1")), Node("n2", "sum", ("n1",), {"dims": [-3], "keepdim": True}),
                         Node("n3", "layer_norm", ("n2",), {"affine": False, "eps": 1e-3, "normalized_shape": [9, 17]})],
                  outputs=["n3"])
    x2 = np.random.default_rng(0).standard_normal((2, 2, 7, 9, 17))
    if nan_at is not None:
        x2[nan_at] = np.nan
    return Case(graph, {"x1": np.zeros((1, 1, 1)), "x2": x2})


def test_a_known_bug_of_an_op_fused_into_its_consumer_matches_the_fusion_finding():
    registry = load_registry(SHIPPED_REGISTRY)
    case = fused_minimum_case(nan_at=(1, 1, 3, 0, 0))
    findings = check_case(case, [get_backend("jax-jit:cpu:float32")]).findings
    assert [f.culprit for f in findings] == ["layer_norm@fused"], "the finding this test is about"
    assert registry.match(findings[0], case.graph).id == "jax-cpu-max-nan-4096"
    assert registry.match(findings[0]) is None, "without its graph a fusion is only its last op"
    # A fusion of ops no entry names is not made known by the graph: here the same finding on a graph
    # whose fused ancestors are only sum and layer_norm.
    alone = Graph(inputs=[TensorSpec("x2", (2, 2, 7, 9, 17))], outputs=["n3"],
                  nodes=[Node("n2", "sum", ("x2",), {"dims": [-3], "keepdim": True}), case.graph.nodes[2]])
    assert registry.match(findings[0], alone) is None
    assert check_case(fused_minimum_case(nan_at=None), [get_backend("jax-jit:cpu:float32")]).findings == []


def test_a_fusion_under_a_transformation_is_charged_to_its_fused_ancestors_too():
    """GPU campaign (torch-compile-jvp): `matmul@fused@jvp` after a softmax over a dim of size 1 is the known FMA
    contraction; the transformation's suffix hid the fusion, so only matmul was matched."""
    from fuzzer.triaging.known import culprit_ops

    graph = Graph(inputs=[TensorSpec("q", (3, 1, 8)), TensorSpec("v", (3, 1, 8))], outputs=["n1"],
                  nodes=[Node("n0", "softmax", ("q",), {"dim": -1}), Node("n1", "matmul", ("n0", "v"))])
    assert culprit_ops("matmul@fused@jvp", graph) == culprit_ops("matmul@fused", graph) == {"matmul", "softmax"}
    assert culprit_ops("matmul@jvp", graph) == {"matmul"}


def test_an_imported_or_reshrunk_case_of_a_known_bug_lands_in_its_known_bucket(tmp_path):
    # GPU campaign cases 961 and 324, re-shrunk after a localization fix, named the known bugs'
    # culprits (rms_norm, conv_transpose2d) but stayed `new`: only a campaign applied the registry.
    db, sign = tmp_path / "c.db", REGRESSION.parent / "known" / "torch-sign-nan.json"
    imported = fuzz("import", sign, "--db", db, "--known-bugs", write_registry(tmp_path, []))
    assert imported.exit_code == 0 and "known bugs" not in imported.stdout, imported.output
    assert [b["status"] for b in json.loads(fuzz("list", "--all", "--db", db, "--json").stdout)] == ["new"]
    shrunk = fuzz("shrink", 1, "--db", db, "--shrink-time", 10)
    assert shrunk.exit_code == 0 and shrunk.stdout.rstrip().endswith("It is the known bug torch-sign-nan."), shrunk.output
    assert [(b["status"], b["known_bug"]) for b in json.loads(fuzz("list", "--all", "--db", db, "--json").stdout)] == [("known", "torch-sign-nan")]
    again = fuzz("import", sign, "--db", tmp_path / "other.db")
    assert again.exit_code == 0 and again.stdout.rstrip().endswith("known bugs: torch-sign-nan"), again.output


def _shrunk_signatures(db: Path) -> set[str]:
    with sqlite3.connect(db) as connection:
        return {row[0] for row in connection.execute("SELECT signature FROM cases WHERE shrunk_from IS NOT NULL")}


def test_a_registry_bug_is_stored_but_never_shrunk(tmp_path, monkeypatch):
    """A registry entry has its case on file: a campaign spends no shrink on its findings (the first
    shrink of each known bug was 8% of a 10-minute CPU campaign), and shrinks the same finding when
    the registry does not list it."""
    code, summary, _ = campaign(tmp_path / "known.db", *SIGN_RUN, graphs=2)
    assert summary["known_findings"] >= 1 and _shrunk_signatures(tmp_path / "known.db") == set()

    empty = tmp_path / "no-bugs.json"
    empty.write_text("[]")
    monkeypatch.setenv("FUZZ_KNOWN_BUGS", str(empty))
    code, summary, new = campaign(tmp_path / "unlisted.db", *SIGN_RUN, graphs=2)
    assert SIGN in new and SIGN in _shrunk_signatures(tmp_path / "unlisted.db")


def test_a_registry_copied_without_its_folder_still_matches_and_known_check_names_what_it_lacks(tmp_path):
    """Issue 50: a copy of corpus/known-bugs.json elsewhere was refused as malformed, its relative report
    and case paths leading nowhere; they are pointers, so it loads, and `fuzz known check` says which
    case files are not there instead of replaying them."""
    copy = tmp_path / "known-bugs.json"
    shutil.copy(SHIPPED_REGISTRY, copy)
    registry = load_registry(copy)
    assert [bug.id for bug in registry.bugs] == [bug.id for bug in load_registry(SHIPPED_REGISTRY).bugs]
    with_cases = [bug for bug in registry.bugs if bug.cases]
    checked = json.loads(fuzz("known", "check", "--known-bugs", copy, "--json").stdout)
    lacking = {row["bug"] for row in checked if row["outcome"] == "no case" and "is not there" in row["detail"]}
    assert lacking == {bug.id for bug in with_cases}
