"""The paper's three claims, encodings, q-sparse averaging and retrieval, as functions.

- :func:`training_dynamics` (convergence): online gradient descent from W = 0
  aligns the positional block of W with the identity.
- :func:`length_generalization` (out of distribution): stochastic positional
  encodings keep their accuracy on longer sequences, fixed ones do not.
- :func:`width_separation` (expressivity): the smallest width reaching a
  target R^2 grows like log T for the transformer and like T d for the FCN.
- :func:`encoding_families` (beyond the paper): the length generalization of
  stochastic, fixed, randomized (a codebook of L positions) and sinusoidal
  encodings, and a sweep of the codebook size L from fixed to stochastic.
- :func:`sparse_averaging` (q-sparse averaging, one query per position): the
  smallest width against N (attention and FCN) and against q, zero-shot
  transfer of a W fitted on sparse token selection, and length
  generalization of stochastic and fixed encodings.
- :func:`sparse_retrieval` (q-sparse token retrieval, several heads): the
  error against the number of heads (the threshold at H = q), the smallest
  width against T at H = q (attention and FCN), and length generalization.
- :func:`single_location` (single-location regression, a token selected by
  its content): projected gradient descent of the erf model beside the
  oracle, linear and softmax-attention baselines.

Each returns a dataclass with ``to_dict()`` (JSON-ready) and ``plot()``
(matplotlib). :func:`reproduce` runs every registered experiment (``EXPERIMENTS``,
read from :mod:`stsq_learn.registry`) at a named size, writes one
PNG per experiment and ``results.json``, and returns a Markdown summary; it
is what ``stsq-learn reproduce`` calls. :func:`plan` estimates a size's
time on this machine from a few timed steps. Each experiment is one record
(its function, presets, summary rows and work) in ``_records/``.
"""

from ._convergence import ConvergenceResult, training_dynamics
from ._encodings import EncodingsResult, encoding_families
from ._length import LengthGeneralizationResult, length_generalization
from ._qsa import SparseAveragingResult, sparse_averaging
from ._reproduce import plan, plan_table, reproduce, summary_table
from ._retrieval import SparseRetrievalResult, sparse_retrieval
from ._separation import SeparationResult, width_separation
from ._single_location import SingleLocationResult, single_location


def __getattr__(name):
    # The registered experiments and their presets, read when asked (see _reproduce).
    if name in ("EXPERIMENTS", "PRESETS"):
        from . import _reproduce

        return getattr(_reproduce, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EXPERIMENTS",
    "PRESETS",
    "ConvergenceResult",
    "EncodingsResult",
    "LengthGeneralizationResult",
    "SeparationResult",
    "SingleLocationResult",
    "SparseAveragingResult",
    "SparseRetrievalResult",
    "encoding_families",
    "length_generalization",
    "plan",
    "plan_table",
    "reproduce",
    "single_location",
    "sparse_averaging",
    "sparse_retrieval",
    "summary_table",
    "training_dynamics",
    "width_separation",
]
