"""Reproduce the paper's three claims as functions returning plain result objects.

- :func:`training_dynamics` (convergence): online gradient descent from W = 0
  aligns the positional block of W with the identity.
- :func:`length_generalization` (out of distribution): stochastic positional
  encodings keep their accuracy on longer sequences, fixed ones do not.
- :func:`width_separation` (expressivity): the smallest width reaching a
  target R^2 grows like log T for the transformer and like T d for the FCN.

Each returns a dataclass with ``to_dict()`` (JSON-ready) and ``plot()``
(matplotlib). :func:`reproduce` runs all three at a named size, writes one
PNG per experiment and ``results.json``, and returns a Markdown summary; it
is what ``stsq-learn reproduce`` calls.
"""

from ._convergence import ConvergenceResult, training_dynamics
from ._length import LengthGeneralizationResult, length_generalization
from ._reproduce import EXPERIMENTS, PRESETS, reproduce, summary_table
from ._separation import SeparationResult, width_separation

__all__ = [
    "EXPERIMENTS",
    "PRESETS",
    "ConvergenceResult",
    "LengthGeneralizationResult",
    "SeparationResult",
    "length_generalization",
    "reproduce",
    "summary_table",
    "training_dynamics",
    "width_separation",
]
