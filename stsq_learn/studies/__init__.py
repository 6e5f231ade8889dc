"""Studies: how a model's cost grows against a baseline's, over seeds, beside a theory.

The package's experiments and a user's own are compositions of a few
functions over any registered task and any estimator (or ``{label:
estimator}``):

- :func:`sweep`: every model at every point of a grid (estimator
  parameters and task fields alike), every seed, scored on held-out rows;
- :func:`length_curve`: fitted once, scored at every evaluation length
  through the task's own length shift;
- :func:`training_curve`: measured along the training;
- :func:`search_threshold` and :func:`minimal_width`: the least value of a
  monotone parameter (a width, a number of heads, a signal) reaching a
  target score, per point and seed, with a lower bound where none does;
- :func:`fit_law`, :func:`fit_laws` (one per seed) and :func:`compare_laws`:
  growth laws fitted to the results;
- :class:`BandDisplay`: medians over the seeds with their min-max band,
  beside a law or a theory curve.

Every study returns a :class:`StudyTable` (one long table, one row per run,
``param_*`` columns, pandas-readable), says its work before it runs
(``dry_run=True``, :func:`planning`), spreads its fits over ``n_jobs``
workers with the same numbers for any ``n_jobs``, and derives every seed in
one way (:mod:`stsq_learn.studies.seeds`).
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
