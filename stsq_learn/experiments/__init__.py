"""The paper's three claims, encodings, q-sparse averaging and retrieval, as functions.

- :func:`training_dynamics` (convergence): online gradient descent from W = 0
  aligns the positional block of W with the identity, with every block of W
  at the same step (the paper's algorithm) and with the token rows
  preconditioned (ours), side by side.
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

Each takes its settings, one typed object (``ConvergenceSettings`` and so on,
subclasses of :class:`Settings`; the presets of :data:`PRESETS` are
instances), and keyword changes to them, and returns a dataclass with
``to_dict()`` (JSON-ready) and ``plot()`` (matplotlib). :func:`reproduce` runs
every registered experiment (``EXPERIMENTS``, read from
:mod:`stsq_learn.registry`) at a named size, writes one PNG per experiment and
``results.json``, and returns a Markdown summary; it is what ``stsq-learn
reproduce`` calls. :func:`plan` estimates a size's time on this machine from a
few timed steps. An experiment whose record has headline numbers runs over
several seeds (on every core), and its numbers' bands (min, median, max) go to
``results.json`` and the summary; :func:`check_reference` compares a run with
the reference numbers the package ships per size
(``references/<preset>.json``), and :func:`write_reference` writes such a file
from a run. Each experiment is one record (its function, presets, summary
rows, work, and optionally its headline numbers and the provenance of its
settings) in ``_records/`` or in its task's home; :class:`Experiment` (the record) and
:class:`Work` are public, so that an experiment of one's own, registered with
its task (``stsq_learn.registry.register(..., experiments=(record,))``), runs
under ``reproduce`` as the built-in ones do.
"""

from .._live_names import live_names
from ._check import ReferenceCheck as ReferenceCheck
from ._check import check_reference as check_reference
from ._check import load_reference as load_reference
from ._check import write_reference as write_reference
from ._convergence import ConvergenceResult as ConvergenceResult
from ._convergence import ConvergenceRun as ConvergenceRun
from ._convergence import training_dynamics as training_dynamics
from ._encodings import EncodingsResult as EncodingsResult
from ._encodings import encoding_families as encoding_families
from ._length import LengthGeneralizationResult as LengthGeneralizationResult
from ._length import length_generalization as length_generalization
from ._record import SIZES as SIZES
from ._record import Experiment as Experiment
from ._record import Work as Work
from ._reproduce import ReproduceResults as ReproduceResults
from ._reproduce import plan as plan
from ._reproduce import plan_table as plan_table
from ._reproduce import reproduce as reproduce
from ._reproduce import summary_table as summary_table
from ._separation import CurveSettings as CurveSettings
from ._separation import SeparationCurve as SeparationCurve
from ._separation import SeparationResult as SeparationResult
from ._separation import WidthSeparationSettings as WidthSeparationSettings
from ._separation import width_separation as width_separation
from ._settings import Settings as Settings


def _from_records():
    """Every registered experiment's function and result class, and ``EXPERIMENTS`` and
    ``PRESETS`` (:mod:`._reproduce`), by name."""
    from . import _reproduce
    from ._records import RECORDS

    out = {"EXPERIMENTS": _reproduce.EXPERIMENTS, "PRESETS": _reproduce.PRESETS}
    for record in RECORDS.values():
        out[record.function.__name__] = record.function
        if record.result is not None:
            out[record.result.__name__] = record.result
        if record.settings is not None:
            out[record.settings.__name__] = record.settings
    return out


_OWN = [  # and, in __all__, every registered experiment's function, result and settings
    "EXPERIMENTS",
    "PRESETS",
    "SIZES",
    "ConvergenceResult",
    "ConvergenceRun",
    "CurveSettings",
    "EncodingsResult",
    "Experiment",
    "LengthGeneralizationResult",
    "ReferenceCheck",
    "ReproduceResults",
    "SeparationCurve",
    "SeparationResult",
    "Settings",
    "WidthSeparationSettings",
    "check_reference",
    "encoding_families",
    "length_generalization",
    "load_reference",
    "plan",
    "plan_table",
    "reproduce",
    "summary_table",
    "training_dynamics",
    "width_separation",
    "Work",
    "write_reference",
]

# The registered experiments, their presets, and the functions of the experiments that
# live in their tasks' homes: read from the registry when asked.
__getattr__, __dir__ = live_names(__name__, _from_records, own=_OWN)
