"""pytest settings for the whole checkout.

``python -m pytest`` also runs the ``Examples`` sections of ``stsq_learn/`` as
doctests (``--doctest-modules`` in pyproject.toml). A module that needs an
optional extra is left out when the extra is not installed, as the tests that
need it are skipped.
"""

from importlib.util import find_spec
from pathlib import Path

collect_ignore = []
if find_spec("dask") is None or find_spec("distributed") is None:
    collect_ignore.append("stsq_learn/distributed.py")

# The 0.5 module paths kept as aliases (each points sys.modules at the module's
# new home) hold no doctests of their own: their modules are collected where they live.
_here = Path(__file__).parent
collect_ignore += [
    str(path.relative_to(_here))
    for path in (_here / "stsq_learn").glob("*.py")
    if "sys.modules[__name__] = " in path.read_text()
]
