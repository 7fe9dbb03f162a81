"""Which deep dives a submission's grading can leave out: the cells the lesson tags
``optional`` that no cell run after them needs.

A learner's core path stands alone (tests/test_core_path.py) and the exercises build on it,
so the grader need not retrain lesson 04's networks or start lesson 05's process demos for
every student. But a student may use a deep dive's function or variable in an answer (04's
``conv_block`` or ``sgd``), so a deep dive is left out only when no cell that runs reads a
name it binds, read the way Python scopes names (:mod:`symtable`: a function's parameters and
locals are its own). The rules, each on the safe side (a cell in doubt runs):

- a cell runs when it is not a deep dive, and a deep dive runs when a cell that runs after it
  reads a name the deep dive binds (at the top level, or ``global`` in a function) and no
  plain statement (an assignment, a ``def``, a ``class``, an import: not one inside an ``if``,
  a loop or a ``try``) of a cell in between binds it again; repeated until no more join;
- a cell that changes an object in place (``model.fc = ...``, ``model[-1] = ...``,
  ``w.requires_grad_()``: PyTorch's in-place methods end in ``_``) counts as binding its name;
- a function reads the module's names when it is called, so what the functions of a cell that
  runs read counts as read by every cell that runs after it;
- a name counts as read where it is read before the cell itself surely bound it (``x = x + 1``
  reads ``x``; a loop's body reads its target after the loop bound it);
- a cell that reaches names in ways no table shows (``globals()``, ``eval``, ``exec``,
  ``vars``, ``locals``) is taken to read every word in its text; IPython's shell and magic
  lines, which expand ``{name}`` and ``$name``, every word of theirs; a cell magic's body is
  read as Python when it is Python (``%%time`` runs it), else word by word; a cell whose code
  cannot be read at all may read, or bind, any name;
- files are no names: a deep dive that writes a file a later cell reads is not seen here. What
  protects the class is the grader's first step, which grades the lesson's own solutions the
  same way and stops if they lose a point (tools/teaching/grade.py).
"""

from __future__ import annotations

import ast
import re
import symtable
from dataclasses import dataclass

from IPython.core.inputtransformer2 import TransformerManager

DYNAMIC = frozenset({"globals", "locals", "vars", "eval", "exec", "get_ipython", "__import__"})
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# statements that bind their names whenever they run (not an if, a loop, a with or a try)
SURE = (ast.Assign, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)


@dataclass(frozen=True)
class Names:
    binds: frozenset[str]  # every name the cell binds
    surely: frozenset[str]  # those it binds by a plain statement, so earlier bindings are dead
    reads: frozenset[str] | None  # names it reads before binding them itself; None: any name
    later: frozenset[str] = frozenset()  # names its functions read, whenever they are called


def _scoped(code: str) -> tuple[set[str], set[str], set[str]]:
    """The names a piece of a cell binds and reads at the top level, scoped as Python does,
    and those its inner scopes (functions, lambdas, comprehensions) read: a function reads
    them when it is called, maybe in a later cell."""
    table = symtable.symtable(code, "<cell>", "exec")
    binds, reads, inside = set(), set(), set()
    for symbol in table.get_symbols():
        if symbol.is_assigned() or symbol.is_imported():
            binds.add(symbol.get_name())
        if symbol.is_referenced():
            reads.add(symbol.get_name())
    inner = list(table.get_children())
    while inner:
        scope = inner.pop()
        inner.extend(scope.get_children())
        for symbol in scope.get_symbols():
            if symbol.is_global():  # a name this scope takes from the cell's module
                if symbol.is_referenced():
                    reads.add(symbol.get_name())
                    inside.add(symbol.get_name())
                if symbol.is_declared_global() and symbol.is_assigned():
                    binds.add(symbol.get_name())
    return binds, reads, inside


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):  # a call's result is new: None
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _changed(tree: ast.AST) -> set[str]:
    """Names whose objects a cell may change in place, which counts as binding them: the
    target of an attribute or item assignment (``model.fc = ...``, ``model[-1] = ...``) and
    what an in-place method is called on (PyTorch's ``_`` suffix: ``w.requires_grad_()``)."""
    changed: set[str] = set()

    def add(target: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                add(element)
        elif isinstance(target, ast.Starred):
            add(target.value)
        elif isinstance(target, (ast.Attribute, ast.Subscript)) and (name := _root(target)):
            changed.add(name)

    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.Delete)):
            for target in node.targets:
                add(target)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            add(node.target)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func.attr
            if method.endswith("_") and not method.startswith("_") and (name := _root(node.func)):
                changed.add(name)
    return changed


def _targets(node: ast.AST) -> set[str]:
    """The names an assignment's target binds (``k, name`` in ``for k, name in ...``)."""
    return {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def _flow(statements: list[ast.stmt], surely: set[str]) -> set[str]:
    """The names ``statements`` read before they are surely bound, in the order they run: a
    loop's or a ``with``'s body reads after its targets are bound; a branch binds nothing for
    sure."""
    surely, reads = set(surely), set()

    def read(node: ast.AST | None, bound: set[str]) -> None:
        if node is not None:
            reads.update(_scoped(ast.unparse(node))[1] - bound)

    for statement in statements:
        if isinstance(statement, (ast.For, ast.AsyncFor)):
            read(statement.iter, surely)
            reads.update(_flow(statement.body, surely | _targets(statement.target)))
            reads.update(_flow(statement.orelse, surely))
        elif isinstance(statement, (ast.If, ast.While)):
            read(statement.test, surely)
            reads.update(_flow(statement.body, surely) | _flow(statement.orelse, surely))
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            inner = set(surely)
            for item in statement.items:
                read(item.context_expr, inner)
                if item.optional_vars is not None:
                    inner |= _targets(item.optional_vars)
            reads.update(_flow(statement.body, inner))
        elif isinstance(statement, ast.Try):
            for block in (statement.body, statement.orelse, statement.finalbody):
                reads.update(_flow(block, surely))
            for handler in statement.handlers:
                read(handler.type, surely)
                reads.update(_flow(handler.body, surely | {handler.name} - {None}))
        else:
            bound, read_here, _ = _scoped(ast.unparse(statement))
            reads.update(read_here - surely)
            if isinstance(statement, SURE) or (
                isinstance(statement, ast.AnnAssign) and statement.value is not None
            ):
                surely |= bound
    return reads


def names(source: str) -> Names | None:
    """What a cell's code binds and reads; None when it cannot be read."""
    try:
        try:
            tree, magic = ast.parse(source), False
        except SyntaxError:  # IPython's syntax (magics, shell lines), or not code at all
            tree, magic = ast.parse(TransformerManager().transform_cell(source)), True
        binds, surely = _changed(tree), set()
        for statement in tree.body:
            bound = _scoped(ast.unparse(statement))[0]
            binds |= bound
            if isinstance(statement, SURE) or (
                isinstance(statement, ast.AnnAssign) and statement.value is not None
            ):
                surely |= bound
        reads = _flow(tree.body, set())
        later = _scoped(ast.unparse(tree))[2]
        if magic:
            reads |= _ipython_reads(source)
    except Exception:  # whatever stops the reading (a syntax error, nesting too deep): it runs
        return None
    if reads & DYNAMIC - {"get_ipython"}:
        reads |= set(WORD.findall(source))
    if later & DYNAMIC:
        later |= set(WORD.findall(source))
    return Names(frozenset(binds), frozenset(surely), frozenset(reads), frozenset(later))


def _ipython_reads(source: str) -> set[str]:
    """What IPython's own lines may read: a shell or magic line expands ``{expr}`` and
    ``$name`` (every word of it counts), and a cell magic's body runs as Python (``%%time``)
    or is text (``%%writefile``): read as Python when it is Python, else word by word."""
    lines = source.lstrip().splitlines()
    reads: set[str] = set()
    if lines and lines[0].startswith("%%"):
        reads |= set(WORD.findall(lines[0]))
        body = "\n".join(lines[1:])
        inner = names(body)
        return reads | (set(WORD.findall(body)) if inner is None else set(inner.reads))
    for line in lines:
        if line.lstrip().startswith(("!", "%")) or re.search(r"=\s*[!%]", line):
            reads |= set(WORD.findall(line))
    return reads


def skippable(sources: list[str], deep_dive: list[bool]) -> set[int]:
    """The indexes of the deep dives (``deep_dive[i]``) that no cell run after them needs;
    ``sources`` holds every cell's code ("" for a markdown cell)."""
    found = [names(s) for s in sources]
    runs = [not d for d in deep_dive]
    joined = True
    while joined:  # a deep dive that joins may define functions that later cells call
        joined = False
        later: frozenset[str] | None = frozenset()  # read by the functions defined so far
        for j, cell in enumerate(found):
            if not runs[j]:
                continue
            reads = (
                None if cell is None or cell.reads is None or later is None else cell.reads | later
            )
            for i in range(j - 1, -1, -1):  # back from j: who last bound what j reads
                before = found[i]
                if before is None or reads is None or before.binds & reads:
                    if not runs[i]:
                        runs[i] = joined = True
                if before is not None and reads is not None:
                    reads = reads - before.surely  # bound for sure by cell i: older ones are dead
                    if not reads:
                        break
            if later is not None:
                later = None if cell is None else later | cell.later
    return {i for i, d in enumerate(deep_dive) if d and not runs[i]}
