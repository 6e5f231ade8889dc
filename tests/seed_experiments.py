"""Throwaway experiments for the tests of seeds, bands, provenance and the reference check.

They live in a module of their own (not a test file) so that the worker
processes of a parallel run import them by name.
"""

import dataclasses
from dataclasses import dataclass

import numpy as np

from stsq_learn import SparseTokenSelector
from stsq_learn.experiments import SIZES, Experiment, Settings, Work
from stsq_learn.tasks import SparseTokenSelectionTask


@dataclass
class LevelResult:
    """A number: the preset's level plus a little noise of the seed."""

    level: float
    value: float

    def to_dict(self):
        return {"level": self.level, "value": self.value}

    def plot(self):
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots()
        ax.bar(["value"], [self.value])
        return fig


class LevelSettings(Settings):
    """The settings of :func:`level_study`.

    Attributes
    ----------
    level : float
        The number the result is near.
    """

    level: float = 1.0


def level_study(settings=None, *, device="auto", random_state=0, progress=False, **changes):
    """``level`` plus noise of scale 0.01 drawn with ``random_state`` (no training)."""
    level = LevelSettings.resolve(settings, changes).level
    noise = np.random.RandomState(random_state).standard_normal()
    return LevelResult(float(level), float(level + 0.01 * noise))


def level_headline(result):
    return {"value": result.value, "twice": 2 * result.value}


def _work(settings):
    task = SparseTokenSelectionTask(8, 2, 2)
    return [Work("level", 1, 10, SparseTokenSelector(8), task)]


LEVEL = Experiment(
    name="test_level",
    function=level_study,
    settings=LevelSettings,
    presets={size: LevelSettings(level=1.0) for size in SIZES},
    summary_rows=lambda rows, res: rows.append(f"| level | value | {res.value:.3f} |"),
    work=_work,
    headline=level_headline,
    provenance={"level": "ours: a number of the test", "noise": "paper: scale 0.01"},
)

PLAIN = Experiment(
    name="test_plain",
    function=level_study,
    settings=LevelSettings,
    presets={size: {"level": 5.0} for size in SIZES},
    summary_rows=lambda rows, res: rows.append(f"| plain | value | {res.value:.3f} |"),
    work=_work,
)


@dataclass
class FitResult:
    """The R^2 of a small model trained a few steps."""

    r2: float

    def to_dict(self):
        return {"r2": self.r2}

    def plot(self):
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots()
        ax.bar(["r2"], [self.r2])
        return fig

    @staticmethod
    def plot_bands(results):
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots()
        ax.plot([r.r2 for r in results], "o")
        ax.set_title(f"bands of {len(results)} seeds")
        return fig


class FitSettings(Settings):
    """The settings of :func:`fit_study`.

    Attributes
    ----------
    n_steps : int
        Online steps.
    """

    n_steps: int


def fit_study(settings=None, *, device="auto", random_state=0, progress=False, **changes):
    """A selector of width 8 trained ``n_steps`` steps at T = 8, d = 2, q = 2, scored."""
    n_steps = FitSettings.resolve(settings, changes).n_steps
    task = SparseTokenSelectionTask(8, 2, 2)
    model = SparseTokenSelector(8, random_state=random_state, device=device)
    model.fit_online(task, n_steps)
    X, y = task.sample(100, random_state=random_state + 1000)
    return FitResult(float(model.score(X, y)))


FIT = Experiment(
    name="test_fit",
    function=fit_study,
    settings=FitSettings,
    presets={size: {"n_steps": 20} for size in SIZES},
    summary_rows=lambda rows, res: rows.append(f"| fit | R^2 | {res.r2:.3f} |"),
    work=_work,
    headline=lambda res: {"r2": res.r2},
)


def level_batch_study(
    settings=None, *, seeds=None, device="auto", random_state=0, progress=False, **changes
):
    """:func:`level_study` of each of ``seeds`` in one call (a list), or of ``random_state``."""
    if seeds is None:
        return level_study(settings, device=device, random_state=random_state, **changes)
    return [level_study(settings, device=device, random_state=s, **changes) for s in seeds]


LEVEL_BATCHED = dataclasses.replace(
    LEVEL, name="test_level_batched", function=level_batch_study, seeds_batched=True
)
"""The level experiment with its seeds in one run (``seeds_batched``)."""


def first_seed_study(settings=None, *, seeds=(0,), device="auto", progress=False, **changes):
    """A batched study gone wrong: the result of its first seed only."""
    return level_study(settings, device=device, random_state=seeds[0], **changes)


WRONG_BATCHED = dataclasses.replace(
    LEVEL, name="test_wrong_batched", function=first_seed_study, seeds_batched=True
)
"""A batched record whose function returns one result, not one per seed."""


class WidthSettings(Settings):
    """The settings of :func:`width_study`.

    Attributes
    ----------
    lengths : tuple of int
        The sequence lengths.
    """

    lengths: tuple = (4, 8)


@dataclass
class WidthResult:
    """One seed's rows of a minimal-width study."""

    table: object

    def to_dict(self):
        return self.table.to_dict()

    def plot(self):
        from stsq_learn.studies import BandDisplay

        return BandDisplay.from_table(self.table, x="seq_len", y="value").figure_


def _width(s, seeds, **options):
    from user_tasks import PairMeanTask

    from stsq_learn import AttentionRegressor
    from stsq_learn.studies import minimal_width

    model = AttentionRegressor(PairMeanTask, dtype="float64")
    grid = {"seq_len": list(s.lengths)}
    return minimal_width(
        model,
        PairMeanTask(4, 2),
        [2, 4, 8, 16],
        grid=grid,
        seeds=seeds,
        n_steps=80,
        n_test=300,
        target=0.5,
        **options,
    )


def width_study(settings=None, *, seeds=(0,), device="auto", progress=False, **changes):
    """A user's experiment on the studies: the least width of the pair-mean task, per seed."""
    s = WidthSettings.resolve(settings, changes)
    table = _width(s, tuple(seeds), batch_seeds=True, device=device, progress=progress)
    return [WidthResult(table.where(seed=seed)) for seed in seeds]


WIDTH = Experiment(
    name="test_width",
    function=width_study,
    settings=WidthSettings,
    presets={size: WidthSettings() for size in SIZES},
    summary_rows=lambda rows, res: rows.append("| width | found | ... |"),
    work=lambda s: list(_width(s, (0,), dry_run=True)),
    headline=lambda res: {
        f"width_T{T:.0f}": w for T, w in zip(*res.table.xy("seq_len", "value", finite=False))
    },
    seeds_batched=True,
)
"""A user's experiment written on the studies, its seeds trained together."""
