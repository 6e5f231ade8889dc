"""Length generalization of the selection task: stochastic against fixed encodings, at longer T'.

The paper's out-of-distribution claim: a transformer trained with
stochastic positional encodings keeps its accuracy on longer sequences, one
trained with fixed encodings does not. A stochastic and a fixed encoding
(and, with ``train_range``, a stochastic one over a range of lengths) are
trained at length T and scored at every ``T' = factor * T`` through the
task's own length shift (unselected tokens inserted, every target kept),
each with its predict-time variants: encoding draws averaged, and
length-aware score scales (:mod:`stsq_learn.encodings.length_scale`),
against the isotropic floor (the best R^2 of any ``W = gamma I`` of the
width). The curves are :func:`~stsq_learn.studies.length_curve`'s, every
model's seeds trained as one batched model (``batch_seeds=True``).

The result's tables: ``r2``, one row per (curve, validation set, seed, T'),
and ``floor`` (no seed: it depends on none), when computed.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import clone
from sklearn.utils._param_validation import Interval

from ...encodings.length_scale import LENGTH_SCALES, cached_floor
from ...engine.batch_reuse import reusing_batches
from ...experiments import Experiment, Settings
from ...experiments._common import new_axes
from ...experiments._result import fmt_band
from ...experiments._settings import SequenceOf, StrOptions, positive_ints
from ...studies import BandDisplay, StudyTable, length_curve
from ...studies.plan import active_plan
from .estimators import SparseTokenSelector
from .task import SparseTokenSelectionTask

VALIDATION_SETS = {"val_128": 128, "val_large": None}
"""The validation sets: the paper's 128 rows, and the first ``n_val_large`` (all of them)."""

ADAM = SparseTokenSelector(
    64, solver="adam", learning_rate_init=0.01, learning_rate="constant", batch_size=256
)
"""The default model of the length experiments: width 64, Adam at a constant 0.01, 256 rows."""

COUNT = [Interval(numbers.Integral, 1, None, closed="left")]
_SCALES = StrOptions(set(LENGTH_SCALES))


class TaskSettings(Settings):
    """What the length experiments share: the training task, the model, its steps, the T'.

    The base of :class:`LengthGeneralizationSettings` and
    :class:`~stsq_learn.experiments.EncodingsSettings`, which document its
    settings.
    """

    _parameter_constraints = {
        "seq_len": COUNT,
        "n_features": COUNT,
        "n_selected": COUNT,
        "estimator": [SparseTokenSelector],
        "n_steps": COUNT,
        "factors": [positive_ints()],
    }

    seq_len: int = 16
    n_features: int = 8
    n_selected: int = 3
    estimator: SparseTokenSelector = ADAM
    n_steps: int = 500
    factors: tuple = (1, 2, 4, 8, 16)

    def _validate(self):
        SparseTokenSelectionTask(self.seq_len, self.n_features, self.n_selected)


class LengthGeneralizationSettings(TaskSettings):
    """The settings of :func:`length_generalization`: the task, the model, the lengths.

    Attributes
    ----------
    seq_len, n_features, n_selected : int, default=16, 8, 3
        The training task D_{T,q}.
    estimator : SparseTokenSelector, default=ADAM
        The model to train (cloned; its ``positional_encoding``,
        ``random_state`` and, if given, ``device`` are the run's): width
        64, Adam at a constant step of 0.01, batches of 256.
    n_steps : int, default=500
        Online training steps of each model (long enough for fixed
        encodings to fit their positions, which keeps them from
        extrapolating).
    factors : tuple of int, default=(1, 2, 4, 8, 16)
        Evaluation lengths T' as multiples of ``seq_len``.
    n_pe_samples : int, default=16
        Encoding draws averaged by the second stochastic curve (1 skips it).
    n_val_large : int, default=1000
        Held-out rows of the larger validation set (its first 128 are the
        paper's smaller one).
    length_scales : tuple of {"log", "floor"}, default=("log", "floor")
        Length scales the fitted stochastic model is also scored with (the
        fixed one with the last of them); empty skips those curves.
    train_range : tuple of (int, int) or None, default=None
        A range of training lengths ``(T_min, seq_len)`` for one more
        stochastic model, trained with ``range_scale``; None skips it.
    range_scale : {"log", "floor"}, default="log"
        The length scale of the model trained over ``train_range``.
    floor : bool, default=True
        Compute the isotropic floor at each length (on 20,000 simulated
        rows, those the ``"floor"`` scale reads its gammas from).

    Examples
    --------
    >>> from stsq_learn.experiments import LengthGeneralizationSettings
    >>> preset = LengthGeneralizationSettings(seq_len=8, factors=(1, 2))
    >>> preset.replace(n_steps=20).n_steps, preset.factors
    (20, (1, 2))
    """

    _parameter_constraints = {
        **TaskSettings._parameter_constraints,
        "n_pe_samples": COUNT,
        "n_val_large": COUNT,
        "length_scales": [SequenceOf(_SCALES, min_len=0)],
        "train_range": [positive_ints(min_len=2, increasing=True), None],
        "range_scale": [_SCALES],
        "floor": ["boolean"],
    }

    n_pe_samples: int = 16
    n_val_large: int = 1000
    length_scales: tuple = ("log", "floor")
    train_range: tuple | None = None
    range_scale: str = "log"
    floor: bool = True

    def _validate(self):
        super()._validate()
        if self.train_range is not None and (
            len(self.train_range) != 2 or self.train_range[1] != self.seq_len
        ):
            raise ValueError(
                f"train_range must be (T_min, seq_len={self.seq_len}): the models are read "
                f"against each other at the same longest training length, got {self.train_range!r}."
            )


def sizes(seq_len, n_features, n_selected, width):
    """A preset's training task and model (:data:`ADAM` at ``width``), as settings."""
    estimator = clone(ADAM).set_params(width=width)
    return dict(seq_len=seq_len, n_features=n_features, n_selected=n_selected, estimator=estimator)


def eval_lengths(settings):
    """The lengths T' scored, increasing: ``factor * seq_len`` for each of ``factors``."""
    return sorted({int(f) * settings["seq_len"] for f in settings["factors"]})


class _VariantScore:
    """R^2 on the first ``n_rows`` rows, predicting with ``n_pe_samples`` draws and a scale."""

    def __init__(self, n_pe_samples, length_scale, n_rows):
        self.n_pe_samples, self.length_scale, self.n_rows = n_pe_samples, length_scale, n_rows

    def __call__(self, estimator, X, y):
        own = {k: estimator.get_params()[k] for k in ("n_pe_samples", "length_scale")}
        estimator.set_params(n_pe_samples=self.n_pe_samples, length_scale=self.length_scale)
        try:
            return estimator.score(X[: self.n_rows], y[: self.n_rows])
        finally:
            estimator.set_params(**own)


def _models(cfg):
    """Model key to ``(estimator, task, [(curve, draws, scale), ...])``: what each is scored as."""
    task = SparseTokenSelectionTask(cfg.seq_len, cfg.n_features, cfg.n_selected)
    scales = list(cfg.length_scales)
    stochastic = [("stochastic", 1, None)]
    if cfg.n_pe_samples > 1:
        stochastic.append((f"stochastic, {cfg.n_pe_samples} draws", cfg.n_pe_samples, None))
    stochastic += [(f"stochastic, {s} scale", 1, s) for s in scales]
    fixed = [("fixed", 1, None)] + [(f"fixed, {s} scale", 1, s) for s in scales[-1:]]
    models = {
        pe: (clone(cfg.estimator).set_params(positional_encoding=pe), task, curves)
        for pe, curves in (("stochastic", stochastic), ("fixed", fixed))
    }
    if cfg.train_range is not None:
        lo, hi = cfg.train_range
        label = f"stochastic, trained on {lo}..{hi}, {cfg.range_scale} scale"
        est = clone(cfg.estimator).set_params(
            positional_encoding="stochastic", length_scale=cfg.range_scale
        )
        on = SparseTokenSelectionTask((lo, hi), cfg.n_features, cfg.n_selected)
        models[label] = (est, on, [(label, 1, cfg.range_scale)])
    return models


@reusing_batches
def run(cfg, seeds, *, device=None, progress=False, n_jobs=None):
    """One :func:`~stsq_learn.studies.length_curve` per trained model, over every seed.

    The arguments are :class:`~stsq_learn.experiments.Experiment`'s ``run``'s;
    each model's seeds train as one batched model.

    Returns
    -------
    dict of str to StudyTable
        ``r2``: ``model`` (the curve), ``validation``, ``seed``,
        ``eval_seq_len``, ``r2``; and with ``floor``, ``floor``:
        ``eval_seq_len``, ``floor_r2`` and ``width`` (no seed).
    """
    lengths = eval_lengths(cfg)
    sizes = {k: n or cfg.n_val_large for k, n in VALIDATION_SETS.items()}
    parts = [
        length_curve(
            {key: est},
            on,
            lengths,
            seeds=seeds,
            n_steps=cfg.n_steps,
            n_test=max(sizes.values()),
            scoring={
                f"{curve}|{name}": _VariantScore(k, scale, rows)
                for curve, k, scale in curves
                for name, rows in sizes.items()
            },
            error_score="raise",
            n_jobs=n_jobs,
            device=device,
            batch_seeds=True,
            progress=progress,
        )
        for key, (est, on, curves) in _models(cfg).items()
    ]
    tables = {"r2": _long_table(parts)}
    if cfg.floor and active_plan() is None:  # the floor's simulation is no study: not planned
        m = cfg.estimator.width
        floor = [1.0 - cached_floor(t, cfg.n_selected, m, 1).relative_mse for t in lengths]
        tables["floor"] = StudyTable(
            {"eval_seq_len": lengths, "floor_r2": floor, "width": [m] * len(lengths)}
        )
    return tables


def _long_table(tables):
    """One row per (curve, validation set, seed, length) of the studies' tables."""
    out = {name: [] for name in ("model", "validation", "seed", "eval_seq_len", "r2")}
    for table in tables:
        scores = [c for c in table.columns if "|" in c]
        for i in range(len(table)):
            for column in scores:
                curve, validation = column.split("|")
                values = (curve, validation, table["seed"][i], table["eval_seq_len"][i])
                for name, value in zip(out, (*values, table[column][i])):
                    out[name].append(value)
    return StudyTable(out, meta=tables[0].meta)


# -- what the tables give --------------------------------------------------------------------
def slug(text):
    """``text`` as a flat name: lowercase words joined by ``_``."""
    return "_".join("".join(c if c.isalnum() else " " for c in text.lower()).split())


def floor_r2(result):
    """T' to the isotropic floor's R^2 (empty where the floor was not computed)."""
    if "floor" not in result.tables:
        return {}
    xs, ys = result.tables["floor"].xy("eval_seq_len", "floor_r2")
    return {int(x): float(y) for x, y in zip(xs, ys)}


def headline(result):
    """The R^2 of every curve at every T' on the large validation set, of one seed.

    Returns
    -------
    dict of str to float
        ``<curve>_r2_at_<k>T`` (R^2 at ``k`` times the training length) and,
        where the floor was computed and is below R^2 = 1,
        ``<curve>_floor_ratio_at_<k>T``: the curve's relative MSE over the
        floor's.
    """
    T = result.settings["seq_len"]
    table = result.tables["r2"].where(validation="val_large")
    floor = floor_r2(result)
    out = {}
    for model in table.unique("model"):
        rows = table.where(model=model)
        for t, r2 in zip(rows["eval_seq_len"], rows["r2"]):
            out[f"{slug(model)}_r2_at_{t // T}T"] = float(r2)
            if floor.get(int(t), 1.0) < 1:
                out[f"{slug(model)}_floor_ratio_at_{t // T}T"] = (1 - r2) / (1 - floor[int(t)])
    return out


def summary(result):
    """Summary rows: the floor and every curve's R^2 at every T' (median [min, max])."""
    c, bands = result.settings, result.bands()
    T, lengths = c["seq_len"], eval_lengths(c)
    ks = [t // T for t in lengths]
    rows = [
        f"| length generalization (T={T}, {c['n_val_large']} rows) | R^2 at "
        f"{', '.join(f'{k}T' for k in ks)} | |"
    ]
    floor = floor_r2(result)
    if floor:
        m = int(result.tables["floor"]["width"][0])
        values = " / ".join(f"{floor[t]:.3f}" for t in lengths)
        rows.append(f"| | floor at T' (best W = gamma I of width {m}) | {values} |")
    for model in result.tables["r2"].unique("model"):
        values = " / ".join(fmt_band(bands[f"{slug(model)}_r2_at_{k}T"]) for k in ks)
        rows.append(f"| | {model} | {values} |")
    return rows


# -- the figure ------------------------------------------------------------------------------
def length_axes(ax, T, values):
    """An R^2 against T' panel: the training length and R^2 = 0 marked, R^2 from below 0 to 1."""
    ax.set_ylim(min(-0.1, np.nanmin(values, initial=0.0) - 0.05), 1.02)
    ax.axvline(T, color="gray", ls=":", lw=1, label=f"training length T={T}")
    ax.axhline(0.0, color="k", lw=0.5)


def figure(result, axes=None):
    """R^2 against T' for every curve, one panel per validation set, the floor beside.

    Parameters
    ----------
    result : ExperimentResult
        A run of :func:`length_generalization`.
    axes : sequence of 2 matplotlib Axes, default=None
        One per validation set; None makes a new figure (one row).

    Returns
    -------
    matplotlib.figure.Figure
        Each curve its median over the seeds with the min-max shaded; the
        fixed encoding in red squares (dashed, its scale dotted).
    """
    fig, axes = new_axes(axes, 2)
    c, table = result.settings, result.tables["r2"]
    T = c["seq_len"]
    models = table.unique("model")
    others = iter(["C0", "C1", "C2", "C4", "C6", "C8", "C9", "C5"])
    colors = {m: "C3" if m.startswith("fixed") else next(others) for m in models}
    line_kw = {
        m: {"marker": "s", "ls": ":" if "scale" in m else "--"}
        for m in models
        if m.startswith("fixed")
    }
    floor = floor_r2(result)
    theory = None
    if floor:
        m = int(result.tables["floor"]["width"][0])
        theory = {f"floor at T' (best W = gamma I, width {m})": (list(floor), list(floor.values()))}
    for ax, (name, n_rows) in zip(axes, VALIDATION_SETS.items()):
        BandDisplay.from_table(
            table.where(validation=name),
            x="eval_seq_len",
            y="r2",
            theory=theory,
            ax=ax,
            logx=True,
            colors=colors,
            legend=False,
            line_kw=line_kw,
            xlabel="evaluation length T' (log scale)",
            ylabel="$R^2$ (1 - relative MSE)",
            title=f"Validation set of {n_rows or c['n_val_large']} rows",
        )
        length_axes(ax, T, table["r2"])
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize="small")
    n = len(result.seeds)
    seeds = "one seed" if n == 1 else f"median over {n} seeds, band: min-max"
    fig.suptitle(f"Length generalization, trained at T={T} ({seeds})")
    return fig


SHARED_PROVENANCE = {
    "batch_size": "paper: a fresh batch of 256 rows per step (online training)",
    "tokens": "paper: Gaussian tokens",
    "subsets": "paper: uniform q-subsets",
    "seq_len": "ours: the training length",
    **dict.fromkeys(
        ("n_features", "n_selected", "width", "n_steps", "learning_rate_init"),
        "ours: chosen for these presets",
    ),
    "solver": "ours: Adam at a constant step of 0.01",
    "factors": "ours: the test lengths",
    "metric": "ours: R^2 = 1 - relative MSE",
}
"""The provenance of the settings the length experiments share."""

PROVENANCE = {
    **SHARED_PROVENANCE,
    "n_val_128": "paper: a fixed 128-row out-of-distribution validation set",
    "positional_encoding": "paper: stochastic positional encodings against fixed ones",
    "n_val_large": "ours: a larger validation set, for less noise",
    "n_pe_samples": "ours: encoding draws averaged at predict time",
    "length_scales": "ours: length-aware score scales",
    "train_range": "ours: a model trained over a range of lengths",
    "range_scale": "ours: chosen for these presets",
    "floor": "ours: the isotropic floor W = gamma I of the width, as the reference",
}
"""Setting by setting, whether it comes from the paper or is ours."""

RECORD = Experiment(
    name="length_generalization",
    function_name="length_generalization",
    doc="""Train stochastic and fixed encodings at length T; score them at T' = factor * T.

    Two clones of the estimator, with ``positional_encoding="stochastic"``
    and ``"fixed"``, are trained online at ``seq_len`` (and, with
    ``train_range``, a stochastic one over a range of lengths); each is
    scored on its seed's held-out rows moved to each T', with its
    predict-time variants (see :mod:`stsq_learn.tasks.selection.length`;
    the settings: :class:`LengthGeneralizationSettings`). From the paper:
    the fresh batch of 256 rows per step, the 128-row validation set,
    Gaussian tokens and uniform q-subsets; the rest is ours (``PROVENANCE``).

    Examples
    --------
    >>> from stsq_learn.experiments import length_generalization
    >>> result = length_generalization("tiny", seeds=2, n_steps=10, n_val_large=150)
    >>> result.tables["r2"].unique("eval_seq_len"), result.seeds
    ([8, 16], (0, 1))
    >>> len(result.bands()["fixed_r2_at_2T"]["values"])
    2
    """,
    settings=LengthGeneralizationSettings,
    presets={
        "tiny": dict(
            **sizes(8, 2, 2, 8),
            n_steps=30,
            factors=(1, 2),
            n_pe_samples=4,
            n_val_large=200,
            train_range=(4, 8),
            floor=False,
        ),
        "quick": dict(train_range=(4, 16)),  # 1500 steps: twice the time, the same shapes
        "full": dict(
            **sizes(32, 16, 4, 128),
            n_steps=4000,
            factors=(1, 2, 4, 8, 16, 32),
            n_val_large=2000,
            train_range=(8, 32),
            range_scale="floor",
        ),
        "gpu": dict(
            **sizes(64, 16, 4, 256),
            n_steps=5000,
            factors=(1, 2, 4, 8, 16, 32, 64),
            n_pe_samples=64,
            n_val_large=10000,
            train_range=(16, 64),
            range_scale="floor",
        ),
    },
    run=run,
    figure=figure,
    headline=headline,
    summary=summary,
    provenance=PROVENANCE,
    aliases=("length",),
)
length_generalization = RECORD.function
