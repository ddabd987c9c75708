"""The import graph of fuzzer/ has no circles.

Every module under fuzzer/ is parsed (never imported) and each `import fuzzer.x` / `from
fuzzer.x import y` becomes an edge; `from fuzzer import x` is an edge to fuzzer.x when x is a
module. A package's `__init__` runs before any of its submodules, so importing fuzzer.a.b is an
edge to fuzzer.a as well, except from inside fuzzer.a: there fuzzer.a's `__init__` has run (or
is running) already, so a module importing its sibling fuzzer.a.c adds no edge to fuzzer.a. Naming
fuzzer.a itself (`from fuzzer.a import X`, which reads its `__init__`'s names) still does.

Two graphs are checked:

* module level (imports that run when the module is imported, including those under `if` or
  `try`): a circle here makes import order matter and half-initialized modules possible. Zero.
* every import, including those inside functions. Lazy imports are a legitimate way to put off
  an import's cost (torch, jax, onnxruntime) or to reach a backend module the registry finds by
  name, but a circle through them still means a lower layer calls back up into a higher one.
  The circles that remain are listed in ALLOWED_LAZY_CIRCLES, each with its reason; a new one
  fails.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "fuzzer"

# Circles through function-level imports that are the design, not a layering mistake:
# (module, module) pairs whose mutual imports are allowed, each with why.
ALLOWED_LAZY_CIRCLES: dict[frozenset, str] = {
    frozenset({"fuzzer.ops", "fuzzer.ops.derived"}): "get_op falls back to the derived ops, read from their table only "
    "when a name is not a hand-written one; the derived ops are built beside the hand-written registry (a derived op "
    "never takes a hand-written op's name)",
    frozenset({"fuzzer.arrays", "fuzzer.ir", "fuzzer.ops", "fuzzer.ops.derived", "fuzzer.ops.derived.ops",
               "fuzzer.ops.derived.conventions", "fuzzer.oracle", "fuzzer.records"}):
    "a derived op's convention (ops/derived/conventions.py) marks operand entries and asks the oracle's own dependence "
    "probe (oracle.rules.depends_on_undefined) which results they reach, when a case is judged; a Numerics hook that "
    "lets the oracle propagate the marks itself would remove it",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(node: ast.AST, current: str, known: set[str], is_package: bool = False) -> set[str]:
    """The fuzzer modules an import statement loads (with their parent packages)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:  # relative: `.` is the current package, each further dot one up
            package = current.split(".")[: len(current.split(".")) - node.level + is_package]
            base = ".".join(package + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        names = [base] + [f"{base}.{alias.name}" for alias in node.names]
    else:
        return set()
    current_parts = current.split(".")
    enclosing = {".".join(current_parts[:i]) for i in range(1, len(current_parts))}
    found = set()
    for name in names:
        parts = name.split(".")
        found.update(".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) not in enclosing)
        found.add(name)
    return {name for name in found if name in known and name != current}


def import_graph(module_level_only: bool) -> dict[str, set[str]]:
    known = set(modules())
    graph = {}
    for name, path in modules().items():
        tree = ast.parse(path.read_text(), filename=str(path))
        edges: set[str] = set()
        pending = list(tree.body)
        while pending:
            node = pending.pop()
            edges |= imported_modules(node, name, known, path.name == "__init__.py")
            if module_level_only and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            pending.extend(ast.iter_child_nodes(node))
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected component with more than one module (Tarjan), shown
    as a path a -> b -> ... -> a found inside the component."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(start: str) -> None:
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return [path_within(graph, component) for component in components]


def path_within(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest circle through the component's first module, by breadth-first search."""
    start = min(component)
    previous = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & component):
                if child == start:
                    path = [node]
                    while previous[path[-1]] is not None:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return sorted(component)


def describe(found: list[list[str]]) -> str:
    return "; ".join(" -> ".join(circle) for circle in found)


def test_the_walker_sees_a_circle_when_there_is_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_walker_reads_every_kind_of_import():
    known = {"fuzzer", "fuzzer.ir", "fuzzer.cli", "fuzzer.backends", "fuzzer.backends.ort", "fuzzer.backends.torch_eager"}
    # (importing module, statement): the modules it loads that its own packages have not loaded already
    statements = {
        ("fuzzer.backends.torch_eager", "import fuzzer.backends.ort"): {"fuzzer.backends.ort"},
        ("fuzzer.backends.torch_eager", "from fuzzer.ir import Case"): {"fuzzer.ir"},
        ("fuzzer.backends.torch_eager", "from fuzzer import ir"): {"fuzzer", "fuzzer.ir"},
        ("fuzzer.backends.torch_eager", "from . import ort"): {"fuzzer.backends", "fuzzer.backends.ort"},
        ("fuzzer.backends.torch_eager", "from fuzzer.backends import get_backend"): {"fuzzer.backends"},
        ("fuzzer.backends.torch_eager", "import numpy"): set(),
        ("fuzzer.cli", "import fuzzer.backends.ort"): {"fuzzer.backends", "fuzzer.backends.ort"},
    }
    for (current, source), expected in statements.items():
        node = ast.parse(source).body[0]
        assert imported_modules(node, current, known) == expected, source


def test_module_level_imports_have_no_circles():
    found = circles(import_graph(module_level_only=True))
    assert not found, f"Import circles at module level: {describe(found)}; move the shared names down a layer."


def test_lazy_imports_close_no_circle_but_the_allowed_ones():
    found = [c for c in circles(import_graph(module_level_only=False)) if frozenset(c) not in ALLOWED_LAZY_CIRCLES]
    assert not found, (f"Import circles through function-level imports: {describe(found)}; move the shared names "
                       "down a layer, or add the circle to ALLOWED_LAZY_CIRCLES with the reason it is the design.")


# -- what the commands import: only the frameworks a case needs, and only where it runs ------------

REPO = PACKAGE.parent
# A fresh interpreter running `fuzz ARGS...` that says at exit whether torch or jax was ever imported in it.
FRAMEWORKS_AT_EXIT = """
import atexit, sys
atexit.register(lambda: print("frameworks imported:", sorted({"torch", "jax"} & set(sys.modules)), file=sys.stderr))
sys.argv = ["fuzz", *sys.argv[1:]]
from fuzzer.cli import main
main()
"""


def test_a_replay_imports_no_framework_in_the_command_and_only_the_cases_in_its_worker(tmp_path):
    import subprocess
    import sys

    from fuzzer.running.replay import REFERENCE_BACKEND, Replayer

    db = tmp_path / "fuzz.db"
    subprocess.run([sys.executable, "-c", FRAMEWORKS_AT_EXIT, "import", "--db", str(db),
                    str(REPO / "corpus" / "known" / "torch-cosh-overflow.json")], check=True, capture_output=True)
    done = subprocess.run([sys.executable, "-c", FRAMEWORKS_AT_EXIT, "replay", "1", "--db", str(db)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "nan-inf" in done.stdout, done.stdout + done.stderr  # torch's cosh overflow reproduces
    assert done.stderr.rstrip().endswith("frameworks imported: []"), done.stderr
    with Replayer(["torch-eager:cpu:float32"], []) as replayer:  # the worker's shared libraries, as Linux maps them
        libraries = Path(f"/proc/{replayer.worker.process.pid}/maps").read_text()
    assert "libtorch" in libraries and "jaxlib" not in libraries
    with Replayer([REFERENCE_BACKEND], []) as replayer:  # export's bound on the float64 reference: numpy alone
        libraries = Path(f"/proc/{replayer.worker.process.pid}/maps").read_text()
    assert "libtorch" not in libraries and "jaxlib" not in libraries
