"""Experiment 1: training dynamics of the SPE transformer under gradient descent."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone
from skorch.callbacks import Callback

from .._validation import check_positive_int
from ..engine.batch_reuse import reusing_batches
from ..nn import positional_alignment
from ..tasks import SparseTokenSelectionTask
from ..tasks.selection.estimators import SparseTokenSelector
from ._bands import plot_band
from ._common import (
    band_title,
    dataclass_dict,
    derived_seed,
    estimator_config,
    jsonable,
    new_axes,
    prepared,
    seed_results,
    train_online,
)
from ._settings import Settings

# The runs' names, by the token rows' step requested (``token_block_rate``).
_RUN_NAMES = {1.0: "same_step", "auto": "preconditioned"}


def _run_name(rate):
    """The run's name in results: ``same_step``, ``preconditioned`` or ``token_rate_<x>``."""
    return _RUN_NAMES[rate] if rate in _RUN_NAMES else f"token_rate_{rate:g}"


def _run_label(rate, resolved, width):
    """A figure's and summary's words for a run with token rows stepped at ``rate``."""
    if resolved is None:
        return "token block frozen"
    if resolved == 1.0:
        return "every block at the same step (the paper's algorithm)"
    share = (
        f"1/{width} of the step"
        if math.isclose(resolved, 1.0 / width)
        else f"{resolved:g} times the step"
    )
    words = f"token rows at {share}"
    return f"{words} (preconditioned, ours)" if rate == "auto" else words


@dataclass
class ConvergenceRun:
    """One run of :func:`training_dynamics`: its token rows' step and its curves.

    Attributes
    ----------
    name : str
        ``"same_step"`` (``token_block_rate=1.0``: every block of W at the
        same step, the paper's algorithm), ``"preconditioned"``
        (``token_block_rate="auto"``: the token rows at ``1 / width`` of the
        step, the estimator's default and ours) or ``"token_rate_<x>"``.
    label : str
        The run's description in the figure and the summary.
    token_block_rate : float or "auto"
        The token rows' step requested, as a multiple of the step.
    token_block_rate_ : float or None
        The multiple the run used (``"auto"`` resolved; None when the token
        block is frozen).
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
    """

    name: str
    label: str
    token_block_rate: object
    token_block_rate_: float | None
    loss: list
    cos: list
    gamma: list
    token_norm: list
    test_r2: float
    positional_block: np.ndarray = field(repr=False)
    token_block: np.ndarray = field(repr=False)

    @property
    def short_label(self):
        """A short label for crowded legends (``"same step (paper's)"`` and so on)."""
        short = {"same_step": "same step (paper's)", "preconditioned": "preconditioned (ours)"}
        return short.get(self.name, self.name.replace("_", " "))

    @property
    def final(self):
        """The last record as a dict: loss, cos, gamma, token_norm, test_r2."""
        return {
            "loss": self.loss[-1],
            "cos": self.cos[-1],
            "gamma": self.gamma[-1],
            "token_norm": self.token_norm[-1],
            "test_r2": self.test_r2,
        }

    def to_dict(self):
        """JSON-ready dict: the run's step, curves, final record and W summaries."""
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


@dataclass
class ConvergenceResult:
    """Per-step record of online gradient-descent training from W = 0, one run per token step.

    Every run starts from W = 0 with the same seed (the same batches and
    encodings) and differs only in the step of W's token rows. The first
    run is the headline: with the default ``token_block_rates=(1.0,
    "auto")``, every block at the same step (the paper's algorithm), then
    the token rows at ``1 / width`` of it (``"preconditioned"``, the
    estimator's default, ours). ``loss``, ``cos``, ``gamma``,
    ``token_norm``, ``test_r2``, ``positional_block``, ``token_block`` and
    ``final`` are the first run's.

    Attributes
    ----------
    config : dict
        The experiment's settings (task, width, learning rate, steps, seed,
        the token rows' steps of the runs).
    steps : list of int
        Step index k of each record: the state after k updates (0 is W = 0).
    runs : dict of str to ConvergenceRun
        The runs by name, the headline first.

    Examples
    --------
    >>> from stsq_learn.experiments import training_dynamics
    >>> from stsq_learn import SparseTokenSelector
    >>> res = training_dynamics(seq_len=8, n_features=2, n_selected=2, n_steps=20,
    ...                         estimator=SparseTokenSelector(16, solver="sgd",
    ...                                                       learning_rate_init=1.0),
    ...                         random_state=0)
    >>> len(res.steps), res.steps[-1], list(res.runs)
    (21, 20, ['same_step', 'preconditioned'])
    """

    config: dict
    steps: list
    runs: dict

    @property
    def headline(self):
        """The first run (:class:`ConvergenceRun`)."""
        return next(iter(self.runs.values()))

    loss = property(lambda self: self.headline.loss, doc="The first run's losses.")
    cos = property(lambda self: self.headline.cos, doc="The first run's cos(W_pp, I).")
    gamma = property(lambda self: self.headline.gamma, doc="The first run's gamma.")
    token_norm = property(lambda self: self.headline.token_norm, doc="The first run's ||W_xp||_F.")
    test_r2 = property(lambda self: self.headline.test_r2, doc="The first run's test R^2.")
    positional_block = property(lambda self: self.headline.positional_block, doc="Final W_pp.")
    token_block = property(lambda self: self.headline.token_block, doc="Final W_xp.")

    @property
    def final(self):
        """The first run's last record: step, loss, cos, gamma, token_norm, test_r2."""
        return {"step": self.steps[-1], **self.headline.final}

    def to_dict(self):
        """JSON-ready dict: config, steps, every run, and the first run's curves at the top.

        The top level keeps the layout of one run (``loss``, ``cos``,
        ``gamma``, ``token_norm``, ``test_r2``, ``final``,
        ``positional_block_summary``: the first run's); ``runs`` holds every
        run by name.
        """
        runs = {name: run.to_dict() for name, run in self.runs.items()}
        first = runs[self.headline.name]
        out = {"config": jsonable(self.config), "steps": jsonable(self.steps)}
        for key in ("loss", "cos", "gamma", "token_norm", "test_r2"):
            out[key] = first[key]
        out["final"] = {"step": self.steps[-1], **first["final"]}
        out["positional_block_summary"] = first["positional_block_summary"]
        out["runs"] = runs
        return out

    def plot(self, axes=None):
        """Loss, cos(W_pp, I), gamma and the token norm per run, and the first run's W.

        Each run is one line style (the first solid, the next dashed, ...),
        labelled by its token rows' step.

        Parameters
        ----------
        axes : sequence of 4 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 4 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure holding the axes.
        """
        return _plot([self], axes)

    @staticmethod
    def plot_bands(results, axes=None):
        """The figure of :meth:`plot` over seeds: each curve's median and its min-max band.

        Parameters
        ----------
        results : sequence of ConvergenceResult
            One per seed, with the same steps and runs (the experiment at
            several ``random_state``).
        axes : sequence of 4 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 4 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The panels and labels of :meth:`plot`, every curve drawn as its
            median over the seeds with the min-max shaded; the last panel
            is the first seed's W. One result draws :meth:`plot`'s figure.
        """
        return _plot(seed_results(results, ConvergenceResult, ("steps",)), axes)


def _plot(results, axes):
    """The figure of :meth:`ConvergenceResult.plot` over one result or several seeds'."""
    first = results[0]
    for i, res in enumerate(results):
        if list(res.runs) != list(first.runs):
            raise ValueError(
                f"results[{i}] has the runs {list(res.runs)}, results[0] has {list(first.runs)}: "
                "the seeds of one experiment run the same token steps."
            )
    fig, axes = new_axes(axes, 4, figsize=(17, 3.8))
    ax_loss, ax_cos, ax_gamma, ax_w = axes
    steps = np.asarray(first.steps)
    styles = ("-", "--", ":", "-.")
    for i, name in enumerate(first.runs):
        runs = [res.runs[name] for res in results]
        run = runs[0]
        ls = styles[i % len(styles)]

        def curves(key, runs=runs):
            return [getattr(r, key) for r in runs]

        plot_band(ax_loss, steps, curves("loss"), ls, lw=1, color="C0", label=run.label)
        plot_band(ax_cos, steps, curves("cos"), ls, color="C1", label=run.short_label)
        plot_band(
            ax_gamma, steps, curves("gamma"), ls, color="C2", label=rf"$\gamma$, {run.short_label}"
        )
        plot_band(
            ax_gamma,
            steps,
            curves("token_norm"),
            ls,
            color="C3",
            label=rf"$\|W_{{xp}}\|_F$, {run.short_label}",
        )
    ax_loss.set_yscale("log")
    ax_loss.set_xlabel("gradient step")
    ax_loss.set_ylabel("training loss (squared error)")
    ax_loss.set_title("Loss")
    ax_loss.legend(loc="lower left", fontsize="x-small")
    ax_cos.axhline(1.0, color="gray", ls=":", lw=1, label="identity direction")
    ax_cos.set_ylim(-0.05, 1.05)
    ax_cos.set_xlabel("gradient step")
    ax_cos.set_ylabel(r"$\cos(W_{pp}, I)$")
    ax_cos.set_title("Positional block aligns with I")
    ax_cos.legend(loc="lower right", fontsize="x-small")
    ax_gamma.set_xlabel("gradient step")
    ax_gamma.set_ylabel("value")
    ax_gamma.set_title(r"Scale $\gamma = \mathrm{tr}(W_{pp})/m$ and token block $\|W_{xp}\|_F$")
    ax_gamma.legend(loc="upper left", fontsize="x-small")
    run = first.headline
    d = run.token_block.shape[0]
    W = np.vstack([run.token_block, run.positional_block])
    lim = float(np.abs(W).max()) or 1.0
    im = ax_w.imshow(W, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", interpolation="none")
    ax_w.axhline(d - 0.5, color="k", lw=1)
    ax_w.set_xlabel("column (query positional coordinate)")
    ax_w.set_ylabel(f"row (first {d}: token block)")
    which = run.name if len(results) == 1 else f"{run.name}, seed {first.config['random_state']}"
    ax_w.set_title(f"Final W ({which}): token rows, then $W_{{pp}}$", fontsize="medium")
    fig.colorbar(im, ax=ax_w, label="entry of W")
    if len(results) > 1:
        fig.suptitle(f"Training dynamics, {band_title(len(results))}")
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


_DEFAULT = SparseTokenSelector(
    64, solver="sgd", learning_rate_init=1.0, learning_rate="constant", batch_size=256
)


def _checked_rates(token_block_rates):
    """``token_block_rates`` as a tuple of distinct positive floats and "auto" (None kept)."""
    if token_block_rates is None:
        return None
    if isinstance(token_block_rates, (str, int, float)):
        raise TypeError(
            "token_block_rates must be a sequence of positive numbers and 'auto' (or None), "
            f"got {token_block_rates!r}."
        )
    rates = []
    for i, rate in enumerate(token_block_rates):
        if isinstance(rate, str) and rate == "auto":
            rates.append("auto")
            continue
        ok = isinstance(rate, (int, float, np.number)) and not isinstance(rate, bool)
        if not ok or not np.isfinite(rate) or rate <= 0:
            raise ValueError(
                f"token_block_rates[{i}] must be a positive finite number or 'auto', got {rate!r}."
            )
        rates.append(float(rate))
    if not rates:
        raise ValueError("token_block_rates must hold at least one rate, got an empty sequence.")
    if len(set(rates)) != len(rates):
        raise ValueError(f"token_block_rates must not repeat a rate, got {token_block_rates!r}.")
    return tuple(rates)


class ConvergenceSettings(Settings):
    """The settings of :func:`training_dynamics`: the task, the model and the runs.

    Attributes
    ----------
    seq_len, n_features, n_selected : int, default=16, 8, 3
        The task D_{T,q}: T tokens in R^d, q selected.
    estimator : SparseTokenSelector or None, default=None
        The model to train (cloned; its ``random_state``, ``token_block_rate``
        and, if given, ``device`` are replaced by the run's). None is a
        :class:`~stsq_learn.SparseTokenSelector` of width 64 with stochastic
        encodings and ``solver="sgd"``, no momentum, at a constant
        ``learning_rate_init=1.0``, batches of 256. Plain gradient descent
        needs a large step: the loss gradient at W = 0 is small (scores are
        uniform).
    n_steps : int, default=400
        Gradient steps, each on a fresh batch.
    token_block_rates : tuple of (float or "auto"), or None, default=(1.0, "auto")
        One run per value, in order, the first the headline: the step of
        W's token rows as a multiple of the step (the estimator's
        ``token_block_rate``). 1.0 steps every block alike (the paper's
        algorithm); ``"auto"`` is the estimator's preconditioning
        (``1 / width`` with SGD). None runs once with the estimator's own
        ``token_block_rate``.
    record_every : int, default=1
        Record W every this many steps.
    n_test : int, default=1000
        Fresh rows for each run's final R^2.
    """

    seq_len: int = 16
    n_features: int = 8
    n_selected: int = 3
    estimator: SparseTokenSelector | None = None
    n_steps: int = 400
    token_block_rates: tuple | None = (1.0, "auto")
    record_every: int = 1
    n_test: int = 1000


@reusing_batches
def training_dynamics(settings=None, *, device=None, random_state=0, progress=False, **changes):
    """Train the SPE transformer online with plain gradient descent and record W.

    The paper's convergence claim: from W = 0, gradient descent on a fresh
    batch at every step drives the positional block W_pp towards a growing
    multiple of the identity while the token block stays near 0. Its
    algorithm steps every block of W alike; the estimators' default
    (``token_block_rate="auto"``) steps the token rows at ``1 / width`` of
    the positional rows' step, a preconditioning of ours (see the user
    guide's "Step sizes that follow the width"). Both are run, one after
    the other with the same seed (the same batches and encodings), each
    labelled: every block at the same step first (the headline), then the
    preconditioned run. At T=16, d=8, q=3, width 64, 300 steps at step 1,
    the token block's norm ends at 0.54 with every block at the same step
    and 0.067 preconditioned; cos(W_pp, I) 0.999 and gamma 2.63 either way.

    A clone of ``estimator`` (by default a
    :class:`~stsq_learn.SparseTokenSelector` of width 64 with stochastic
    encodings and ``solver="sgd"``, no momentum, at a constant
    ``learning_rate_init=1.0``, batches of 256) is trained by
    ``fit_online`` once per rate of ``token_block_rates``; a callback
    passed through its ``callbacks`` hook reads W before every
    ``record_every``-th step, and W is read once more after the last one.
    Of these settings, the fresh batch of 256 rows at every step is the
    paper's; the width, step size, steps and sizes are ours
    (:data:`stsq_learn.experiments._records.convergence.PROVENANCE`).

    Parameters
    ----------
    settings : ConvergenceSettings, mapping or None, default=None
        The task, the model and the runs (None: the defaults).
    device : str or None, default=None
        Training device; None keeps the estimator's.
    random_state : int, default=0
        Seed of the runs (initialisation is W = 0; the seed fixes batches
        and encodings, the same for every run).
    progress : bool, default=False
        Show a tqdm progress bar over the steps.
    **changes
        Settings of :class:`ConvergenceSettings` to change
        (``training_dynamics(n_steps=100)``).

    Returns
    -------
    ConvergenceResult
        The recorded trajectory of W, the losses and the final test R^2 of
        every run.
    """
    cfg = ConvergenceSettings.resolve(settings, changes)
    n_steps = check_positive_int(cfg.n_steps, "n_steps")
    record_every = check_positive_int(cfg.record_every, "record_every")
    n_test = check_positive_int(cfg.n_test, "n_test")
    rates = _checked_rates(cfg.token_block_rates)
    task = SparseTokenSelectionTask(cfg.seq_len, cfg.n_features, cfg.n_selected)
    d = task.n_features

    base = prepared(
        cfg.estimator,
        _DEFAULT,
        SparseTokenSelector,
        "estimator",
        device=device,
        random_state=random_state,
    )
    if rates is None:
        rates = (base.token_block_rate,)
    X_test, y_test = task.sample(n_test, random_state=derived_seed(random_state, 1))
    runs = {}
    steps = None
    for rate in rates:
        model = clone(base).set_params(token_block_rate=rate)
        recorder = _AlignmentRecorder(d, record_every)
        name = _run_name(rate)
        train_online(
            model,
            task,
            n_steps,
            desc=f"convergence, {name} (gradient steps)",
            progress=progress,
            callbacks=[recorder],
        )
        W = model.key_query_
        records = [*recorder.records_, (n_steps, positional_alignment(W, d))]
        losses = model.loss_curve_
        steps = [k for k, _ in records]
        resolved = model.token_block_rate_
        runs[name] = ConvergenceRun(
            name=name,
            label=_run_label(rate, resolved, model.width),
            token_block_rate=rate,
            token_block_rate_=None if resolved is None else float(resolved),
            loss=[float(losses[min(k, n_steps - 1)]) for k in steps],
            cos=[float(r["cos"]) for _, r in records],
            gamma=[float(r["gamma"]) for _, r in records],
            token_norm=[float(r["token_norm"]) for _, r in records],
            test_r2=float(model.score(X_test, y_test)),
            positional_block=W[d:],
            token_block=W[:d],
        )
    config = {
        "seq_len": task.seq_len,
        "n_features": d,
        "n_selected": task.n_selected,
        "width": model.width,
        "n_steps": n_steps,
        "learning_rate_init": model.learning_rate_init,
        "solver": model.solver,
        "batch_size": model.batch_size,
        "token_block_rates": list(rates),
        "estimator": estimator_config(base),
        "record_every": record_every,
        "device": str(model.device_),
        "random_state": random_state,
    }
    return ConvergenceResult(config=config, steps=steps, runs=runs)
