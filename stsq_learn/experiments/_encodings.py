"""Experiment 4: length generalization of the four positional-encoding families."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..encodings.families import POSITIONAL_ENCODINGS
from ..engine.batch_reuse import reusing_batches
from ..tasks.selection.estimators import SparseTokenSelector
from ._common import dataclass_dict, estimator_config, new_axes, prepared
from ._encoding_runs import checked_arguments, train_and_score
from ._settings import Settings

_STYLES = {
    "stochastic": dict(color="C0", marker="o"),
    "fixed": dict(color="C3", marker="s", ls="--"),
    "randomized": dict(color="C2", marker="D"),
    "sinusoidal": dict(color="C1", marker="^", ls="-."),
}


def _seed_stats(per_seed):
    """Mean, minimum and maximum over seeds at each length (NaN where nothing is scored)."""
    arr = np.array(per_seed, dtype=float)  # (n_seeds, n_lengths); NaN = not scorable
    stats = []
    for column in arr.T:
        finite = column[np.isfinite(column)]
        if finite.size:
            stats.append((float(finite.mean()), float(finite.min()), float(finite.max())))
        else:
            stats.append((math.nan, math.nan, math.nan))
    return [list(s) for s in zip(*stats)]


def _number(value):
    """``value`` as a float, NaN for None (JSON's not-a-number)."""
    return math.nan if value is None else float(value)


@dataclass
class EncodingsResult:
    """R^2 of the four encoding families, and of a codebook sweep, at longer lengths.

    Every model is trained at length T and scored on one validation set moved
    to T' = factor * T. A randomized codebook of L positions cannot predict
    at T' > L: those entries are NaN (``None`` in :meth:`to_dict`) and the
    plot and the summary say "n/a".

    Attributes
    ----------
    config : dict
        The experiment's settings.
    eval_lengths : list of int
        The lengths T' scored (T' = factor * T).
    families : list of str
        ``"stochastic"``, ``"fixed"``, ``"randomized"`` (codebook of
        ``config["max_positions"]`` positions) and ``"sinusoidal"``.
    r2 : dict of str to list of list of float
        ``r2[family][seed][i]`` is the R^2 of the model trained with seed
        number ``seed`` at ``eval_lengths[i]``.
    r2_mean, r2_min, r2_max : dict of str to list of float
        Mean, smallest and largest R^2 over the seeds at each length.
    codebook_sizes : list of int
        The codebook sizes L of the sweep (randomized encodings with
        ``max_positions=L``).
    sweep_length : int
        The evaluation length T' the sweep is plotted and summarised at.
    sweep_r2 : dict of str to list of list of float
        ``sweep_r2[str(L)][seed][i]``: the R^2 of the codebook of L positions
        at ``eval_lengths[i]``; NaN where ``eval_lengths[i] > L``.
    sweep_mean, sweep_min, sweep_max : list of float
        Mean, smallest and largest R^2 over the seeds at ``sweep_length``,
        one per codebook size; NaN where L < ``sweep_length``. Fixed
        encodings (``r2_mean["fixed"]``) and stochastic ones (the limit of
        an infinite codebook) are the references.

    Examples
    --------
    >>> from stsq_learn.experiments import encoding_families
    >>> from stsq_learn import SparseTokenSelector
    >>> res = encoding_families(seq_len=8, n_features=2, n_selected=2,
    ...                         estimator=SparseTokenSelector(8), n_steps=10,
    ...                         factors=(1, 2), codebook_factors=(1, 2), sweep_factor=2,
    ...                         n_seeds=1, n_val=100, random_state=0)
    >>> res.families, res.eval_lengths, res.codebook_sizes
    (['stochastic', 'fixed', 'randomized', 'sinusoidal'], [8, 16], [8, 16])
    >>> res.sweep_r2["8"][0][1]      # a codebook of 8 positions cannot score at T' = 16
    nan
    """

    config: dict
    eval_lengths: list
    families: list
    r2: dict
    r2_mean: dict
    r2_min: dict
    r2_max: dict
    codebook_sizes: list
    sweep_length: int
    sweep_r2: dict
    sweep_mean: list
    sweep_min: list
    sweep_max: list

    def at(self, family, factor):
        """Mean R^2 over the seeds of ``family`` at length ``factor * T``.

        Parameters
        ----------
        family : str
            One of ``families``.
        factor : int
            Relative length; ``factor * T`` must be one of ``eval_lengths``.

        Returns
        -------
        float
            The mean R^2 (NaN where the family could not be scored).
        """
        T = self.config["seq_len"]
        return _number(self.r2_mean[family][self.eval_lengths.index(int(factor * T))])

    def codebook_at(self, max_positions, factor):
        """Mean R^2 over the seeds of the codebook of ``max_positions`` at ``factor * T``.

        Parameters
        ----------
        max_positions : int
            One of ``codebook_sizes``.
        factor : int
            Relative length; ``factor * T`` must be one of ``eval_lengths``.

        Returns
        -------
        float
            The mean R^2, NaN where ``factor * T > max_positions``.
        """
        i = self.eval_lengths.index(int(factor * self.config["seq_len"]))
        values = [_number(per_seed[i]) for per_seed in self.sweep_r2[str(max_positions)]]
        return math.nan if any(math.isnan(v) for v in values) else float(np.mean(values))

    def to_dict(self):
        """JSON-ready dict of the fields (NaN becomes None)."""
        return dataclass_dict(self)

    def plot(self, axes=None):
        """Two panels: R^2 against T' per family, and R^2 at the sweep length against L.

        Lines are the mean over the seeds; bands (left) and error bars
        (right) span the smallest to the largest seed.

        Parameters
        ----------
        axes : sequence of 2 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure holding the axes.
        """
        fig, (ax, ax_sweep) = new_axes(axes, 2, figsize=(12, 4.2))
        self._plot_families(ax)
        self._plot_codebook_sweep(ax_sweep, ax.get_ylim())
        return fig

    def _plot_families(self, ax):
        """R^2 against T' per family: the mean over the seeds and their range."""
        T = self.config["seq_len"]
        lengths = np.array(self.eval_lengths)
        lows = [min(-0.1, np.nanmin(np.array(v, dtype=float)) - 0.05) for v in self.r2_min.values()]
        for family in self.families:
            mean = np.array(self.r2_mean[family], dtype=float)
            label = family
            if family == "randomized":
                label = f"randomized (L={self.config['max_positions']})"
            if np.isnan(mean).any():
                label += ", n/a where T' > L"
            ax.plot(lengths, mean, label=label, **_STYLES[family])
            ax.fill_between(
                lengths,
                np.array(self.r2_min[family], dtype=float),
                np.array(self.r2_max[family], dtype=float),
                color=_STYLES[family]["color"],
                alpha=0.15,
                lw=0,
            )
        ax.axvline(T, color="gray", ls=":", lw=1, label=f"training length T={T}")
        ax.axhline(0.0, color="k", lw=0.5)
        ax.set_xscale("log", base=2)
        ax.set_xticks(self.eval_lengths, [str(t) for t in self.eval_lengths])
        ax.set_xlabel("evaluation length T' (log scale)")
        ax.set_ylabel("$R^2$ (1 - relative MSE)")
        ax.set_ylim(min([-0.1, *lows]), 1.02)
        ax.set_title(f"Encoding families, mean and range over {self.config['n_seeds']} seed(s)")
        ax.legend(loc="lower left", fontsize="small")

    def _plot_codebook_sweep(self, ax, ylim):
        """R^2 at the sweep length against L, with fixed and stochastic as references."""
        T_s = self.sweep_length
        sizes = np.array(self.codebook_sizes)
        mean = np.array(self.sweep_mean, dtype=float)
        ok = np.isfinite(mean)
        err = np.array(
            [
                mean[ok] - np.array(self.sweep_min, dtype=float)[ok],
                np.array(self.sweep_max, dtype=float)[ok] - mean[ok],
            ]
        )
        ax.errorbar(
            sizes[ok],
            mean[ok],
            yerr=err,
            label=f"randomized, codebook of L, at T'={T_s}",
            capsize=3,
            **_STYLES["randomized"],
        )
        self._plot_sweep_references(ax)
        ax.axvline(T_s, color="gray", ls=":", lw=1)
        if not ok.all():
            self._mark_unscorable(ax, sizes[~ok])
        ax.axhline(0.0, color="k", lw=0.5)
        ax.set_xscale("log", base=2)
        ax.set_xticks(self.codebook_sizes, [str(L) for L in self.codebook_sizes])
        ax.set_xlim(sizes.min() / 1.3, sizes.max() * 1.3)
        ax.set_xlabel("codebook size L = max_positions (log scale)")
        ax.set_ylabel("$R^2$")
        ax.set_ylim(ylim)
        ax.set_title(f"From fixed (L = T) to stochastic (L -> infinity), T' = {T_s}")
        ax.legend(loc="best", fontsize="small")

    def _plot_sweep_references(self, ax):
        """The codebooks at the training length, and fixed and stochastic at the sweep's."""
        T, T_s = self.config["seq_len"], self.sweep_length
        i_train = self.eval_lengths.index(T) if T in self.eval_lengths else None
        if i_train is not None:
            at_train = [
                np.mean([_number(s[i_train]) for s in self.sweep_r2[str(L)]])
                for L in self.codebook_sizes
            ]
            ax.plot(
                np.array(self.codebook_sizes),
                at_train,
                color="C2",
                ls=":",
                marker=".",
                alpha=0.6,
                label=f"randomized at the training length T={T}",
            )
        i_s = self.eval_lengths.index(T_s)
        for family, ls in (("stochastic", "-"), ("fixed", "--")):
            if family in self.r2_mean:
                ax.axhline(
                    _number(self.r2_mean[family][i_s]),
                    color=_STYLES[family]["color"],
                    ls=ls,
                    lw=1.2,
                    label=f"{family} at T'={T_s}"
                    + (" (L -> infinity)" if family == "stochastic" else ""),
                )

    def _mark_unscorable(self, ax, missing):
        """Shade the codebook sizes ``missing`` (L < T'), which cannot place a row at T'."""
        T_s = self.sweep_length
        missing = ", ".join(str(L) for L in missing)
        ax.axvspan(min(self.codebook_sizes) / 1.3, T_s, color="0.9", zorder=0)
        ax.text(
            0.02,
            0.5,
            f"n/a at T'={T_s}:\nL = {missing} < T'\n(too few codebook\npositions for a row)",
            transform=ax.transAxes,
            va="center",
            fontsize="small",
            color="0.3",
        )


class EncodingsSettings(Settings):
    """The settings of :func:`encoding_families`: the task, the model, the lengths, the sweep.

    Attributes
    ----------
    seq_len, n_features, n_selected : int, default=16, 8, 3
        The training task D_{T,q}.
    estimator : SparseTokenSelector or None, default=None
        The model to train (cloned; its ``positional_encoding``,
        ``max_positions``, ``random_state`` and, if given, ``device`` are
        replaced). None is ``SparseTokenSelector(width=64)``: Adam at 0.01,
        batches of 256.
    n_steps : int, default=1500
        Online training steps of every model.
    factors : tuple of int, default=(1, 2, 4, 8)
        Evaluation lengths as multiples of ``seq_len``.
    max_positions : int or None, default=None
        Codebook size of the ``"randomized"`` family; None is
        ``max(factors) * seq_len``, so that it can be scored at every
        evaluation length. At least ``seq_len``.
    codebook_factors : tuple of int, default=(1, 2, 4, 8, 16)
        Codebook sizes of the sweep as multiples of ``seq_len``.
    sweep_factor : int, default=4
        The sweep is plotted and summarised at T' = ``sweep_factor *
        seq_len``; one of ``factors``.
    n_seeds : int, default=3
        Training seeds of every model (the spread of the results).
    n_val : int, default=1000
        Rows of the validation set.

    Examples
    --------
    >>> from stsq_learn.experiments import EncodingsSettings
    >>> EncodingsSettings(seq_len=8, factors=(1, 2), sweep_factor=2).codebook_factors
    (1, 2, 4, 8, 16)
    """

    seq_len: int = 16
    n_features: int = 8
    n_selected: int = 3
    estimator: SparseTokenSelector | None = None
    n_steps: int = 1500
    factors: tuple = (1, 2, 4, 8)
    max_positions: int | None = None
    codebook_factors: tuple = (1, 2, 4, 8, 16)
    sweep_factor: int = 4
    n_seeds: int = 3
    n_val: int = 1000


@reusing_batches
def encoding_families(
    settings=None, *, device=None, random_state=0, progress=False, n_jobs=None, **changes
):
    """Train every positional-encoding family at length T; score at T' = factor * T.

    Which encodings let the trained transformer generalize to longer
    sequences? Clones of ``estimator`` with each ``positional_encoding`` of
    :class:`~stsq_learn.SparseTokenSelector` (``"stochastic"``, the paper's;
    ``"fixed"``; ``"randomized"`` with a codebook of ``max_positions``;
    ``"sinusoidal"``) are trained online at length ``seq_len`` with the same
    width, steps and seed, ``n_seeds`` times, and scored on one validation
    set moved to each T' by :class:`~stsq_learn.LengthShiftScorer` (fresh
    unselected tokens inserted, every target kept).

    The codebook sweep trains randomized encodings with ``max_positions`` =
    L for L = c * T, c in ``codebook_factors``: L = T is fixed encodings
    (every row takes all T codebook vectors, in order), and as L grows each
    codebook vector is seen in fewer rows, the limit being stochastic
    encodings. Every codebook is scored at every T' <= L; a codebook smaller
    than T' cannot place the tokens of a row there, so that entry is NaN.

    The stochastic family, the fresh batch of 256 rows per step, Gaussian
    tokens and uniform q-subsets are the paper's; the other families, the
    sizes, steps, optimiser (Adam at 0.01), test lengths and the codebook
    sweep are ours.

    Parameters
    ----------
    settings : EncodingsSettings, mapping or None, default=None
        The task, the model, the evaluation lengths and the codebook sweep
        (None: the defaults).
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
        Settings of :class:`EncodingsSettings` to change
        (``encoding_families(n_seeds=1)``).

    Returns
    -------
    EncodingsResult
        R^2 of every family and codebook, per seed and evaluation length.

    Examples
    --------
    >>> from stsq_learn.experiments import encoding_families
    >>> from stsq_learn import SparseTokenSelector
    >>> res = encoding_families(seq_len=8, n_features=2, n_selected=2,
    ...                         estimator=SparseTokenSelector(8), n_steps=10,
    ...                         factors=(1, 2), codebook_factors=(2,), sweep_factor=2,
    ...                         n_seeds=1, n_val=100, random_state=0)
    >>> res.config["max_positions"], res.sweep_length
    (16, 16)
    """
    cfg = EncodingsSettings.resolve(settings, changes)
    task, plan = checked_arguments(cfg, random_state)
    base = prepared(
        cfg.estimator,
        SparseTokenSelector(64),
        SparseTokenSelector,
        "estimator",
        device=device,
        random_state=0,
    )
    scores, device_used = train_and_score(base, task, plan, progress=progress, n_jobs=n_jobs)
    return _result(task, base, plan, scores, device_used)


def _result(task, base, plan, scores, device_used):
    """The :class:`EncodingsResult` of the trained models' ``scores``."""
    T = task.seq_len
    families = list(POSITIONAL_ENCODINGS)
    r2 = {family: scores[family] for family in families}
    stats = {family: _seed_stats(r2[family]) for family in families}
    sweep_r2 = {
        str(L): scores["randomized" if L == plan.max_positions else f"L={L}"]
        for L in plan.codebook_sizes
    }
    i_s = plan.eval_lengths.index(plan.sweep_factor * T)
    sweep_stats = [_seed_stats(sweep_r2[str(L)]) for L in plan.codebook_sizes]
    config = {
        "seq_len": T,
        "n_features": task.n_features,
        "n_selected": task.n_selected,
        "width": base.width,
        "n_steps": plan.n_steps,
        "solver": base.solver,
        "learning_rate_init": base.learning_rate_init,
        "batch_size": base.batch_size,
        "estimator": estimator_config(base),
        **plan.config(),
        "device": str(device_used),
        "random_state": plan.random_state,
    }
    return EncodingsResult(
        config=config,
        eval_lengths=plan.eval_lengths,
        families=families,
        r2=r2,
        r2_mean={f: stats[f][0] for f in families},
        r2_min={f: stats[f][1] for f in families},
        r2_max={f: stats[f][2] for f in families},
        codebook_sizes=plan.codebook_sizes,
        sweep_length=plan.sweep_factor * T,
        sweep_r2=sweep_r2,
        sweep_mean=[s[0][i_s] for s in sweep_stats],
        sweep_min=[s[1][i_s] for s in sweep_stats],
        sweep_max=[s[2][i_s] for s in sweep_stats],
    )
