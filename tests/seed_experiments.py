"""Throwaway experiments on the experiment layer, for the tests of reproduce and its results.

They live in a module of their own (not a test file) so that the worker
processes of a parallel run import them by name. Each is what a user's own
experiment is: settings with constraints, a ``run`` returning study tables
with a ``seed`` column, a figure drawn from the tables, a record.
"""

import numbers

import numpy as np
from sklearn.utils._param_validation import Interval

from stsq_learn import SparseTokenSelector
from stsq_learn.experiments import SIZES, Experiment, Settings, Work
from stsq_learn.studies import BandDisplay, StudyTable, minimal_width, sweep
from stsq_learn.studies.plan import active_plan
from stsq_learn.tasks import SparseTokenSelectionTask


class LevelSettings(Settings):
    """The settings of :func:`level_study`.

    Attributes
    ----------
    level : float
        The number the result is near.
    """

    _parameter_constraints = {"level": [Interval(numbers.Real, None, None, closed="neither")]}

    level: float = 1.0


def noise(seed):
    """The noise of seed ``seed`` (what the level experiments add to their level)."""
    return 0.01 * np.random.RandomState(seed).standard_normal()


def level_run(cfg, seeds, *, device, progress, n_jobs):
    """One row per seed: ``level`` plus its noise (no training; a plan records one part)."""
    plan = active_plan()
    if plan is not None:
        plan.append(Work("level", 1, 10, SparseTokenSelector(8), SparseTokenSelectionTask(8, 2, 2)))
        return {"levels": StudyTable({"seed": [], "value": []})}
    values = [cfg.level + noise(s) for s in seeds]
    return {"levels": StudyTable({"seed": list(seeds), "value": values})}


def level_figure(result, axes=None):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots() if axes is None else (axes[0].figure, axes[0])
    table = result.tables["levels"]
    ax.plot(table["seed"], table["value"], "o")
    ax.set_title(f"{len(table)} seeds")
    return fig


def level_headline(result):
    (value,) = result.tables["levels"]["value"]
    return {"value": value, "twice": 2 * value}


LEVEL = Experiment(
    name="test_level",
    function_name="level_study",
    doc="``level`` plus noise of scale 0.01 per seed (no training).",
    settings=LevelSettings,
    presets={size: {} for size in SIZES},
    run=level_run,
    figure=level_figure,
    headline=level_headline,
    summary=lambda result: [f"| level | seeds | {len(result.seeds)} |"],
    provenance={"level": "ours: a number of the test", "noise": "paper: scale 0.01"},
)
level_study = LEVEL.function

PLAIN = Experiment(
    name="test_plain",
    function_name="plain_study",
    doc="The level experiment without headline numbers.",
    settings=LevelSettings,
    presets={size: {"level": 5.0} for size in SIZES},
    run=level_run,
    figure=level_figure,
)
"""The level experiment without headline numbers."""


class FitSettings(Settings):
    """The settings of :func:`fit_study`.

    Attributes
    ----------
    n_steps : int
        Online steps.
    """

    _parameter_constraints = {"n_steps": [Interval(numbers.Integral, 1, None, closed="left")]}

    n_steps: int = 20


def fit_run(cfg, seeds, *, device, progress, n_jobs):
    """A selector of width 8 trained ``n_steps`` steps at T = 8, d = 2, q = 2, scored."""
    model = SparseTokenSelector(8) if device is None else SparseTokenSelector(8, device=device)
    table = sweep(
        model,
        SparseTokenSelectionTask(8, 2, 2),
        seeds=seeds,
        n_steps=cfg.n_steps,
        n_test=100,
        batch_seeds=True,
        n_jobs=n_jobs,
        progress=progress,
    )
    return {"fits": table}


def fit_figure(result, axes=None):
    return BandDisplay.from_table(result.tables["fits"], x="seed", y="score").figure_


FIT = Experiment(
    name="test_fit",
    function_name="fit_study",
    doc="The trained selector's R^2 per seed.",
    settings=FitSettings,
    presets={size: {} for size in SIZES},
    run=fit_run,
    figure=fit_figure,
    headline=lambda result: {"r2": float(result.tables["fits"]["score"][0])},
)
fit_study = FIT.function


class WidthSettings(Settings):
    """The settings of :func:`width_study`.

    Attributes
    ----------
    lengths : tuple of int
        The sequence lengths.
    """

    _parameter_constraints = {"lengths": "no_validation"}

    lengths: tuple = (4, 8)


def width_run(cfg, seeds, *, device, progress, n_jobs):
    """A user's experiment on the studies: the least width of the pair-mean task, per seed."""
    from user_tasks import PairMeanTask

    from stsq_learn import AttentionRegressor

    table = minimal_width(
        AttentionRegressor(PairMeanTask, dtype="float64"),
        PairMeanTask(4, 2),
        [2, 4, 8, 16],
        grid={"seq_len": list(cfg.lengths)},
        seeds=seeds,
        n_steps=80,
        n_test=300,
        target=0.5,
        batch_seeds=True,
        n_jobs=n_jobs,
        progress=progress,
    )
    return {"widths": table}


WIDTH = Experiment(
    name="test_width",
    function_name="width_study",
    doc="The least width of the pair-mean task against its length.",
    settings=WidthSettings,
    presets={size: {} for size in SIZES},
    run=width_run,
    figure=lambda result, axes=None: (
        BandDisplay.from_table(result.tables["widths"], x="seq_len", y="value", logx=True).figure_
    ),
    headline=lambda result: {
        f"width_T{T:.0f}": w
        for T, w in zip(*result.tables["widths"].xy("seq_len", "value", finite=False))
    },
)
"""A user's experiment written on the studies, its seeds trained together."""
width_study = WIDTH.function
