"""The judged-share meter (fuzzer/judging/judged_share.py): given a checked case, it counts the entries the
oracle judged, per (op, dtype, backend kind); a campaign carries the counts through its checkpoint
and a resume, `fuzz stats --json` shows them, and the summary names an op judged on under half."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fuzzer import oracle
from fuzzer.backends import get_backend
from fuzzer.corpus import Corpus
from fuzzer.errors import UserError
from fuzzer.judging import judged_share
from fuzzer.judging.check import check_case
import fuzzer.ops
from fuzzer.running.campaign import CampaignOptions, run_campaign
from test_cli_errors import assert_user_error, fuzz
from test_oracle import single_op_case

FUZZ = str(Path(sys.executable).with_name("fuzz"))
PLUGIN = str(Path(__file__).parent / "plugins" / "conventional_op.py")


def metered(case, dtype="float32"):
    """(the meter's one row for the case's op on torch-eager in `dtype`, the case's reference)."""
    backend = get_backend(f"torch-eager:cpu:{dtype}")
    seen = []
    result = check_case(case, [backend], on_reference=seen.append)
    rows = judged_share.measure(case.graph, seen[0], result, [backend])
    assert list(rows) == [f"{case.graph.nodes[0].op}|{dtype}|torch-eager"]
    return next(iter(rows.values())), seen[0]


def test_an_entry_an_op_leaves_undefined_is_not_judged(monkeypatch):
    # pow(-inf, 0.5) is +inf by IEEE pow and nan by torch's sqrt (pow_scalar's `undefined`).
    monkeypatch.setattr(oracle.paths, "LAZY", False)  # every verdict through the honest models, as a backend off the floor
    row, _ = metered(single_op_case("pow_scalar", [-np.inf, 1.0, 4.0, 9.0], {"exponent": 0.5}))
    assert (row["cases"], row["entries"], row["judged"]) == (1, 4, 3)


def test_an_output_loosened_past_the_factor_is_not_judged(monkeypatch):
    # float16 exp near 8: the rounding of x is amplified 8-fold, so the allowance is ~8 floors.
    monkeypatch.setattr(oracle.paths, "LAZY", False)
    loose, reference = metered(single_op_case("exp", [7.0, 7.5, 8.0, 8.5]), "float16")
    assert oracle.allowed_error(reference, 0, "float16") > judged_share.LOOSENED_FACTOR * oracle.floor_allowance(reference, 0, "float16")
    assert (loose["entries"], loose["judged"]) == (4, 0)
    tight, _ = metered(single_op_case("exp", [0.1, 0.2, 0.3, 0.4]), "float16")
    assert (tight["entries"], tight["judged"]) == (4, 4)
    assert judged_share.median_allowance(loose) > 2 * judged_share.median_allowance(tight)


def test_a_verdict_at_the_floor_judges_every_finite_entry_without_the_honest_models():
    row, reference = metered(single_op_case("tanh", [np.nan, 1.0, 2.0, 3.0]))
    assert (row["entries"], row["judged"]) == (4, 3)
    assert reference.models_computed is None  # the meter did not make the oracle compute them
    floor_u = oracle.floor_allowance(reference, 0, "float32") / (reference.scales[0] * oracle.UNIT_ROUNDOFF["float32"])
    assert floor_u / 2 <= judged_share.median_allowance(row) <= floor_u * 2


def test_a_tampered_row_is_refused_in_one_sentence(tmp_path):
    with pytest.raises(UserError, match="judged_share row 'relu' that is malformed"):
        judged_share.checked_rows({"relu": {"cases": 1, "entries": 1, "judged": 1}}, "Campaign 1's checkpoint")
    db = tmp_path / "c.db"
    with Corpus(str(db)) as corpus:
        campaign_id = corpus.start_campaign({}, 0, {})
        corpus.checkpoint(campaign_id, {"judged_share": {"relu|float32|torch-eager": {"cases": 1, "judged": 1}}}, 1, 0)
    assert_user_error(fuzz("stats", "--db", db), f"Campaign {campaign_id}'s checkpoint", "lacks one of the counts")


@pytest.fixture(scope="module")
def conventional_campaign(tmp_path_factory):
    """A campaign of the plugin op `conventional` alone, then resumed for more: (db path, the first
    part's progress, the resumed progress). The op is taken out of this process's registry after."""
    saved = fuzzer.ops._REGISTRY
    fuzzer.ops._REGISTRY = dict(fuzzer.ops.registry())  # the plugin adds its op to a copy
    try:
        db = str(tmp_path_factory.mktemp("judged") / "c.db")
        options = dict(backends=["torch-eager:cpu:float32"], ops=["conventional"], regimes=["small"], max_nodes=2,
                       seed=3, workers=1, plugins=[PLUGIN], shrink_time=5.0)
        first = run_campaign(Corpus(db), CampaignOptions(max_cases=6, **options))
        first_rows = {key: dict(row) for key, row in first.judged_share.items()}
        resumed = run_campaign(Corpus(db), CampaignOptions(max_cases=11, **options), resume=first.campaign_id)  # 22 cases: MIN_CASES
        yield db, first_rows, resumed
    finally:
        fuzzer.ops._REGISTRY = saved


def test_the_meter_survives_a_checkpoint_and_resume(conventional_campaign):
    _, first, resumed = conventional_campaign
    key = "conventional|float32|torch-eager"
    assert first[key]["cases"] > 0
    assert all(resumed.judged_share[key][name] > first[key][name] for name in ("cases", "entries"))
    assert all(resumed.judged_share[k][name] >= n for k, row in first.items() for name, n in row.items())


def test_the_summary_names_an_op_judged_on_under_half(conventional_campaign):
    _, _, resumed = conventional_campaign
    low = judged_share.low_judged(resumed.judged_share)
    assert [(e["op"], e["dtype"], e["kind"]) for e in low] == [("conventional", "float32", "torch-eager")]
    assert low[0]["cases"] >= judged_share.MIN_CASES and low[0]["share"] < 0.5
    assert "conventional float32 on torch-eager" in judged_share.low_judged_summary(resumed.judged_share)


def test_fuzz_stats_json_shows_the_meter(conventional_campaign):
    db, _, resumed = conventional_campaign
    result = subprocess.run([FUZZ, "stats", "--db", db, "--json"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["judged_share"]
    row = resumed.judged_share["conventional|float32|torch-eager"]
    assert rows[0]["op"] == "conventional" and (rows[0]["entries"], rows[0]["judged"]) == (row["entries"], row["judged"])


def test_the_report_lists_the_least_judged_first(conventional_campaign, tmp_path):
    from fuzzer.report import write_report

    db, _, _ = conventional_campaign
    html = Path(write_report(Corpus(db), tmp_path, with_plots=False)["html"]).read_text()
    table = html[html.index('id="judged"'):]
    assert table.index("<code>conventional</code>") < table.index("</tbody>")


def test_the_table_puts_the_least_judged_first_and_reads_the_median_from_the_bins():
    rows = {"relu|float32|torch-eager": {"cases": 3, "entries": 10, "judged": 9, "u_log2:9": 3},
            "pow|float16|jax-eager": {"cases": 3, "entries": 10, "judged": 2, "u_log2:5": 1, "u_log2:7": 2}}
    table = judged_share.table(rows)
    assert [(e["op"], e["share"]) for e in table] == [("pow", 0.2), ("relu", 0.9)]
    assert table[0]["median_allowance_u"] == 2 ** 7.5 and table[1]["median_allowance_u"] == 2 ** 9.5


def test_the_summary_gives_kinds_that_judged_alike_one_line_and_names_only_the_least_judged():
    alike = {"cases": 30, "entries": 100, "judged": 10, "u_log2:3": 30}
    rows = {f"prod|float32|{kind}": dict(alike) for kind in ("torch-eager", "torch-module", "torch-layout")}
    rows["prod|float32|jax-eager"] = {"cases": 30, "entries": 100, "judged": 20, "u_log2:3": 30}
    rows |= {f"op{i}|float32|torch-eager": {"cases": 30, "entries": 100, "judged": 30 + i, "u_log2:3": 30} for i in range(12)}
    lines = judged_share.low_judged_summary(rows).splitlines()
    assert lines[1].startswith("  prod float32 on torch-eager, torch-layout, torch-module: 10% of 100 entries")
    assert lines[2].startswith("  prod float32 on jax-eager: 20%")
    assert len(lines) == 1 + judged_share.SUMMARY_LINES + 1 and lines[-1] == "  and 6 more"


def test_a_plugin_transformation_is_metered_under_its_name():
    # A TransformedBackend (derive_backend with a graph transformation) has no kind of its own: the meter's
    # row, and the summary's line, name it by its name, not by an empty kind ("erf float32 on , torch-eager").
    from fuzzer.plugins import load_plugin

    load_plugin(str(Path(__file__).parent / "plugins" / "motif_faults.py"))
    backend = get_backend("fault-addmm-column-bias")
    case = single_op_case("tanh", [0.5, 1.0, 2.0, 3.0])
    seen = []
    result = check_case(case, [backend], on_reference=seen.append)
    assert list(judged_share.measure(case.graph, seen[0], result, [backend])) == ["tanh|float32|fault-addmm-column-bias"]
