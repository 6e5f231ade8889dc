"""The engine every estimator runs on, whatever its task.

- :mod:`.base`: the estimator base, whatever the targets (training,
  ``fit_online``, the forward pass, warm starts, divergence);
- :mod:`.regression` and :mod:`.classification`: what real targets and
  labels add to it (``fit``, ``predict``, ``score``; the classifier's
  ``classes_``, probabilities and decision function, and their losses);
- :mod:`.cores`: the attention and fully-connected model cores over a task;
- :mod:`.rates`: step sizes that follow the width;
- :mod:`.training`: data streams, callbacks and the skorch net;
- :mod:`.batch_reuse`: one online batch stream drawn once for the fits that read it;
- :mod:`.progress`: how a run went (its losses and the divergence verdict);
- :mod:`.memory`: what a fit or a predict would allocate, checked first;
- :mod:`.state`: the fitted state (one record: train, save, load, warm start).

Nothing here names a task: the estimators ask a task object
(:class:`stsq_learn.Task`) what they need.
"""
