"""A graph and its parameters as a real `torch.nn.Module` tree, for model-level (metamorphic) backends.

`build_module(case, ...)` turns a Case into a `GraphModule`:

* one `OpModule` per node, holding that node's parameters as `nn.Parameter`
  (weights, biases) or registered buffers (batch_norm running statistics, RNN
  initial states h0/c0), whose forward calls the op's torch implementation
  `fn(xs, ps, attrs)` with its own params dict;
* the node modules, in graph order, grouped into nested containers drawn from a
  *nesting seed* (`random.Random(nesting_seed)`): `nn.Sequential`, `Block` (named
  children such as `inner`, `post`, `conv2d`) and `Stack` (an `nn.ModuleList`
  called `layers`), up to MAX_DEPTH levels, so that state_dict keys look like
  `blocks.0.inner.layers.1.conv2d.weight`. The grouping is a pure function of the
  seed and the node count; backends use `case.seed`, which the shrinker keeps.

Values flow through the tree as an environment dict {value name: tensor}: every
container passes it from child to child, every OpModule reads its inputs from it
and adds its output. The graph is a DAG, not a chain, so this is what a module
tree needs to carry; the execution order is the depth-first order of the leaves,
which is the graph's node order.

`build_graph_module(..., flat=True)` gives a `FlatGraphModule` instead: the same graph as one
module without submodules, its parameters registered on it. Backends to which the tree is only
overhead use it: torch.jit.trace builds a ScriptModule for every submodule, most of a trace's
time (bench/module_cost.py: the flat module halves torch-jit-trace's time per graph), and no
bug it looks for lives in the nesting. The tree stays where a bug class needs it: BatchNorm
folding across submodules (seed bug 5), module paths (state_dict keys through save/load,
export, freezing), and torch-module's own subject, running the tree.

Train/eval: the module is put in `.eval()`, and `module.training` changes nothing.
An op's mode is its attribute (`batch_norm`/`dropout` `training=...`): the graph
says which math the model computes and the float64 reference follows the
attribute, so a module must too. Consequently a model-level transformation that
switches dropout on "because it's a module" is a finding (dropout with
training=False must be the identity), exactly seed bug 2.
"""

from __future__ import annotations

import random
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn

from fuzzer.ir import Case, Graph, Node, infer_shapes, param_shapes, split_arrays
from fuzzer.ops import get_op

MAX_DEPTH = 4
CONTAINER_NAMES = ("inner", "body", "stem", "core", "head", "post", "pre", "tail", "trunk", "neck")

Env = dict  # value name -> tensor


def buffer_weights(graph: Graph) -> frozenset[str]:
    """The graph's parameters ("n0.running_mean") that its ops declare as buffers (`OpDef.buffers`)."""
    return frozenset(f"{node.name}.{pname}" for node in graph.nodes for pname in get_op(node.op).buffers)


class OpModule(nn.Module):
    """One graph node: its parameters, and a forward that calls the op's torch implementation."""

    def __init__(self, node: Node, fn: Callable, params: dict[str, torch.Tensor], out_shape: Sequence[int] = ()):
        super().__init__()
        self.node_name = node.name
        self.op = node.op
        self.inputs = tuple(node.inputs)
        self.output = node.name  # the env key it writes (a fold may rename it)
        self.attrs = dict(node.attrs)
        self.out_shape = tuple(out_shape)
        self.fn = fn
        self.param_names: list[str] = []
        for pname, value in params.items():
            self.add_param(pname, value)

    def add_param(self, pname: str, value: torch.Tensor) -> None:
        # State, not weights (the op's `buffers`: running statistics, RNN initial states) are
        # buffers: saved in the state_dict, never trained.
        if pname in get_op(self.op).buffers:
            self.register_buffer(pname, value)
        else:
            self.register_parameter(pname, value if isinstance(value, nn.Parameter) else nn.Parameter(value))
        if pname not in self.param_names:
            self.param_names.append(pname)

    def params(self) -> dict[str, torch.Tensor]:
        return {pname: getattr(self, pname) for pname in self.param_names}

    def forward(self, env: Env) -> Env:
        out = self.fn([env[ref] for ref in self.inputs], self.params(), self.attrs)
        env = dict(env)
        env[self.output] = out
        return env

    def extra_repr(self) -> str:
        return f"{self.op}({', '.join(self.inputs)}) -> {self.output}"


class Block(nn.Module):
    """A custom container with named children, run in registration order."""

    def __init__(self, children: list[tuple[str, nn.Module]]):
        super().__init__()
        for name, child in children:
            self.add_module(name, child)

    def forward(self, env: Env) -> Env:
        for child in self.children():
            env = child(env)
        return env


class Stack(nn.Module):
    """A container keeping its children in an `nn.ModuleList` called `layers`."""

    def __init__(self, children: list[nn.Module]):
        super().__init__()
        self.layers = nn.ModuleList(children)

    def forward(self, env: Env) -> Env:
        for layer in self.layers:
            env = layer(env)
        return env


class GraphModule(nn.Module):
    """The whole graph: forward(*inputs in graph order) -> tuple of outputs."""

    def __init__(self, input_names: Sequence[str], output_names: Sequence[str], blocks: nn.Sequential):
        super().__init__()
        self.input_names = tuple(input_names)
        self.output_names = tuple(output_names)
        self.blocks = blocks

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        env = dict(zip(self.input_names, inputs))
        env = self.blocks(env)
        return tuple(env[name] for name in self.output_names)

    def op_modules(self) -> list[tuple[str, OpModule]]:
        """(qualified name, module) of every node module, depth first = execution order."""
        return [(name, m) for name, m in self.named_modules() if isinstance(m, OpModule)]


class FlatGraphModule(nn.Module):
    """The whole graph as one module without submodules: every node's parameters registered on it
    (`n0_weight`; buffers as OpModule registers them), forward running the nodes in graph order.
    Called like a GraphModule: forward(*inputs in graph order) -> tuple of outputs."""

    def __init__(self, graph: Graph, fns: list[Callable], params: list[dict[str, torch.Tensor]]):
        super().__init__()
        self.input_names = tuple(spec.name for spec in graph.inputs)
        self.output_names = tuple(graph.outputs)
        self.nodes = graph.nodes
        self.fns = fns
        self.attribute_names: list[dict[str, str]] = []  # per node: its parameter name -> this module's attribute
        used: set[str] = set()
        for node, node_params in zip(graph.nodes, params):
            names = {}
            for pname, value in node_params.items():
                names[pname] = _unique(f"{node.name}_{pname}", used)
                if pname in get_op(node.op).buffers:
                    self.register_buffer(names[pname], value)
                else:
                    self.register_parameter(names[pname], nn.Parameter(value))
            self.attribute_names.append(names)

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        env = dict(zip(self.input_names, inputs))
        for node, fn, names in zip(self.nodes, self.fns, self.attribute_names):
            env[node.name] = fn([env[ref] for ref in node.inputs], {p: getattr(self, a) for p, a in names.items()}, node.attrs)
        return tuple(env[name] for name in self.output_names)


# -- nesting ---------------------------------------------------------------------


def _unique(name: str, used: set[str]) -> str:
    candidate, k = name, 1
    while candidate in used:
        candidate, k = f"{name}_{k}", k + 1
    used.add(candidate)
    return candidate


def _container(rng: random.Random, children: list[nn.Module], style: str | None = None) -> nn.Module:
    style = style or rng.choice(("sequential", "block", "stack"))
    if style == "sequential":
        return nn.Sequential(*children)
    if style == "stack":
        return Stack(children)
    used: set[str] = set()
    named = []
    for child in children:
        # A module name holds no "." (a derived op's name does: torch.special.erfcx).
        base = child.op.replace(".", "_") if isinstance(child, OpModule) else rng.choice(CONTAINER_NAMES)
        named.append((_unique(base, used), child))
    return Block(named)


def _group(leaves: list[OpModule], rng: random.Random, depth: int, style: str | None = None) -> nn.Module:
    """A container holding `leaves` in order; its sub-grouping drawn from rng."""
    n = len(leaves)
    parts = rng.randint(1, min(3, n))
    cuts = sorted(rng.sample(range(1, n), parts - 1))
    children: list[nn.Module] = []
    for start, stop in zip([0, *cuts], [*cuts, n]):
        chunk = leaves[start:stop]
        if depth >= MAX_DEPTH:
            children.extend(chunk)
        elif len(chunk) == 1 and rng.random() < 0.5:
            children.append(chunk[0])
        else:
            children.append(_group(chunk, rng, depth + 1))
    return _container(rng, children, style)


def nest(leaves: list[OpModule], nesting_seed: int) -> nn.Sequential:
    """Group the node modules (in order) into nested containers; deterministic for a seed."""
    rng = random.Random(nesting_seed)
    if not leaves:
        return nn.Sequential()
    return _group(list(leaves), rng, 0, style="sequential")


# -- building --------------------------------------------------------------------


def _tensor(array: np.ndarray, dtype: torch.dtype, device: str) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array)).to(device=device, dtype=dtype)


def build_graph_module(
    graph: Graph,
    params: dict[str, dict[str, np.ndarray]] | None,
    dtype: str = "float32",
    device: str = "cpu",
    nesting_seed: int = 0,
    impl_for: Callable[[str], Callable] | None = None,
    flat: bool = False,
) -> GraphModule | FlatGraphModule:
    """A GraphModule for `graph` (`flat`: a FlatGraphModule, and `nesting_seed` is unused).
    `params` {node: {param: array}}; None gives zero-filled parameters (a freshly built model to
    load a state_dict into)."""
    torch_dtype = getattr(torch, dtype)
    impl_for = impl_for or (lambda op_name: get_op(op_name).torch)
    shapes = infer_shapes(graph)
    declared = param_shapes(graph, shapes)
    node_params = []
    for node in graph.nodes:
        tensors = {}
        for full_name, shape in declared.items():
            owner, pname = full_name.split(".", 1)
            if owner != node.name:
                continue
            if params is None:
                tensors[pname] = torch.zeros(shape, dtype=torch_dtype, device=device)
            else:
                tensors[pname] = _tensor(params[node.name][pname], torch_dtype, device)
        node_params.append(tensors)
    fns = [impl_for(node.op) for node in graph.nodes]
    if flat:
        return FlatGraphModule(graph, fns, node_params).eval()
    leaves = [OpModule(node, fn, tensors, shapes[node.name]) for node, fn, tensors in zip(graph.nodes, fns, node_params)]
    module = GraphModule([s.name for s in graph.inputs], graph.outputs, nest(leaves, nesting_seed))
    return module.eval()


def build_module(
    case: Case,
    dtype: str = "float32",
    device: str = "cpu",
    nesting_seed: int | None = None,
    impl_for: Callable[[str], Callable] | None = None,
) -> GraphModule:
    """The case as a nested nn.Module in eval mode; the nesting seed defaults to case.seed."""
    _, params = split_arrays(case)
    seed = case.seed if nesting_seed is None else nesting_seed
    return build_graph_module(case.graph, params, dtype, device, seed, impl_for)


def input_tensors(case: Case, dtype: str = "float32", device: str = "cpu") -> list[torch.Tensor]:
    """The graph inputs, in graph order, as tensors."""
    torch_dtype = getattr(torch, dtype)
    return [_tensor(case.arrays[spec.name], torch_dtype, device) for spec in case.graph.inputs]


def module_outputs(module: nn.Module, inputs) -> list[torch.Tensor]:
    """Run a GraphModule (or anything with the same calling convention: a traced or exported
    copy) on inputs given as a list in graph order or a dict by input name."""
    if isinstance(inputs, dict):
        inputs = [inputs[name] for name in module.input_names]
    out = module(*inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def to_numpy(outputs: list[torch.Tensor]) -> list[np.ndarray]:
    return [out.detach().to("cpu", torch.float64).numpy() for out in outputs]
