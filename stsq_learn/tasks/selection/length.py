"""Length generalization of the selection task: stochastic against fixed encodings at T'.

Models trained at T, scored at every ``T' = factor * T`` through the task's length shift; and
what the other selection experiments share with it.
"""

from __future__ import annotations

import functools

from sklearn.base import clone

from ...encodings.length_scale import LENGTH_SCALES, cached_floor
from ...engine.batch_reuse import reusing_batches
from ...experiments import Experiment, Settings
from ...experiments._common import length_axes, new_axes
from ...experiments._result import fmt_band
from ...experiments._settings import COUNTS, SequenceOf, StrOptions, positive_ints
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

_SCALES = StrOptions(set(LENGTH_SCALES))


class TaskSettings(Settings):
    """The selection experiments' task, model and steps (documented by their settings)."""

    _parameter_constraints = {
        **dict.fromkeys(("seq_len", "n_features", "n_selected", "n_steps"), COUNTS),
        "estimator": [SparseTokenSelector],
    }

    seq_len: int = 16
    n_features: int = 8
    n_selected: int = 3
    estimator: SparseTokenSelector = ADAM
    n_steps: int = 500

    def _validate(self):
        SparseTokenSelectionTask(self.seq_len, self.n_features, self.n_selected)


class LengthGeneralizationSettings(TaskSettings):
    """The settings of :func:`length_generalization`: the task, the model, the lengths.

    Attributes
    ----------
    seq_len, n_features, n_selected : int, default=16, 8, 3
        The training task D_{T,q}.
    estimator : SparseTokenSelector, default=ADAM
        The model (cloned; each curve sets its ``positional_encoding``).
    n_steps : int, default=500
        Online steps of each model (enough for fixed encodings to fit their
        positions, which keeps them from extrapolating).
    factors : tuple of int, default=(1, 2, 4, 8, 16)
        Evaluation lengths T' as multiples of ``seq_len``.
    n_pe_samples, n_val_large : int, default=16, 1000
        Encoding draws averaged by the second stochastic curve (1 skips it);
        held-out rows of the large validation set (the first 128: the paper's).
    length_scales : tuple of {"log", "floor"}, default=("log", "floor")
        Length-aware score scales (:mod:`stsq_learn.encodings.length_scale`)
        the stochastic model is also scored with (the fixed one with the last).
    train_range, range_scale : (int, int) or None, {"log", "floor"}, default=None, "log"
        ``(T_min, seq_len)``: one more stochastic model, trained over these
        lengths with the length scale ``range_scale`` (None: none).
    floor : bool, default=True
        Compute the isotropic floor at each T' (the best R^2 of any ``W =
        gamma I`` of the width, on 20,000 simulated rows).

    Examples
    --------
    >>> from stsq_learn.experiments import LengthGeneralizationSettings
    >>> preset = LengthGeneralizationSettings(seq_len=8, factors=(1, 2))
    >>> preset.replace(n_steps=20).n_steps, preset.factors
    (20, (1, 2))
    """

    _parameter_constraints = {
        **TaskSettings._parameter_constraints,
        **dict.fromkeys(("n_pe_samples", "n_val_large"), COUNTS),
        "factors": [positive_ints()],
        "length_scales": [SequenceOf(_SCALES, min_len=0)],
        "train_range": [positive_ints(min_len=2, increasing=True), None],
        "range_scale": [_SCALES],
        "floor": ["boolean"],
    }

    factors: tuple = (1, 2, 4, 8, 16)
    n_pe_samples: int = 16
    n_val_large: int = 1000
    length_scales: tuple = ("log", "floor")
    train_range: tuple | None = None
    range_scale: str = "log"
    floor: bool = True

    def _validate(self):
        super()._validate()
        if self.train_range is not None and self.train_range[1:] != (self.seq_len,):
            raise ValueError(
                f"train_range must be (T_min, seq_len={self.seq_len}): the models are read "
                f"against each other at the same longest training length, got {self.train_range!r}."
            )


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


def sizes(seq_len, n_features, n_selected, width, estimator=ADAM):
    """A preset's training task and model (``estimator`` at ``width``), as settings."""
    estimator = clone(estimator).set_params(width=width)
    return dict(seq_len=seq_len, n_features=n_features, n_selected=n_selected, estimator=estimator)


TINY = dict(**sizes(8, 2, 2, 8), n_steps=30, factors=(1, 2))
"""The tiny preset's task, model, steps and lengths T', shared by the length experiments."""


def eval_lengths(settings):
    """The lengths T' scored, increasing: ``factor * seq_len`` for each of ``factors``."""
    return sorted({int(f) * settings["seq_len"] for f in settings["factors"]})


# -- the studies -----------------------------------------------------------------------------
def _variant_score(n_pe_samples, length_scale, n_rows, estimator, X, y):
    """R^2 on the first ``n_rows`` rows, predicting with ``n_pe_samples`` draws and a scale."""
    own = {k: estimator.get_params()[k] for k in ("n_pe_samples", "length_scale")}
    estimator.set_params(n_pe_samples=n_pe_samples, length_scale=length_scale)
    try:
        return estimator.score(X[:n_rows], y[:n_rows])
    finally:
        estimator.set_params(**own)


def _models(cfg):
    """Model key to ``(estimator, task, [(curve, draws, scale), ...])``: what each is scored as."""
    task = SparseTokenSelectionTask(cfg.seq_len, cfg.n_features, cfg.n_selected)
    stochastic = [("stochastic", 1, None)]
    if cfg.n_pe_samples > 1:
        stochastic.append((f"stochastic, {cfg.n_pe_samples} draws", cfg.n_pe_samples, None))
    stochastic += [(f"stochastic, {s} scale", 1, s) for s in cfg.length_scales]
    fixed = [("fixed", 1, None)] + [(f"fixed, {s} scale", 1, s) for s in cfg.length_scales[-1:]]
    models = {
        pe: (clone(cfg.estimator).set_params(positional_encoding=pe), task, curves)
        for pe, curves in (("stochastic", stochastic), ("fixed", fixed))
    }
    if cfg.train_range is not None:
        lo, hi = cfg.train_range
        label = f"stochastic, trained on {lo}..{hi}, {cfg.range_scale} scale"
        est = clone(models["stochastic"][0]).set_params(length_scale=cfg.range_scale)
        on = SparseTokenSelectionTask((lo, hi), cfg.n_features, cfg.n_selected)
        models[label] = (est, on, [(label, 1, cfg.range_scale)])
    return models


@reusing_batches
def run(cfg, seeds, **kw):
    """The record's ``run``: one :func:`~stsq_learn.studies.length_curve` per trained model.

    Returns ``r2`` (``model``: the curve, ``validation``, ``seed``,
    ``eval_seq_len``, ``r2``) and, with ``floor``, ``floor`` (no seed).
    """
    lengths = eval_lengths(cfg)
    rows = {k: n or cfg.n_val_large for k, n in VALIDATION_SETS.items()}
    kw.update(seeds=seeds, n_steps=cfg.n_steps, n_test=max(rows.values()), batch_seeds=True)
    kw["error_score"] = "raise"
    parts = []
    for key, (est, on, curves) in _models(cfg).items():
        scoring = {
            f"{curve}|{name}": functools.partial(_variant_score, k, scale, n)
            for curve, k, scale in curves
            for name, n in rows.items()
        }
        parts.append(length_curve({key: est}, on, lengths, scoring=scoring, **kw))
    # One row per (curve, validation set, seed, length) of the studies' "curve|set" columns.
    long = [
        (*column.split("|"), part["seed"][i], part["eval_seq_len"][i], part[column][i])
        for part in parts
        for i in range(len(part))
        for column in part.columns
        if "|" in column
    ]
    names = ("model", "validation", "seed", "eval_seq_len", "r2")
    tables = {"r2": StudyTable(dict(zip(names, map(list, zip(*long)))), meta=parts[0].meta)}
    if cfg.floor and active_plan() is None:
        m = cfg.estimator.width
        floor = [1.0 - cached_floor(t, cfg.n_selected, m, 1).relative_mse for t in lengths]
        columns = dict(eval_seq_len=lengths, floor_r2=floor, width=[m] * len(lengths))
        tables["floor"] = StudyTable(columns)
    return tables


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
    """One seed's ``<curve>_r2_at_<k>T`` (R^2 at k T on the large set) of every curve and T'.

    Where the floor is below 1, ``<curve>_floor_ratio_at_<k>T`` too: the
    curve's relative MSE over the floor's.
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
R2_AXES = dict(x="eval_seq_len", logx=True, legend=False, ylabel="$R^2$ (1 - relative MSE)")
R2_AXES["xlabel"] = "evaluation length T' (log scale)"
"""The style of an R^2 against T' panel (``BandDisplay.from_table``'s arguments)."""


def seeds_caption(result):
    """What a figure's bands show: ``"one seed"`` or ``"median over <n> seeds, band: min-max"``."""
    n = len(result.seeds)
    return "one seed" if n == 1 else f"median over {n} seeds, band: min-max"


def figure(result, axes=None):
    """The record's ``figure``: R^2 against T', a panel per validation set, the floor beside."""
    fig, axes = new_axes(axes, 2)
    c, table = result.settings, result.tables["r2"]
    fig.suptitle(f"Length generalization, trained at T={c['seq_len']} ({seeds_caption(result)})")
    fixed = [m for m in table.unique("model") if m.startswith("fixed")]
    others = iter(["C0", "C1", "C2", "C4", "C6", "C8", "C9", "C5"])
    colors = {m: "C3" if m in fixed else next(others) for m in table.unique("model")}
    style = {"colors": colors, "theory": None, **R2_AXES}
    style["line_kw"] = {m: {"marker": "s", "ls": ":" if "scale" in m else "--"} for m in fixed}
    floor = floor_r2(result)
    if floor:
        label = f"floor at T' (best W = gamma I, width {int(result.tables['floor']['width'][0])})"
        style["theory"] = {label: (list(floor), list(floor.values()))}
    for ax, (name, n_rows) in zip(axes, VALIDATION_SETS.items()):
        title = f"Validation set of {n_rows or c['n_val_large']} rows"
        BandDisplay.from_table(table.where(validation=name), y="r2", ax=ax, title=title, **style)
        length_axes(ax, c["seq_len"], table["r2"])
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize="small")
    return fig


RECORD = Experiment(
    name="length_generalization",
    function_name="length_generalization",
    settings=LengthGeneralizationSettings,
    doc="""Train stochastic and fixed encodings at length T; score them at T' = factor * T.

    Clones of the estimator with ``positional_encoding="stochastic"`` and
    ``"fixed"`` (and with ``train_range`` one more) are trained online, each
    scored on its seed's held-out rows moved to each T' with its variants
    (:mod:`stsq_learn.tasks.selection.length`; the settings:
    :class:`LengthGeneralizationSettings`; the paper's and ours: ``PROVENANCE``).

    Examples
    --------
    >>> from stsq_learn.experiments import length_generalization
    >>> result = length_generalization("tiny", seeds=2, n_steps=10,
    ...                                n_val_large=150)
    >>> result.tables["r2"].unique("eval_seq_len"), result.seeds
    ([8, 16], (0, 1))
    >>> len(result.bands()["fixed_r2_at_2T"]["values"])
    2
    """,
    presets={
        "tiny": dict(**TINY, n_pe_samples=4, n_val_large=200, train_range=(4, 8), floor=False),
        "quick": dict(train_range=(4, 16)),  # 1500 steps: twice the time, the same shapes
        "full": dict(**sizes(32, 16, 4, 128), n_steps=4000, factors=(1, 2, 4, 8, 16, 32))
        | dict(n_val_large=2000, train_range=(8, 32), range_scale="floor"),
        "gpu": dict(**sizes(64, 16, 4, 256), n_steps=5000, factors=(1, 2, 4, 8, 16, 32, 64))
        | dict(n_pe_samples=64, n_val_large=10000, train_range=(16, 64), range_scale="floor"),
    },
    provenance=PROVENANCE,
    aliases=("length",),
)
length_generalization = RECORD.function
