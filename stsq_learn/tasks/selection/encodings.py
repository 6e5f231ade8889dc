"""The encodings comparison of the selection task: four families and a codebook sweep at T'.

Every ``positional_encoding`` trained at T and scored at each ``T' = factor * T`` (as in
:mod:`~stsq_learn.tasks.selection.length`), and randomized codebooks of ``max_positions = L``
from L = T (fixed encodings) towards stochastic ones; a codebook shorter than T' is not scored.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from sklearn.base import clone

from ...encodings.families import POSITIONAL_ENCODINGS
from ...engine.batch_reuse import reusing_batches
from ...experiments import Experiment
from ...experiments._common import length_axes, new_axes
from ...experiments._result import band_text
from ...experiments._settings import COUNT, COUNTS, positive_ints
from ...studies import BandDisplay, StudyTable, length_curve
from .length import (
    R2_AXES,
    SHARED_PROVENANCE,
    TINY,
    TaskSettings,
    eval_lengths,
    seeds_caption,
    sizes,
)
from .task import SparseTokenSelectionTask

_COLORS = {"stochastic": "C0", "fixed": "C3", "randomized": "C2", "sinusoidal": "C1"}
_MARKS = dict(
    stochastic=("o", "-"), fixed=("s", "--"), randomized=("D", "-"), sinusoidal=("^", "-.")
)


class EncodingsSettings(TaskSettings):
    """The settings of :func:`encoding_families`: the task, the model, the lengths, the sweep.

    Attributes
    ----------
    seq_len, n_features, n_selected, estimator
        The training task and the model, as in
        :class:`~stsq_learn.experiments.LengthGeneralizationSettings`.
    n_steps : int, default=400
        Online training steps of every model.
    factors : tuple of int, default=(1, 2, 4, 8)
        Evaluation lengths T' as multiples of ``seq_len``.
    max_positions : int or None, default=None
        Codebook size of the ``"randomized"`` family, at least ``seq_len``
        (None: ``max(factors) * seq_len``, scored at every T').
    codebook_factors, sweep_factor : tuple of int, int, default=(1, 4, 16), 4
        Codebook sizes of the sweep as multiples of ``seq_len``; it is drawn
        and summarised at ``T' = sweep_factor * seq_len`` (one of ``factors``).
    n_val : int, default=1000
        Held-out rows of each seed.

    Examples
    --------
    >>> from stsq_learn.experiments import EncodingsSettings
    >>> settings = EncodingsSettings(seq_len=8, factors=(1, 2), sweep_factor=2)
    >>> settings.codebook_factors
    (1, 4, 16)
    """

    _parameter_constraints = {
        **TaskSettings._parameter_constraints,
        "factors": [positive_ints()],
        "max_positions": [COUNT, None],
        "codebook_factors": [positive_ints()],
        "sweep_factor": COUNTS,
        "n_val": COUNTS,
    }

    n_steps: int = 400
    factors: tuple = (1, 2, 4, 8)
    max_positions: int | None = None
    codebook_factors: tuple = (1, 4, 16)
    sweep_factor: int = 4
    n_val: int = 1000

    def _validate(self):
        super()._validate()
        if self.sweep_factor not in self.factors:
            raise ValueError(
                f"sweep_factor={self.sweep_factor} must be one of factors={list(self.factors)}: "
                "the sweep is compared with fixed and stochastic encodings at that length."
            )
        if max_positions(self) < self.seq_len:
            raise ValueError(
                f"max_positions={self.max_positions} must be at least seq_len={self.seq_len}: "
                "a codebook smaller than the training length cannot place a training row."
            )


PROVENANCE = {
    **SHARED_PROVENANCE,
    "positional_encoding": (
        "paper: stochastic encodings; ours: the comparison with fixed, randomized "
        "(Ruoss et al., 2023) and sinusoidal (Vaswani et al., 2017) ones"
    ),
    "max_positions": "ours: chosen for these presets",
    "codebook_factors": "ours: the codebook sweep",
    "sweep_factor": "ours: chosen for these presets",
    "n_val": "ours: chosen for these presets",
}
"""Setting by setting, whether it comes from the paper or is ours."""


def max_positions(settings):
    """The randomized family's codebook size (``max(factors) * seq_len`` where None)."""
    given = settings["max_positions"]
    return max(settings["factors"]) * settings["seq_len"] if given is None else given


def codebook_sizes(settings):
    """The sweep's codebook sizes L, increasing."""
    return sorted({int(c) * settings["seq_len"] for c in settings["codebook_factors"]})


def codebook_model(settings, L):
    """The model label of the codebook of L positions: ``"randomized"`` or ``"L=<L>"``."""
    return "randomized" if L == max_positions(settings) else f"L={L}"


def planned_models(cfg):
    """Every model of ``cfg`` by label: the four families, then the sweep's codebooks they
    lack (``{family: ..., "L=<size>": ...}``)."""
    est, top = cfg.estimator, max_positions(cfg)
    models = {f: clone(est).set_params(positional_encoding=f) for f in POSITIONAL_ENCODINGS}
    models["randomized"].set_params(max_positions=top)
    for L in codebook_sizes(cfg):
        if L != top:  # not the family's own codebook
            models[f"L={L}"] = clone(models["randomized"]).set_params(max_positions=L)
    return models


@reusing_batches
def run(cfg, seeds, **kw):
    """The record's ``run``: the :func:`~stsq_learn.studies.length_curve` of every model.

    One study per longest length scored. Returns ``lengths``: a row per
    (model, seed, T'), with ``score`` (R^2), the fit's columns and ``width``.
    """
    lengths = eval_lengths(cfg)
    task = SparseTokenSelectionTask(cfg.seq_len, cfg.n_features, cfg.n_selected)
    groups = {}  # the longest length scored -> the models scored up to it
    for label, est in planned_models(cfg).items():
        longest = max(t for t in lengths if t <= (est.max_positions or lengths[-1]))
        groups.setdefault(longest, {})[label] = est
    kw.update(seeds=seeds, n_steps=cfg.n_steps, n_test=cfg.n_val, error_score="raise")
    table = StudyTable.concat(
        [
            length_curve(models, task, [t for t in lengths if t <= L], batch_seeds=True, **kw)
            for L, models in groups.items()
        ]
    )
    return {"lengths": table.with_columns(width=[cfg.estimator.width] * len(table))}


# -- what the table gives --------------------------------------------------------------------
def r2(result, model):
    """Every T' of the settings to the R^2 of ``model`` (a family, or a codebook's label:
    :func:`codebook_model`) in one seed's view of :func:`encoding_families`; NaN beyond the
    model's codebook (not scored)."""
    rows = result.tables["lengths"].where(model=model)
    scored = {int(t): float(v) for t, v in zip(rows["eval_seq_len"], rows["score"])}
    return {t: scored.get(t, math.nan) for t in eval_lengths(result.settings)}


def headline(result):
    """One seed's ``<family>_r2_at_<k>T`` at every T', and the sweep's at its length.

    The sweep's: ``codebook_L<L>_r2_at_<k>T`` (NaN where L is shorter).
    """
    c = result.settings
    T, k = c["seq_len"], c["sweep_factor"]
    out = {}
    for family in POSITIONAL_ENCODINGS:
        for t, value in r2(result, family).items():
            out[f"{family}_r2_at_{t // T}T"] = value
    for L in codebook_sizes(c):
        out[f"codebook_L{L}_r2_at_{k}T"] = r2(result, codebook_model(c, L))[k * T]
    return out


def summary(result):
    """Summary rows: each family's R^2 at every T', the sweep at its length (median [min, max])."""
    c, bands = result.settings, result.bands()
    T, k = c["seq_len"], c["sweep_factor"]
    ks = [t // T for t in eval_lengths(c)]
    m = int(result.tables["lengths"]["width"][0])
    value = functools.partial(band_text, bands)
    rows = [
        f"| encodings (T={T}, m={m}, {c['n_steps']} steps, {c['n_val']} rows) | R^2 at "
        f"{', '.join(f'{i}T' for i in ks)} | |"
    ]
    for family in POSITIONAL_ENCODINGS:
        label = f"randomized, L={max_positions(c)}" if family == "randomized" else family
        rows.append(f"| | {label} | {' / '.join(value(f'{family}_r2_at_{i}T') for i in ks)} |")
    Ls = codebook_sizes(c)
    values = " / ".join(value(f"codebook_L{L}_r2_at_{k}T") for L in Ls)
    rows.append(
        f"| | randomized at {k}T, L = {', '.join(map(str, Ls))} (n/a: L < {k * T}) | {values} |"
    )
    return rows


# -- the figure ------------------------------------------------------------------------------
_SWEEP_AXES = dict(x="codebook_size", y="score", hue=None, style="errorbar", logx=True)
_SWEEP_AXES |= dict(colors={None: "C2"}, legend=False, ylabel="$R^2$")  # R^2 against L at one T'
_SWEEP_AXES["xlabel"] = "codebook size L = max_positions (log scale)"


def figure(result, axes=None):
    """The record's ``figure``: R^2 against T' per family, the codebooks' at the sweep's T'
    (beside the stochastic and fixed families' medians there)."""
    fig, (ax, ax_sweep) = new_axes(axes, 2)
    c, table = result.settings, result.tables["lengths"]
    T, T_s = c["seq_len"], c["sweep_factor"] * c["seq_len"]
    fig.suptitle(
        f"Positional encodings at longer lengths, trained at T={T} ({seeds_caption(result)})"
    )
    line_kw = {f: {"marker": mk, "ls": ls} for f, (mk, ls) in _MARKS.items()}
    kw = dict(y="score", ax=ax, colors=_COLORS, line_kw=line_kw, title="Encoding families")
    kw["labels"] = {"randomized": f"randomized (L={max_positions(c)})"}
    BandDisplay.from_table(table.where(model=list(POSITIONAL_ENCODINGS)), **kw, **R2_AXES)
    length_axes(ax, T, table["score"])
    ax.legend(loc="lower left", fontsize="small")
    # The sweep: each codebook's R^2 at T_s, where L >= T_s (a smaller one cannot place a row).
    scored = [L for L in codebook_sizes(c) if L >= T_s]
    at = table.where(eval_seq_len=T_s)
    sweep = at.where(model=[codebook_model(c, L) for L in scored])
    sizes_ = [max_positions(c) if m == "randomized" else int(m[2:]) for m in sweep["model"]]
    refs, refs_kw = {}, {}
    for f in ("stochastic", "fixed"):  # the families' medians at T_s, over the codebooks
        label = f"{f} at T'={T_s}, median"
        refs[label] = (scored, [float(np.median(at.where(model=f)["score"]))] * len(scored))
        refs_kw[label] = {"color": _COLORS[f], "ls": _MARKS[f][1]}
    kw = dict(theory=refs if scored else None, theory_kw=refs_kw, ax=ax_sweep)
    kw["labels"] = {None: f"randomized, codebook of L, at T'={T_s}"}
    kw["title"] = f"From fixed (L = T) to stochastic (L -> infinity), T' = {T_s}"
    BandDisplay.from_table(sweep.with_columns(codebook_size=sizes_), **kw, **_SWEEP_AXES)
    missing = ", ".join(str(L) for L in codebook_sizes(c) if L < T_s)
    if missing:
        where = dict(transform=ax_sweep.transAxes, fontsize="small", color="0.3")
        ax_sweep.text(0.02, 0.04, f"n/a at T'={T_s}: L = {missing} < T'", **where)
    ax_sweep.set_ylim(ax.get_ylim())
    ax_sweep.legend(loc="lower right", fontsize="small")
    return fig


RECORD = Experiment(
    name="encodings",
    function_name="encoding_families",
    settings=EncodingsSettings,
    doc="""Train every positional-encoding family at length T; score at T' = factor * T.

    The four families of :mod:`stsq_learn.tasks.selection.encodings` and its
    codebook sweep, with the same width, steps and seeds. The settings are
    :class:`EncodingsSettings`; ``PROVENANCE`` says which are the paper's.

    Examples
    --------
    >>> from stsq_learn.experiments import encoding_families
    >>> result = encoding_families("tiny", seeds=2, n_steps=10, n_val=100)
    >>> result.tables["lengths"].unique("model")
    ['stochastic', 'fixed', 'randomized', 'sinusoidal', 'L=32', 'L=8']
    >>> # 8 positions cannot score at 16
    >>> result.bands()["codebook_L8_r2_at_2T"]["values"]
    [nan, nan]
    """,
    presets={
        "tiny": dict(**TINY, codebook_factors=(1, 2, 4), sweep_factor=2, n_val=200),
        # 400 steps: stochastic and the randomized codebook within 0.04 of each other at 4T
        # and 8T, far above fixed and sinusoidal (500 left them level; 1500 moved no shape).
        "quick": {},
        "full": dict(**sizes(32, 16, 4, 128), n_steps=2000, factors=(1, 2, 4, 8, 16))
        | dict(codebook_factors=(1, 2, 4, 8, 16, 32), n_val=2000),
        "gpu": dict(**sizes(64, 16, 4, 256), n_steps=5000, factors=(1, 2, 4, 8, 16))
        | dict(codebook_factors=(1, 2, 4, 8, 16, 32, 64), n_val=10000),
    },
    provenance=PROVENANCE,
)
encoding_families = RECORD.function
