"""Length generalization of the selection task: stochastic against fixed encodings, at longer T'.

:func:`length_generalization` trains a stochastic and a fixed encoding
(and, if asked, a stochastic one over a range of lengths) at length T and
scores each fitted model at every ``T' = factor * T`` through the task's own
length shift, with its predict-time variants (encoding draws averaged,
length-aware score scales, :mod:`stsq_learn.encodings.length_scale`),
against the isotropic floor. Its curves are :func:`stsq_learn.studies.length_curve`'s,
every model's seeds trained as one batched model (``batch_seeds=True``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from ..._validation import check_positive_int, resolve_device
from ...encodings.length_scale import cached_floor, length_scale_rule
from ...engine.batch_reuse import reusing_batches
from ...experiments._common import estimator_config, seed_results
from ...experiments._settings import Settings
from ...studies import BandDisplay, StudyTable, check_seeds, length_curve
from .estimators import SparseTokenSelector
from .task import SparseTokenSelectionTask

__all__ = [
    "LengthGeneralizationResult",
    "LengthGeneralizationSettings",
    "length_generalization",
]


# -- shared with the encodings comparison ----------------------------------------------------
def checked_estimator(estimator):
    """``estimator`` (None: ``SparseTokenSelector(64)``), refused unless a SparseTokenSelector."""
    if estimator is None:
        return SparseTokenSelector(64)
    if not isinstance(estimator, SparseTokenSelector):
        raise TypeError(
            f"estimator must be a SparseTokenSelector, got {type(estimator).__name__}: "
            f"{estimator!r}."
        )
    return estimator


def seeds_of(random_state, seeds):
    """The run's seeds and whether it returns a list: ``seeds`` if given, else ``random_state``."""
    if seeds is None:
        return check_seeds([random_state]), False
    return check_seeds(seeds), True


def device_of(device, estimator):
    """The device the models train on (``device``, else the estimator's), checked."""
    return str(resolve_device(estimator.device if device is None else device))


def run_config(task, estimator, n_steps, device):
    """What a result records of the run's task, model, steps and device (JSON-ready)."""
    return {
        "seq_len": task.seq_len,
        "n_features": task.n_features,
        "n_selected": task.n_selected,
        "width": estimator.width,
        "n_steps": n_steps,
        "solver": estimator.solver,
        "learning_rate_init": estimator.learning_rate_init,
        "batch_size": estimator.batch_size,
        "estimator": estimator_config(estimator),
        "device": device,
    }


def length_axes(ax, lengths, T, values):
    """An R^2 against T' panel: log-2 lengths, the training length and R^2 = 0 marked.

    The y axis runs from below the lowest of ``values`` (and -0.1) to 1.
    """
    ax.set_ylim(min(-0.1, np.nanmin(values, initial=0.0) - 0.05), 1.02)
    ax.axvline(T, color="gray", ls=":", lw=1, label=f"training length T={T}")
    ax.axhline(0.0, color="k", lw=0.5)
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(t) for t in lengths])
    ax.minorticks_off()
    ax.set_xlabel("evaluation length T' (log scale)")
    ax.set_ylabel("$R^2$ (1 - relative MSE)")


def new_figure(axes, n, width):
    """``n`` panels in a row (``axes`` given, or a new constrained figure)."""
    import matplotlib.pyplot as plt

    if axes is None:
        fig, axes = plt.subplots(1, n, figsize=(width * n, 5.2), layout="constrained")
        return fig, list(np.atleast_1d(axes))
    axes = list(np.atleast_1d(axes))
    if len(axes) != n:
        raise ValueError(f"axes must hold {n} matplotlib Axes, got {len(axes)}.")
    return axes[0].figure, axes


# -- the experiment's result ------------------------------------------------------------------
VALIDATION_SETS = ("val_128", "val_large")


@dataclass
class LengthGeneralizationResult:
    """R^2 of models trained at length T, scored on held-out rows moved to T', for one seed.

    Attributes
    ----------
    config : dict
        The experiment's settings.
    eval_lengths : list of int
        The lengths T' scored (T' = factor * T).
    models : list of str
        Curve names: ``"stochastic"`` (one encoding draw, the paper),
        ``"stochastic, K draws"`` (the same fitted model averaging its
        attention over K draws at predict time), ``"stochastic, <rule>
        scale"`` (the same model with ``length_scale=<rule>``), ``"fixed"``
        and ``"fixed, <rule> scale"``, and ``"stochastic, trained on
        T_min..T, <rule> scale"`` (trained over a range of lengths).
    r2 : dict of str to dict of str to list of float
        ``r2[validation_set][model]`` is the R^2 at each of ``eval_lengths``;
        the validation sets are ``"val_large"`` (``n_val_large`` held-out
        rows) and ``"val_128"`` (their first 128, the paper's size).
    train_r2 : dict of str to float
        In-distribution R^2 of each trained model on the large validation set.
    floor_r2 : list of float or None
        ``1 - isotropic_floor(T', q, width)``: the best R^2 any ``W = gamma I``
        of the width reaches at each of ``eval_lengths`` (None where not
        computed).
    table : StudyTable
        The long table behind ``r2``: ``model``, ``validation``, ``seed``,
        ``eval_seq_len``, ``r2``.

    Examples
    --------
    >>> from stsq_learn.experiments import length_generalization
    >>> from stsq_learn import SparseTokenSelector
    >>> res = length_generalization(seq_len=8, n_features=2, n_selected=2,
    ...                             estimator=SparseTokenSelector(16), n_steps=20,
    ...                             factors=(1, 2), n_val_large=200, random_state=0)
    >>> sorted(res.r2), res.eval_lengths
    (['val_128', 'val_large'], [8, 16])
    """

    config: dict
    eval_lengths: list
    models: list
    r2: dict
    train_r2: dict
    floor_r2: list | None
    table: StudyTable

    def at(self, model, factor, validation="val_large"):
        """R^2 of ``model`` at length ``factor * T`` on a validation set.

        Parameters
        ----------
        model : str
            One of ``models``.
        factor : float
            Relative length; ``factor * T`` must be one of ``eval_lengths``.
        validation : str, default="val_large"
            Name of the validation set, a key of ``r2``.

        Returns
        -------
        float
            The recorded R^2.
        """
        T = self.config["seq_len"]
        return self.r2[validation][model][self.eval_lengths.index(int(factor * T))]

    def to_dict(self):
        """JSON-ready dict of the fields, the table as its ``to_dict()``.

        Returns
        -------
        dict
            The fields by name.
        """
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["table"] = self.table.to_dict()
        return out

    @classmethod
    def from_dict(cls, data):
        """The result :meth:`to_dict` described.

        Parameters
        ----------
        data : dict
            A result's ``to_dict()``.

        Returns
        -------
        LengthGeneralizationResult
            The result, its table a :class:`~stsq_learn.studies.StudyTable` again.
        """
        return cls(**{**data, "table": StudyTable.from_dict(data["table"])})

    def plot(self, axes=None):
        """R^2 against T' for each model, one panel per validation set, the floor beside.

        Parameters
        ----------
        axes : sequence of 2 matplotlib Axes, default=None
            One per validation set; ``None`` makes a new figure with one row.

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
        results : sequence of LengthGeneralizationResult
            One per seed, with the same lengths and models.
        axes : sequence of 2 matplotlib Axes, default=None
            One per validation set; ``None`` makes a new figure with one row.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The panels of :meth:`plot`, each curve the median over the seeds
            with the min-max shaded; the floor depends on no seed.
        """
        return _plot(results, axes)


def _plot(results, axes):
    """The figure of :meth:`LengthGeneralizationResult.plot` over one or several seeds."""
    results = seed_results(results, LengthGeneralizationResult, ("eval_lengths", "models"))
    first = results[0]
    table = StudyTable.concat([res.table for res in results])
    fig, axes = new_figure(axes, len(VALIDATION_SETS), 6)
    cfg, lengths = first.config, first.eval_lengths
    floor = None
    if first.floor_r2 is not None:
        label = f"floor at T' (best W = gamma I, width {cfg['width']})"
        floor = {label: (lengths, first.floor_r2)}
    colors = iter(["C0", "C1", "C2", "C4", "C6", "C8", "C9", "C5"])
    colors = {m: "C3" if m.startswith("fixed") else next(colors) for m in first.models}
    for ax, name in zip(axes, VALIDATION_SETS):
        n_rows = cfg["n_val_large"] if name == "val_large" else 128
        display = BandDisplay.from_table(
            table.where(validation=name),
            x="eval_seq_len",
            y="r2",
            theory=floor,
            ax=ax,
            logx=True,
            colors=colors,
            title=f"Validation set of {n_rows} rows, {len(results)} seed(s)",
        )
        ax.get_legend().remove()
        for model, line in display.lines_.items():
            if model.startswith("fixed"):  # fixed in red squares, its scale dotted
                line.set(marker="s", ls=":" if "scale" in model else "--")
        length_axes(ax, lengths, cfg["seq_len"], table.xy("eval_seq_len", "r2")[1])
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize="small")
    fig.suptitle(f"Length generalization, trained at T={cfg['seq_len']}")
    return fig


# -- the experiment ---------------------------------------------------------------------------
class LengthGeneralizationSettings(Settings):
    """The settings of :func:`length_generalization`: the task, the model, the lengths.

    Attributes
    ----------
    seq_len, n_features, n_selected : int, default=16, 8, 3
        The training task D_{T,q}.
    estimator : SparseTokenSelector or None, default=None
        The model to train (cloned; its ``positional_encoding``,
        ``random_state`` and, if given, ``device`` are replaced). None is
        ``SparseTokenSelector(width=64)``.
    n_steps : int, default=1500
        Online training steps of each model (long enough for fixed encodings to
        fit their positions, which is what keeps them from extrapolating).
    factors : tuple of int, default=(1, 2, 4, 8)
        Evaluation lengths as multiples of ``seq_len``.
    n_pe_samples : int, default=16
        Encoding draws averaged by the second curve (1 skips that curve).
    n_val_large : int, default=1000
        Held-out rows of the larger validation set (the first 128 of them
        are the smaller one).
    length_scales : tuple of {"log", "floor"}, default=("log", "floor")
        Length scales the fitted stochastic model is also scored with (the
        fixed one with the last of them); empty skips those curves.
    train_range : tuple of (int, int) or None, default=None
        A range of training lengths ``(T_min, T)`` for one more stochastic
        model, trained with ``range_scale``; None skips it.
    range_scale : {"log", "floor"}, default="log"
        The length scale of the model trained over ``train_range``.
    floor : bool, default=True
        Compute the isotropic floor at each length (on 20,000 simulated rows,
        the same the ``"floor"`` scale reads its gammas from).

    Examples
    --------
    >>> from stsq_learn.experiments import LengthGeneralizationSettings
    >>> preset = LengthGeneralizationSettings(seq_len=8, factors=(1, 2))
    >>> preset.replace(n_steps=20).n_steps, preset.factors
    (20, (1, 2))
    """

    seq_len: int = 16
    n_features: int = 8
    n_selected: int = 3
    estimator: SparseTokenSelector | None = None
    n_steps: int = 1500
    factors: tuple = (1, 2, 4, 8)
    n_pe_samples: int = 16
    n_val_large: int = 1000
    length_scales: tuple = ("log", "floor")
    train_range: tuple | None = None
    range_scale: str = "log"
    floor: bool = True


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


@reusing_batches
def length_generalization(
    settings=None, *, device=None, random_state=0, seeds=None, progress=False, **changes
):
    """Train stochastic and fixed encodings at length T; score them at T' = factor * T.

    The paper's out-of-distribution claim: a transformer trained with
    stochastic positional encodings keeps its accuracy on longer sequences,
    one trained with fixed encodings does not. Two clones of ``estimator``,
    one with ``positional_encoding="stochastic"`` and one with ``"fixed"``,
    are trained online at length ``seq_len`` (and, with ``train_range``, a
    stochastic one over a range of lengths); each is scored on its seed's
    held-out rows moved to each T' by the task's length shift (unselected
    tokens inserted, every target kept), with its predict-time variants: the
    stochastic model averaging ``n_pe_samples`` encoding draws, and each
    model with the length scales. The curves are
    :func:`~stsq_learn.studies.length_curve`'s, with ``batch_seeds=True``
    (the seeds of a model trained as one batched model) and the seed rule
    of :mod:`stsq_learn.studies.seeds`.

    From the paper: the fresh batch of 256 rows per step, the 128-row
    validation set, Gaussian tokens and uniform q-subsets. Ours: the sizes,
    the steps, the optimiser, the test lengths, the larger validation set,
    the length scales, and R^2 (1 - relative MSE) as the metric
    (``PROVENANCE`` of its record says so setting by setting).

    Parameters
    ----------
    settings : LengthGeneralizationSettings, mapping or None, default=None
        The task, the model, the evaluation lengths and the curves (None:
        the defaults).
    device : str or None, default=None
        Training device; None keeps the estimator's.
    random_state : int, default=0
        The seed of a one-seed run (ignored when ``seeds`` is given).
    seeds : int or sequence of int or None, default=None
        Several seeds, trained together: ``n`` is ``0 .. n-1``. None runs
        ``random_state`` alone.
    progress : bool, default=False
        Show a tqdm progress bar over the models.
    **changes
        Settings of :class:`LengthGeneralizationSettings` to change
        (``length_generalization(n_steps=500)``).

    Returns
    -------
    LengthGeneralizationResult or list of LengthGeneralizationResult
        One result (``seeds`` None), or one per seed in seed order.

    Raises
    ------
    TypeError, ValueError
        For a bad setting, named, before any training.
    """
    cfg = LengthGeneralizationSettings.resolve(settings, changes)
    n_steps = check_positive_int(cfg.n_steps, "n_steps")
    n_pe_samples = check_positive_int(cfg.n_pe_samples, "n_pe_samples")
    n_val_large = check_positive_int(cfg.n_val_large, "n_val_large")
    factors = [check_positive_int(f, "factors[i]") for f in cfg.factors]
    if not factors:
        raise ValueError("factors must name at least one length multiple, got an empty sequence.")
    length_scales = [length_scale_rule(s).name for s in cfg.length_scales]
    range_scale = length_scale_rule(cfg.range_scale).name
    base = checked_estimator(cfg.estimator)
    run_seeds, as_list = seeds_of(random_state, seeds)
    used = device_of(device, base)
    task = SparseTokenSelectionTask(cfg.seq_len, cfg.n_features, cfg.n_selected)
    T = task.seq_len
    range_task = _checked_range(cfg.train_range, T, cfg.n_features, cfg.n_selected)
    eval_lengths = sorted({f * T for f in factors})
    # model label -> (estimator, task, [(curve, draws, scale)])
    stochastic = [("stochastic", 1, None)]
    if n_pe_samples > 1:
        stochastic.append((f"stochastic, {n_pe_samples} draws", n_pe_samples, None))
    stochastic += [(f"stochastic, {s} scale", 1, s) for s in length_scales]
    fixed = [("fixed", 1, None)]
    fixed += [(f"fixed, {s} scale", 1, s) for s in length_scales[-1:]]
    runs = {
        pe: (clone(base).set_params(positional_encoding=pe), task, curves)
        for pe, curves in (("stochastic", stochastic), ("fixed", fixed))
    }
    if range_task is not None:
        lo, hi = range_task.length_range
        label = f"stochastic, trained on {lo}..{hi}, {range_scale} scale"
        est = clone(base).set_params(positional_encoding="stochastic", length_scale=range_scale)
        runs[label] = (est, range_task, [(label, 1, range_scale)])
    n_test = max(128, n_val_large)
    sizes = {"val_128": 128, "val_large": n_val_large}
    tables = [
        length_curve(
            {key: est},
            on,
            eval_lengths,
            seeds=run_seeds,
            n_steps=n_steps,
            n_test=n_test,
            scoring={
                f"{curve}|{name}": _VariantScore(k, scale, rows)
                for curve, k, scale in curves
                for name, rows in sizes.items()
            },
            error_score="raise",
            device=used,
            batch_seeds=True,
            progress=progress,
        )
        for key, (est, on, curves) in runs.items()
    ]
    floor_r2 = None
    if cfg.floor:
        floor_r2 = [
            1.0 - cached_floor(t, cfg.n_selected, base.width, 1).relative_mse for t in eval_lengths
        ]
    config = {
        **run_config(task, base, n_steps, used),
        "factors": factors,
        "n_pe_samples": n_pe_samples,
        "n_val_128": 128,
        "n_val_large": n_val_large,
        "length_scales": length_scales,
        "train_range": None if range_task is None else list(range_task.length_range),
        "range_scale": range_scale,
    }
    curves = [curve for _, _, cs in runs.values() for curve, _, _ in cs]
    table = _long_table(tables)
    results = [
        _result(table.where(seed=s), {**config, "random_state": s}, list(runs), curves, floor_r2)
        for s in run_seeds
    ]
    return results if as_list else results[0]


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


def _result(table, config, trained, curves, floor_r2):
    """The :class:`LengthGeneralizationResult` of one seed's rows (``trained``: the models)."""
    eval_lengths = table.unique("eval_seq_len")
    r2 = {
        name: {c: [float(v) for v in table.where(validation=name, model=c)["r2"]] for c in curves}
        for name in VALIDATION_SETS
    }
    i = eval_lengths.index(config["seq_len"]) if config["seq_len"] in eval_lengths else None
    train_r2 = {key: None if i is None else r2["val_large"][key][i] for key in trained}
    return LengthGeneralizationResult(
        config=config,
        eval_lengths=list(eval_lengths),
        models=list(curves),
        r2=r2,
        train_r2=train_r2,
        floor_r2=floor_r2,
        table=table,
    )


def _checked_range(train_range, T, n_features, n_selected):
    """The task over ``train_range`` (ending at the training length T), or None."""
    if train_range is None:
        return None
    if not isinstance(train_range, (tuple, list)) or len(train_range) != 2:
        raise ValueError(f"train_range must be None or (T_min, T_max), got {train_range!r}.")
    if int(train_range[1]) != T:
        raise ValueError(
            f"train_range must end at the training length seq_len={T} (the models are read "
            f"against each other at the same longest training length), got {train_range!r}."
        )
    return SparseTokenSelectionTask(tuple(train_range), n_features, n_selected)
