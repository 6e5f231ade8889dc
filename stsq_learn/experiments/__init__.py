"""The experiments: each task's claims, measured over seeds, and the run that reproduces them.

Every experiment composes the studies (:mod:`stsq_learn.studies`) in its
task's home, and its record (:class:`Experiment`) is registered with its
task (``stsq_learn.registry.register(..., experiments=(record,))``: one's
own runs under :func:`reproduce` as the built-in ones do). The reference
numbers :func:`check_reference` compares a run with ship per size in
``references/<preset>.json``.
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
    from ._registered import RECORDS

    presets = {size: {name: rec.presets[size] for name, rec in RECORDS.items()} for size in SIZES}
    out = {"EXPERIMENTS": tuple(RECORDS), "PRESETS": presets}
    for record in RECORDS.values():
        out[record.function.__name__] = record.function
        out[record.settings.__name__] = record.settings
        out.update({obj.__name__: obj for obj in record.exports})
    return out


# Own names: those imported above (__all__ adds every registered experiment's).
_OWN = ["EXPERIMENTS", "PRESETS", *(n for n in dir() if n[0] != "_" and n != "live_names")]

# The registered experiments, their presets and settings: read from the registry when asked.
__getattr__, __dir__ = live_names(__name__, _from_records, own=_OWN)
