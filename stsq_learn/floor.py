"""The 0.5 path of :mod:`stsq_learn.encodings.floor`, kept so that imports of it keep working."""

import sys

from .encodings import floor

sys.modules[__name__] = floor
