"""Intersphinx inventories of the projects the documentation names, made offline.

The build reaches no network, so ``conf.py``'s ``intersphinx_mapping`` reads
inventories kept in ``docs/_intersphinx/``. This script writes them from the
packages installed here (Python's standard library, NumPy, scikit-learn,
PyTorch, skorch, dask.distributed): every public name of the modules below,
with the address of its page under the layout each project's documentation
uses (``modules/generated/<name>.html`` for scikit-learn, and so on). Run it
after a change of a listed project's release::

    python docs/_inventories.py

A reference to a name none of them holds is rendered as plain text (see
``conf.py``), never as a link that goes nowhere.
"""

import importlib
import importlib.util
import inspect
import sys
import zlib
from pathlib import Path

OUT = Path(__file__).resolve().parent / "_intersphinx"

# project key -> (project name, documentation address); conf.py reads this.
PROJECTS = {
    "python": ("Python", "https://docs.python.org/3/"),
    "numpy": ("NumPy", "https://numpy.org/doc/stable/"),
    "sklearn": ("scikit-learn", "https://scikit-learn.org/stable/"),
    "torch": ("PyTorch", "https://docs.pytorch.org/docs/stable/"),
    "skorch": ("skorch", "https://skorch.readthedocs.io/en/stable/"),
    "distributed": ("Dask.distributed", "https://distributed.dask.org/en/stable/"),
}


def _public(module):
    """The module's ``__all__``, or, without one, the names it defines itself."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            n
            for n in dir(module)
            if getattr(getattr(module, n), "__module__", module.__name__).startswith(
                module.__name__
            )
        ]
    return [n for n in names if not n.startswith("_") and hasattr(module, n)]


def _kind(obj):
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if callable(obj):
        return "function"
    return None


def _methods(cls, home):
    """Public methods and properties of ``cls`` defined in a module of ``home``."""
    out = []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        owner = next((k for k in cls.__mro__ if name in vars(k)), None)
        if owner is None or not (owner.__module__ or "").startswith(home):
            continue
        member = vars(owner)[name]
        if isinstance(member, property):
            out.append((name, "attribute"))
        elif callable(member) or isinstance(member, (classmethod, staticmethod)):
            out.append((name, "method"))
    return out


def _entries_by_page(modules, page, home, methods=True):
    """Entries of every public class and function of ``modules``, each on ``page(name)``."""
    entries = []
    for modname in modules:
        module = importlib.import_module(modname)
        entries.append((modname, "module", page(modname, None)))
        for name in _public(module):
            obj = getattr(module, name)
            kind = _kind(obj)
            if kind is None or inspect.ismodule(obj):
                continue
            full = f"{modname}.{name}"
            entries.append((full, kind, page(full, kind)))
            if kind == "class" and methods:
                base = page(full, kind).split("#")[0]
                for member, mkind in _methods(obj, home):
                    entries.append((f"{full}.{member}", mkind, f"{base}#{full}.{member}"))
    return entries


def python_entries():
    """The builtins and the standard-library modules the docs may name."""
    import builtins

    entries = []
    stdtypes = {"dict", "list", "tuple", "str", "set", "frozenset", "bytes", "range"}
    for name in [n for n in dir(builtins) if not n.startswith("_")]:
        obj = getattr(builtins, name)
        kind = _kind(obj)
        if kind == "exception":
            entries.append((name, "exception", f"library/exceptions.html#{name}"))
        elif kind == "class" and name in stdtypes:
            entries.append((name, "class", f"library/stdtypes.html#{name}"))
        elif kind is not None:
            entries.append((name, kind, f"library/functions.html#{name}"))
    for const in ("None", "True", "False", "Ellipsis", "NotImplemented"):
        entries.append((const, "data", f"library/constants.html#{const}"))
    modules = [
        "collections", "collections.abc", "concurrent.futures", "contextlib", "dataclasses",
        "functools", "itertools", "json", "logging", "math", "multiprocessing", "numbers",
        "os", "pathlib", "pickle", "random", "threading", "time", "typing", "warnings",
    ]  # fmt: skip
    for modname in modules:
        module = importlib.import_module(modname)
        page = f"library/{modname}.html"
        entries.append((modname, "module", f"{page}#module-{modname}"))
        for name in _public(module):
            obj = getattr(module, name)
            kind = _kind(obj)
            if kind is None or inspect.ismodule(obj):
                continue
            entries.append((f"{modname}.{name}", kind, f"{page}#{modname}.{name}"))
    entries.append(("os.PathLike", "class", "library/os.html#os.PathLike"))
    return entries


def numpy_entries():
    import numpy as np

    entries = [("numpy", "module", "reference/index.html#module-numpy")]
    for name in _public(np):
        obj = getattr(np, name)
        kind = _kind(obj)
        if kind is None or inspect.ismodule(obj):
            continue
        entries.append((f"numpy.{name}", kind, f"reference/generated/numpy.{name}.html#$"))
    for name in ("ndarray", "dtype"):
        for member, mkind in _methods(getattr(np, name), ""):
            full = f"numpy.{name}.{member}"
            entries.append((full, mkind, f"reference/generated/{full}.html#$"))
    random = "reference/random/generator.html"
    entries += [
        ("numpy.random", "module", "reference/random/index.html#module-numpy.random"),
        ("numpy.random.Generator", "class", f"{random}#$"),
        ("numpy.random.default_rng", "function", f"{random}#$"),
        ("numpy.random.RandomState", "class", "reference/random/legacy.html#$"),
    ]
    for member, _ in _methods(np.random.Generator, ""):
        full = f"numpy.random.Generator.{member}"
        entries.append((full, "method", f"reference/random/generated/{full}.html#$"))
    return entries


def sklearn_entries():
    import sklearn
    from sklearn.experimental import (  # noqa: F401  (the Halving searches, documented)
        enable_halving_search_cv,
        enable_iterative_imputer,
    )

    modules = ["sklearn"] + [
        f"sklearn.{name}"
        for name in [*sklearn.__all__, "base", "utils"]
        if importlib.util.find_spec(f"sklearn.{name}") is not None
    ]

    def page(full, kind):
        if kind is None:  # a module: its section of the API reference
            return f"api/{full}.html#module-{full}"
        return f"modules/generated/{full}.html#{full}"

    entries = _entries_by_page(modules, page, "sklearn")
    return [e for e in entries if e[0] != "sklearn" or e[1] != "module"] + [
        ("sklearn", "module", "api/index.html")
    ]


def torch_entries():
    import torch
    import torch.nn
    import torch.optim

    def generated(full, kind):
        return f"generated/{full}.html#{full}"

    entries = [
        ("torch", "module", "torch.html#module-torch"),
        ("torch.nn", "module", "nn.html#module-torch.nn"),
        ("torch.optim", "module", "optim.html#module-torch.optim"),
        ("torch.Tensor", "class", "tensors.html#torch.Tensor"),
        ("torch.device", "class", "tensor_attributes.html#torch.device"),
        ("torch.dtype", "class", "tensor_attributes.html#torch.dtype"),
        ("torch.Generator", "class", "generated/torch.Generator.html#torch.Generator"),
    ]
    for name in _public(torch):
        obj = getattr(torch, name)
        if inspect.isfunction(obj) or inspect.isbuiltin(obj):
            entries.append((f"torch.{name}", "function", generated(f"torch.{name}", None)))
    for modname in ("torch.nn", "torch.optim"):
        module = importlib.import_module(modname)
        for name in _public(module):
            obj = getattr(module, name)
            if inspect.isclass(obj) and not issubclass(obj, BaseException):
                full = f"{modname}.{name}"
                entries.append((full, "class", generated(full, "class")))
                if name in ("Module", "Optimizer"):  # the methods every subclass has
                    base = generated(full, "class").split("#")[0]
                    for member, mkind in _methods(obj, "torch"):
                        entries.append((f"{full}.{member}", mkind, f"{base}#{full}.{member}"))
    return entries


def skorch_entries():
    import skorch

    entries = [("skorch", "module", "index.html")]
    for modname in ("skorch.net", "skorch.regressor", "skorch.classifier", "skorch.callbacks"):
        module = importlib.import_module(modname)
        page = f"{modname.split('.')[1]}.html"
        entries.append((modname, "module", f"{page}#module-{modname}"))
        for name in _public(module):
            obj = getattr(module, name)
            if not inspect.isclass(obj) or not (obj.__module__ or "").startswith(modname):
                continue
            full = f"{modname}.{name}"
            entries.append((full, "class", f"{page}#{full}"))
            for member, mkind in _methods(obj, modname):
                entries.append((f"{full}.{member}", mkind, f"{page}#{full}.{member}"))
            if getattr(skorch, name, None) is obj:  # also reached as skorch.<name>
                entries.append((f"skorch.{name}", "class", f"{page}#{full}"))
    return entries


def distributed_entries():
    entries = [(name, "module", "index.html") for name in ("distributed", "dask.distributed")]
    names = ["Client", "LocalCluster", "Future", "wait", "as_completed", "get_client",
             "get_worker", "worker_client", "fire_and_forget", "progress"]  # fmt: skip
    import distributed

    for name in names:
        obj = getattr(distributed, name)
        kind = _kind(obj)
        for prefix in ("distributed", "dask.distributed"):
            entries.append((f"{prefix}.{name}", kind, f"api.html#distributed.{name}"))
        if kind == "class":
            for member, mkind in _methods(obj, "distributed"):
                full = f"distributed.{name}.{member}"
                entries.append((full, mkind, f"api.html#{full}"))
    return entries


def _version(key):
    if key == "python":
        return f"{sys.version_info.major}.{sys.version_info.minor}"
    from importlib.metadata import version

    return version({"sklearn": "scikit-learn"}.get(key, key))


def inventory(key, entries):
    """The bytes of a Sphinx inventory (version 2) of ``entries`` for project ``key``."""
    project, _ = PROJECTS[key]
    head = (
        "# Sphinx inventory version 2\n"
        f"# Project: {project}\n"
        f"# Version: {_version(key)}\n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    lines = set()
    for name, kind, uri in entries:
        if uri.endswith("#" + name):  # the inventory's shorthand for "#<name>"
            uri = uri[: -len(name)] + "$"
        lines.add(f"{name} py:{kind} 1 {uri} -")
    body = "\n".join(sorted(lines)) + "\n"
    return head.encode() + zlib.compress(body.encode(), 9)


def main():
    OUT.mkdir(exist_ok=True)
    makers = {
        "python": python_entries,
        "numpy": numpy_entries,
        "sklearn": sklearn_entries,
        "torch": torch_entries,
        "skorch": skorch_entries,
        "distributed": distributed_entries,
    }
    for key, make in makers.items():
        entries = make()
        (OUT / f"{key}.inv").write_bytes(inventory(key, entries))
        print(f"{key}: {len(set(entries))} entries")


if __name__ == "__main__":
    main()
