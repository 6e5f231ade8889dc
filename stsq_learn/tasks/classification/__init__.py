"""Sparse-token classification (Barnfield, Cui and Lu, ICLR 2026): its home.

- :mod:`.estimators` (the attention classifier) and :mod:`.modules` (its
  torch module)
- :mod:`.baselines` (the linear baselines)
- :mod:`.experiment` (the experiment and its record)
- :mod:`.task`
- :mod:`.theory`

The law and its generator are importable from here; the estimators, the
theory and the rest load with their modules (the registry,
:mod:`stsq_learn.registry`, names them all).
"""

from .task import SparseTokenClassificationTask, make_sparse_token_classification

__all__ = ["SparseTokenClassificationTask", "make_sparse_token_classification"]
