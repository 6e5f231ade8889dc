"""Count, for each registered task, the package files outside its home that name it in code.

A task's *home* is the folder of its module (``stsq_learn/tasks/NAME/``), or
that module alone while the task is one file. A file *names* the task when
its code (not its docstrings) holds one of the task's names: an import of a
module of its home, an identifier or attribute equal to a public name its
home alone defines (classes, functions, constants), or a string equal to the
task's registry name or to one of those names. Run from the repository root::

    python tools/task_homes.py            # one line per task: the count and the files
    python tools/task_homes.py --max 2    # exit 1 if a task other than selection exceeds 2
"""

from __future__ import annotations

import argparse
import ast
import itertools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "stsq_learn"


def _docstring_nodes(tree):
    """The string constants that are docstrings (of the module, classes and functions)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
        # attribute docstrings: a string expression right after an assignment
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for prev, cur in itertools.pairwise(body):
                if (
                    isinstance(prev, (ast.Assign, ast.AnnAssign))
                    and isinstance(cur, ast.Expr)
                    and isinstance(cur.value, ast.Constant)
                    and isinstance(cur.value.value, str)
                ):
                    out.add(id(cur.value))
    return out


def _module_name(path):
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _home_files(task_class):
    module = sys.modules[task_class.__module__]
    path = Path(module.__file__).resolve()
    if path.name in ("task.py", "__init__.py") and path.parent.parent.name == "tasks":
        return sorted(path.parent.rglob("*.py"))
    return [path]


def _public_names(files):
    names = set()
    for path in files:
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in names if not n.startswith("_") and n not in {"__all__"}}


def _names_in(path, modules, names, task_name):
    """The reasons ``path`` names the task (empty: it does not)."""
    tree = ast.parse(path.read_text())
    docs = _docstring_nodes(tree)
    here = _module_name(path)
    hits = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # resolve a relative import against this module's package
                pkg = here.split(".")
                pkg = pkg[: len(pkg) - node.level + (1 if path.name == "__init__.py" else 0)]
                base = ".".join([*pkg, base] if base else pkg)
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
            hits.update(f"import {t}" for t in targets if t in modules)
            hits.update(f"import {a.name}" for a in node.names if a.name in names)
        elif isinstance(node, ast.Import):
            hits.update(f"import {a.name}" for a in node.names if a.name in modules)
        elif isinstance(node, ast.Name) and node.id in names:
            hits.add(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in names:
            hits.add(node.attr)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docs
            and (node.value == task_name or node.value in names)
        ):
            hits.add(repr(node.value))
    return sorted(hits)


def count():
    """Task name to ``{file: reasons}`` of the package files outside its home naming it."""
    sys.path.insert(0, str(ROOT))
    from stsq_learn import registry

    out = {}
    for reg in registry.registrations():
        home = [p.resolve() for p in _home_files(reg.task)]
        modules = {_module_name(p) for p in home}
        # A name counts when it is the home's alone: protocol names every experiment or
        # task module defines (RECORD, PRESETS, work, ...) name no task.
        elsewhere = _public_names([p for p in PACKAGE.rglob("*.py") if p.resolve() not in home])
        names = _public_names(home) - elsewhere
        found = {}
        for path in sorted(PACKAGE.rglob("*.py")):
            if path.resolve() in home:
                continue
            reasons = _names_in(path, modules, names, reg.task.name)
            if reasons:
                found[str(path.relative_to(ROOT))] = reasons
        out[reg.task.name] = found
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, help="fail when a task (not selection) exceeds it")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the reasons")
    args = parser.parse_args(argv)
    over = []
    for task, found in count().items():
        print(f"{task}: {len(found)} file(s) outside its home name it")
        for path, reasons in found.items():
            print(f"    {path}" + (f": {', '.join(reasons)}" if args.verbose else ""))
        if args.max is not None and task != "selection" and len(found) > args.max:
            over.append(task)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
