"""The encodings comparison of the selection task: four families and a codebook sweep at longer T'.

:func:`encoding_families` trains every positional-encoding family of
:class:`~stsq_learn.SparseTokenSelector` (and randomized codebooks of
several sizes) at length T and scores each at every ``T' = factor * T``
through the task's own length shift: one
:func:`~stsq_learn.studies.length_curve`, every model's seeds trained as
one batched model (``batch_seeds=True``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from ..._validation import check_positive_int
from ...encodings.families import POSITIONAL_ENCODINGS
from ...engine.batch_reuse import reusing_batches
from ...experiments._common import seed_results
from ...experiments._settings import Settings
from ...studies import BandDisplay, StudyTable, length_curve
from .estimators import SparseTokenSelector
from .length import (
    checked_estimator,
    device_of,
    length_axes,
    new_figure,
    run_config,
    seeds_of,
)
from .task import SparseTokenSelectionTask

__all__ = ["EncodingsResult", "EncodingsSettings", "encoding_families"]

_COLORS = {"stochastic": "C0", "fixed": "C3", "randomized": "C2", "sinusoidal": "C1"}
_MARKS = {"stochastic": ("o", "-"), "fixed": ("s", "--"), "randomized": ("D", "-")}


def _number(value):
    """``value`` as a float, NaN for None (JSON's not-a-number)."""
    return math.nan if value is None else float(value)


@dataclass
class EncodingsResult:
    """R^2 of the four encoding families, and of a codebook sweep, at longer lengths, for one seed.

    Every model is trained at length T and scored on the seed's held-out
    rows moved to T' = factor * T. A randomized codebook of L positions
    cannot predict at T' > L: those entries are NaN (``None`` in
    :meth:`to_dict`), the plot leaves them out and the summary says "n/a".

    Attributes
    ----------
    config : dict
        The experiment's settings (``random_state``: the seed).
    eval_lengths : list of int
        The lengths T' scored (T' = factor * T).
    families : list of str
        ``"stochastic"``, ``"fixed"``, ``"randomized"`` (codebook of
        ``config["max_positions"]`` positions) and ``"sinusoidal"``.
    r2 : dict of str to list of float
        ``r2[family][i]`` is the R^2 at ``eval_lengths[i]``.
    codebook_sizes : list of int
        The codebook sizes L of the sweep (randomized encodings with
        ``max_positions=L``).
    sweep_length : int
        The evaluation length T' the sweep is plotted and summarised at.
    sweep_r2 : dict of str to list of float
        ``sweep_r2[str(L)][i]``: the R^2 of the codebook of L positions at
        ``eval_lengths[i]``; NaN where ``eval_lengths[i] > L``.
    table : StudyTable
        The study's rows: ``model`` (a family, or ``"L=<size>"`` for a
        codebook the families lack), ``seed``, ``eval_seq_len``, ``score``.

    Examples
    --------
    >>> from stsq_learn.experiments import encoding_families
    >>> from stsq_learn import SparseTokenSelector
    >>> res = encoding_families(seq_len=8, n_features=2, n_selected=2,
    ...                         estimator=SparseTokenSelector(8), n_steps=10,
    ...                         factors=(1, 2), codebook_factors=(1, 2), sweep_factor=2,
    ...                         n_val=100, random_state=0)
    >>> res.families, res.eval_lengths, res.codebook_sizes
    (['stochastic', 'fixed', 'randomized', 'sinusoidal'], [8, 16], [8, 16])
    >>> res.sweep_r2["8"][1]      # a codebook of 8 positions cannot score at T' = 16
    nan
    """

    config: dict
    eval_lengths: list
    families: list
    r2: dict
    codebook_sizes: list
    sweep_length: int
    sweep_r2: dict
    table: StudyTable

    def at(self, family, factor):
        """R^2 of ``family`` at length ``factor * T``.

        Parameters
        ----------
        family : str
            One of ``families``.
        factor : int
            Relative length; ``factor * T`` must be one of ``eval_lengths``.

        Returns
        -------
        float
            The R^2 (NaN where the family could not be scored).
        """
        T = self.config["seq_len"]
        return _number(self.r2[family][self.eval_lengths.index(int(factor * T))])

    def codebook_at(self, max_positions, factor):
        """R^2 of the codebook of ``max_positions`` at length ``factor * T``.

        Parameters
        ----------
        max_positions : int
            One of ``codebook_sizes``.
        factor : int
            Relative length; ``factor * T`` must be one of ``eval_lengths``.

        Returns
        -------
        float
            The R^2, NaN where ``factor * T > max_positions``.
        """
        i = self.eval_lengths.index(int(factor * self.config["seq_len"]))
        return _number(self.sweep_r2[str(max_positions)][i])

    def to_dict(self):
        """JSON-ready dict of the fields (NaN as None), the table as its ``to_dict()``.

        Returns
        -------
        dict
            The fields by name.
        """

        def plain(values):
            return [None if math.isnan(v) else v for v in map(_number, values)]

        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["r2"] = {k: plain(v) for k, v in self.r2.items()}
        out["sweep_r2"] = {k: plain(v) for k, v in self.sweep_r2.items()}
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
        EncodingsResult
            The result (None read back as NaN), its table a StudyTable again.
        """
        out = dict(data, table=StudyTable.from_dict(data["table"]))
        for name in ("r2", "sweep_r2"):
            out[name] = {k: [_number(v) for v in vs] for k, vs in data[name].items()}
        return cls(**out)

    def plot(self, axes=None):
        """Two panels: R^2 against T' per family, and R^2 at the sweep length against L.

        Parameters
        ----------
        axes : sequence of 2 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure holding the axes.
        """
        return _plot([self], axes)

    @staticmethod
    def plot_bands(results, axes=None):
        """The figure of :meth:`plot` over seeds: medians with their min-max bands.

        Parameters
        ----------
        results : sequence of EncodingsResult
            One per seed, with the same lengths, families and codebooks.
        axes : sequence of 2 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The panels of :meth:`plot`: each family's median R^2 over the
            seeds with the min-max shaded, each codebook's with error bars.
        """
        return _plot(results, axes)


def _plot(results, axes):
    """The figure of :meth:`EncodingsResult.plot` over one or several seeds."""
    same = ("eval_lengths", "families", "codebook_sizes", "sweep_length")
    results = seed_results(results, EncodingsResult, same)
    first = results[0]
    table = StudyTable.concat([res.table for res in results])
    fig, (ax, ax_sweep) = new_figure(axes, 2, 6)
    cfg, T, T_s = first.config, first.config["seq_len"], first.sweep_length
    families = table[np.isin(table["model"], first.families)]
    labels = {"randomized": f"randomized (L={cfg['max_positions']})"}
    display = BandDisplay.from_table(
        families, x="eval_seq_len", y="score", ax=ax, logx=True, colors=_COLORS, labels=labels
    )
    for family, line in display.lines_.items():
        marker, ls = _MARKS.get(family, ("^", "-."))
        line.set(marker=marker, ls=ls)
    length_axes(ax, first.eval_lengths, T, table.xy("eval_seq_len", "score")[1])
    ax.set_title(f"Encoding families, {len(results)} seed(s)")
    ax.legend(loc="lower left", fontsize="small")
    # The sweep: each codebook's R^2 at T_s, where L >= T_s (a smaller one cannot place a row).
    sweep = StudyTable.concat([_sweep_rows(res) for res in results])
    scored = sweep.where(eval_seq_len=T_s)
    sizes = [L for L in first.codebook_sizes if L >= T_s]
    refs = {}
    for family in ("stochastic", "fixed"):
        value = float(np.median([res.r2[family][res.eval_lengths.index(T_s)] for res in results]))
        refs[f"{family} at T'={T_s}, median"] = (sizes, [value] * len(sizes))
    sweep_display = BandDisplay.from_table(
        scored[scored["codebook_size"] >= T_s],
        x="codebook_size",
        y="score",
        hue=None,
        theory=refs if sizes else None,
        ax=ax_sweep,
        style="errorbar",
        logx=True,
        colors={None: "C2"},
        labels={None: f"randomized, codebook of L, at T'={T_s}"},
        xlabel="codebook size L = max_positions (log scale)",
        ylabel="$R^2$",
        title=f"From fixed (L = T) to stochastic (L -> infinity), T' = {T_s}",
    )
    for (family, (_, ls)), line in zip(_MARKS.items(), sweep_display.theory_lines_.values()):
        line.set(color=_COLORS[family], ls=ls)
    missing = [L for L in first.codebook_sizes if L < T_s]
    if missing:
        ax_sweep.text(
            0.02,
            0.04,
            f"n/a at T'={T_s}: L = {', '.join(map(str, missing))} < T'",
            transform=ax_sweep.transAxes,
            fontsize="small",
            color="0.3",
        )
    ax_sweep.set_ylim(ax.get_ylim())
    ax_sweep.legend(loc="lower right", fontsize="small")
    return fig


def _sweep_rows(result):
    """The codebooks' rows of one result, with their size in ``codebook_size``."""
    out = {"codebook_size": [], "seed": [], "eval_seq_len": [], "score": []}
    for L in result.codebook_sizes:
        for t, value in zip(result.eval_lengths, result.sweep_r2[str(L)]):
            for name, v in zip(out, (L, result.config["random_state"], t, value)):
                out[name].append(v)
    return StudyTable(out)


class EncodingsSettings(Settings):
    """The settings of :func:`encoding_families`: the task, the model, the lengths, the sweep.

    Attributes
    ----------
    seq_len, n_features, n_selected : int, default=16, 8, 3
        The training task D_{T,q}.
    estimator : SparseTokenSelector or None, default=None
        The model to train (cloned; its ``positional_encoding``,
        ``max_positions``, ``random_state`` and, if given, ``device`` are
        replaced). None is ``SparseTokenSelector(width=64)``.
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
    n_val : int, default=1000
        Held-out rows of each seed.

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
    n_val: int = 1000


def planned_models(estimator, max_positions, codebook_sizes):
    """Every model by label: the four families, then the sweep's codebooks they lack.

    Parameters
    ----------
    estimator : SparseTokenSelector
        The settings every model shares.
    max_positions : int
        The codebook size of the ``"randomized"`` family.
    codebook_sizes : sequence of int
        The sweep's codebook sizes.

    Returns
    -------
    dict of str to SparseTokenSelector
        ``{family: ..., "L=<size>": ...}``.
    """
    models = {f: clone(estimator).set_params(positional_encoding=f) for f in POSITIONAL_ENCODINGS}
    models["randomized"].set_params(max_positions=max_positions)
    for L in codebook_sizes:
        if L != max_positions:
            models[f"L={L}"] = clone(estimator).set_params(
                positional_encoding="randomized", max_positions=L
            )
    return models


def _codebook_score(estimator, X, y):
    """R^2 of ``estimator`` on ``(X, y)``; NaN beyond its codebook (it cannot place a row)."""
    L = estimator.max_positions_
    return math.nan if L is not None and X.shape[1] > L else estimator.score(X, y)


def _checked(cfg):
    """The task and the checked factors, codebook factors, sweep factor and codebook size."""
    for name in ("n_steps", "n_val"):
        check_positive_int(getattr(cfg, name), name)
    factors = [check_positive_int(f, "factors[i]") for f in cfg.factors]
    if not factors:
        raise ValueError("factors must name at least one length multiple, got an empty sequence.")
    codebook = sorted({check_positive_int(c, "codebook_factors[i]") for c in cfg.codebook_factors})
    if not codebook:
        raise ValueError(
            "codebook_factors must name at least one codebook size, got an empty sequence."
        )
    sweep_factor = check_positive_int(cfg.sweep_factor, "sweep_factor")
    if sweep_factor not in factors:
        raise ValueError(
            f"sweep_factor={sweep_factor} must be one of factors={factors}: the sweep is "
            "compared with fixed and stochastic encodings at that length."
        )
    task = SparseTokenSelectionTask(cfg.seq_len, cfg.n_features, cfg.n_selected)
    T = task.seq_len
    max_positions = max(factors) * T if cfg.max_positions is None else cfg.max_positions
    max_positions = check_positive_int(max_positions, "max_positions")
    if max_positions < T:
        raise ValueError(
            f"max_positions={max_positions} must be at least seq_len={T}: a codebook "
            "smaller than the training length cannot place a training row."
        )
    return task, factors, codebook, sweep_factor, max_positions


@reusing_batches
def encoding_families(
    settings=None, *, device=None, random_state=0, seeds=None, progress=False, **changes
):
    """Train every positional-encoding family at length T; score at T' = factor * T.

    Which encodings let the trained transformer generalize to longer
    sequences? Clones of ``estimator`` with each ``positional_encoding`` of
    :class:`~stsq_learn.SparseTokenSelector` (``"stochastic"``, the paper's;
    ``"fixed"``; ``"randomized"`` with a codebook of ``max_positions``;
    ``"sinusoidal"``) are trained online at length ``seq_len`` with the same
    width, steps and seed, and scored on the seed's held-out rows moved to
    each T' by the task's length shift (fresh unselected tokens inserted,
    every target kept).

    The codebook sweep trains randomized encodings with ``max_positions`` =
    L for L = c * T, c in ``codebook_factors``: L = T is fixed encodings
    (every row takes all T codebook vectors, in order), and as L grows each
    codebook vector is seen in fewer rows, the limit being stochastic
    encodings. Every codebook is scored at every T' <= L; a codebook smaller
    than T' cannot place the tokens of a row there, so that entry is NaN.

    All models are one :func:`~stsq_learn.studies.length_curve` with
    ``batch_seeds=True``: the seeds of each trained as one batched model, by
    the seed rule of :mod:`stsq_learn.studies.seeds`. The stochastic family, the fresh batch
    of 256 rows per step, Gaussian tokens and uniform q-subsets are the
    paper's; the other families, the sizes, steps, optimiser, test lengths
    and the codebook sweep are ours.

    Parameters
    ----------
    settings : EncodingsSettings, mapping or None, default=None
        The task, the model, the evaluation lengths and the codebook sweep
        (None: the defaults).
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
        Settings of :class:`EncodingsSettings` to change
        (``encoding_families(n_steps=500)``).

    Returns
    -------
    EncodingsResult or list of EncodingsResult
        One result (``seeds`` None), or one per seed in seed order.

    Raises
    ------
    TypeError, ValueError
        For a bad setting, named, before any training.

    Examples
    --------
    >>> from stsq_learn.experiments import encoding_families
    >>> from stsq_learn import SparseTokenSelector
    >>> res = encoding_families(seq_len=8, n_features=2, n_selected=2,
    ...                         estimator=SparseTokenSelector(8), n_steps=10,
    ...                         factors=(1, 2), codebook_factors=(2,), sweep_factor=2,
    ...                         n_val=100, seeds=2)
    >>> len(res), res[1].config["random_state"], res[0].sweep_length
    (2, 1, 16)
    """
    cfg = EncodingsSettings.resolve(settings, changes)
    task, factors, codebook, sweep_factor, max_positions = _checked(cfg)
    base = checked_estimator(cfg.estimator)
    run_seeds, as_list = seeds_of(random_state, seeds)
    used = device_of(device, base)
    T = task.seq_len
    eval_lengths = sorted({f * T for f in factors})
    sizes = [c * T for c in codebook]
    table = length_curve(
        planned_models(base, max_positions, sizes),
        task,
        eval_lengths,
        seeds=run_seeds,
        n_steps=cfg.n_steps,
        n_test=cfg.n_val,
        scoring=_codebook_score,
        error_score="raise",
        device=used,
        batch_seeds=True,
        progress=progress,
    )
    config = {
        **run_config(task, base, cfg.n_steps, used),
        "factors": factors,
        "max_positions": max_positions,
        "codebook_factors": codebook,
        "sweep_factor": sweep_factor,
        "n_val": cfg.n_val,
    }
    results = []
    for seed in run_seeds:
        rows = table.where(seed=seed)

        def scores(model, rows=rows):
            return [float(v) for v in rows.where(model=model)["score"]]

        results.append(
            EncodingsResult(
                config={**config, "random_state": seed},
                eval_lengths=eval_lengths,
                families=list(POSITIONAL_ENCODINGS),
                r2={family: scores(family) for family in POSITIONAL_ENCODINGS},
                codebook_sizes=sizes,
                sweep_length=sweep_factor * T,
                sweep_r2={
                    str(L): scores("randomized" if L == max_positions else f"L={L}") for L in sizes
                },
                table=rows,
            )
        )
    return results if as_list else results[0]
