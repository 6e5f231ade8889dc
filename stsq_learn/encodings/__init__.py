"""Positional encodings: where the vectors p_t of the attention model come from.

- :mod:`.families`: the encoding families (stochastic, fixed, randomized,
  sinusoidal) and their registry ``POSITIONAL_ENCODINGS``;
- :mod:`.draws`, :mod:`.sampling`, :mod:`.keyed`: where their randomness
  comes from (a stream, or each row's key through Philox);
- :mod:`.length_scale`: length-aware attention scales;
- :mod:`.floor`: the isotropic floor, the lowest error ``W = gamma I`` reaches.

The names of :mod:`.families` are importable from here, as in 0.5
(``from stsq_learn.encodings import StochasticEncoding``).
"""

from .families import *  # noqa: F403
from .families import __all__ as __all__
