"""Experiment 2: length generalization of stochastic vs fixed encodings, against the floor.

Beside the paper's two curves, the same fitted models are scored with the
length-aware score scales (:mod:`stsq_learn.length_scale`), a stochastic
model is trained over a range of lengths with a scale, and the isotropic
floor at every evaluation length (the best any ``W = gamma I`` of the width
reaches there) is the reference every curve is read against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from .._validation import check_positive_int
from ..encodings.length_scale import cached_floor, length_scale_rule
from ..engine.batch_reuse import reusing_batches
from ..tasks import SparseTokenSelectionTask
from ..tasks.selection.estimators import SparseTokenSelector
from ._bands import plot_band
from ._common import (
    ShiftedRows,
    band_title,
    dataclass_dict,
    derived_seed,
    estimator_config,
    n_workers,
    new_axes,
    prepared,
    progress_bar,
    run_jobs,
    seed_results,
    train_online,
)
from ._settings import Settings


@dataclass
class LengthGeneralizationResult:
    """R^2 of models trained at length T, scored on validation sets moved to T'.

    Attributes
    ----------
    config : dict
        The experiment's settings.
    eval_lengths : list of int
        The lengths T' scored (T' = factor * T).
    models : list of str
        Curve names: ``"stochastic"`` (SPE, one encoding draw, the paper),
        ``"stochastic, K draws"`` (the same fitted model averaging its
        attention over K draws at predict time), ``"stochastic, <rule>
        scale"`` (the same model with ``length_scale=<rule>``), ``"fixed"``
        and ``"fixed, <rule> scale"``, and ``"stochastic, trained on
        T_min..T, <rule> scale"`` (trained over a range of lengths).
    r2 : dict of str to dict of str to list of float
        ``r2[validation_set][model]`` is the R^2 at each of ``eval_lengths``;
        the validation sets are ``"val_128"`` (128 rows, the paper's size)
        and ``"val_large"``.
    train_r2 : dict of str to float
        In-distribution R^2 of each trained model on the large validation set.
    floor_r2 : list of float
        ``1 - isotropic_floor(T', q, width)``: the best R^2 any ``W = gamma I``
        of the width reaches at each of ``eval_lengths`` (None where not
        computed).

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
    floor_r2: list | None = None

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
        """JSON-ready dict of the fields."""
        return dataclass_dict(self)

    def plot(self, axes=None):
        """R^2 against T' for each model, one panel per validation set.

        Parameters
        ----------
        axes : sequence of matplotlib Axes, default=None
            One per validation set; ``None`` makes a new figure with one row.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure holding the axes.
        """
        return _plot([self], axes)

    @staticmethod
    def plot_bands(results, axes=None):
        """The figure of :meth:`plot` over seeds: each model's median R^2 and its min-max band.

        Parameters
        ----------
        results : sequence of LengthGeneralizationResult
            One per seed, with the same lengths, models and validation sets
            (the experiment at several ``random_state``).
        axes : sequence of matplotlib Axes, default=None
            One per validation set; ``None`` makes a new figure with one row.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The panels and labels of :meth:`plot`, each model's R^2 drawn
            as its median over the seeds with the min-max shaded, the floor
            (which depends on no seed: the first result's) as before. One result draws
            :meth:`plot`'s figure.
        """
        same = ("eval_lengths", "models")
        return _plot(seed_results(results, LengthGeneralizationResult, same), axes)


def _plot(results, axes):
    """The figure of :meth:`LengthGeneralizationResult.plot` over one or several seeds."""
    first = results[0]
    sets = list(first.r2)
    for i, res in enumerate(results):
        if list(res.r2) != sets:
            raise ValueError(
                f"results[{i}] has the validation sets {list(res.r2)}, results[0] has {sets}: "
                "the seeds of one experiment score the same sets."
            )
    fig, axes = new_axes(axes, len(sets), figsize=(6 * len(sets), 5.2))
    T = first.config["seq_len"]
    lengths = first.eval_lengths
    for ax, name in zip(axes, sets):
        if first.floor_r2 is not None:
            ax.plot(
                lengths,
                first.floor_r2,
                color="k",
                ls="--",
                lw=1.5,
                label=f"floor at T' (best W = gamma I, width {first.config['width']}, 1 draw)",
            )
        others = iter(["C0", "C1", "C2", "C4", "C6", "C8", "C9", "C5"])  # red: fixed
        for model in first.models:
            fixed = model.startswith("fixed")
            style = dict(
                color="C3" if fixed else next(others),
                marker="s" if fixed else "o",
                ls=(":" if "scale" in model else "--") if fixed else "-",
            )
            plot_band(ax, lengths, [res.r2[name][model] for res in results], label=model, **style)
        ax.axvline(T, color="gray", ls=":", lw=1, label=f"training length T={T}")
        ax.axhline(0.0, color="k", lw=0.5)
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(t) for t in lengths])
        ax.set_xlabel("evaluation length T' (log scale)")
        ax.set_ylabel("$R^2$ (1 - relative MSE)")
        lowest = np.nanmin([min(v) for res in results for v in res.r2[name].values()])
        ax.set_ylim(min(-0.1, lowest - 0.05), 1.02)
        n_rows = first.config["n_val_128"] if name == "val_128" else first.config["n_val_large"]
        ax.set_title(f"Length shift, validation set of {n_rows} rows")
    # One legend for both panels, below them: the curves stay visible.
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize="small")
    if len(results) > 1:
        fig.suptitle(f"Length generalization, {band_title(len(results))}")
    return fig


class LengthGeneralizationSettings(Settings):
    """The settings of :func:`length_generalization`: the task, the model, the lengths.

    Attributes
    ----------
    seq_len, n_features, n_selected : int, default=16, 8, 3
        The training task D_{T,q}.
    estimator : SparseTokenSelector or None, default=None
        The model to train (cloned; its ``positional_encoding``,
        ``random_state`` and, if given, ``device`` are replaced). None is
        ``SparseTokenSelector(width=64)``: Adam at 0.01, batches of 256.
    n_steps : int, default=1500
        Online training steps of each model (long enough for fixed encodings to
        fit their positions, which is what keeps them from extrapolating).
    factors : tuple of int, default=(1, 2, 4, 8)
        Evaluation lengths as multiples of ``seq_len``.
    n_pe_samples : int, default=16
        Encoding draws averaged by the third curve (1 skips that curve).
    n_val_large : int, default=1000
        Rows of the larger validation set.
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


@reusing_batches
def length_generalization(
    settings=None, *, device=None, random_state=0, progress=False, n_jobs=None, **changes
):
    """Train SPE and fixed encodings at length T; score at T' = factor * T, against the floor.

    The paper's out-of-distribution claim: a transformer trained with
    stochastic positional encodings keeps its accuracy on longer sequences,
    one trained with fixed encodings does not. Two clones of ``estimator``,
    one with ``positional_encoding="stochastic"`` and one with ``"fixed"``,
    are trained online (fresh batches) at length ``seq_len``; two fixed
    validation sets drawn at that length (128 rows as in the paper, and
    ``n_val_large`` rows) are moved to each T' by
    :class:`~stsq_learn.LengthShiftScorer`, which inserts unselected tokens
    and keeps every target. The SPE model is also scored with its attention
    averaged over ``n_pe_samples`` encoding draws.

    From the paper: the fresh batch of 256 rows per step, the fixed 128-row
    validation set, Gaussian tokens and uniform q-subsets. Ours: the sizes,
    the steps, the optimiser (Adam at 0.01), the test lengths, the larger
    validation set, the length scales, and R^2 (1 - relative MSE) as the
    metric (``PROVENANCE`` of its record says so setting by setting).

    Parameters
    ----------
    settings : LengthGeneralizationSettings, mapping or None, default=None
        The task, the model, the evaluation lengths and the curves (None:
        the defaults).
    device : str or None, default=None
        Training device; None keeps the estimator's.
    random_state : int, default=0
        Seed of the run.
    progress : bool, default=False
        Show tqdm progress bars.
    n_jobs : int or None, default=None
        Worker processes the models train on (joblib's process backend,
        one PyTorch thread each); None is 1, -1 every core. The results do
        not depend on it.
    **changes
        Settings of :class:`LengthGeneralizationSettings` to change
        (``length_generalization(n_steps=500)``).

    Returns
    -------
    LengthGeneralizationResult
        R^2 of every model at every evaluation length, per validation set.
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
    task = SparseTokenSelectionTask(cfg.seq_len, cfg.n_features, cfg.n_selected)
    T = task.seq_len
    range_task = _checked_range(cfg.train_range, T, cfg.n_features, cfg.n_selected)
    eval_lengths = sorted({f * T for f in factors})
    val = {
        "val_128": task.sample(128, random_state=derived_seed(random_state, 2)),
        "val_large": task.sample(n_val_large, random_state=derived_seed(random_state, 3)),
    }
    base = prepared(
        cfg.estimator,
        SparseTokenSelector(64),
        SparseTokenSelector,
        "estimator",
        device=device,
        random_state=derived_seed(random_state, 4),
    )
    keys = ["stochastic", "fixed"]
    jobs = [
        (clone(base).set_params(positional_encoding=pe), task, n_steps, f"{pe} encodings")
        for pe in ("stochastic", "fixed")
    ]
    # (label, fitted model, draws, length scale)
    variants = [("stochastic", "stochastic", 1, None)]
    if n_pe_samples > 1:
        variants.append((f"stochastic, {n_pe_samples} draws", "stochastic", n_pe_samples, None))
    variants += [(f"stochastic, {s} scale", "stochastic", 1, s) for s in length_scales]
    variants.append(("fixed", "fixed", 1, None))
    if length_scales:
        variants.append((f"fixed, {length_scales[-1]} scale", "fixed", 1, length_scales[-1]))
    if range_task is not None:
        lo, hi = range_task.length_range
        label = f"stochastic, trained on {lo}..{hi}, {range_scale} scale"
        est = clone(base).set_params(positional_encoding="stochastic", length_scale=range_scale)
        jobs.append((est, range_task, n_steps, f"over {lo}..{hi}"))
        keys.append(label)
        variants.append((label, label, 1, range_scale))
    # The models are independent: on worker processes when n_jobs allows, same numbers.
    show = progress and n_workers(n_jobs, len(jobs)) == 1
    models = run_jobs(_train, [(*job, show) for job in jobs], n_jobs)
    fitted = dict(zip(keys, models))
    r2 = _score_variants(fitted, variants, val, eval_lengths, random_state, progress)
    floor_r2 = None
    if cfg.floor:
        floor_r2 = [
            # n_draws=1 written out: the key the "floor" scale computed these under.
            1.0 - cached_floor(t, cfg.n_selected, base.width, 1).relative_mse
            for t in eval_lengths
        ]
    X, y = val["val_large"]
    config = {
        "seq_len": T,
        "n_features": task.n_features,
        "n_selected": task.n_selected,
        "width": base.width,
        "n_steps": n_steps,
        "solver": base.solver,
        "learning_rate_init": base.learning_rate_init,
        "batch_size": base.batch_size,
        "estimator": estimator_config(base),
        "factors": factors,
        "n_pe_samples": n_pe_samples,
        "n_val_128": 128,
        "n_val_large": n_val_large,
        "length_scales": length_scales,
        "train_range": None if range_task is None else list(range_task.length_range),
        "range_scale": range_scale,
        "device": str(fitted["stochastic"].device_),
        "random_state": random_state,
    }
    return LengthGeneralizationResult(
        config=config,
        eval_lengths=eval_lengths,
        models=[label for label, _, _, _ in variants],
        r2=r2,
        train_r2={pe: float(m.score(X, y)) for pe, m in fitted.items()},
        floor_r2=floor_r2,
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


def _train(estimator, task, n_steps, what, progress):
    """``estimator`` trained online on ``task`` (one job of the experiment)."""
    return train_online(estimator, task, n_steps, desc=f"length: train {what}", progress=progress)


def _score_variants(fitted, variants, val, eval_lengths, random_state, progress):
    """``r2[validation set][label]``: R^2 of each (label, model, draws, scale) at each length.

    Each validation set is moved to each length once (the numbers of
    ``LengthShiftScorer(T', random_state=derived_seed(random_state, 5))``).
    """
    r2 = {name: {label: [] for label, _, _, _ in variants} for name in val}
    own = {key: (m.n_pe_samples, m.length_scale) for key, m in fitted.items()}
    total = len(val) * len(variants) * len(eval_lengths)
    task = fitted["stochastic"].task_
    seed = derived_seed(random_state, 5)
    with progress_bar(total, "length: scoring at T'", enabled=progress, leave=False) as bar:
        for name, (X, y) in val.items():
            shifted = ShiftedRows(task, X, y, eval_lengths, seed)
            for label, pe, k, scale in variants:
                model = fitted[pe].set_params(n_pe_samples=k, length_scale=scale)
                for T_eval in eval_lengths:
                    r2[name][label].append(shifted.score(model, T_eval))
                    bar.update()
    for key, (k, scale) in own.items():
        fitted[key].set_params(n_pe_samples=k, length_scale=scale)
    return r2
