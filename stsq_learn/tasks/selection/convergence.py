"""Training dynamics of the selection task: from W = 0, gradient descent aligns W_pp with I.

The paper's convergence claim: from W = 0, gradient descent on a fresh batch
at every step drives the positional block W_pp of the attention's
key-query matrix towards a growing multiple of the identity, while the token
block stays near 0. Its algorithm steps every block of W alike; the
estimators' default (``token_block_rate="auto"``) steps the token rows at
``1 / width`` of the positional rows' step, a preconditioning of ours (see
the user guide's "Step sizes that follow the width"). Both are run from the
same seed (the same batches and encodings): every block at the same step
first (the headline run, ``same_step``), then the preconditioned run
(``preconditioned``).

One :func:`~stsq_learn.studies.training_curve` measures, at step 0 and
every ``record_every`` steps, cos(W_pp, I), gamma = tr(W_pp) / m and
||W_xp||_F, and at about 20 of those steps (the last among them) the R^2 on
the seed's held-out rows (``stream_seed(s, "test")``). The result's one
table, ``dynamics``, holds every run's and seed's rows, with the model's
``width`` and the token rows' step each run used (``token_block_rate_``);
the final values are functions of it (:func:`final`).
"""

from __future__ import annotations

import functools
import math
import numbers

import numpy as np
from sklearn.base import clone
from sklearn.utils._param_validation import Interval

from ...engine.batch_reuse import reusing_batches
from ...experiments import Experiment, Settings
from ...experiments._common import new_axes
from ...experiments._result import band, fmt_band
from ...experiments._settings import SequenceOf, StrOptions
from ...nn import positional_alignment
from ...studies import BandDisplay, stream_seed, training_curve
from .estimators import SparseTokenSelector
from .task import SparseTokenSelectionTask

_RUN_NAMES = {1.0: "same_step", "auto": "preconditioned"}
_SHORT = {"same_step": "same step (paper's)", "preconditioned": "preconditioned (ours)"}
_HEADLINE = ("cos", "gamma", "token_norm")
_R2_POINTS = 20  # the test R^2 is scored at about this many steps of a run (and the last)
_COUNT = [Interval(numbers.Integral, 1, None, closed="left")]

GD = SparseTokenSelector(
    64, solver="sgd", learning_rate_init=1.0, learning_rate="constant", batch_size=256
)
"""The default model: width 64, plain gradient descent at a constant step of 1, 256 rows a step."""


class ConvergenceSettings(Settings):
    """The settings of :func:`training_dynamics`: the task, the model and the runs.

    Attributes
    ----------
    seq_len, n_features, n_selected : int, default=16, 8, 3
        The task D_{T,q}: T tokens in R^d, q selected.
    estimator : SparseTokenSelector, default=GD
        The model to train (cloned; its ``random_state``, ``token_block_rate``
        and, if given, ``device`` are the run's): width 64, ``solver="sgd"``
        without momentum at a constant ``learning_rate_init=1.0``, batches
        of 256. Plain gradient descent needs a large step: the loss
        gradient at W = 0 is small (the scores are uniform).
    n_steps : int, default=300
        Gradient steps, each on a fresh batch.
    token_block_rates : tuple of (float or "auto"), or None, default=(1.0, "auto")
        One run per value, in order, the first the headline: the step of
        W's token rows as a multiple of the step (the estimator's
        ``token_block_rate``). 1.0 steps every block alike (the paper's
        algorithm); ``"auto"`` is the estimators' preconditioning
        (``1 / width`` with SGD). None runs once with the estimator's own.
    record_every : int, default=1
        Measure W every this many steps (a divisor of ``n_steps``, so that
        the last step is measured).
    n_test : int, default=1000
        Held-out rows of each seed scoring the test R^2.

    Examples
    --------
    >>> from stsq_learn.experiments import ConvergenceSettings
    >>> ConvergenceSettings(n_steps=100, record_every=10).token_block_rates
    (1.0, 'auto')
    """

    _parameter_constraints = {
        "seq_len": _COUNT,
        "n_features": _COUNT,
        "n_selected": _COUNT,
        "estimator": [SparseTokenSelector],
        "n_steps": _COUNT,
        "token_block_rates": [
            SequenceOf(Interval(numbers.Real, 0, None, closed="neither"), StrOptions({"auto"})),
            None,
        ],
        "record_every": _COUNT,
        "n_test": _COUNT,
    }

    seq_len: int = 16
    n_features: int = 8
    n_selected: int = 3
    estimator: SparseTokenSelector = GD
    n_steps: int = 300
    token_block_rates: tuple | None = (1.0, "auto")
    record_every: int = 1
    n_test: int = 1000

    def _validate(self):
        SparseTokenSelectionTask(self.seq_len, self.n_features, self.n_selected)
        rates = self.token_block_rates
        if rates is not None and len(set(rates)) != len(rates):
            raise ValueError(f"token_block_rates must not repeat a rate, got {rates!r}.")
        if self.n_steps % self.record_every:
            raise ValueError(
                f"record_every must divide n_steps ({self.n_steps}) so that the last step is "
                f"measured, got {self.record_every}."
            )


# -- measures (module level: a study may run them in worker processes) -----------------------
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


def _run_name(rate):
    """A run's name: ``same_step``, ``preconditioned`` or ``token_rate_<x>``."""
    return _RUN_NAMES[rate] if rate in _RUN_NAMES else f"token_rate_{rate:g}"


def _resolved_rate(estimator, rate):
    """The token rows' step a fit at ``rate`` runs: ``"auto"`` is 1/width with SGD (NaN: frozen)."""
    if not estimator.learn_token_block:
        return math.nan
    if rate == "auto":
        return 1.0 / estimator.width if estimator.solver in ("sgd", "auto") else 1.0
    return float(rate)


@reusing_batches
def run(cfg, seeds, *, device=None, progress=False, n_jobs=None):
    """One :func:`~stsq_learn.studies.training_curve` of every run over every seed.

    The arguments are :class:`~stsq_learn.experiments.Experiment`'s ``run``'s.

    Returns
    -------
    dict of str to StudyTable
        ``dynamics``: one row per (run, seed, step): ``model`` (the run's
        name), ``seed``, ``step``, ``cos``, ``gamma``, ``token_norm``,
        ``test_r2``, ``loss``, ``fit_failure``, ``width`` and
        ``token_block_rate_`` (the multiple of the step the token rows took).
    """
    est = cfg.estimator
    task = SparseTokenSelectionTask(cfg.seq_len, cfg.n_features, cfg.n_selected)
    rates = cfg.token_block_rates or (est.token_block_rate,)
    models = {_run_name(r): clone(est).set_params(token_block_rate=r) for r in rates}
    measures = {key: functools.partial(_alignment, key) for key in _HEADLINE}
    every, n_steps = cfg.record_every, cfg.n_steps
    stride = every * max(1, n_steps // (_R2_POINTS * every))
    measures["test_r2"] = _TestR2(task, cfg.n_test, stride, n_steps)
    table = training_curve(
        models,
        task,
        measures,
        every=every,
        seeds=seeds,
        n_steps=n_steps,
        error_score="raise",
        n_jobs=n_jobs,
        device=device,
        progress=progress,
    )
    step_of = {_run_name(r): _resolved_rate(est, r) for r in rates}
    return {
        "dynamics": table.with_columns(
            width=[est.width] * len(table),
            token_block_rate_=[step_of[m] for m in table["model"]],
        )
    }


# -- what the table gives --------------------------------------------------------------------
def final(result, run, column):
    """The last value of ``column`` in ``run`` (a one-seed view's; the median over seeds).

    Parameters
    ----------
    result : ExperimentResult
        A run of :func:`training_dynamics` or one seed's view of it.
    run : str
        A run's name (``"same_step"``, ``"preconditioned"``, ...).
    column : str
        ``"cos"``, ``"gamma"``, ``"token_norm"``, ``"test_r2"`` or ``"loss"``.

    Returns
    -------
    float
    """
    rows = result.tables["dynamics"].where(model=run)
    return float(np.median(rows.where(step=int(np.max(rows["step"])))[column]))


def run_label(result, run, short=False):
    """The words for a run: its token rows' step beside the paper's algorithm.

    Parameters
    ----------
    result : ExperimentResult
        A run of :func:`training_dynamics`.
    run : str
        A run's name.
    short : bool, default=False
        The short label of crowded legends (``"same step (paper's)"``).

    Returns
    -------
    str
    """
    if short:
        return _SHORT.get(run, run.replace("_", " "))
    rows = result.tables["dynamics"].where(model=run)
    rate, width = float(rows["token_block_rate_"][0]), int(rows["width"][0])
    if math.isnan(rate):
        return "token block frozen"
    if rate == 1.0:
        return "every block at the same step (the paper's algorithm)"
    share = (
        f"1/{width} of the step" if math.isclose(rate, 1 / width) else f"{rate:g} times the step"
    )
    return f"token rows at {share}" + (" (preconditioned, ours)" if run == "preconditioned" else "")


def _where(result):
    c, width = result.settings, int(result.tables["dynamics"]["width"][0])
    return f"T={c['seq_len']}, d={c['n_features']}, q={c['n_selected']}, m={width}"


def headline(result):
    """The final cos(W_pp, I), gamma and token-block norm of every run, of one seed.

    Returns
    -------
    dict of str to float
        ``"<run>.cos"``, ``"<run>.gamma"`` and ``"<run>.token_norm"`` for
        each run (``same_step``, ``preconditioned``), flat.
    """
    runs = result.tables["dynamics"].unique("model")
    return {f"{run}.{key}": final(result, run, key) for run in runs for key in _HEADLINE}


def summary(result):
    """Summary rows: one block per run, its final values over the seeds."""
    bands, c = result.bands(), result.settings
    rows = []
    for run in result.tables["dynamics"].unique("model"):
        r2 = band([final(result.seed(s), run, "test_r2") for s in result.seeds])
        rows += [
            f"| convergence ({_where(result)}; {run_label(result, run)}) | final cos(W_pp, I) | "
            f"{fmt_band(bands[f'{run}.cos'])} |",
            f"| | final gamma = tr(W_pp)/m | {fmt_band(bands[f'{run}.gamma'])} |",
            f"| | final token-block norm | {fmt_band(bands[f'{run}.token_norm'])} |",
            f"| | test R^2 after {c['n_steps']} steps | {fmt_band(r2)} |",
        ]
    return rows


# -- the figure ------------------------------------------------------------------------------
def figure(result, axes=None):
    """Loss, cos(W_pp, I), gamma beside the token norm, and the test R^2 along the training.

    Every curve is its median over the seeds with the min-max shaded; each
    run has one line style (the first solid, the next dashed, ...).

    Parameters
    ----------
    result : ExperimentResult
        A run of :func:`training_dynamics`.
    axes : sequence of 4 matplotlib Axes, default=None
        Where to draw; None makes a new figure (two rows of two).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = new_axes(axes, 4, ncols=2)
    table = result.tables["dynamics"]
    runs = table.unique("model")
    styles = dict(zip(runs, ("-", "--", ":", "-.") * len(runs)))
    short = {run: run_label(result, run, short=True) for run in runs}

    def draw(ax, y, color, labels, **kwargs):
        marker = "o" if y == "test_r2" else ""  # dense curves: no markers
        BandDisplay.from_table(
            table,
            x="step",
            y=y,
            ax=ax,
            colors=dict.fromkeys(runs, color),
            labels=labels,
            xlabel="gradient step",
            legend=False,
            line_kw={run: {"marker": marker, "ls": ls, "lw": 1.2} for run, ls in styles.items()},
            **kwargs,
        )

    ax_loss, ax_cos, ax_scale, ax_r2 = axes
    draw(
        ax_loss,
        "loss",
        "C0",
        {run: run_label(result, run) for run in runs},
        logy=True,
        ylabel="training loss (squared error)",
        title="Loss",
    )
    draw(
        ax_cos,
        "cos",
        "C1",
        short,
        ylabel=r"$\cos(W_{pp}, I)$",
        title="Positional block aligns with I",
    )
    ax_cos.axhline(1.0, color="gray", ls=":", lw=1, label="identity direction")
    ax_cos.set_ylim(-0.05, 1.05)
    for y, color, symbol in (("gamma", "C2", r"$\gamma$"), ("token_norm", "C3", r"$\|W_{xp}\|_F$")):
        labels = {run: f"{symbol}, {short[run]}" for run in runs}
        draw(ax_scale, y, color, labels, ylabel="value", title=r"Scale $\gamma$ and token block")
    draw(
        ax_r2,
        "test_r2",
        "C4",
        short,
        ylabel=r"test $R^2$",
        title="Fresh rows at the training length",
    )
    for ax, loc in zip(axes, ("upper right", "lower right", "upper left", "lower right")):
        ax.legend(loc=loc, fontsize="small")
    n = len(result.seeds)
    seeds = "one seed" if n == 1 else f"median over {n} seeds, band: min-max"
    fig.suptitle(f"Training dynamics from W = 0 ({_where(result)}; {seeds})")
    return fig


PROVENANCE = {
    "batch": "paper: a fresh batch of n = 256 rows at every step",
    "tokens": "paper: Gaussian tokens",
    "subsets": "paper: a uniform q-subset of the T positions",
    "algorithm": "paper: gradient descent from W = 0, every block of W at the same step "
    "(token_block_rate=1.0, the headline run)",
    "token_block_rate": "ours: the second run's 'auto' (token rows at 1/width of the step), "
    "the estimators' preconditioning, shown beside the paper's algorithm",
    "learning_rate_init": "ours: a constant step of 1.0",
    "solver": "ours: SGD without momentum (plain gradient descent on each batch)",
    "seq_len, n_features, n_selected": "ours: T, d and q of each preset",
    "width": "ours: each preset's width (the theory asks for O~(d + q log T))",
    "n_steps": "ours: each preset's steps",
    "n_test": "ours: fresh rows scoring the final R^2",
    "metric": "ours: cos(W_pp, I), gamma = tr(W_pp)/m, ||W_xp||_F and the test R^2 as reported",
}
"""Each setting: ``"paper: ..."`` where the paper fixes it, else ``"ours: ..."``."""

_FULL = dict(seq_len=64, n_features=16, n_selected=4, estimator=clone(GD).set_params(width=256))

RECORD = Experiment(
    name="convergence",
    function_name="training_dynamics",
    doc="""Train the selection transformer with plain gradient descent from W = 0; measure W.

    Every run of ``token_block_rates`` trains a clone of the estimator from
    W = 0 on fresh batches, from the same seed, and is measured along its
    training (see :mod:`stsq_learn.tasks.selection.convergence`; the
    settings: :class:`ConvergenceSettings`). At T=16, d=8, q=3, width 64,
    300 steps at step 1, the token block's norm ends at 0.55 with every
    block at the same step and 0.067 preconditioned; cos(W_pp, I) 0.999
    and gamma 2.63 either way. The measuring callback acts on one net, so
    the seeds' fits run one after another, with the numbers of one-seed
    runs.

    Examples
    --------
    >>> from stsq_learn.experiments import training_dynamics
    >>> from stsq_learn import SparseTokenSelector
    >>> result = training_dynamics(seq_len=8, n_features=2, n_selected=2, n_steps=20,
    ...                            estimator=SparseTokenSelector(16, solver="sgd",
    ...                                                          learning_rate_init=1.0),
    ...                            n_test=100, seeds=2)
    >>> result.tables["dynamics"].unique("model"), result.seeds
    (['same_step', 'preconditioned'], (0, 1))
    >>> sorted(result.bands())[:2]
    ['preconditioned.cos', 'preconditioned.gamma']
    """,
    settings=ConvergenceSettings,
    presets={
        "tiny": dict(
            seq_len=8,
            n_features=2,
            n_selected=2,
            estimator=clone(GD).set_params(width=8),
            n_steps=30,
            n_test=200,
        ),
        "quick": {},
        "full": dict(**_FULL, n_steps=5000, record_every=10),
        "gpu": dict(**_FULL, n_steps=10000, record_every=10),
    },
    run=run,
    figure=figure,
    headline=headline,
    summary=summary,
    provenance=PROVENANCE,
)
training_dynamics = RECORD.function
