"""Studies: how a model's cost grows against a baseline's, over seeds, beside a theory.

Compositions of a few functions over any registered task and any estimator (or ``{label:
estimator}``): grids, length and training curves, threshold searches, growth laws and their
display. Every study returns a :class:`StudyTable`, says its work before it runs
(``dry_run=True``, :func:`planning`), gives the same numbers for any ``n_jobs`` and derives
every seed in one way (:mod:`stsq_learn.studies.seeds`).
"""

from .display import BandDisplay
from .laws import LAWS, Law, compare_laws, fit_law, fit_laws
from .plan import StudyPlan, Work, planning
from .search import METHODS, StopAtTarget, minimal_width, search_threshold
from .seeds import check_seeds, stream_seed
from .sweep import Trace, length_curve, sweep, training_curve
from .table import StudyTable

__all__ = [
    "LAWS",
    "METHODS",
    "BandDisplay",
    "Law",
    "StopAtTarget",
    "StudyPlan",
    "StudyTable",
    "Trace",
    "Work",
    "check_seeds",
    "compare_laws",
    "fit_law",
    "fit_laws",
    "length_curve",
    "minimal_width",
    "planning",
    "search_threshold",
    "stream_seed",
    "sweep",
    "training_curve",
]
