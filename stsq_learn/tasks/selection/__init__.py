"""Sparse token selection (STS_q), the paper's task: its home.

The law and its generator are importable from here; the estimators, the
experiment and the rest load with their modules (the registry,
:mod:`stsq_learn.registry`, names them all).
"""

from .task import SparseTokenSelectionTask, make_sparse_token_selection, shift_length

__all__ = ["SparseTokenSelectionTask", "make_sparse_token_selection", "shift_length"]
