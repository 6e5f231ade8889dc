"""The tasks' generators and laws, for ``make_*``-style imports, read from the registry.

Every registered task's ``make_*`` generator, its task class and its other
public functions, under the module name scikit-learn users look for; each
lives in its task's module of :mod:`stsq_learn.tasks`, and
:mod:`stsq_learn.registry` lists them.
"""

from __future__ import annotations

from . import registry
from ._live_names import live_names


def _names():
    return {
        name: obj
        for reg in registry.registrations()
        for name, obj in reg.public().items()
        if name.startswith("make_") or obj is reg.task or obj in reg.exports
    }


__getattr__, __dir__ = live_names(__name__, _names)
