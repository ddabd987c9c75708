"""An op's torch or jax implementation as Python source, for reproducers.

A reproducer must run exactly what the campaign ran, so its op code is not a second copy
written for printing: it is the op declaration's own implementation, read back with
`inspect`. Three forms, from the most readable:

* an implementation made by `torch_function("nn.functional.silu")` / `jax_function(...)`
  (marked with `API_PATH`) becomes a direct call: `F.silu(x)`, `jnp.exp(x)`;
* any other function of ours `(xs, ps, attrs)`, or the plain function `(*inputs, **attrs)` one
  wraps (marked with `WRAPS`: `_jax_softplus`), is run symbolically
  on this node (`specialize`): attribute values and shapes put in, the branches the node does
  not take left out, loops over attributes unrolled, our helpers computed now or inlined, so
  what stays is public calls: `F.conv2d(x, w, None, [1, 1], 'same', [1, 2], 8)`,
  `x.permute(0, 2, 1)`, `lax.conv_general_dilated(x, w, window_strides=[1, 1], ...)`;
* one that cannot be (a loop or a branch on tensor values, a function it passes on as a
  value) comes along as its `def` and is called with literal lists and dicts:
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
import copy
import inspect
import math
import sys
import textwrap
import types
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from fuzzer.errors import OpUnsupported, UserError
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
            if used.startswith("__") and used.endswith("__"):
                continue  # the module's own metadata: a nested class's body reads __name__ and stores __doc__
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
        if isinstance(value, (types.BuiltinFunctionType, type)) and getattr(value, "__module__", None) and not _is_plugin(value):
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


def _is_plugin(value) -> bool:
    """Whether `value` (a class: a custom autograd.Function) is a plugin file's: no script can import
    it, so the file comes along whole (`Source._fall_back`)."""
    return str(getattr(value, "__module__", "")).startswith("fuzzer_plugin_")


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
               shapes: dict[str, tuple[int, ...]] | None = None,
               temporary: Callable[[str], str] = lambda name: name) -> tuple[list[str], str]:
    """(statements, expression): the source that computes the op implementation `impl` (an
    OpDef's, or a plugin's override) on the named inputs and params; what it needs goes into
    `source`. `shapes` gives the script variables' shapes where they are fixed; `temporary(name)`
    names a variable the statements assign."""
    if hasattr(impl, API_PATH):
        keywords = getattr(impl, API_KEYWORDS, {})
        renamed = {keywords.get(k, k): v for k, v in attrs.items()}
        return [], f"{_alias(getattr(impl, API_PATH), source)}({', '.join(inputs + _keywords(renamed))})"
    if hasattr(impl, WRAPS):
        wrapped = getattr(impl, WRAPS)
        written = specialize(wrapped, [_name(i) for i in inputs], {k: _literal_node(v) for k, v in attrs.items()},
                             source, shapes, temporary)
        return written or ([], f"{source.add_function(wrapped)}({', '.join(inputs + _keywords(attrs))})")
    arguments = [ast.List([_name(i) for i in inputs], ast.Load()),
                 ast.Dict([ast.Constant(k) for k in params], [_name(v) for v in params.values()]), _literal_node(attrs)]
    written = specialize(impl, arguments, {}, source, shapes, temporary)
    if written is not None:
        return written
    name = source.add_function(impl)
    param_dict = "{" + ", ".join(f"{key!r}: {value}" for key, value in params.items()) + "}"
    return [], f"{name}([{', '.join(inputs)}], {param_dict}, {literal(attrs)})"


# -- specializing an implementation to one node --------------------------------------------

def specialize(fn: Callable, args: list[ast.expr], keywords: dict[str, ast.expr], source: Source,
               shapes: dict[str, tuple[int, ...]] | None = None,
               temporary: Callable[[str], str] = lambda name: name) -> tuple[list[str], str] | None:
    """(statements, expression) computing `fn(*args, **keywords)` (script expressions) in public
    calls only, or None where `fn` cannot be written so (then its `def` comes along).

    `fn` is run symbolically: attribute values and shapes are known now, so its `if`s on them
    take one branch and the other is left out (and checks that the release has the API, which
    raise OpUnsupported, altogether), its loops over them are unrolled, calls of our
    helpers on known values are computed now (a shape rule gives a shape) and calls on script
    values are inlined, and what stays are the framework calls on the script's tensors,
    `F.conv2d(x, w, None, [1, 1], 'same', [1, 2], 8)`. A local used once is written into its one
    use; others become variables named by `temporary`."""
    if not isinstance(fn, types.FunctionType) or not _is_ours(fn.__module__):
        return None
    specializer = _Specializer(shapes or {}, temporary)
    try:
        result = specializer.call(fn, args, keywords)
    except _NotSpecializable:
        return None
    statements, result = _inline_single_uses(specializer.statements, result)
    script_names = {node.id for value in args + list(keywords.values()) for node in ast.walk(value) if isinstance(node, ast.Name)}
    written = [*(ast.Assign([ast.Name(name, ast.Store())], value) for name, value in statements), result]
    written = [ast.fix_missing_locations(_Alias().visit(node)) for node in written]
    nodes = [node for tree in written for node in ast.walk(tree)]
    if any(isinstance(node, _Object) for node in nodes):
        return None  # a function of ours passed on as a value
    script_names |= specializer.temporaries | {node.arg for node in nodes if isinstance(node, ast.arg)}
    script_names |= {node.id for node in nodes if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    for name in dict.fromkeys(node.id for node in nodes if isinstance(node, ast.Name)):
        if name in script_names:
            continue
        if name in ALIAS_NAMES:
            source.add_import(ALIAS_NAMES[name])
        elif name in specializer.imports:
            source.add_import(specializer.imports[name])
        elif not hasattr(builtins, name):  # the script's names shadow no builtin (program_source.with_readable_names)
            return None
    return [ast.unparse(statement) for statement in written[:-1]], ast.unparse(written[-1])


class _NotSpecializable(Exception):
    pass


class _Object(ast.expr):
    """A function of ours met while specializing: it has no script source, and is inlined where called."""

    _fields = ()

    def __init__(self, value):
        super().__init__()
        self.value = value

    def __deepcopy__(self, memo) -> _Object:
        # A copied tree (a local put in where it is used) names the same function; copy's default,
        # rebuilding the node as `_Object()`, cannot, since an AST node pickles without its arguments.
        return self


# Builtins computed while specializing, on known values only.
SAFE_BUILTINS = {name: getattr(builtins, name) for name in (
    "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "float", "int", "len", "list", "max", "min", "range",
    "reversed", "round", "set", "sorted", "str", "sum", "tuple", "zip")}
_UNKNOWN = object()
_INLINING_DEPTH = 12


def _name(variable: str) -> ast.Name:
    return ast.Name(variable, ast.Load())


def _elements(node: ast.expr) -> list | None:
    """The element nodes of a sequence: a known value's, or a list or tuple display's without
    starred items; None where the elements are not known here."""
    values = _known(node)
    if values is not _UNKNOWN:
        return [_literal_node(value) for value in values]
    if isinstance(node, (ast.List, ast.Tuple)) and not any(isinstance(i, ast.Starred) for i in node.elts):
        return list(node.elts)
    return None


def _literal_node(value) -> ast.expr:
    if not _is_literal(value):
        raise _NotSpecializable(f"{type(value).__name__} is no literal")
    return ast.parse(literal(value), mode="eval").body


def _known(node: ast.expr):
    """The value of `node` where it is computed from literals and safe builtins alone, else _UNKNOWN."""
    if isinstance(node, ast.Constant):
        return node.value
    bound = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {a.arg for n in ast.walk(node) if isinstance(n, ast.Lambda) for a in n.args.args}
    for part in ast.walk(node):
        if isinstance(part, _Object) or (isinstance(part, ast.Name) and part.id not in SAFE_BUILTINS and part.id not in bound):
            return _UNKNOWN
        # A case's attribute values arrive as literals; no dunder attribute of one is ever computed
        # here (the way out of a restricted eval: "".__class__.__mro__...).
        if isinstance(part, ast.Attribute) and part.attr.startswith("__"):
            return _UNKNOWN
    try:
        with warnings.catch_warnings():  # `2 is not None`, an attribute put into an `is` test: true, and no fault of the user's
            warnings.simplefilter("ignore", SyntaxWarning)
            value = eval(compile(ast.fix_missing_locations(ast.Expression(copy.deepcopy(node))), "<known>", "eval"),
                         {"__builtins__": SAFE_BUILTINS})  # noqa: S307 - literals and safe builtins only, checked above
    except Exception:  # noqa: BLE001 - an expression that fails now stays in the script (it fails there too)
        return _UNKNOWN
    return value


def _folded(node: ast.expr) -> ast.expr:
    value = _known(node)
    return _literal_node(value) if value is not _UNKNOWN and _is_literal(value) else node


def _is_simple(node: ast.expr) -> bool:
    """Cheap to repeat: a literal, a variable, a dotted name or a display of such; a local bound
    to one is put in wherever it is used."""
    if isinstance(node, (ast.Name, _Object, ast.Constant)) or _known(node) is not _UNKNOWN:
        return True
    if isinstance(node, ast.Attribute):
        return _is_simple(node.value)
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(_is_simple(item) for item in node.elts)
    if isinstance(node, ast.Dict):
        return all(key is not None and _is_simple(key) and _is_simple(value) for key, value in zip(node.keys, node.values))
    return False


@dataclass
class _Scope:
    function: types.FunctionType
    local: dict[str, ast.expr]

    def free(self) -> dict:
        code = self.function.__code__
        return {name: cell.cell_contents for name, cell in zip(code.co_freevars, self.function.__closure__ or ())}


def _is_release_check(statement: ast.If, scope: _Scope) -> bool:
    """`if not hasattr(jnp.linalg, "vector_norm"): raise OpUnsupported(...)`: a check that the
    framework release has the API, which the campaign's release passed (else the backend gives
    no verdict, so there is no finding). Left out of a specialized call: on an older release the
    call itself fails or differs, and the script prints the versions."""
    if statement.orelse or len(statement.body) != 1 or not isinstance(statement.body[0], ast.Raise):
        return False
    raised = statement.body[0].exc
    raised = raised.func if isinstance(raised, ast.Call) else raised
    return isinstance(raised, ast.Name) and scope.function.__globals__.get(raised.id) is OpUnsupported


class _Specializer:
    """Runs our functions on script expressions: see `specialize`."""

    def __init__(self, shapes: dict[str, tuple[int, ...]], temporary: Callable[[str], str]):
        self.shapes, self.temporary = shapes, temporary
        self.statements: list[tuple[str, ast.expr]] = []
        self.temporaries: set[str] = set()
        self.imports: dict[str, str] = {}  # name -> the import line that binds it
        self.depth = 0

    def call(self, fn: types.FunctionType, args: list[ast.expr], keywords: dict[str, ast.expr]) -> ast.expr:
        if self.depth >= _INLINING_DEPTH:
            raise _NotSpecializable("too deep")
        try:
            function = _function_node(fn)
            bound = inspect.signature(fn).bind(*args, **keywords)
        except (NotWritable, TypeError, ValueError):
            raise _NotSpecializable(fn.__qualname__) from None
        bound.apply_defaults()
        parameters = inspect.signature(fn).parameters
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters.values()):
            raise _NotSpecializable("*args")
        scope = _Scope(fn, {name: value if isinstance(value, ast.AST) else _literal_node(value)
                            for name, value in bound.arguments.items()})
        self.depth += 1
        try:
            result = self.block(function.body, scope)
        finally:
            self.depth -= 1
        return ast.Constant(None) if result is None else result

    # -- statements ------------------------------------------------------------------------

    def block(self, statements: list[ast.stmt], scope: _Scope) -> ast.expr | None:
        """The returned expression, or None where the block ends without a return."""
        for statement in statements:
            result = self.statement(statement, scope)
            if result is not None:
                return result
        return None

    def statement(self, statement: ast.stmt, scope: _Scope) -> ast.expr | None:
        if isinstance(statement, ast.Return):
            return ast.Constant(None) if statement.value is None else self.expr(statement.value, scope)
        if isinstance(statement, ast.Pass):
            return None
        if isinstance(statement, ast.Expr):  # a docstring, or a check of known values
            if not isinstance(statement.value, ast.Constant) and _known(self.expr(statement.value, scope)) is _UNKNOWN:
                raise _NotSpecializable("a statement with an effect")
            return None
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            if isinstance(statement, ast.ImportFrom) and statement.level:
                raise _NotSpecializable("a relative import")
            for alias in statement.names:
                name = alias.asname or alias.name.partition(".")[0]
                self.imports[name] = ast.unparse(type(statement)(**{**statement.__dict__, "names": [alias]}))
                scope.local[name] = _name(name)
            return None
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            self.assign(statement.targets[0], self.expr(statement.value, scope), scope)
            return None
        if isinstance(statement, ast.AnnAssign) and statement.value is not None:
            self.assign(statement.target, self.expr(statement.value, scope), scope)
            return None
        if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
            value = ast.BinOp(ast.Name(statement.target.id, ast.Load()), statement.op, statement.value)
            self.assign(statement.target, self.expr(value, scope), scope)
            return None
        if isinstance(statement, ast.If):
            if _is_release_check(statement, scope):
                return None
            test = _known(self.expr(statement.test, scope))
            if test is _UNKNOWN:
                raise _NotSpecializable("a branch on a script value")
            return self.block(statement.body if test else statement.orelse, scope)
        if isinstance(statement, ast.For) and not statement.orelse:
            items = _elements(self.expr(statement.iter, scope))
            if items is None:
                raise _NotSpecializable("a loop over a script value")
            for item in items:  # unrolled
                self.assign(statement.target, item, scope)
                result = self.block(statement.body, scope)
                if result is not None:
                    return result
            return None
        raise _NotSpecializable(type(statement).__name__)

    def assign(self, target: ast.expr, value: ast.expr, scope: _Scope) -> None:
        if isinstance(target, ast.Name):
            if _is_simple(value):
                scope.local[target.id] = value
                return
            variable, count = self.temporary(target.id), 1
            while variable in self.temporaries:  # a local assigned again (an unrolled loop's)
                count += 1
                variable = self.temporary(f"{target.id}_{count}")
            self.temporaries.add(variable)
            self.statements.append((variable, value))
            scope.local[target.id] = _name(variable)
            return
        if not isinstance(target, (ast.Tuple, ast.List)) or any(isinstance(t, ast.Starred) for t in target.elts):
            raise _NotSpecializable("an assignment to an attribute or item")
        items = _elements(value)
        if items is None:
            self.assign(ast.Name("_unpacked", ast.Store()), value, scope)
            items = [ast.Subscript(scope.local["_unpacked"], ast.Constant(i), ast.Load()) for i in range(len(target.elts))]
        if len(items) != len(target.elts):
            raise _NotSpecializable("unpacking a different number of values")
        for element, item in zip(target.elts, items):
            self.assign(element, item, scope)

    # -- expressions -----------------------------------------------------------------------

    def lookup(self, name: str, scope: _Scope) -> ast.expr:
        if name in scope.local:
            return copy.deepcopy(scope.local[name])
        free = scope.free()
        if name in free:
            return self.object_node(free[name], name)
        if name in scope.function.__globals__:
            return self.object_node(scope.function.__globals__[name], name)
        if hasattr(builtins, name):
            return _name(name)
        raise _NotSpecializable(f"unknown name {name}")

    def object_node(self, value, name: str) -> ast.expr:
        """A value our function uses (a global or a closure's), as a script expression."""
        if isinstance(value, types.ModuleType):
            self.imports[name] = f"import {value.__name__}" if value.__name__ == name else f"import {value.__name__} as {name}"
            return _name(name)
        if isinstance(value, types.FunctionType) and _is_ours(value.__module__):
            return _Object(value)
        if _is_literal(value):
            return _literal_node(value)
        if isinstance(value, dict) and all(_is_literal(key) for key in value):
            return ast.Dict([_literal_node(key) for key in value], [self.object_node(item, name) for item in value.values()])
        module = sys.modules.get(getattr(value, "__module__", None) or "")
        if (callable(value) and module is not None and getattr(module, getattr(value, "__name__", ""), None) is value
                and not _is_plugin(value)):
            home = module.__name__.lstrip("_")  # operator.gt lives in _operator
            self.imports[home.partition(".")[0]] = f"import {home}"
            return ast.parse(f"{home}.{value.__name__}", mode="eval").body
        raise _NotSpecializable(f"{name} is a {type(value).__name__}")

    def expr(self, node: ast.expr, scope: _Scope, bound: frozenset[str] = frozenset()) -> ast.expr:
        """`node` with what is known put in and computed; `bound`: names a comprehension or lambda binds."""
        if isinstance(node, ast.Name):
            return node if node.id in bound else self.lookup(node.id, scope)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp, ast.Lambda)):
            bound = bound | {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            if isinstance(node, ast.Lambda):
                bound |= {a.arg for a in node.args.args}
                return _folded(ast.Lambda(node.args, self.expr(node.body, scope, bound)))
        if isinstance(node, ast.BoolOp):
            return self.bool_op(node, scope, bound)
        if isinstance(node, ast.IfExp):
            test = self.expr(node.test, scope, bound)
            known = _known(test)
            if known is not _UNKNOWN:
                return self.expr(node.body if known else node.orelse, scope, bound)
        if isinstance(node, ast.Call):
            return self.call_expr(node, scope, bound)
        node = self.children(node, scope, bound)
        if isinstance(node, ast.Attribute) and node.attr in ("shape", "ndim") and isinstance(node.value, ast.Name):
            shape = self.shapes.get(node.value.id)  # a script variable's shape, fixed when the script is written
            if shape is not None:
                return _literal_node(tuple(shape) if node.attr == "shape" else len(shape))
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
                and isinstance(node.comparators[0], ast.Dict) and _known(node.left) is not _UNKNOWN:
            keys = [_known(key) for key in node.comparators[0].keys]
            if _UNKNOWN not in keys:
                return ast.Constant((_known(node.left) in keys) == isinstance(node.ops[0], ast.In))
        return _folded(node)

    def children(self, node: ast.AST, scope: _Scope, bound: frozenset[str]) -> ast.AST:
        """A copy of `node` with each child expression specialized."""
        if isinstance(node, (_Object, ast.arguments)):
            return node
        new = copy.copy(node)
        for field, value in ast.iter_fields(node):
            if isinstance(value, ast.expr):
                setattr(new, field, self.expr(value, scope, bound))
            elif isinstance(value, ast.AST):
                setattr(new, field, self.children(value, scope, bound))
            elif isinstance(value, list):
                setattr(new, field, [self.expr(item, scope, bound) if isinstance(item, ast.expr)
                                     else self.children(item, scope, bound) if isinstance(item, ast.AST) else item
                                     for item in value])
        return new

    def bool_op(self, node: ast.BoolOp, scope: _Scope, bound: frozenset[str]) -> ast.expr:
        """`a and b` is b where a is known true, a where known false (so for `or`); unknown ones stay."""
        kept = []
        for index, operand in enumerate(node.values):
            value = self.expr(operand, scope, bound)
            known = _known(value)
            last = index == len(node.values) - 1
            if known is _UNKNOWN or (last and kept):
                kept.append(value)
            elif bool(known) != isinstance(node.op, ast.And) or last:
                return value if not kept else ast.BoolOp(node.op, [*kept, value])
        return kept[0] if len(kept) == 1 else ast.BoolOp(node.op, kept)

    def subscript(self, node: ast.Subscript) -> ast.expr:
        """xs[0] -> the input's variable, ps["weight"] -> the param's, xs[:3] -> a list of them."""
        owner, key = node.value, _known(node.slice) if not isinstance(node.slice, ast.Slice) else _UNKNOWN
        if isinstance(owner, (ast.List, ast.Tuple)) and not any(isinstance(i, ast.Starred) for i in owner.elts):
            if isinstance(node.slice, ast.Slice):
                bounds = [_known(part) if part is not None else None for part in (node.slice.lower, node.slice.upper, node.slice.step)]
                if _UNKNOWN not in bounds:
                    return type(owner)(owner.elts[slice(*bounds)], ast.Load())
            elif isinstance(key, int) and -len(owner.elts) <= key < len(owner.elts):
                return owner.elts[key]
        if isinstance(owner, ast.Dict) and key is not _UNKNOWN:
            keys = [_known(k) if k is not None else _UNKNOWN for k in owner.keys]
            if _UNKNOWN not in keys and key in keys:
                return owner.values[keys.index(key)]
        return _folded(node)

    def call_expr(self, node: ast.Call, scope: _Scope, bound: frozenset[str]) -> ast.expr:
        function = self.expr(node.func, scope, bound)
        args = []
        for arg in node.args:  # f(*[a, b]) reads as f(a, b)
            value = self.expr(arg, scope, bound)
            inner = value.value if isinstance(value, ast.Starred) else None
            known = _known(inner) if inner is not None else _UNKNOWN
            if isinstance(inner, (ast.List, ast.Tuple)):
                args.extend(inner.elts)
            elif isinstance(known, (list, tuple)):
                args.extend(_literal_node(item) for item in known)
            else:
                args.append(value)
        keywords = [ast.keyword(k.arg, self.expr(k.value, scope, bound)) for k in node.keywords]
        plain = not any(isinstance(a, ast.Starred) for a in args) and all(k.arg for k in keywords)
        if isinstance(function, ast.Name) and function.id == "getattr" and "getattr" not in bound and len(args) == 2 \
                and isinstance(_known(args[1]), str) and not keywords:
            return ast.Attribute(args[0], _known(args[1]), ast.Load())  # getattr(F, "conv2d") -> F.conv2d
        if isinstance(function, ast.Attribute) and function.attr == "get" and isinstance(function.value, ast.Dict) \
                and plain and not keywords and len(args) in (1, 2) and _known(args[0]) is not _UNKNOWN:
            keys = [_known(k) if k is not None else _UNKNOWN for k in function.value.keys]
            if _UNKNOWN not in keys:  # ps.get("bias")
                key = _known(args[0])
                return function.value.values[keys.index(key)] if key in keys else (args[1] if len(args) == 2 else ast.Constant(None))
        if isinstance(function, _Object) and plain:
            values = [_known(a) for a in args] + [_known(k.value) for k in keywords]
            if _UNKNOWN not in values:  # a shape rule or attribute helper on known values: its result, where a literal
                try:
                    result = function.value(*values[:len(args)], **{k.arg: v for k, v in zip(keywords, values[len(args):])})
                except Exception:  # noqa: BLE001 - a rule refusing these values: inlined, so the script shows it
                    result = _UNKNOWN
                if result is not _UNKNOWN and _is_literal(result):
                    return _literal_node(result)
            return self.call(function.value, args, {k.arg: k.value for k in keywords})
        if isinstance(function, _Object):
            raise _NotSpecializable("our function called with *args or **kwargs")
        return _folded(ast.Call(function, args, keywords))


def _inline_single_uses(statements: list[tuple[str, ast.expr]], result: ast.expr) -> tuple[list[tuple[str, str]], ast.expr]:
    """Writes each variable used once into its use, from the last one back."""
    kept: list[tuple[str, ast.expr]] = []
    for variable, value in reversed(statements):
        later = [result, *(v for _, v in kept)]
        uses = sum(isinstance(n, ast.Name) and n.id == variable for tree in later for n in ast.walk(tree))
        if uses == 1:
            result, kept = _replace(result, variable, value), [(name, _replace(v, variable, value)) for name, v in kept]
        else:
            kept.insert(0, (variable, value))
    return kept, result


def _replace(tree: ast.expr, variable: str, value: ast.expr) -> ast.expr:
    class Put(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name):
            return copy.deepcopy(value) if node.id == variable else node

    return Put().visit(copy.deepcopy(tree))


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
