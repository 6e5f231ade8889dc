"""How a training run went: the loss it started from, its completed losses, and the verdict.

Kept apart from the training machinery (:mod:`stsq_learn.engine.training`): these
read a finished skorch run and judge it. :func:`start_loss` measures the
model a run starts from, before any step; :func:`completed_losses` reads the
completed epochs or steps (and warns about an interrupted or unconverged
run); :func:`check_progress` refuses a run that diverged (its final loss
clearly above the starting model's) and warns about one that ends worse than
predicting 0.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from .training import STOP_REASON, raise_diverged


def start_loss(module, data, generator, kwargs, chunk, criterion):
    """The training loss of ``module`` before any step, on ``data.probe`` rows (no gradient).

    ``generator`` is the probe's own, so the run's batches and draws are
    those it would have without the probe. The rows go through the model
    ``chunk`` at a time (:func:`stsq_learn.engine.training.probe_chunk`), so the
    probe holds no more than that many rows' forward pass. ``criterion`` is
    the run's loss (:mod:`stsq_learn.nn.losses`): the mean of its
    ``losses`` over every output unit of the probe. A list of generators
    measures the members of a batched fit (``module`` stacked:
    :mod:`stsq_learn.nn.members`), each on its own probe rows and draws, and
    gives a list of losses.
    """
    from ..encodings.draws import StreamedDraws
    from ..nn.members import member_parts

    S = len(generator) if isinstance(generator, list) else 1
    draws = StreamedDraws(generator)
    losses = [[] for _ in range(S)]
    with torch.no_grad():
        for X, y in data.probe(generator, chunk):
            out = module(X, generator=draws, **kwargs)
            for own, out_s, y_s in zip(losses, member_parts(out, S), member_parts(y, S)):
                own.append(criterion.losses(out_s, y_s))
            del X, y, out, out_s, y_s  # the next chunk is drawn while these would be held
    means = [float(torch.cat(own).mean()) for own in losses]
    return means if isinstance(generator, list) else means[0]


def completed_losses(net, online, planned, owner, *, early_stopping):
    """Losses of the completed epochs (online: steps) of a run planned for ``planned``.

    Warns when the run ended early with no stopping callback's reason in the
    history (skorch's ``fit`` returns quietly after a ``KeyboardInterrupt``:
    Ctrl-C), and when ``fit`` used every epoch while ``early_stopping`` (the
    ``tol`` rule) watched it: not converged. A run with no such rule ran the
    course it was planned for, and that is no warning.
    """
    # A batch or epoch cut short by Ctrl-C has no loss: keep the completed ones.
    if online:
        losses = [b["train_loss"] for b in net.history[-1]["batches"] if "train_loss" in b]
    else:
        losses = [e["train_loss"] for e in net.history if "train_loss" in e]
    unit = "step" if online else "epoch"
    if len(losses) < planned and net.history[-1].get(STOP_REASON) is None:
        warnings.warn(
            f"{owner}: training was interrupted (KeyboardInterrupt) after {len(losses)} of "
            f"{planned} {unit}s; the model keeps the weights reached so far and "
            "loss_curve_, n_iter_ and t_ describe the completed part.",
            UserWarning,
            stacklevel=4,
        )
    elif early_stopping and len(losses) == planned:
        warnings.warn(
            f"{owner}: maximum iterations ({planned}) reached and the optimization hasn't "
            "converged yet.",
            ConvergenceWarning,
            stacklevel=4,
        )
    return losses


_DIVERGED_RATIO = 1.5
"""A final loss this many times the starting model's (and 0.1 L0 above it) has diverged."""


def check_progress(net, losses, *, zero_loss, start_loss, online, owner, keep=False):
    """Refuse a run that ended clearly worse than the model it started from; warn otherwise.

    The final training loss (the last epoch's, or the mean of the last tenth
    of the online steps, at least the last 5) is compared with
    ``start_loss``, the loss of the model the run started from (W = 0, a
    fresh net, or the previous fit of a warm start) measured before the
    first step, and with ``zero_loss``, the
    loss of predicting 0. Ending more than :data:`_DIVERGED_RATIO` times
    ``start_loss`` and ``0.1 * zero_loss`` above it (online, judged on at
    least 5 steps: a few batches are too noisy), the run has diverged:
    ``ValueError`` naming the step size (the caller has assigned nothing
    yet), or with ``keep`` a ``UserWarning`` and the diverged model. A model
    that ends worse than predicting 0 without having diverged (a short run
    that barely moved, a model that started worse) gets a ``UserWarning``
    naming the likely cause.
    """
    if not losses or zero_loss <= 0:
        return
    part = max(min(5, len(losses)), len(losses) // 10) if online else 1
    final, first = float(np.mean(losses[-part:])), float(np.mean(losses[:part]))
    diverged = final > _DIVERGED_RATIO * start_loss and final > start_loss + 0.1 * zero_loss
    if diverged and (not online or part >= 5):  # a few online batches are too noisy to judge
        what = (
            f"the final training loss is {final / start_loss:.3g} times that of the model it "
            f"started from ({final / zero_loss:.3g} times that of predicting 0)"
        )
        if not keep:
            raise_diverged(net, what)
        warnings.warn(
            f"{owner}: training diverged: {what}; the model is kept as "
            f"on_divergence='warn' asks. Lower learning_rate_init (it was {net.lr:.4g}).",
            UserWarning,
            stacklevel=4,
        )
        return
    ratio = final / zero_loss
    if ratio <= 1:
        return
    if final > first:
        cause = f"The step size is the likely cause (learning_rate_init={net.lr:.4g}); lower it"
    else:
        cause = "Training was too short to beat it: train longer (max_iter, n_steps)"
    warnings.warn(
        f"{owner}: the final training loss is {ratio:.3g} times that of predicting 0: "
        f"the model is worse than no model. {cause}, or leave learning_rate_init at "
        "'auto' where the estimator offers it.",
        UserWarning,
        stacklevel=4,
    )
