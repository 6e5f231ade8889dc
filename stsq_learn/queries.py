"""The 0.5 path of :mod:`stsq_learn.nn.queries`, kept so that imports of it keep working."""

import sys

from .nn import queries

sys.modules[__name__] = queries
