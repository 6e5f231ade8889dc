"""The convergence experiment: online gradient descent from W = 0 aligns W_pp with the identity.

:func:`training_dynamics` is a composition of the study tools: one
:func:`~stsq_learn.studies.training_curve` measures cos(W_pp, I), gamma,
the token block's norm and the test R^2 along the training of one model per
token rows' step (the paper's algorithm, every block at the same step, and
the preconditioned run), over the seeds; :class:`ConvergenceResult` holds
one seed's rows and draws their bands with
:class:`~stsq_learn.studies.BandDisplay`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from ..._validation import check_positive_int
from ...engine.batch_reuse import reusing_batches
from ...experiments._settings import Settings
from ...nn import positional_alignment
from ...studies import BandDisplay, StudyTable, check_seeds, stream_seed, training_curve
from .estimators import SparseTokenSelector
from .task import SparseTokenSelectionTask

# The runs' names, by the token rows' step requested (``token_block_rate``).
_RUN_NAMES = {1.0: "same_step", "auto": "preconditioned"}
_SHORT = {"same_step": "same step (paper's)", "preconditioned": "preconditioned (ours)"}
_MEASURES = ("cos", "gamma", "token_norm", "test_r2")
_R2_POINTS = 20  # the test R^2 is scored at about this many steps of a run (and the last)


def _run_name(rate):
    """A run's name: ``same_step``, ``preconditioned`` or ``token_rate_<x>``."""
    return _RUN_NAMES[rate] if rate in _RUN_NAMES else f"token_rate_{rate:g}"


def _resolved_rate(estimator, rate):
    """The token rows' step a fit at ``rate`` runs: ``"auto"`` is 1/width with SGD, else 1."""
    if not estimator.learn_token_block:
        return None
    if rate == "auto":
        return 1.0 / estimator.width if estimator.solver in ("sgd", "auto") else 1.0
    return float(rate)


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


def _alignment(key, estimator):
    """One number of :func:`~stsq_learn.nn.positional_alignment` of the estimator's W."""
    return positional_alignment(estimator.key_query_, estimator.n_features_in_)[key]


class _TestR2:
    """R^2 on the held-out rows of the estimator's seed (``stream_seed(seed, "test")``).

    Scored every ``stride`` steps and at the last (NaN between: scoring
    ``n_test`` rows costs more than a step).
    """

    def __init__(self, task, n_test, stride, n_steps):
        self.task, self.n_test, self.stride, self.n_steps = task, n_test, stride, n_steps
        self.rows = {}

    def __call__(self, estimator):
        step = sum(len(epoch["batches"]) for epoch in estimator.net_.history)
        if step % self.stride and step != self.n_steps:
            return np.nan
        seed = estimator.random_state
        if seed not in self.rows:
            self.rows[seed] = self.task.sample(self.n_test, random_state=stream_seed(seed, "test"))
        return estimator.score(*self.rows[seed])


@dataclass
class ConvergenceRun:
    """One run of :func:`training_dynamics`: its token rows' step and its rows.

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
    table : StudyTable
        The run's rows of :func:`~stsq_learn.studies.training_curve` (one
        seed): ``step``, ``cos``, ``gamma``, ``token_norm``, ``test_r2``,
        ``loss``.
    """

    name: str
    label: str
    token_block_rate: object
    token_block_rate_: float | None
    table: StudyTable

    def curve(self, column):
        """A column of the run's rows, in step order, as a list of floats.

        Parameters
        ----------
        column : str
            ``"step"``, ``"cos"``, ``"gamma"``, ``"token_norm"``, ``"test_r2"``
            or ``"loss"`` (the training loss of the step's batch; NaN at 0).

        Returns
        -------
        list of float
            Its value at each record, the first at step 0.
        """
        return [float(v) for v in self.table[column]]

    loss = property(lambda self: self.curve("loss"), doc="Training loss at each record.")
    cos = property(lambda self: self.curve("cos"), doc="cos(W_pp, I) at each record.")
    gamma = property(lambda self: self.curve("gamma"), doc="tr(W_pp) / m at each record.")
    token_norm = property(lambda self: self.curve("token_norm"), doc="||W_xp||_F per record.")
    test_r2 = property(lambda self: self.curve("test_r2")[-1], doc="The final test R^2.")

    @property
    def short_label(self):
        """A short label for crowded legends (``"same step (paper's)"`` and so on)."""
        return _SHORT.get(self.name, self.name.replace("_", " "))

    @property
    def final(self):
        """The last record as a dict: loss, cos, gamma, token_norm, test_r2."""
        return {key: self.curve(key)[-1] for key in ("loss", *_MEASURES)}

    def to_dict(self):
        """JSON-ready dict: the run's step, label and final record (its rows are the table's)."""
        return {
            "name": self.name,
            "label": self.label,
            "token_block_rate": self.token_block_rate,
            "token_block_rate_": self.token_block_rate_,
            "final": self.final,
        }


@dataclass
class ConvergenceResult:
    """One seed of :func:`training_dynamics`: its runs' rows along the training.

    Every run starts from W = 0 with the same seed (the same batches and
    encodings) and differs only in the step of W's token rows. The first
    run is the headline: with the default ``token_block_rates=(1.0,
    "auto")``, every block at the same step (the paper's algorithm), then
    the token rows at ``1 / width`` of it (``"preconditioned"``, ours).

    Attributes
    ----------
    config : dict
        The experiment's settings (task, width, step, steps, seed, the token
        rows' steps of the runs).
    table : StudyTable
        The seed's rows of :func:`~stsq_learn.studies.training_curve`, one
        per (run, step): ``model`` (the run's name), ``seed``, ``step``,
        ``cos``, ``gamma``, ``token_norm``, ``test_r2``, ``loss``, ``error``.
    runs : dict of str to ConvergenceRun
        The runs by name, the headline first.

    Examples
    --------
    >>> from stsq_learn.experiments import training_dynamics
    >>> from stsq_learn import SparseTokenSelector
    >>> res = training_dynamics(seq_len=8, n_features=2, n_selected=2, n_steps=20,
    ...                         estimator=SparseTokenSelector(16, solver="sgd",
    ...                                                       learning_rate_init=1.0),
    ...                         n_test=100, random_state=0)
    >>> len(res.steps), res.steps[-1], list(res.runs)
    (21, 20, ['same_step', 'preconditioned'])
    """

    config: dict
    table: StudyTable
    runs: dict

    @property
    def headline(self):
        """The first run (:class:`ConvergenceRun`)."""
        return next(iter(self.runs.values()))

    @property
    def steps(self):
        """Step index k of each record: the state after k updates (0 is W = 0)."""
        return [int(k) for k in self.headline.table["step"]]

    @property
    def final(self):
        """The first run's last record: step, loss, cos, gamma, token_norm, test_r2."""
        return {"step": self.steps[-1], **self.headline.final}

    def to_dict(self):
        """JSON-ready dict: config, the runs (labels and final records) and the rows.

        Returns
        -------
        dict
            ``config``, ``final`` (the first run's), ``runs`` (name to
            :meth:`ConvergenceRun.to_dict`) and ``table``
            (:meth:`StudyTable.to_dict`); :meth:`from_dict` reads it back.
        """
        return {
            "config": self.config,
            "final": self.final,
            "runs": {name: run.to_dict() for name, run in self.runs.items()},
            "table": self.table.to_dict(),
        }

    @classmethod
    def from_dict(cls, data):
        """The result :meth:`to_dict` described.

        Parameters
        ----------
        data : dict
            As :meth:`to_dict` returns it (or as JSON read it back).

        Returns
        -------
        ConvergenceResult
        """
        table = StudyTable.from_dict(data["table"])
        runs = {
            name: ConvergenceRun(
                name,
                run["label"],
                run["token_block_rate"],
                run["token_block_rate_"],
                table.where(model=name),
            )
            for name, run in data["runs"].items()
        }
        return cls(config=data["config"], table=table, runs=runs)

    def plot(self, axes=None):
        """Loss, cos(W_pp, I), gamma and the token norm, and the test R^2 along the training.

        Parameters
        ----------
        axes : sequence of 4 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 4 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure holding the axes: one curve per run, each run one
            line style (the first solid, the next dashed, ...).
        """
        return self.plot_bands([self], axes)

    @staticmethod
    def plot_bands(results, axes=None):
        """The figure of :meth:`plot` over seeds: each curve's median and its min-max band.

        Parameters
        ----------
        results : sequence of ConvergenceResult
            One per seed, with the same steps and runs.
        axes : sequence of 4 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 4 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            Training loss (log scale), cos(W_pp, I), gamma beside the token
            block's norm, and the test R^2, against the gradient step: every
            curve its median over the seeds with the min-max shaded (one
            result draws its curves alone).
        """
        return _plot(results, axes)


def _plot(results, axes):
    """The figure of :meth:`ConvergenceResult.plot_bands`."""
    import matplotlib.pyplot as plt

    if isinstance(results, ConvergenceResult):
        raise TypeError(
            "results must be a list of ConvergenceResult, got one ConvergenceResult: pass [result]."
        )
    results = list(results)
    if not results:
        raise ValueError("results must hold at least one ConvergenceResult, got none.")
    for i, res in enumerate(results):
        if not isinstance(res, ConvergenceResult):
            raise TypeError(f"results[{i}] must be a ConvergenceResult, got {type(res).__name__}.")
    first = results[0]
    for i, res in enumerate(results[1:], start=1):
        for what in ("runs", "steps"):
            mine, theirs = getattr(res, what), getattr(first, what)
            if list(mine) != list(theirs):
                raise ValueError(
                    f"results[{i}] has the {what} {list(mine)}, results[0] has {list(theirs)}: "
                    "the seeds of one experiment run the same token steps and steps."
                )
    if axes is None:
        fig, axes = plt.subplots(1, 4, figsize=(18, 3.9), layout="constrained")
    else:
        if len(axes) != 4:
            raise ValueError(f"axes must hold 4 Axes, got {len(axes)}.")
        fig = axes[0].figure
    table = StudyTable.concat([r.table for r in results])
    runs = list(first.runs.values())
    styles = dict(zip((r.name for r in runs), ("-", "--", ":", "-.") * len(runs)))

    def draw(ax, y, colors, labels, **kwargs):
        display = BandDisplay.from_table(
            table, x="step", y=y, ax=ax, colors=colors, labels=labels, **kwargs
        )
        for name, line in display.lines_.items():  # dense curves: no markers
            line.set(marker="o" if y == "test_r2" else "", linestyle=styles[name], lw=1.2)
        ax.legend(fontsize="x-small")
        return display

    draw(
        axes[0],
        "loss",
        dict.fromkeys(styles, "C0"),
        {r.name: r.label for r in runs},
        logy=True,
        xlabel="gradient step",
        ylabel="training loss (squared error)",
        title="Loss",
    )
    draw(
        axes[1],
        "cos",
        dict.fromkeys(styles, "C1"),
        {r.name: r.short_label for r in runs},
        xlabel="gradient step",
        ylabel=r"$\cos(W_{pp}, I)$",
        title="Positional block aligns with I",
    )
    axes[1].axhline(1.0, color="gray", ls=":", lw=1, label="identity direction")
    axes[1].set_ylim(-0.05, 1.05)
    axes[1].legend(loc="lower right", fontsize="x-small")
    for y, color, symbol in (("gamma", "C2", r"$\gamma$"), ("token_norm", "C3", r"$\|W_{xp}\|_F$")):
        draw(
            axes[2],
            y,
            dict.fromkeys(styles, color),
            {r.name: f"{symbol}, {r.short_label}" for r in runs},
            xlabel="gradient step",
            ylabel="value",
            title=r"Scale $\gamma = \mathrm{tr}(W_{pp})/m$ and token block $\|W_{xp}\|_F$",
        )
    axes[2].legend(loc="upper left", fontsize="x-small")
    draw(
        axes[3],
        "test_r2",
        dict.fromkeys(styles, "C4"),
        {r.name: r.short_label for r in runs},
        xlabel="gradient step",
        ylabel=r"test $R^2$",
        title="Fresh rows at the training length",
    )
    for ax in axes:
        ax.title.set_fontsize("medium")
    cfg = first.config
    where = f"T={cfg['seq_len']}, d={cfg['n_features']}, q={cfg['n_selected']}, m={cfg['width']}"
    n = len(results)
    seeds = "one seed" if n == 1 else f"median over {n} seeds, band: min-max"
    fig.suptitle(f"Training dynamics from W = 0 ({where}; {seeds})")
    return fig


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


_DEFAULT = SparseTokenSelector(
    64, solver="sgd", learning_rate_init=1.0, learning_rate="constant", batch_size=256
)


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
        Measure W every this many steps (it must divide ``n_steps``, so
        that the last step is measured).
    n_test : int, default=1000
        Held-out rows of each seed scoring the test R^2 (at about 20 steps
        of each run, the last among them).
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
def training_dynamics(
    settings=None, *, device=None, random_state=0, seeds=None, progress=False, **changes
):
    """Train the SPE transformer online with plain gradient descent and measure W as it trains.

    The paper's convergence claim: from W = 0, gradient descent on a fresh
    batch at every step drives the positional block W_pp towards a growing
    multiple of the identity while the token block stays near 0. Its
    algorithm steps every block of W alike; the estimators' default
    (``token_block_rate="auto"``) steps the token rows at ``1 / width`` of
    the positional rows' step, a preconditioning of ours (see the user
    guide's "Step sizes that follow the width"). Both are run with the same
    seed (the same batches and encodings), each labelled: every block at
    the same step first (the headline), then the preconditioned run. At
    T=16, d=8, q=3, width 64, 300 steps at step 1, the token block's norm
    ends at 0.54 with every block at the same step and 0.067
    preconditioned; cos(W_pp, I) 0.999 and gamma 2.63 either way.

    One :func:`~stsq_learn.studies.training_curve` trains a clone of
    ``estimator`` per rate of ``token_block_rates`` for every seed
    (``random_state=s``) and measures, at step 0 and every
    ``record_every`` steps, cos(W_pp, I), gamma = tr(W_pp)/m and
    ||W_xp||_F, and at about 20 of those steps (the last among them) the
    R^2 on the seed's held-out rows (``stream_seed(s, "test")``,
    :mod:`stsq_learn.studies.seeds`). The
    measuring callback makes the members engine fit the seeds one after
    another (a callback acts on one net), with the numbers of their
    single fits. Of these settings, the fresh batch of 256 rows at every
    step is the paper's; the width, step size, steps and sizes are ours
    (:data:`stsq_learn.experiments._records.convergence.PROVENANCE`).

    Parameters
    ----------
    settings : ConvergenceSettings, mapping or None, default=None
        The task, the model and the runs (None: the defaults).
    device : str or None, default=None
        Training device; None keeps the estimator's.
    random_state : int, default=0
        The seed of one run (W starts at 0; the seed fixes the batches, the
        encodings and the held-out rows, the same for every rate).
    seeds : int, sequence of int or None, default=None
        Several seeds at once (``n``: the seeds ``0 .. n-1``), in place of
        ``random_state``: one result per seed, in order.
    progress : bool, default=False
        Show a progress bar over the fits.
    **changes
        Settings of :class:`ConvergenceSettings` to change
        (``training_dynamics(n_steps=100)``).

    Returns
    -------
    ConvergenceResult or list of ConvergenceResult
        The measures along the training of every run: one result, or with
        ``seeds`` one per seed.
    """
    cfg = ConvergenceSettings.resolve(settings, changes)
    n_steps = check_positive_int(cfg.n_steps, "n_steps")
    every = check_positive_int(cfg.record_every, "record_every")
    if n_steps % every:
        raise ValueError(
            f"record_every must divide n_steps ({n_steps}) so that the last step is measured, "
            f"got {every}."
        )
    n_test = check_positive_int(cfg.n_test, "n_test")
    rates = _checked_rates(cfg.token_block_rates)
    one = seeds is None
    try:
        seeds = check_seeds([random_state] if one else seeds)
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).replace("seeds[0]", "random_state") if one else exc) from None
    estimator = _DEFAULT if cfg.estimator is None else cfg.estimator
    if not isinstance(estimator, SparseTokenSelector):
        raise TypeError(
            f"estimator must be a SparseTokenSelector, got {type(estimator).__name__}: "
            f"{estimator!r}."
        )
    task = SparseTokenSelectionTask(cfg.seq_len, cfg.n_features, cfg.n_selected)
    if rates is None:
        rates = (estimator.token_block_rate,)
    models = {_run_name(r): clone(estimator).set_params(token_block_rate=r) for r in rates}
    measures = {key: functools.partial(_alignment, key) for key in _MEASURES[:3]}
    stride = every * max(1, n_steps // (_R2_POINTS * every))
    measures["test_r2"] = _TestR2(task, n_test, stride, n_steps)
    table = training_curve(
        models,
        task,
        measures,
        every=every,
        seeds=seeds,
        n_steps=n_steps,
        error_score="raise",
        device=device,
        progress=progress,
    )
    width = estimator.width
    config = {
        "seq_len": task.seq_len,
        "n_features": task.n_features,
        "n_selected": task.n_selected,
        "width": width,
        "n_steps": n_steps,
        "solver": estimator.solver,
        "learning_rate_init": estimator.learning_rate_init,
        "learning_rate": estimator.learning_rate,
        "batch_size": estimator.batch_size,
        "token_block_rates": list(rates),
        "record_every": every,
        "n_test": n_test,
        "device": str(device or estimator.device),
    }
    results = []
    for seed in seeds:
        part = table.where(seed=seed)  # the seed's rows, as a run of that seed alone has them
        rows = StudyTable({c: part[c] for c in part.columns}, meta={**part.meta, "seeds": [seed]})
        runs = {}
        for rate in rates:
            name = _run_name(rate)
            resolved = _resolved_rate(estimator, rate)
            label = _run_label(rate, resolved, width)
            runs[name] = ConvergenceRun(name, label, rate, resolved, rows.where(model=name))
        results.append(
            ConvergenceResult(config={**config, "random_state": seed}, table=rows, runs=runs)
        )
    return results[0] if one else results
