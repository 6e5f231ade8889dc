"""The 0.5 path of :mod:`stsq_learn.io.persistence`, kept so that imports of it keep working."""

import sys

from .io import persistence

sys.modules[__name__] = persistence
