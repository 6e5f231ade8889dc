"""pytest settings for the whole checkout.

``python -m pytest`` also runs the ``Examples`` sections of ``stsq_learn/`` as
doctests (``--doctest-modules`` in pyproject.toml). A module that needs an
optional extra is left out when the extra is not installed, as the tests that
need it are skipped.
"""

from importlib.util import find_spec

collect_ignore = []
if find_spec("dask") is None or find_spec("distributed") is None:
    collect_ignore.append("stsq_learn/distributed.py")
