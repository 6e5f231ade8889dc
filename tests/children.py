"""The environment of a child Python process a test starts."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child_env(**extra):
    """This process's environment for a child, with the repository first on its path.

    The child imports ``stsq_learn`` from this checkout and its dependencies
    from wherever the parent finds them: the parent's ``PYTHONPATH`` entries
    (a ``--target`` install, say) are kept after the repository. ``extra``
    sets further variables.
    """
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    path = os.pathsep.join([str(ROOT), *(p for p in kept if Path(p).resolve() != ROOT)])
    return {**os.environ, "PYTHONPATH": path, **extra}
