"""The tasks' generators and laws, for ``make_*``-style imports, read from the registry.

Every registered task's ``make_*`` generator, its task class and its other
public functions, under the module name scikit-learn users look for; each
lives in its task's module of :mod:`stsq_learn.tasks`, and
:mod:`stsq_learn.registry` lists them.
"""

from __future__ import annotations

from . import registry


def _names():
    return {
        name: obj
        for reg in registry.registrations()
        for name, obj in reg.public().items()
        if name.startswith("make_") or obj is reg.task or obj in reg.exports
    }


def __getattr__(name):
    if name == "__all__":
        return sorted(_names())
    try:
        return _names()[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__():
    return sorted([*globals(), *_names()])
