"""The package imports downward only: its import graph, read with ``ast``, has no cycle.

Every ``import`` and ``from ... import`` of every module of ``stsq_learn`` counts,
at module level and inside functions alike (an import hidden in a function is
still a dependency), with relative imports resolved. A package's ``__init__`` is
a node of its own: ``from . import x`` names the module ``x`` where there is one,
else the package. A cycle fails the test, printed as the chain of modules.
"""

import ast
from pathlib import Path

import stsq_learn

PACKAGE = Path(stsq_learn.__file__).parent


def _modules():
    """Dotted name -> (path, whether it is a package's ``__init__``)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _known(name, modules):
    """The module ``name`` names: itself, else its longest prefix that is a module."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph():
    """Module -> the set of package modules it imports."""
    modules = _modules()
    graph = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        here = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = here.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                for alias in node.names:  # a submodule where there is one, else the module
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in modules else base)
            for target in targets:
                known = _known(target, modules)
                if known is not None and known != name:
                    graph[name].add(known)
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _chain(graph, component):
    """One cycle through ``component``, as ``a -> b -> ... -> a`` (breadth-first)."""
    members, start = set(component), component[0]
    paths = {w: [start, w] for w in graph[start] & members}
    frontier = list(paths)
    while start not in paths:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    nxt.append(w)
        frontier = nxt
    return " -> ".join(paths[start])


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert "stsq_learn.engine.base" in graph["stsq_learn.engine.cores"]  # from .base import
    assert "stsq_learn.registry" in graph["stsq_learn"]  # from . import registry
    assert "stsq_learn.encodings.floor" in graph["stsq_learn.encodings.length_scale"]  # in a def
    assert "stsq_learn.tasks" in graph["stsq_learn.engine.base"]  # from ..tasks import get_task


def test_cycles_are_found_and_printed():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert _chain(graph, ["a", "b", "c"]) == "a -> b -> c -> a"


def test_the_package_imports_downward_only():
    graph = import_graph()
    found = cycles(graph)
    lines = [f"{len(c)} modules ({', '.join(c)}), e.g. {_chain(graph, c)}" for c in found]
    assert not found, "import cycles:\n" + "\n".join(lines)
