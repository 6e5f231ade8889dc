"""The experiments: each task's claims, measured over seeds, and the run that reproduces them.

Every experiment is a composition of the studies (:mod:`stsq_learn.studies`)
living in its task's home, with one signature,
``experiment(settings=None, *, seeds=3, device=None, progress=False,
n_jobs=None, **changes)``, and one result: an :class:`ExperimentResult`
holding the experiment's settings (as JSON) and its studies' tables, every
seed's rows in them. What an experiment derives (a threshold, a law, a
best length) is a function of those tables; ``result.seed(s)`` is one
seed's view, ``result.bands()`` its headline numbers over the seeds,
``result.plot()`` its figure, drawn from the tables alone.

Each experiment's settings are a :class:`Settings` subclass whose every
setting declares its constraints (checked before any fit); its record
(:class:`Experiment`: the settings, the studies it runs, the figure, the
headline numbers, the summary rows and presets per size of :data:`SIZES`)
is registered with its task, and :data:`EXPERIMENTS` lists them in run
order. :func:`reproduce` runs them at a size and writes ``results.json``
(every result whole) with its figures and a summary; :func:`plot_results`
redraws the figures of a saved run; :func:`plan` estimates a size's time
on this machine; :func:`check_reference` compares a run with the reference
numbers the package ships per size (``references/<preset>.json``) and
:func:`write_reference` writes such a file from a run. An experiment of
one's own, registered with its task
(``stsq_learn.registry.register(..., experiments=(record,))``), runs under
``reproduce`` as the built-in ones do.
"""

from .._live_names import live_names
from ._check import ReferenceCheck as ReferenceCheck
from ._check import check_reference as check_reference
from ._check import load_reference as load_reference
from ._check import write_reference as write_reference
from ._record import SIZES as SIZES
from ._record import Experiment as Experiment
from ._record import Work as Work
from ._record import document_experiment as document_experiment
from ._reproduce import RESULTS_FORMAT as RESULTS_FORMAT
from ._reproduce import ReproduceResults as ReproduceResults
from ._reproduce import load_results as load_results
from ._reproduce import plan as plan
from ._reproduce import plan_table as plan_table
from ._reproduce import plot_results as plot_results
from ._reproduce import reproduce as reproduce
from ._reproduce import summary_table as summary_table
from ._result import ExperimentResult as ExperimentResult
from ._settings import MappingOf as MappingOf
from ._settings import SequenceOf as SequenceOf
from ._settings import Settings as Settings


def _from_records():
    """Every registered experiment's function, settings class and other exports, and
    ``EXPERIMENTS`` and ``PRESETS``, by name."""
    from . import _reproduce
    from ._registered import RECORDS

    out = {"EXPERIMENTS": _reproduce.EXPERIMENTS, "PRESETS": _reproduce.PRESETS}
    for record in RECORDS.values():
        out[record.function.__name__] = record.function
        out[record.settings.__name__] = record.settings
        out.update({obj.__name__: obj for obj in record.exports})
    return out


_OWN = [  # and, in __all__, every registered experiment's function, settings and exports
    "EXPERIMENTS",
    "PRESETS",
    "RESULTS_FORMAT",
    "SIZES",
    "Experiment",
    "ExperimentResult",
    "MappingOf",
    "ReferenceCheck",
    "ReproduceResults",
    "SequenceOf",
    "Settings",
    "Work",
    "check_reference",
    "document_experiment",
    "load_reference",
    "load_results",
    "plan",
    "plan_table",
    "plot_results",
    "reproduce",
    "summary_table",
    "write_reference",
]

# The registered experiments, their presets and settings: read from the registry when asked.
__getattr__, __dir__ = live_names(__name__, _from_records, own=_OWN)
