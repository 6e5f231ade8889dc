"""q-sparse token retrieval (Mousavi-Hosseini, Sanford, Wu, Erdogdu): its home.

The law and its generator are importable from here; the estimators, the
experiment and the rest load with their modules (the registry,
:mod:`stsq_learn.registry`, names them all).
"""

from .task import SparseRetrievalTask, make_sparse_retrieval

__all__ = ["SparseRetrievalTask", "make_sparse_retrieval"]
