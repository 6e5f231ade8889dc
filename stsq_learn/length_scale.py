"""The 0.5 path of :mod:`stsq_learn.encodings.length_scale`, kept for imports of it."""

import sys

from .encodings import length_scale

sys.modules[__name__] = length_scale
