"""Single-location regression (Marion, Berthier, Biau, Boyer): its home.

- :mod:`.base`
- :mod:`.batch` (several erf-predictor fits in one batched computation:
  ``fit_online_batch``, ``fit_online_seeds``)
- :mod:`.estimators`
- :mod:`.experiment` (the experiment and its record)
- :mod:`.task`
- :mod:`.theory`

The law and its generator are importable from here; the estimators, the
experiment and the rest load with their modules (the registry,
:mod:`stsq_learn.registry`, names them all).
"""

from .task import SingleLocationTask, make_single_location

__all__ = ["SingleLocationTask", "make_single_location"]
