"""In-context linear regression (Zhang, Frei and Bartlett, JMLR 2024): its home.

- :mod:`.task` (the law of prompts, its data contract and shifts)
- :mod:`.theory` (the global minimum, the risk and the baselines' risks)
- :mod:`.modules` (the linear self-attention layer in torch)
- :mod:`.estimators` (:class:`~stsq_learn.LinearAttentionRegressor`)
- :mod:`.baselines` (per-prompt least squares and one gradient step)
- :mod:`.experiment` (the experiment: the layer beside the theory, from the studies)

The law and its generator are importable from here; the estimators, the
theory and the rest load with their modules (the registry,
:mod:`stsq_learn.registry`, names them all).
"""

from .task import InContextRegressionTask, make_in_context_regression

__all__ = ["InContextRegressionTask", "make_in_context_regression"]
