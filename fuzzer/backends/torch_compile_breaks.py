"""torch.compile with graph breaks: fullgraph=False, each `.item()` a break (issue 55).

Users' loops read a tensor as a Python number (`x.addcdiv_(m, d, value=s.item())`) under plain
torch.compile: dynamo stops the graph at `.item()`, runs it in Python, and resumes in a new frame whose
graph takes the number as a constant, guarded (torch 2.13 and 2.15: each new number a recompile of the resumed
frame). pytorch#185382 (addcdiv_ after such a break in a loop, wrong from the third iteration,
torch 2.13) lives there, a path fullgraph=True never takes (torch-compile-capture keeps `.item()` in the
graph instead). This kind runs programs only (a plain graph has nothing that breaks), with dynamo's
capture settings off, as a user's defaults are; its step reads each scalar in the compiled frame itself,
so that the break splits that frame (one code object per graph: see GraphBreak), and a reproducer prints
how many graphs dynamo made.
"""

from __future__ import annotations

from fuzzer.backends.torch_compile import COMPILED, TorchCompile, _own_code_object
from fuzzer.ir import Case, Graph, infer_shapes
from fuzzer.programs.program import computed_scalar, shared_reads, with_scalar
from fuzzer.programs.statements import ELEMENT, FORMS, ITEM, LIST_READ

# Printed by a reproducer after the run: more graphs than one means the program went through a break.
GRAPH_COUNT = "print(f'dynamo graphs: {torch._dynamo.utils.counters[\"stats\"][\"unique_graphs\"]}', file=sys.stderr)"


def _forget_automatic_dynamic() -> None:
    """Forget which numbers and sizes dynamo saw change: it keeps that per code location (torch._dynamo.pgo, torch 2.5
    on), which a fresh compile of the same step shares, so a rerun would make a number symbolic a call sooner (a rerun
    that differs: a nondeterministic verdict). Only dynamic=None compiles read it; older releases keep it per code object."""
    import torch._dynamo

    pgo = getattr(torch._dynamo, "pgo", None)
    if pgo is not None:
        pgo.reset_code_state()


class TorchCompileBreaks(TorchCompile):
    kind = "torch-compile-breaks"
    description = "torch.compile (inductor), fullgraph=False: a program's .item() breaks the graph; programs only"
    fullgraph = False
    # torch.compile's default, automatic dynamic: a number that changed between calls becomes a symbol of the resumed
    # graph instead of a recompile per number (torch 2.13's stale scalar, pytorch#185382's path, needs it: dynamic=False
    # recompiles for every number and computes right).
    dynamic = None
    dynamo_options = {"capture_scalar_outputs": False, "capture_dynamic_output_shape_ops": False}
    runs_programs = True
    # Compiled afresh for each input set (below), so a compiled set reuses nothing: one of them (special values) beside
    # the graph's plain sets, not all eight, so that a mixed campaign reaches more graphs through the break.
    compiled_sets = 1

    def supports_graph(self, graph: Graph) -> bool:
        return bool(graph.steps) and super().supports_graph(graph)

    def _execute(self, graph: Graph, inputs: dict, params: dict):
        # Compiled afresh for every input set, as in a reproducer's process: which graphs a step recompiles depends
        # on the numbers read before it in this run, not on the cases that ran before.
        COMPILED.entries.pop(self.cache_key(graph), None)
        _forget_automatic_dynamic()
        return super()._execute(graph, inputs, params)

    def _traced_impl(self, op: str):
        # Not reading its scalar: the traced frame does (below). A copy of its own for each graph: an op whose output
        # size depends on values breaks inside it, and dynamo then compiles its frame alone, keeping at most
        # recompile_limit variants a code object (see GraphBreak).
        return _own_code_object(self.impl_for(op), f"fuzz_{op}")

    def _traced_function(self, graph: Graph, impls: dict):
        """The step as straight-line code, one line a statement and each `.item()` a line of its own: dynamo resumes
        after a break in straight-line code, but runs a whole frame eagerly where a loop breaks."""
        names = {spec.name: f"v{index}" for index, spec in enumerate(graph.inputs)}
        lines = [f"    {names[spec.name]} = inputs[INPUTS[{index}]]" for index, spec in enumerate(graph.inputs)]
        position = {node.name: index for index, node in enumerate(graph.nodes)}
        reader = {name: position[first] for name, first in shared_reads(graph, infer_shapes(graph)).items()}
        for index, node in enumerate(graph.nodes):
            operands, attrs = [names[name] for name in node.inputs], f"NODES[{index}].attrs"
            if ITEM in node.attrs:  # the break: this graph ends here, and a resumed one takes the number
                scalar, element = operands.pop(), node.attrs.get(ELEMENT)
                if reader[node.name] == index:  # else the number (the list) an earlier statement read, used again
                    read = f"{scalar}.item()" if element is None else f"TOLIST([{scalar}], {{}}, {{}})"
                    lines.append(f"    number{index} = {read}")
                number = f"number{reader[node.name]}" + ("" if element is None else f"[{element}]")
                # its Python arithmetic, if any, in the resumed frame, as a user's loop computes it
                attrs = f"with_scalar({attrs}, computed_scalar({attrs}, {number}, FORMS.__getitem__))"
            names[node.name] = f"v{len(names)}"
            lines.append(f"    {names[node.name]} = IMPLS[{index}]([{', '.join(operands)}], "
                         f"params.get(NODES[{index}].name, {{}}), {attrs})")
        lines.append(f"    return [{', '.join(names[name] for name in graph.outputs)}]")
        forms = {form: self.impl_for(form) for form in FORMS}  # looked up outside: dynamo need not trace the registry
        namespace = {"INPUTS": [spec.name for spec in graph.inputs], "NODES": graph.nodes, "with_scalar": with_scalar,
                     "computed_scalar": computed_scalar, "FORMS": forms, "TOLIST": self.impl_for(LIST_READ),
                     "IMPLS": [impls[node.op] for node in graph.nodes]}
        exec("def run_graph(inputs, params):\n" + "\n".join(lines), namespace)  # names and indices only: no case text
        return namespace["run_graph"]

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        imports, code = super().reproducer_program(case)
        return [*imports, "import sys", "import torch._dynamo.utils"], f"{code}\n{GRAPH_COUNT}"


BACKENDS = [TorchCompileBreaks]
