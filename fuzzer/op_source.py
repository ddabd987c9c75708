"""An op's torch or jax implementation as Python source, for reproducers.

A reproducer must run exactly what the campaign ran, so its op code is not a second copy
written for printing: it is the op declaration's own implementation, read back with
`inspect`. Three forms, from the most readable:

* an implementation made by `torch_function("nn.functional.silu")` / `jax_function(...)`
  (marked with `API_PATH`) becomes a direct call: `F.silu(x)`, `jnp.exp(x)`;
* one that wraps a plain function `(*inputs, **attrs)` (marked with `WRAPS`) brings that
  function's `def` and calls it: `_jax_softplus(x, beta=2.0, threshold=20.0)`;
* a module-level `def name(xs, ps, attrs)` whose body is imports and one `return EXPR` is
  written as EXPR with this node's values put in (`inline_expression`):
  `F.layer_norm(x, [4], n0_weight, None, 1e-05)`, `x.permute(0, 2, 1)`;
* any other such `def` comes along and is called with literal lists and dicts:
  `_torch_rms_norm([x], {"weight": w}, {"eps": 1e-05})`.

A `def` (or a lambda, written as a `def`) brings the module-level names it uses: other
functions of ours (recursively), plain constants (as literals), imported modules and functions
(as import lines) and our error classes (as one-line stand-ins, so the script needs no fuzzer).
A function using anything else (our op registry, an object a plugin built at import) cannot
stand alone: it is imported from the fuzzer package, or a plugin file comes along whole, and
`Source.notes` says why the script needs the fuzzer (`Source._fall_back`). A registry test
writes every op for both frameworks and checks that the source computes the same values as
the implementation, without that fallback.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import math
import sys
import textwrap
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from fuzzer.errors import UserError
from fuzzer.ops import API_KEYWORDS, API_PATH, WRAPS

ALIASES = {"torch.nn.functional.": "F.", "jax.numpy.": "jnp."}
ALIAS_IMPORTS = {"F.": "import torch.nn.functional as F", "jnp.": "import jax.numpy as jnp"}
LITERAL_TYPES = (int, float, str, bool, type(None))
# Our exceptions an implementation may raise; the script gets a stand-in of the same name.
STAND_INS = ("OpUnsupported", "ShapeError")


class NotWritable(UserError):
    """Code that cannot be written as standalone source: a bug in an op's declaration (the
    registry test writes every op), or a plugin's function using a value we cannot write."""

    def __init__(self, why: str):
        super().__init__(f"Cannot write a reproducer: {why}.")


@dataclass
class Source:
    """What a script needs for some op calls: import lines and definitions, each once, in order."""

    imports: list[str] = field(default_factory=list)
    definitions: dict[str, str] = field(default_factory=dict)  # name -> source text
    # Why the script needs the fuzzer package after all (`_fall_back`), for a comment.
    notes: list[str] = field(default_factory=list)
    # Off for the registry test: an op of ours must always be writable.
    fallback: bool = True
    _package_depth: int = 0  # functions of the fuzzer package being written, one inside the other

    def add_import(self, line: str) -> None:
        if line not in self.imports:
            self.imports.append(line)

    def add_function(self, fn: types.FunctionType) -> str:
        """Bring `fn`'s `def` and what it uses; returns the name to call it by. A function that
        cannot stand alone comes from the fuzzer package instead (`_fall_back`)."""
        if not _is_ours(fn.__module__):
            self.add_import(f"from {fn.__module__} import {fn.__name__}")
            return fn.__name__
        in_package = fn.__module__.startswith("fuzzer.")
        if in_package and self._package_depth:
            return self._write_function(fn)  # the outermost function of the package falls back, whole
        saved = (list(self.imports), dict(self.definitions))
        self._package_depth += in_package
        try:
            return self._write_function(fn)
        except NotWritable as why:
            if not self.fallback:
                raise
            self.imports, self.definitions = saved
            return self._fall_back(fn, why)
        finally:
            self._package_depth -= in_package

    def _write_function(self, fn: types.FunctionType) -> str:
        if fn.__closure__:
            return self._add_closure(fn)
        name = function_name(fn)
        if name in self.definitions:
            if self.definitions[name] is not None and self.definitions[name] != _def_text(fn):
                raise NotWritable(f"two functions named {name} (one in {fn.__module__}); rename one")
            return name
        self.definitions[name] = None  # placeholder: a recursive helper refers to itself
        self._add_globals(fn)
        del self.definitions[name]  # re-inserted after its helpers, so definitions come first
        self.definitions[name] = _def_text(fn)
        return name

    def _fall_back(self, fn: types.FunctionType, why: NotWritable) -> str:
        """`fn` from our package (`from fuzzer.ops import get_op`), or, for a plugin's function (its
        module is not importable), the plugin file whole; `notes` says why."""
        reason = str(why).removeprefix("Cannot write a reproducer: ").rstrip(".")
        if fn.__module__.startswith("fuzzer.") and fn.__qualname__ == fn.__name__:
            self.add_import(f"from {fn.__module__} import {fn.__name__}")
            self._note(f"{fn.__module__}.{fn.__name__} cannot stand alone ({reason}), so it is imported from the fuzzer "
                       "package (pip install opdiff-fuzz)")
            return fn.__name__
        module = sys.modules.get(fn.__module__)
        try:
            text = inspect.getsource(module)
        except (OSError, TypeError):
            raise why from None
        file_name = Path(getattr(module, "__file__", "plugin.py")).name
        self.definitions.setdefault(f"<file {fn.__module__}>", f"# {file_name}, whole: its {fn.__qualname__} cannot stand "
                                                              f"alone ({' '.join(reason.splitlines())})\n{text.strip()}")
        self._note(f"the code of {file_name} comes along whole and may import the fuzzer package (pip install opdiff-fuzz)")
        if function_name(fn) != fn.__name__ or fn.__qualname__ != fn.__name__:
            raise why  # a lambda or nested function has no name in the file to call it by
        return fn.__name__

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def _add_closure(self, fn: types.FunctionType) -> str:
        """A function a factory made (`torch_function(path)`'s `run`): written as a maker whose
        parameters are its free variables, called with their values, so several closures of one
        factory become `run_1 = _make_run(...)`, `run_2 = ...` from one definition."""
        maker = f"_{fn.__qualname__.split('.<locals>')[0].strip('_')}_{function_name(fn)}"
        definition = (f"def {maker}({', '.join(fn.__code__.co_freevars)}):\n"
                      f"{textwrap.indent(_def_text(fn), '    ')}\n\n    return {function_name(fn)}")
        if self.definitions.get(maker, definition) != definition:
            raise NotWritable(f"two factories make a function named {fn.__name__}; rename one")
        self._add_globals(fn)
        self.definitions[maker] = definition
        values = ", ".join(self.value_source(cell.cell_contents, name)
                           for cell, name in zip(fn.__closure__, fn.__code__.co_freevars))
        made = f"{maker}({values})"
        for name, text in self.definitions.items():
            if text is not None and text.endswith(f" = {made}"):
                return name
        name = f"{function_name(fn)}_{sum(key.startswith(function_name(fn) + '_') for key in self.definitions) + 1}"
        self.definitions[name] = f"{name} = {made}"
        return name

    def _add_globals(self, fn: types.FunctionType) -> None:
        for used in _global_names(fn.__code__):
            if used in fn.__globals__:  # else a builtin, or an attribute name (x.shape): co_names holds those too
                self._add_global(used, fn.__globals__[used])

    def value_source(self, value, name: str) -> str:
        """Source for a value a function uses (a closure cell or a global called `name`)."""
        if isinstance(value, types.ModuleType):
            self.add_import(f"import {value.__name__}" if value.__name__ == name else f"import {value.__name__} as {name}")
            return name
        if isinstance(value, types.FunctionType):
            return self.add_function(value)
        if _is_literal(value):
            return literal(value)
        if isinstance(value, dict):  # e.g. {"gt": operator.gt}
            return "{" + ", ".join(f"{literal(k)}: {self.value_source(v, name)}" for k, v in value.items()) + "}"
        if isinstance(value, type) and value.__name__ in STAND_INS:
            self.definitions.setdefault(value.__name__, f"class {value.__name__}(Exception):\n"
                                                        "    pass  # raised where this release lacks the op")
            return value.__name__
        if isinstance(value, (types.BuiltinFunctionType, type)) and getattr(value, "__module__", None):
            module = value.__module__.lstrip("_")  # operator.gt lives in _operator
            self.add_import(f"import {module}")
            return f"{module}.{value.__name__}"
        home = sys.modules.get(type(value).__module__)
        if home is not None and not _is_ours(home.__name__) and getattr(home, name, None) is value:
            self.add_import(f"from {home.__name__} import {name}")  # e.g. inductor's `V`
            return name
        raise NotWritable(f"{name!r} (a {type(value).__name__}) is not a module, function, literal or importable object")

    def _add_global(self, name: str, value) -> None:
        written = self.value_source(value, name)
        if written != name:
            if isinstance(value, types.FunctionType):
                raise NotWritable(f"{name} is known under another name ({written}); import it under its own")
            self.definitions.setdefault(name, f"{name} = {written}")

    def text(self) -> str:
        return "\n\n\n".join(self.definitions.values())


def _is_ours(module: str) -> bool:
    """Our op code and plugin files (fuzzer/plugins.py names them fuzzer_plugin_*) are inlined;
    functions of installed libraries are imported."""
    return module == "fuzzer" or module.startswith(("fuzzer.", "fuzzer_plugin_"))


def function_name(fn: types.FunctionType) -> str:
    """`fn`'s name, or for a lambda one made from where it is written (`_lambda_line_22`)."""
    return f"_lambda_line_{fn.__code__.co_firstlineno}" if fn.__name__ == "<lambda>" else fn.__name__


def _function_node(fn: types.FunctionType) -> ast.FunctionDef:
    """`fn`'s definition as a syntax tree; a lambda as the `def` that returns its expression."""
    try:
        lines, _ = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)).strip())
    except (OSError, TypeError, SyntaxError):  # e.g. a lambda on a continuation line of a call
        raise NotWritable(f"the source of {fn.__module__}.{fn.__qualname__} cannot be read alone") from None
    if fn.__name__ != "<lambda>":
        (function,) = tree.body
        if not isinstance(function, ast.FunctionDef):
            raise NotWritable(f"the source of {fn.__module__}.{fn.__qualname__} is not its def")
        return function
    code = fn.__code__
    parameters = code.co_varnames[:code.co_argcount]
    lambdas = [node for node in ast.walk(tree) if isinstance(node, ast.Lambda)
               and tuple(a.arg for a in node.args.args) == parameters and not node.args.vararg and not node.args.kwarg
               and not node.args.defaults]
    if len(lambdas) != 1:
        raise NotWritable(f"{fn.__module__}.{fn.__qualname__} is a lambda that shares its line with another; "
                          "declare it with def so a reproducer can show it")
    newer = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}  # Python 3.12+
    function = ast.FunctionDef(name=function_name(fn), args=lambdas[0].args, body=[ast.Return(lambdas[0].body)],
                               decorator_list=[], returns=None, type_comment=None, **newer)
    return ast.fix_missing_locations(function)


def _def_text(fn: types.FunctionType) -> str:
    if fn.__name__ == "<lambda>":
        return ast.unparse(_function_node(fn))
    return textwrap.dedent(inspect.getsource(fn)).strip()


def _global_names(code: types.CodeType):
    """Names `code` (and the functions and comprehensions nested in it) look up, in first-use order."""
    for name in code.co_names:
        yield name
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _global_names(const)


def _is_literal(value) -> bool:
    if isinstance(value, (tuple, list, frozenset)):
        return all(_is_literal(item) for item in value)
    if isinstance(value, dict):
        return all(_is_literal(k) and _is_literal(v) for k, v in value.items())
    return isinstance(value, LITERAL_TYPES)


def literal(value) -> str:
    """Python source for JSON-like data; non-finite floats as float('inf') (repr would print inf)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, (list, tuple)):
        items = ", ".join(literal(item) for item in value)
        return f"[{items}]" if isinstance(value, list) else f"({items}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _keywords(attrs: dict) -> list[str]:
    return [f"{key}={literal(value)}" for key, value in attrs.items()]


def _alias(path: str, source: Source) -> str:
    for prefix, alias in ALIASES.items():
        if path.startswith(prefix):
            source.add_import(ALIAS_IMPORTS[alias])
            return alias + path[len(prefix):]
    source.add_import(f"import {path.partition('.')[0]}")
    return path


def write_call(impl: Callable, inputs: list[str], params: dict[str, str], attrs: dict, source: Source,
               shapes: list[tuple[int, ...]] | None = None) -> str:
    """The expression that calls the op implementation `impl` (an OpDef's, or a plugin's override)
    on the named inputs and params; what it needs goes into `source`. Attributes become literals,
    and so do shapes computed from them and the inputs' `shapes` where these are given."""
    if hasattr(impl, API_PATH):
        keywords = getattr(impl, API_KEYWORDS, {})
        renamed = {keywords.get(k, k): v for k, v in attrs.items()}
        return f"{_alias(getattr(impl, API_PATH), source)}({', '.join(inputs + _keywords(renamed))})"
    if hasattr(impl, WRAPS):
        name = source.add_function(getattr(impl, WRAPS))
        return f"{name}({', '.join(inputs + _keywords(attrs))})"
    inlined = inline_expression(impl, inputs, params, attrs, source, shapes)
    if inlined is not None:
        return inlined
    name = source.add_function(impl)
    param_dict = "{" + ", ".join(f"{key!r}: {value}" for key, value in params.items()) + "}"
    return f"{name}([{', '.join(inputs)}], {param_dict}, {literal(attrs)})"


def inline_expression(impl: Callable, inputs: list[str], params: dict[str, str], attrs: dict, source: Source,
                      shapes: list[tuple[int, ...]] | None = None) -> str | None:
    """`impl`'s returned expression with this node's inputs, params and attribute values put in
    for `xs[i]`, `ps["k"]`, `ps.get("k")`, `attrs["k"]` and `attrs`, and the inputs' `shapes` for
    `xs[i].shape`; calls of our functions on values known now are computed now (`_Fold`:
    `x.reshape(_infer_flatten(attrs, [tuple(x.shape)]))` -> `x.reshape((2, 12))`). None unless
    `impl` is one of ours whose body is imports and a single return, and whose expression then
    uses no other name than imported modules and builtins."""
    if not isinstance(impl, types.FunctionType) or impl.__closure__ or not _is_ours(impl.__module__):
        return None
    try:
        function = _function_node(impl)
    except (NotWritable, ValueError):
        return None
    body = [statement for statement in function.body
            if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))]  # the docstring
    if (len(function.args.args) != 3 or not body or not isinstance(body[-1], ast.Return) or body[-1].value is None
            or not all(isinstance(statement, (ast.Import, ast.ImportFrom)) for statement in body[:-1])):
        return None
    imported = {}  # name -> the import line that binds it, from the body or the module's globals
    for statement in body[:-1]:
        for alias in statement.names:
            imported[alias.asname or alias.name.partition(".")[0]] = ast.unparse(ast.Module([statement], []))
    try:
        expression = _Substitute([a.arg for a in function.args.args], inputs, params, attrs, shapes).visit(body[-1].value)
    except _NotInlinable:
        return None
    expression = _Fold(impl.__globals__).visit(expression)
    expression = _Alias().visit(expression)
    values = {*inputs, *params.values()}  # the script's variables put in for xs[i] and ps["k"]
    for name in dict.fromkeys(node.id for node in ast.walk(expression) if isinstance(node, ast.Name)):
        if name in values:
            continue
        if name in ALIAS_NAMES:
            source.add_import(ALIAS_NAMES[name])
        elif name in imported:
            source.add_import(imported[name])
        elif isinstance(impl.__globals__.get(name), types.ModuleType):
            module = impl.__globals__[name].__name__
            source.add_import(f"import {module}" if module == name else f"import {module} as {name}")
        elif not (hasattr(builtins, name) and name not in impl.__globals__):
            return None
    return ast.unparse(expression)


# The aliases' names ("F") and the import line that binds each.
ALIAS_NAMES = {alias.rstrip("."): line for alias, line in ALIAS_IMPORTS.items()}


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        owner = _dotted(node.value)
        return owner and f"{owner}.{node.attr}"
    return None


class _Alias(ast.NodeTransformer):
    """torch.nn.functional.layer_norm -> F.layer_norm, jax.numpy.exp -> jnp.exp (ALIASES)."""

    def visit_Attribute(self, node: ast.Attribute):
        path = _dotted(node)
        for prefix, alias in ALIASES.items():
            if path and path.startswith(prefix):
                return ast.parse(alias + path[len(prefix):], mode="eval").body
        return self.generic_visit(node)


class _NotInlinable(Exception):
    pass


class _Substitute(ast.NodeTransformer):
    """Puts a node's inputs, params and attribute values into an implementation's expression."""

    def __init__(self, arguments: list[str], inputs: list[str], params: dict[str, str], attrs: dict,
                 shapes: list[tuple[int, ...]] | None):
        self.xs, self.ps, self.attrs = arguments
        self.inputs, self.params, self.attr_values, self.shapes = inputs, params, attrs, shapes

    def visit_Attribute(self, node: ast.Attribute):
        owner = node.value  # xs[i].shape: the input's shape, known when the script is written
        if (node.attr == "shape" and self.shapes is not None and isinstance(owner, ast.Subscript)
                and isinstance(owner.value, ast.Name) and owner.value.id == self.xs
                and isinstance(owner.slice, ast.Constant) and owner.slice.value in range(len(self.shapes))):
            return ast.parse(literal(tuple(self.shapes[owner.slice.value])), mode="eval").body
        return self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript):
        owner, key = node.value, node.slice
        if isinstance(owner, ast.Name) and isinstance(key, ast.Constant):
            if owner.id == self.xs and isinstance(key.value, int) and 0 <= key.value < len(self.inputs):
                return ast.Name(self.inputs[key.value], ast.Load())
            if owner.id == self.ps and key.value in self.params:
                return ast.Name(self.params[key.value], ast.Load())
            if owner.id == self.attrs and key.value in self.attr_values:
                return ast.parse(literal(self.attr_values[key.value]), mode="eval").body
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call):
        function = node.func
        if (isinstance(function, ast.Attribute) and function.attr == "get" and isinstance(function.value, ast.Name)
                and function.value.id == self.ps and len(node.args) == 1 and isinstance(node.args[0], ast.Constant)):
            name = self.params.get(node.args[0].value)
            return ast.Name(name, ast.Load()) if name else ast.Constant(None)
        node = self.generic_visit(node)
        args = []  # f(*[0, 2, 1]) reads as f(0, 2, 1)
        for arg in node.args:
            args.extend(arg.value.elts if isinstance(arg, ast.Starred) and isinstance(arg.value, (ast.List, ast.Tuple)) else [arg])
        node.args = args
        return node

    def visit_Name(self, node: ast.Name):
        if node.id == self.attrs and _is_literal(self.attr_values):
            return ast.parse(literal(self.attr_values), mode="eval").body
        if node.id in (self.xs, self.ps, self.attrs):
            raise _NotInlinable(node.id)  # used other than as xs[i], ps["k"], ps.get("k"), attrs["k"]
        return node


class _Fold(ast.NodeTransformer):
    """Computes now the calls of our functions (shape rules, attribute helpers) and of `tuple`,
    `list` and `len` whose arguments are literals, when the result is one: the script then shows
    the shape, not the rule."""

    FOLDED_BUILTINS = {"tuple": tuple, "list": list, "len": len}

    def __init__(self, names: dict):
        self.names = names  # the implementation's module globals

    def visit_Call(self, node: ast.Call):
        node = self.generic_visit(node)
        if not isinstance(node.func, ast.Name) or node.keywords:
            return node
        function = self.names.get(node.func.id)
        if not (isinstance(function, types.FunctionType) and _is_ours(function.__module__)):
            function = None if node.func.id in self.names else self.FOLDED_BUILTINS.get(node.func.id)
        if function is None:
            return node
        try:
            values = [ast.literal_eval(arg) for arg in node.args]
        except (ValueError, TypeError):  # an argument is a variable of the script
            return node
        try:
            result = function(*values)
        except Exception:  # noqa: BLE001 - a rule that refuses these values stays a call (it raises in the script too)
            return node
        return ast.parse(literal(result), mode="eval").body if _is_literal(result) else node
