"""Shape variants (issue 28.3): a dynamic-shape compiler runs each graph it compiled at other sizes on
its one compile; the variants are valid, seeded, and reach the sizes such code switches on."""

from pathlib import Path

import pytest

from fuzzer.drawing.generate import CaseGenerator
from fuzzer.drawing.regimes import parse_regime_list
from fuzzer.drawing.shape_variants import THRESHOLD_SIZES, shape_variant
from fuzzer.ir import Graph, Node, TensorSpec, infer_shapes
from fuzzer.ops import float_op_names

PLUGIN = str(Path(__file__).resolve().parent / "plugins" / "dynamic_size_fault.py")


def test_a_variant_renames_one_size_everywhere_so_matching_dims_keep_matching():
    graph = Graph([TensorSpec("a", (3, 4)), TensorSpec("b", (4, 5))], [Node("n0", "matmul", ["a", "b"])], ["n0"])
    variants = [shape_variant(graph, seed) for seed in range(20)]
    assert all(v is not None for v in variants)
    for variant in variants:
        infer_shapes(variant)  # valid: the inner dims still agree
        assert variant.inputs != graph.inputs
        assert [n.op for n in variant.nodes] == ["matmul"]
    assert shape_variant(graph, 7) == shape_variant(graph, 7), "a seed names one variant"


def test_a_graph_whose_sizes_an_attribute_fixes_has_no_variant():
    graph = Graph([TensorSpec("a", (2, 6))], [Node("n0", "reshape", ["a"], {"shape": [3, 4]})], ["n0"])
    assert shape_variant(graph, 0) is None


def test_variants_reach_size_one_sizes_off_powers_of_two_and_past_block_sizes():
    generator = CaseGenerator(float_op_names(), 6, parse_regime_list(""))
    new_sizes = set()
    graphs = with_variants = 0
    for index in range(120):
        graph = generator.case(index).graph
        graphs += 1
        variant = shape_variant(graph, index)
        if variant is None:
            continue
        with_variants += 1
        new_sizes |= {d for spec in variant.inputs for d in spec.shape} - {d for spec in graph.inputs for d in spec.shape}
    assert with_variants >= 0.8 * graphs
    assert 1 in new_sizes
    assert any(size > 2 and size & (size - 1) for size in new_sizes)  # off a power of two
    assert new_sizes & set(THRESHOLD_SIZES)


@pytest.mark.slow
def test_a_campaign_finds_a_fault_that_lives_only_where_one_dynamic_compile_meets_a_new_size(tmp_path):
    """The planted backend is wrong only when its dynamic compile runs at a new size past 17, which
    small-regime graphs never draw. With shape variants a short campaign finds it; without them
    (--compiled-inputs 1: no variant), the same campaign compiles and reuses compiles but finds nothing."""
    from fuzzer.corpus import Corpus
    from fuzzer.running.campaign import CampaignOptions, run_campaign

    planted = "planted-dynamic-stale-size"

    def buckets(compiled_inputs, name):
        # A short shrink (each candidate is a new compile): what is tested here is the finding.
        options = CampaignOptions(backends=["torch-eager:cpu:float32", planted], ops=["tanh", "mul", "add", "sigmoid"],
                                  regimes=["small"], max_cases=6, max_nodes=4, workers=1, plugins=[PLUGIN],
                                  compiled_inputs=compiled_inputs, shrink_time=2, seed=3)
        corpus = Corpus(tmp_path / name)
        progress = run_campaign(corpus, options)
        assert progress.cases_per_structure().get(f"{planted}:cpu:float32", 0) > 1, "the planted compiler must have compiled and run"
        return [b["signature"] for b in corpus.buckets() if planted in b["signature"]]

    assert buckets(1, "without.db") == []
    assert buckets(4, "with.db"), "a shape variant must reach the stale-size fault"
