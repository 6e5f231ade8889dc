"""The generators of the tasks, for ``make_*``-style imports (they live in :mod:`stsq_learn.tasks`).

Sparse token selection (STS_q) and q-sparse averaging (qSA): each task's
law, contract and query structure are one object of :mod:`stsq_learn.tasks`;
this module gathers their generators under the name scikit-learn users look
for.
"""

from __future__ import annotations

from .tasks import (
    SparseAveragingTask,
    SparseTokenSelectionTask,
    make_sparse_averaging,
    make_sparse_token_selection,
    subset_means,
)

__all__ = [
    "SparseAveragingTask",
    "SparseTokenSelectionTask",
    "make_sparse_averaging",
    "make_sparse_token_selection",
    "subset_means",
]
