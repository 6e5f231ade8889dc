"""Experiment 1: training dynamics of the SPE transformer under gradient descent."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from skorch.callbacks import Callback

from .._validation import check_positive_int
from ..nn import positional_alignment
from ..tasks import SparseTokenSelectionTask
from ..tasks.selection.estimators import SparseTokenSelector
from ._common import (
    dataclass_dict,
    derived_seed,
    estimator_config,
    jsonable,
    new_axes,
    prepared,
    train_online,
)


@dataclass
class ConvergenceResult:
    """Per-step record of online gradient-descent training from W = 0.

    Attributes
    ----------
    config : dict
        The experiment's settings (task, width, learning rate, steps, seed).
    steps : list of int
        Step index k of each record: the state after k updates (0 is W = 0).
    loss : list of float
        Training loss of the batch drawn at each recorded step (the last
        record, after the final update, repeats the last batch loss).
    cos : list of float
        cos(W_pp, I) = tr(W_pp) / (sqrt(m) ||W_pp||_F) at each record.
    gamma : list of float
        tr(W_pp) / m at each record.
    token_norm : list of float
        ||W_xp||_F, the norm of the token block, at each record.
    test_r2 : float
        R^2 of the final model on fresh rows at the training length.
    positional_block : ndarray of shape (m, m)
        Final W_pp (kept for the figure; not written to JSON).
    token_block : ndarray of shape (d, m)
        Final token block W_xp (kept for the figure; not written to JSON).

    Examples
    --------
    >>> from stsq_learn.experiments import training_dynamics
    >>> from stsq_learn import SparseTokenSelector
    >>> res = training_dynamics(seq_len=8, n_features=2, n_selected=2, n_steps=20,
    ...                         estimator=SparseTokenSelector(16, solver="sgd",
    ...                                                       learning_rate_init=1.0),
    ...                         random_state=0)
    >>> len(res.steps), res.steps[-1]
    (21, 20)
    """

    config: dict
    steps: list
    loss: list
    cos: list
    gamma: list
    token_norm: list
    test_r2: float
    positional_block: np.ndarray = field(repr=False)
    token_block: np.ndarray = field(repr=False)

    @property
    def final(self):
        """The last record as a dict: step, loss, cos, gamma, token_norm, test_r2."""
        return {
            "step": self.steps[-1],
            "loss": self.loss[-1],
            "cos": self.cos[-1],
            "gamma": self.gamma[-1],
            "token_norm": self.token_norm[-1],
            "test_r2": self.test_r2,
        }

    def to_dict(self):
        """JSON-ready dict: config, per-step curves, the final record, W summaries."""
        out = dataclass_dict(self, skip=("positional_block", "token_block"))
        W_pp = self.positional_block
        m = W_pp.shape[0]
        off = W_pp[~np.eye(m, dtype=bool)]
        out["final"] = jsonable(self.final)
        out["positional_block_summary"] = {
            "diagonal_mean": float(np.diag(W_pp).mean()),
            "off_diagonal_abs_mean": float(np.abs(off).mean()) if off.size else 0.0,
            "token_block_abs_max": float(np.abs(self.token_block).max()),
        }
        return out

    def plot(self, axes=None):
        """Loss, cos(W_pp, I), gamma and the final W, on 4 axes (made if None).

        Parameters
        ----------
        axes : sequence of 4 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 4 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure holding the axes.
        """
        fig, axes = new_axes(axes, 4, figsize=(17, 3.8))
        ax_loss, ax_cos, ax_gamma, ax_w = axes
        steps = np.asarray(self.steps)
        loss = np.asarray(self.loss)
        ax_loss.plot(steps, loss, lw=1, color="C0")
        ax_loss.set_yscale("log")
        ax_loss.set_xlabel("gradient step")
        ax_loss.set_ylabel("training loss (squared error)")
        ax_loss.set_title("Loss")
        ax_cos.plot(steps, self.cos, color="C1", label=r"$\cos(W_{pp}, I)$")
        ax_cos.axhline(1.0, color="gray", ls=":", lw=1, label="identity direction")
        ax_cos.set_ylim(-0.05, 1.05)
        ax_cos.set_xlabel("gradient step")
        ax_cos.set_ylabel(r"$\cos(W_{pp}, I)$")
        ax_cos.set_title("Positional block aligns with I")
        ax_cos.legend(loc="lower right")
        ax_gamma.plot(steps, self.gamma, color="C2", label=r"$\gamma = \mathrm{tr}(W_{pp})/m$")
        ax_gamma.plot(steps, self.token_norm, color="C3", label=r"$\|W_{xp}\|_F$ (token block)")
        ax_gamma.set_xlabel("gradient step")
        ax_gamma.set_ylabel("value")
        ax_gamma.set_title(r"Scale $\gamma$ grows, token block stays small")
        ax_gamma.legend(loc="upper left")
        d = self.token_block.shape[0]
        W = np.vstack([self.token_block, self.positional_block])
        lim = float(np.abs(W).max()) or 1.0
        im = ax_w.imshow(W, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", interpolation="none")
        ax_w.axhline(d - 0.5, color="k", lw=1)
        ax_w.set_xlabel("column (query positional coordinate)")
        ax_w.set_ylabel(f"row (first {d}: token block)")
        ax_w.set_title("Final W: token rows, then $W_{pp}$")
        fig.colorbar(im, ax=ax_w, label="entry of W")
        return fig


class _AlignmentRecorder(Callback):
    """Record cos(W_pp, I), gamma and the token norm before every ``every``-th step."""

    def __init__(self, n_features, every=1):
        self.n_features = n_features
        self.every = every

    def initialize(self):
        self.records_ = []
        self.step_ = 0
        return self

    def on_batch_begin(self, net, training=False, **kwargs):
        if not training:
            return
        if self.step_ % self.every == 0:
            W = net.module_.key_query.detach().cpu().numpy()
            self.records_.append((self.step_, positional_alignment(W, self.n_features)))
        self.step_ += 1


_DEFAULT = SparseTokenSelector(64, solver="sgd", learning_rate_init=1.0, batch_size=256)


def training_dynamics(
    seq_len=16,
    n_features=8,
    n_selected=3,
    *,
    estimator=None,
    n_steps=400,
    record_every=1,
    n_test=1000,
    device=None,
    random_state=0,
    progress=False,
):
    """Train the SPE transformer online with plain gradient descent and record W.

    The paper's convergence claim: from W = 0, gradient descent on fresh
    batches drives the positional block W_pp towards a growing multiple of
    the identity while the token block stays near 0. A clone of
    ``estimator`` (by default a :class:`~stsq_learn.SparseTokenSelector` of
    width 64 with stochastic encodings and ``solver="sgd"``, no momentum, at
    ``learning_rate_init=1.0``, batches of 256: the paper's setting) is
    trained by ``fit_online``; a callback passed through its ``callbacks``
    hook reads W before every ``record_every``-th step, and W is read once
    more after the last one.

    Parameters
    ----------
    seq_len, n_features, n_selected : int, default=16, 8, 3
        The task D_{T,q}: T tokens in R^d, q selected.
    estimator : SparseTokenSelector, default=None
        The model to train (cloned; its ``random_state`` and, if given,
        ``device`` are replaced by the run's). None is the default above.
        Plain gradient descent needs a large step: the loss gradient at
        W = 0 is small (scores are uniform).
    n_steps : int, default=400
        Gradient steps, each on a fresh batch.
    record_every : int, default=1
        Record W every this many steps.
    n_test : int, default=1000
        Fresh rows for the final R^2.
    device : str or None, default=None
        Training device; None keeps the estimator's.
    random_state : int, default=0
        Seed of the run (initialisation is W = 0; the seed fixes batches and encodings).
    progress : bool, default=False
        Show a tqdm progress bar over the steps.

    Returns
    -------
    ConvergenceResult
        The recorded trajectory of W, the losses and the final test R^2.
    """
    n_steps = check_positive_int(n_steps, "n_steps")
    record_every = check_positive_int(record_every, "record_every")
    n_test = check_positive_int(n_test, "n_test")
    task = SparseTokenSelectionTask(seq_len, n_features, n_selected)
    d = task.n_features

    model = prepared(
        estimator,
        _DEFAULT,
        SparseTokenSelector,
        "estimator",
        device=device,
        random_state=random_state,
    )
    recorder = _AlignmentRecorder(d, record_every)
    train_online(
        model,
        task,
        n_steps,
        desc="convergence (gradient steps)",
        progress=progress,
        callbacks=[recorder],
    )
    W = model.key_query_
    records = [*recorder.records_, (n_steps, positional_alignment(W, d))]
    losses = model.loss_curve_
    steps = [k for k, _ in records]
    loss = [float(losses[min(k, n_steps - 1)]) for k in steps]
    X_test, y_test = task.sample(n_test, random_state=derived_seed(random_state, 1))
    config = {
        "seq_len": task.seq_len,
        "n_features": d,
        "n_selected": task.n_selected,
        "width": model.width,
        "n_steps": n_steps,
        "learning_rate_init": model.learning_rate_init,
        "solver": model.solver,
        "batch_size": model.batch_size,
        "estimator": estimator_config(model),
        "record_every": record_every,
        "device": str(model.device_),
        "random_state": random_state,
    }
    return ConvergenceResult(
        config=config,
        steps=steps,
        loss=loss,
        cos=[float(r["cos"]) for _, r in records],
        gamma=[float(r["gamma"]) for _, r in records],
        token_norm=[float(r["token_norm"]) for _, r in records],
        test_r2=float(model.score(X_test, y_test)),
        positional_block=W[d:],
        token_block=W[:d],
    )
