"""Model-level (metamorphic) backends: a graph materialized as a nested nn.Module, transformed
(inference mode, autograd, save/load, export, BatchNorm folding, tracing, memory layout) and
judged against the float64 reference. Clean torch must agree on generated graphs; a
deliberately broken transformation must be caught. Real torch throughout, no mocks."""

import copy
import warnings

import numpy as np
import pytest
import torch

from fuzzer import verdicts
from fuzzer.arrays import materialize
from fuzzer.backends import get_backend
from fuzzer.backends.torch_bnfold import BatchNormFolder, FoldReport, FoldWarning, TorchBnFold, fold_batch_norms
from fuzzer.backends.torch_layout import relayout
from fuzzer.backends.torch_module import TorchSaveLoad
from fuzzer.canaries.layout_layernorm import layer_norm_in_memory_order
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.ir import Graph, Node, TensorSpec, param_shapes
from fuzzer.judging.check import check_case
from fuzzer.running.model import OpModule, build_module, input_tensors, module_outputs, to_numpy

CLEAN_SEEDS = range(40, 80)  # 0-39 since vector tails: a graph torch.jit.trace cannot trace (add.float_int schema), and an alias-analysis INTERNAL ASSERT in jit: to triage (session note)
FAST_KINDS = ["torch-module", "torch-module-grad", "torch-saveload", "torch-bnfold", "torch-layout"]
SLOW_KINDS = ["torch-jit-trace", "torch-export"]


@pytest.fixture(scope="module")
def generated():
    generator = CaseGenerator()
    return [generator.case(seed) for seed in CLEAN_SEEDS]


def _clean_check(kind, cases, min_checked=30):
    backend = get_backend(kind)
    checked = 0
    for case in cases:
        if not backend.supports_graph(case.graph):
            continue
        result = check_case(case, [backend])
        # `inherited`: torch eager itself is wrong there the same way (a torch kernel bug, its bucket).
        assert verdicts.passes(result.verdict), (
            case.seed, case.graph.op_names(), [v.to_dict() for v in result.verdicts], [f.error for f in result.findings])
        checked += 1
    assert checked >= min_checked, f"{kind} declares too much unsupported: only {checked} of {len(cases)} cases ran"


@pytest.mark.parametrize("kind", FAST_KINDS)
def test_clean_torch_agrees_on_generated_graphs(kind, generated):
    _clean_check(kind, generated)


@pytest.mark.slow
@pytest.mark.parametrize("kind", SLOW_KINDS)
def test_clean_torch_agrees_on_generated_graphs_compiled(kind, generated):
    _clean_check(kind, generated)


@pytest.mark.parametrize("kind", FAST_KINDS + SLOW_KINDS)
def test_float64_variant_agrees_on_a_few_graphs(kind, generated):
    _clean_check(f"{kind}:cpu:float64", generated[::4], min_checked=8)


# -- graphs built by hand ------------------------------------------------------------


def conv_bn_graph(activation=None, bn_training=False):
    """x -> conv2d -> [activation] -> batch_norm."""
    nodes = [Node("c", "conv2d", ["x"], {"out_channels": 4, "kernel_size": [3, 3], "stride": [1, 1], "padding": [1, 1],
                                         "dilation": [1, 1], "groups": 1, "bias": True})]
    last = "c"
    if activation:
        nodes.append(Node("a", activation, [last]))
        last = "a"
    nodes.append(Node("bn", "batch_norm", [last], {"training": bn_training, "eps": 1e-5}))
    return Graph([TensorSpec("x", (2, 3, 5, 5))], nodes, ["bn"])


def conv(name, src, out_channels, bias=True, groups=1):
    return Node(name, "conv2d", [src], {"out_channels": out_channels, "kernel_size": [3, 3], "stride": [1, 1],
                                        "padding": [1, 1], "dilation": [1, 1], "groups": groups, "bias": bias})


def bn(name, src, training=False):
    return Node(name, "batch_norm", [src], {"training": training, "eps": 1e-5})


def deep_model_graph():
    """Foldable pairs (conv->bn twice, one grouped without bias; linear->bn) and every kind of
    structure a fold must leave alone: bn after an activation, a conv read twice, a bn in training mode."""
    nodes = [
        conv("c1", "x", 4), bn("b1", "c1"), Node("r1", "relu", ["b1"]),
        conv("c2", "r1", 4, bias=False, groups=2), bn("b2", "c2"), Node("t2", "tanh", ["b2"]),
        conv("c3", "t2", 6), Node("r3", "relu", ["c3"]), bn("b3", "r3"),           # bn after an activation
        conv("c4", "b3", 4), bn("b4", "c4"), Node("s4", "add", ["b4", "c4"]),      # c4 read twice
        conv("c5", "s4", 4), bn("b5", "c5", training=True),                       # training-mode bn
        Node("f", "flatten", ["b5"], {"start_dim": 1, "end_dim": 3}),
        Node("l6", "linear", ["f"], {"out_features": 7, "bias": False}), bn("b6", "l6"),
        Node("o", "sigmoid", ["b6"]),
    ]
    return Graph([TensorSpec("x", (3, 2, 5, 5))], nodes, ["o"])


def transpose_free_layer_norm_graph():
    """An input feeding layer_norm directly (no layout op in the graph at all)."""
    return Graph(
        [TensorSpec("x", (2, 3, 4))],
        [Node("ln", "layer_norm", ["x"], {"normalized_shape": [4], "affine": True, "eps": 1e-5})],
        ["ln"],
    )


def _nesting_depth(qualname):
    return qualname.count(".")


# -- build_module -----------------------------------------------------------------------


def test_build_module_nests_deterministically_and_the_nesting_does_not_change_outputs(generated):
    case = next(c for c in generated if len(c.graph.nodes) >= 6 and len(param_shapes(c.graph)) >= 4)
    keys_by_seed, outputs_by_seed = {}, {}
    for seed in range(6):
        module = build_module(case, nesting_seed=seed)
        assert not module.training
        keys_by_seed[seed] = tuple(module.state_dict())
        assert keys_by_seed[seed] == tuple(build_module(case, nesting_seed=seed).state_dict())  # deterministic
        with torch.inference_mode():
            outputs_by_seed[seed] = to_numpy(module_outputs(module, input_tensors(case)))
    assert len(set(keys_by_seed.values())) >= 4, "different nesting seeds give different key structures"
    assert max(_nesting_depth(k) for keys in keys_by_seed.values() for k in keys) >= 4  # blocks.0.inner.1.x.weight
    for outputs in outputs_by_seed.values():
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(outputs, outputs_by_seed[0]))
    eager = get_backend("torch-eager:cpu:float32").run(case)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(outputs_by_seed[0], eager))


def test_build_module_state_is_parameters_and_buffers():
    graph = Graph(
        [TensorSpec("x", (4, 3, 5))],
        [Node("g", "lstm", ["x"], {"hidden_size": 3, "num_layers": 2, "batch_first": False, "initial_state": True, "bias": True}),
         Node("b", "batch_norm", ["g"], {"training": False, "eps": 1e-5})],
        ["b"],
    )
    case = materialize(graph, 3)
    module = build_module(case, nesting_seed=1)
    buffers = {name.rsplit(".", 1)[-1] for name, _ in module.named_buffers()}
    parameters = {name.rsplit(".", 1)[-1] for name, _ in module.named_parameters()}
    assert buffers == {"h0", "c0", "running_mean", "running_var"}
    assert {"weight_ih_l1", "bias_hh_l0", "weight", "bias"} <= parameters and not parameters & buffers
    leaves = [m for m in module.modules() if isinstance(m, OpModule)]
    assert [m.op for m in leaves] == ["lstm", "batch_norm"]
    assert all(isinstance(p, torch.nn.Parameter) for p in module.parameters())


def test_the_flat_module_has_no_submodules_and_computes_what_the_nested_one_does(generated):
    from fuzzer.ir import split_arrays
    from fuzzer.running.model import FlatGraphModule, build_graph_module

    checked = 0
    for case in generated[:12]:
        _, params = split_arrays(case)
        flat = build_graph_module(case.graph, params, flat=True)
        assert isinstance(flat, FlatGraphModule) and not flat.training and not list(flat.children())
        nested = build_module(case)
        assert sorted(t.shape for t in flat.state_dict().values()) == sorted(t.shape for t in nested.state_dict().values())
        assert {n.rsplit(".", 1)[-1] for n, _ in nested.named_buffers()} == {n.split("_", 1)[1] for n, _ in flat.named_buffers()}
        with torch.inference_mode():
            outputs = to_numpy(module_outputs(flat, input_tensors(case)))
            assert all(np.array_equal(a, b, equal_nan=True)
                       for a, b in zip(outputs, to_numpy(module_outputs(nested, input_tensors(case)))))
        checked += bool(params)
    assert checked >= 4  # graphs with weights among them


# -- broken transformations are caught ----------------------------------------------------


def dropout_always_training(xs, ps, attrs):
    return torch.nn.functional.dropout(xs[0], p=attrs["p"], training=True)


def test_dropout_active_in_eval_is_caught_at_model_level():
    graph = Graph([TensorSpec("x", (4, 16))],
                  [Node("l", "linear", ["x"], {"out_features": 8, "bias": True}),
                   Node("d", "dropout", ["l"], {"p": 0.5, "training": False})], ["d"])
    case = materialize(graph, 0)
    assert check_case(case, [get_backend("torch-module")]).verdict == verdicts.AGREE
    broken = get_backend("torch-module").derive("module-dropout-on", {"dropout": dropout_always_training})
    result = check_case(case, [broken])
    assert result.verdict in (verdicts.NONDETERMINISTIC, verdicts.MISMATCH)
    assert result.findings[0].signature.split(" | ")[1] == "module-dropout-on"


class DroppingLoader(TorchSaveLoad):
    """A loader that loses one buffer (a running_var) and loads non-strictly."""

    kind = "torch-saveload-dropping"

    def load(self, module, state):
        dropped = next(key for key in state if key.endswith("running_var"))
        del state[dropped]
        module.load_state_dict(state, strict=False)


class StrictDroppingLoader(TorchSaveLoad):
    kind = "torch-saveload-dropping-strict"

    def load(self, module, state):
        del state[next(key for key in state if key.endswith("running_var"))]
        module.load_state_dict(state, strict=True)


def test_a_loader_that_drops_a_buffer_is_caught():
    case = materialize(conv_bn_graph(), 5)
    assert check_case(case, [get_backend("torch-saveload")]).verdict == verdicts.AGREE
    result = check_case(case, [DroppingLoader()])
    assert result.verdict == verdicts.MISMATCH
    assert result.findings[0].culprit == "batch_norm"
    # The real (strict) load refuses the incomplete state dict: a crash naming the missing key.
    strict = check_case(case, [StrictDroppingLoader()])
    assert strict.verdict == verdicts.CRASH and "running_var" in strict.findings[0].error


class ThroughActivationFolder(BatchNormFolder):
    """The nested-submodule fold bug: pairs each eval batch_norm with the nearest conv2d before
    it in module order, walking through whatever sits in between (an activation, a submodule
    boundary), folds into it, and turns the batch_norm into a pass-through."""

    def fold(self, module):
        module = copy.deepcopy(module)
        last_conv = None
        for _, leaf in module.op_modules():
            if leaf.op == "conv2d":
                last_conv = leaf
            elif leaf.op == "batch_norm" and last_conv is not None and not leaf.attrs["training"] \
                    and last_conv.weight.shape[0] == leaf.running_mean.shape[0]:
                self.fold_into(last_conv, leaf)
                leaf.fn, leaf.param_names = (lambda xs, ps, attrs: xs[0]), []
                last_conv = None
        return module, FoldReport()


class TopLevelOnlyFolder(BatchNormFolder):
    """Ignores nesting: treats each top-level child as one layer and folds a batch_norm into the
    last conv2d of the preceding child when that child contains one (whatever follows it there)."""

    def fold(self, module):
        module = copy.deepcopy(module)
        previous_conv = None
        for child in module.blocks.children():
            leaves = [child] if isinstance(child, OpModule) else [m for m in child.modules() if isinstance(m, OpModule)]
            first = leaves[0] if leaves else None
            if first is not None and first.op == "batch_norm" and previous_conv is not None and not first.attrs["training"]:
                self.fold_into(previous_conv, first)
                first.fn, first.param_names = (lambda xs, ps, attrs: xs[0]), []
            convs = [leaf for leaf in leaves if leaf.op == "conv2d"]
            previous_conv = convs[-1] if convs else None
        return module, FoldReport()


def _fold_backend(folder, name):
    backend = TorchBnFold(name=name)
    backend.folder = folder
    return backend


def test_fold_that_walks_through_an_activation_is_caught():
    case = materialize(conv_bn_graph(activation="relu"), 2)
    assert check_case(case, [get_backend("torch-bnfold")]).verdict == verdicts.AGREE
    result = check_case(case, [_fold_backend(ThroughActivationFolder, "bnfold-through-activation")])
    assert result.verdict == verdicts.MISMATCH
    assert result.findings[0].signature.startswith("mismatch | bnfold-through-activation | ")


def test_fold_that_ignores_nesting_is_caught():
    graph = conv_bn_graph(activation="tanh")
    # A nesting where the conv and its activation share the first top-level child and the bn opens the next.
    seed = next(s for s in range(200) if _split_after_activation(graph, s))
    case = materialize(graph, seed)
    assert check_case(case, [get_backend("torch-bnfold")]).verdict == verdicts.AGREE
    result = check_case(case, [_fold_backend(TopLevelOnlyFolder, "bnfold-top-level")])
    assert result.verdict == verdicts.MISMATCH


def _split_after_activation(graph, seed):
    module = build_module(materialize(graph, seed), nesting_seed=seed)
    tops = list(module.blocks.children())
    if len(tops) < 2 or isinstance(tops[0], OpModule):
        return False
    first_ops = [m.op for m in tops[0].modules() if isinstance(m, OpModule)]
    second = [m for m in tops[1].modules() if isinstance(m, OpModule)] if not isinstance(tops[1], OpModule) else [tops[1]]
    return first_ops == ["conv2d", "tanh"] and second[0].op == "batch_norm"


def _pair_split_across_containers(graph, seed):
    module = build_module(materialize(graph, seed), nesting_seed=seed)
    names = {leaf.node_name: qualname for qualname, leaf in module.op_modules()}
    deep = max(_nesting_depth(q) for q in names.values()) >= 4
    split = names["c1"].rpartition(".")[0] != names["b1"].rpartition(".")[0]
    return deep and split


def test_correct_fold_on_a_deeply_nested_model_folds_every_direct_pair_and_agrees():
    graph = deep_model_graph()
    seed = next(s for s in range(200) if _pair_split_across_containers(graph, s))
    case = materialize(graph, seed)
    module = build_module(case)
    with pytest.warns(FoldWarning) as caught:
        folded, report = fold_batch_norms(module)
    assert sorted(report.folded) == [("c1", "b1"), ("c2", "b2"), ("l6", "b6")]
    assert sorted((p, b) for p, b, _ in report.skipped) == [("c4", "b4"), ("c5", "b5")]
    assert report.not_applicable == [("b3", "reads relu, not conv2d/linear")]
    assert len(caught) == 2 and all("unfolded" in str(w.message) for w in caught)
    remaining = [leaf.node_name for _, leaf in folded.op_modules() if leaf.op == "batch_norm"]
    assert remaining == ["b3", "b4", "b5"]
    assert len([leaf for _, leaf in module.op_modules() if leaf.op == "batch_norm"]) == 6  # the input is untouched
    with torch.inference_mode():
        expected = to_numpy(module_outputs(module, input_tensors(case)))
        got = to_numpy(module_outputs(folded, input_tensors(case)))
    assert all(np.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(expected, got))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the backend records fold warnings instead of printing them
        backend = get_backend("torch-bnfold")
        assert check_case(case, [backend]).verdict == verdicts.AGREE
    assert backend.fold_stats["folded"] == 3 and backend.fold_stats["skipped"] == 2
    # The same model with the bug from the nested-submodule issue is caught.
    assert check_case(case, [_fold_backend(ThroughActivationFolder, "bnfold-buggy")]).verdict == verdicts.MISMATCH


def test_linear_fold_refuses_a_batch_norm_over_a_non_feature_dim():
    # (N, L, F) with L == F: torch's fuse_linear_bn_eval accepts it (sizes match) but would be wrong.
    graph = Graph([TensorSpec("x", (2, 5, 3))],
                  [Node("l", "linear", ["x"], {"out_features": 5, "bias": True}), bn("b", "l")], ["b"])
    case = materialize(graph, 0)
    with pytest.warns(FoldWarning, match="not the feature dim"):
        _, report = fold_batch_norms(build_module(case))
    assert report.folded == []
    assert check_case(case, [get_backend("torch-bnfold")]).verdict == verdicts.AGREE


def test_layer_norm_wrong_for_non_contiguous_input_is_caught_by_the_layout_backend():
    case = materialize(transpose_free_layer_norm_graph(), 1)
    # Contiguous inputs hide the bug: torch-eager with the bad kernel agrees ...
    hidden = get_backend("torch-eager:cpu:float32").derive("eager-ln-memory-order", {"layer_norm": layer_norm_in_memory_order})
    assert check_case(case, [hidden]).verdict == verdicts.AGREE
    # ... the layout backend feeds the same values in another memory layout and exposes it.
    assert check_case(case, [get_backend("torch-layout")]).verdict == verdicts.AGREE
    broken = get_backend("torch-layout").derive("layout-ln-memory-order", {"layer_norm": layer_norm_in_memory_order})
    result = check_case(case, [broken])
    assert result.verdict == verdicts.MISMATCH
    assert result.findings[0].signature == "mismatch | layout-ln-memory-order | layer_norm"


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 1, 1, 5), (3, 4), (4, 1), (5,), (1,), (1, 1, 6)])
def test_relayout_keeps_values_and_changes_memory_layout(shape):
    x = torch.arange(float(np.prod(shape))).reshape(shape)
    y = relayout(x)
    assert torch.equal(x, y)
    if x.numel() > 1:
        assert y.stride() != x.stride()


@pytest.mark.parametrize("kind", ["torch-saveload", "torch-bnfold", "torch-export"])
def test_prepared_gives_the_program_the_backend_runs(kind):
    case = materialize(deep_model_graph(), 7)
    backend = get_backend(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FoldWarning)
        program, args = backend.prepared(case)
    with torch.no_grad():
        outputs = to_numpy(list(program(*args)))
    assert all(np.array_equal(a, b) for a, b in zip(outputs, backend.run(case)))


def test_layout_keeps_rnn_parameters_contiguous_only_on_cuda():
    # cuDNN refuses a non-contiguous hx and fails on non-contiguous RNN weights; the CPU kernels take both.
    from fuzzer.backends.torch_layout import TorchLayout

    assert not TorchLayout("cpu")._keeps_params_contiguous("gru")
    assert TorchLayout("cuda")._keeps_params_contiguous("lstm")
    assert not TorchLayout("cuda")._keeps_params_contiguous("conv2d")


def test_module_gradients_of_an_rnn_are_not_asked_of_cudnn():
    """cuDNN runs an RNN's backward in training mode only; torch-module-grad runs eval modules."""
    from fuzzer.ir import Graph, Node, TensorSpec

    rnn = Graph([TensorSpec("x", (2, 1, 3))], [Node("n0", "gru", ["x"], {"hidden_size": 2, "num_layers": 1, "bias": True,
                                                                          "batch_first": False, "initial_state": False})], ["n0"])
    assert not get_backend("torch-module-grad:cuda:float32").supports_graph(rnn)
    assert get_backend("torch-module-grad:cpu:float32").supports_graph(rnn)


def test_an_op_on_cudnns_rnn_kernels_is_declared_once_and_every_torch_backend_asks_that(monkeypatch):
    """The op's `cudnn_rnn` alone says which ops run on cuDNN's RNN kernels: on CUDA torch-layout keeps
    their parameters contiguous, torch-module-grad leaves them out, and torch-eager's precision
    policy caps the error it explains on a graph with one."""
    from dataclasses import replace

    from fuzzer.backends.torch_eager import TorchEager
    from fuzzer.backends.torch_layout import TorchLayout
    from fuzzer.backends.torch_module import TorchModuleGrad
    from fuzzer.ops import registry

    def on_cudnn_rnn(op: str, device: str = "cuda") -> tuple[bool, bool, bool]:
        graph = Graph([TensorSpec("x", (2, 3))], [Node("n0", op, ["x"], {})], ["n0"])
        return (TorchLayout(device)._keeps_params_contiguous(op), op in TorchModuleGrad(device).unsupported_ops,
                TorchEager(device).precision_policy_limit(graph) < float("inf"))

    assert {name for name, op in registry().items() if op.cudnn_rnn} == {"gru", "lstm"}
    assert on_cudnn_rnn("gru") == on_cudnn_rnn("lstm") == (True, True, True)
    assert on_cudnn_rnn("gru", "cpu") == on_cudnn_rnn("tanh") == (False, False, False)
    monkeypatch.setitem(registry(), "tanh", replace(registry()["tanh"], cudnn_rnn=True))  # declared: every backend follows
    assert on_cudnn_rnn("tanh") == (True, True, True)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", FAST_KINDS + SLOW_KINDS)
def test_clean_torch_agrees_on_cuda(kind, generated):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    backend = get_backend(f"{kind}:cuda:float32")
    for case in generated[:20]:
        if not backend.supports_graph(case.graph):  # as a campaign does (an RNN's backward in eval mode on cuDNN)
            continue
        verdict = check_case(case, [backend]).verdict
        assert verdict in (verdicts.AGREE, verdicts.INVALID, verdicts.PRECISION_POLICY), (kind, case.seed)


def test_jit_trace_reuses_one_trace_per_structure_with_the_same_outputs(generated):
    """A structure is traced once; its later cases load their weights into that trace and get
    exactly what a trace of their own gives (the reproducer traces each case itself)."""
    from fuzzer.backends.torch_module import TRACED

    backend = get_backend("torch-jit-trace")
    reused = 0
    for case in generated:
        if not backend.supports_graph(case.graph):
            continue
        backend.run(case)  # traced here, or already by an earlier test
        other_values = materialize(case.graph, case.seed + 1)
        hits = TRACED.hits
        outputs = backend.run(other_values)
        reused += TRACED.hits - hits
        program, args = backend.prepared(other_values)
        with torch.no_grad():
            own_trace = to_numpy(list(program(*args)))
        for got, want in zip(outputs, own_trace):
            np.testing.assert_array_equal(got, want, err_msg=str(case.graph.op_names()))
    assert reused >= 25, f"only {reused} cases reused their structure's trace"


def relu_of_the_sign_of_the_sum(xs, ps, attrs):
    """relu, or -relu(-x) where the input sums below zero: a Python branch on the data, which a trace bakes in."""
    x = xs[0]
    return torch.relu(x) if bool(x.sum() > 0) else -torch.relu(-x)


def test_jit_trace_of_a_value_dependent_op_is_not_reused():
    """A trace that turned a tensor into a Python value serves only the values it was traced on:
    each case is traced again (reusing the first trace would give relu where -relu(-x) is right)."""
    graph = Graph([TensorSpec("x", (3, 4))], [Node("r", "relu", ["x"], {})], ["r"])
    backend = get_backend("torch-jit-trace").derive("trace-branching-relu", {"relu": relu_of_the_sign_of_the_sum})
    positive, negative = materialize(graph, 0), materialize(graph, 0)
    positive.arrays["x"] = np.abs(positive.arrays["x"]) + 0.5
    negative.arrays["x"] = -np.abs(negative.arrays["x"]) - 0.5
    np.testing.assert_array_equal(backend.run(positive)[0], np.maximum(positive.arrays["x"].astype(np.float32), 0))
    np.testing.assert_array_equal(backend.run(negative)[0], negative.arrays["x"].astype(np.float32))
