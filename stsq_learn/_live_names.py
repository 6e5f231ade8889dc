"""Module attributes read from the registry when asked, so that a later registration is in them.

Packages above the registry whose names depend on the registered tasks
(``stsq_learn.datasets``, ``stsq_learn.experiments``, ``stsq_learn.scoring``)
give :func:`live_names` the function that builds those names; it returns the
module's ``__getattr__`` and ``__dir__`` (PEP 562). This module imports
nothing of the package, so any layer may use it, even while the registry is
still importing. (``stsq_learn.nn`` is below the registry: the registry adds
the task modules to it when it registers them.)
"""

from __future__ import annotations

import sys


def live_names(module_name, build, own=()):
    """The ``__getattr__`` and ``__dir__`` of a module whose extra names ``build()`` gives.

    ``module_name``: the module's ``__name__``; ``build()`` returns a dict of
    name to object, read from the registry at the call; ``own``: the module's
    own public names (``__all__``, where the module does not define it, is
    these and the built ones).
    """

    def __getattr__(name):
        if name == "__all__":
            return sorted({*own, *build()})
        try:
            return build()[name]
        except KeyError:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}") from None

    def __dir__():
        return sorted({*vars(sys.modules[module_name]), *build()})

    return __getattr__, __dir__
