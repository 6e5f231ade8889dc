"""q-sparse averaging (qSA) of Sanford, Hsu and Telgarsky: its home.

The law and its generator are importable from here; the estimators, the
experiment and the rest load with their modules (the registry,
:mod:`stsq_learn.registry`, names them all).
"""

from .task import SparseAveragingTask, make_sparse_averaging, shift_averaging, subset_means

__all__ = ["SparseAveragingTask", "make_sparse_averaging", "shift_averaging", "subset_means"]
