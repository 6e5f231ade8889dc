"""Training dynamics of the selection task: from W = 0, gradient descent aligns W_pp with I.

The paper's algorithm (every block of W at one step) beside our preconditioning (the token rows
at ``1 / width`` of the step): the settings, the training curves, numbers, figure and record.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from sklearn.base import clone
from sklearn.utils._param_validation import StrOptions

from ...engine.batch_reuse import reusing_batches
from ...experiments import Experiment
from ...experiments._common import new_axes
from ...experiments._result import band, fmt_band, last_step
from ...experiments._settings import COUNTS, POSITIVE, SequenceOf
from ...nn import positional_alignment
from ...studies import BandDisplay, stream_seed, training_curve
from .estimators import SparseTokenSelector
from .length import TaskSettings, seeds_caption, sizes
from .task import SparseTokenSelectionTask

_SHORT = {"same_step": "same step (paper's)", "preconditioned": "preconditioned (ours)"}
_HEADLINE = ("cos", "gamma", "token_norm")
_R2_POINTS = 20  # the test R^2 is scored at about this many steps of a run (and the last)

GD = SparseTokenSelector(
    64, solver="sgd", learning_rate_init=1.0, learning_rate="constant", batch_size=256
)
"""The default model: width 64, plain gradient descent at a constant step of 1, 256 rows a step."""


class ConvergenceSettings(TaskSettings):
    """The settings of :func:`training_dynamics`: the task, the model and the runs.

    Attributes
    ----------
    seq_len, n_features, n_selected : int, default=16, 8, 3
        The task D_{T,q}: T tokens in R^d, q selected.
    estimator : SparseTokenSelector, default=GD
        The model (cloned; each run sets its ``token_block_rate``): plain GD
        needs a large step, the gradient at W = 0 being small.
    n_steps : int, default=300
        Gradient steps, each on a fresh batch.
    token_block_rates : tuple of (float or "auto"), or None, default=(1.0, "auto")
        The estimator's ``token_block_rate`` of each run, the first the
        headline's; None runs once with the estimator's own.
    record_every, n_test : int, default=1, 1000
        Measure W every this many steps (a divisor of ``n_steps``); held-out
        rows of each seed scoring the test R^2.

    Examples
    --------
    >>> from stsq_learn.experiments import ConvergenceSettings
    >>> ConvergenceSettings(n_steps=100, record_every=10).token_block_rates
    (1.0, 'auto')
    """

    _parameter_constraints = {
        **TaskSettings._parameter_constraints,
        **dict.fromkeys(("record_every", "n_test"), COUNTS),
        "token_block_rates": [SequenceOf(POSITIVE, StrOptions({"auto"})), None],
    }

    estimator: SparseTokenSelector = GD
    n_steps: int = 300
    token_block_rates: tuple | None = (1.0, "auto")
    record_every: int = 1
    n_test: int = 1000

    def _validate(self):
        super()._validate()
        rates = self.token_block_rates
        if rates is not None and len(set(rates)) != len(rates):
            raise ValueError(f"token_block_rates must not repeat a rate, got {rates!r}.")
        if self.n_steps % self.record_every:
            raise ValueError(
                f"record_every must divide n_steps ({self.n_steps}) so that the last step is "
                f"measured, got {self.record_every}."
            )


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


# -- the study (its measures at module level: a study may run them in worker processes) ------
def _alignment(key, estimator):
    """One number of :func:`~stsq_learn.nn.positional_alignment` of the estimator's W."""
    return positional_alignment(estimator.key_query_, estimator.n_features_in_)[key]


def _test_r2(task, n_test, stride, n_steps, rows, estimator):
    """R^2 on the held-out rows of the estimator's seed (kept in ``rows``), every ``stride`` steps
    and the last; NaN between: scoring ``n_test`` rows costs more than a step."""
    step = sum(len(epoch["batches"]) for epoch in estimator.net_.history)
    if step % stride and step != n_steps:
        return np.nan
    seed = estimator.random_state
    if seed not in rows:
        rows[seed] = task.sample(n_test, random_state=stream_seed(seed, "test"))
    return estimator.score(*rows[seed])


@reusing_batches
def run(cfg, seeds, **kw):
    """The record's ``run``: one training curve of every run over every seed.

    Returns ``dynamics``: a row per (run, seed, step): ``model`` (the run), ``cos``, ``gamma``,
    ``token_norm``, ``test_r2`` (NaN between the ~20 steps scored), ``loss``, ``fit_failure``,
    ``width`` and ``token_block_rate_`` (the multiple of the step the token rows took).
    """
    est, every, n_steps = cfg.estimator, cfg.record_every, cfg.n_steps
    task = SparseTokenSelectionTask(cfg.seq_len, cfg.n_features, cfg.n_selected)
    rates = {  # a run's name to its token_block_rate
        {1.0: "same_step", "auto": "preconditioned"}.get(r) or f"token_rate_{r:g}": r
        for r in cfg.token_block_rates or (est.token_block_rate,)
    }
    models = {name: clone(est).set_params(token_block_rate=r) for name, r in rates.items()}
    measures = {key: functools.partial(_alignment, key) for key in _HEADLINE}
    stride = every * max(1, n_steps // (_R2_POINTS * every))
    measures["test_r2"] = functools.partial(_test_r2, task, cfg.n_test, stride, n_steps, {})
    kw.update(every=every, seeds=seeds, n_steps=n_steps, error_score="raise", batch_seeds=True)
    table = training_curve(models, task, measures, **kw)
    auto = 1.0 / est.width if est.solver in ("sgd", "auto") else 1.0  # "auto": 1/width with SGD
    step_of = {  # the token rows' step each run takes (NaN: the block frozen)
        name: (auto if r == "auto" else float(r)) if est.learn_token_block else math.nan
        for name, r in rates.items()
    }
    steps = [step_of[m] for m in table["model"]]
    return {"dynamics": table.with_columns(width=[est.width] * len(table), token_block_rate_=steps)}


# -- what the table gives --------------------------------------------------------------------
def final(result, run, column):
    """The last value of the measure ``column`` (``"cos"``, ``"loss"``, ...) in the run named
    ``run`` (``"same_step"``, ...) of a :func:`training_dynamics` result: one seed's view's, or
    the median over the seeds."""
    rows = result.tables["dynamics"].where(model=run)
    return float(np.median(last_step(rows)[column]))


def run_label(result, run, short=False):
    """The words for the run named ``run`` of a :func:`training_dynamics` result: its token
    rows' step beside the paper's algorithm (``short``: the label of crowded legends,
    ``"same step (paper's)"``)."""
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
    """One seed's final ``<run>.cos``, ``<run>.gamma`` and ``<run>.token_norm`` of every run."""
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
_PANELS = (  # each panel's labels, and where its legend goes
    ({"ylabel": "training loss (squared error)", "title": "Loss", "logy": True}, "upper right"),
    ({"ylabel": r"$\cos(W_{pp}, I)$", "title": "Positional block aligns with I"}, "lower right"),
    ({"ylabel": "value", "title": r"Scale $\gamma$ and token block"}, "upper left"),
    ({"ylabel": r"test $R^2$", "title": "Fresh rows at the training length"}, "lower right"),
)


def figure(result, axes=None):
    """The record's ``figure``: loss, cos(W_pp, I), gamma and the token norm, the test R^2
    along the training, a line style per run."""
    fig, axes = new_axes(axes, 4)
    fig.suptitle(f"Training dynamics from W = 0 ({_where(result)}; {seeds_caption(result)})")
    table = result.tables["dynamics"]
    runs = table.unique("model")
    styles = dict(zip(runs, ("-", "--", ":", "-.") * len(runs)))
    short = {run: run_label(result, run, short=True) for run in runs}
    curves = (  # panel, column, colour, labels
        (0, "loss", "C0", {run: run_label(result, run) for run in runs}),
        (1, "cos", "C1", short),
        (2, "gamma", "C2", {run: rf"$\gamma$, {short[run]}" for run in runs}),
        (2, "token_norm", "C3", {run: rf"$\|W_{{xp}}\|_F$, {short[run]}" for run in runs}),
        (3, "test_r2", "C4", short),
    )
    common = {"x": "step", "xlabel": "gradient step", "legend": False}
    for i, y, color, labels in curves:
        marker = "o" if y == "test_r2" else ""  # dense curves: no markers
        line_kw = {run: {"marker": marker, "ls": ls, "lw": 1.2} for run, ls in styles.items()}
        kw = dict(colors=dict.fromkeys(runs, color), labels=labels, line_kw=line_kw, **common)
        BandDisplay.from_table(table, y=y, ax=axes[i], **kw, **_PANELS[i][0])
    axes[1].axhline(1.0, color="gray", ls=":", lw=1, label="identity direction")
    axes[1].set_ylim(-0.05, 1.05)
    for ax, (_, loc) in zip(axes, _PANELS):
        ax.legend(loc=loc, fontsize="small")
    return fig


RECORD = Experiment(
    name="convergence",
    function_name="training_dynamics",
    settings=ConvergenceSettings,
    doc="""Train the selection transformer with plain gradient descent from W = 0; measure W.

    One run per ``token_block_rates`` from the same seed
    (:mod:`stsq_learn.tasks.selection.convergence`; the settings:
    :class:`ConvergenceSettings`). At T=16, d=8, q=3, width 64, 300 steps at
    step 1, the token block's norm ends at 0.55 with every block at the same
    step and 0.067 preconditioned; cos(W_pp, I) 0.999 and gamma 2.63 either
    way.

    Examples
    --------
    >>> from stsq_learn.experiments import training_dynamics
    >>> from stsq_learn import SparseTokenSelector
    >>> model = SparseTokenSelector(16, solver="sgd", learning_rate_init=1.0)
    >>> result = training_dynamics(seq_len=8, n_features=2, n_selected=2,
    ...                            n_steps=20, estimator=model, n_test=100,
    ...                            seeds=2)
    >>> result.tables["dynamics"].unique("model"), result.seeds
    (['same_step', 'preconditioned'], (0, 1))
    >>> sorted(result.bands())[:2]
    ['preconditioned.cos', 'preconditioned.gamma']
    """,
    presets={
        "tiny": dict(**sizes(8, 2, 2, 8, GD), n_steps=30, n_test=200),
        "quick": {},
        "full": dict(**sizes(64, 16, 4, 256, GD), n_steps=5000, record_every=10),
        "gpu": dict(**sizes(64, 16, 4, 256, GD), n_steps=10000, record_every=10),
    },
    provenance=PROVENANCE,
)
training_dynamics = RECORD.function
