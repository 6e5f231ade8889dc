"""Experiment 1: training dynamics of the SPE transformer under gradient descent."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._validation import check_positive_int
from ..datasets import SparseTokenSelectionTask
from ..estimators import SparseTokenSelector
from ..nn import positional_alignment
from ._common import dataclass_dict, derived_seed, fit_online_with_progress, jsonable, new_axes


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
    >>> res = training_dynamics(seq_len=8, n_features=2, n_selected=2, width=16,
    ...                         n_steps=20, random_state=0)
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

        Returns
        -------
        fig : matplotlib.figure.Figure
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


class _RecordingSelector(SparseTokenSelector):
    """A SparseTokenSelector that keeps a handle on its module while it trains."""

    def _make_module(self, *args, **kwargs):
        module = super()._make_module(*args, **kwargs)
        self._live_module = module
        return module


def training_dynamics(
    seq_len=16,
    n_features=8,
    n_selected=3,
    *,
    width=64,
    n_steps=400,
    learning_rate=1.0,
    batch_size=256,
    record_every=1,
    n_test=1000,
    device="auto",
    random_state=0,
    progress=False,
):
    """Train the SPE transformer online with plain gradient descent and record W.

    The paper's convergence claim: from W = 0, gradient descent on fresh
    batches drives the positional block W_pp towards a growing multiple of
    the identity while the token block stays near 0. The model is a
    :class:`~stsq_learn.SparseTokenSelector` with stochastic encodings and
    ``solver="sgd"`` (no momentum), trained by ``fit_online``; W is read
    before every ``record_every``-th step and after the last one.

    Parameters
    ----------
    seq_len, n_features, n_selected : int, default=16, 8, 3
        The task D_{T,q}: T tokens in R^d, q selected.
    width : int, default=64
        Encoding dimension m.
    n_steps : int, default=400
        Gradient steps, each on a fresh batch.
    learning_rate : float, default=1.0
        Step size of plain gradient descent. The loss gradient at W = 0 is
        small (scores are uniform), so the step is large compared with Adam's.
    batch_size : int, default=256
        Rows per step (the paper's 256).
    record_every : int, default=1
        Record W every this many steps.
    n_test : int, default=1000
        Fresh rows for the final R^2.
    device : str, default="auto"
        Training device.
    random_state : int, default=0
        Seed of the run (initialisation is W = 0; the seed fixes batches and encodings).
    progress : bool, default=False
        Show a tqdm progress bar over the steps.

    Returns
    -------
    ConvergenceResult
    """
    n_steps = check_positive_int(n_steps, "n_steps")
    record_every = check_positive_int(record_every, "record_every")
    n_test = check_positive_int(n_test, "n_test")
    task = SparseTokenSelectionTask(seq_len, n_features, n_selected)
    d = task.n_features

    model = _RecordingSelector(
        width,
        positional_encoding="stochastic",
        solver="sgd",
        learning_rate_init=learning_rate,
        momentum=0.0,
        batch_size=batch_size,
        device=device,
        random_state=random_state,
    )
    records = []
    counter = [0]

    def on_step():
        k = counter[0]
        if k % record_every == 0:
            W = model._live_module.key_query.detach().cpu().numpy()
            records.append((k, positional_alignment(W, d)))
        counter[0] += 1

    fit_online_with_progress(
        model, task, n_steps, desc="convergence (SGD steps)", enabled=progress, on_step=on_step
    )
    W = model.key_query_
    records.append((n_steps, positional_alignment(W, d)))
    del model._live_module
    losses = model.loss_curve_
    steps = [k for k, _ in records]
    loss = [float(losses[min(k, n_steps - 1)]) for k in steps]
    X_test, y_test = task.sample(n_test, random_state=derived_seed(random_state, 1))
    config = {
        "seq_len": task.seq_len,
        "n_features": d,
        "n_selected": task.n_selected,
        "width": width,
        "n_steps": n_steps,
        "learning_rate": learning_rate,
        "solver": "sgd",
        "batch_size": batch_size,
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
