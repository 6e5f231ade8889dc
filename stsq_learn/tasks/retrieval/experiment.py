"""q-sparse token retrieval: the error against heads, widths against T, length generalization.

q-sparse token retrieval (Mousavi-Hosseini, Sanford, Wu and Erdogdu, 2025)
names q positions in order and asks for the named tokens side by side. One
attention head averages tokens, so a readout of H heads retrieves at most H
of q independent tokens: the theory's threshold is H = q. Three studies
(:mod:`stsq_learn.studies`), every seed in each:

1. ``heads`` (:func:`~stsq_learn.studies.sweep`): for each q of
   ``q_values`` and each H of ``n_heads`` up to q + 1, a
   :class:`~stsq_learn.SparseTokenRetriever` trained online; its relative
   MSE beside the bound ``1 - H/q``. The threshold at q
   (:func:`thresholds`) is the fewest heads whose relative MSE is below
   ``1 / (2q)``, half the least error of q - 1 heads;
2. ``widths`` (:func:`~stsq_learn.studies.minimal_width`): at H = q =
   ``n_selected``, the smallest width reaching ``target_r2`` against T for
   the attention model and the fully-connected net, with the theory's laws
   ``a + b log2 T`` and ``b T^c`` fitted per seed (:func:`width_laws`);
3. ``length`` (:func:`~stsq_learn.studies.length_curve`): retrievers with
   stochastic and fixed encodings, R^2 on held-out rows lengthened to
   ``factors`` times T by the task's shift.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import field

import numpy as np
from sklearn.base import clone
from sklearn.utils._param_validation import Interval, StrOptions

from ...engine.batch_reuse import reusing_batches
from ...experiments import Experiment, Settings, document_experiment
from ...experiments._common import new_axes
from ...experiments._result import band, fmt_band
from ...experiments._settings import MappingOf, SequenceOf, positive_ints
from ...scoring import relative_mse
from ...studies import (
    BandDisplay,
    Law,
    StudyTable,
    fit_laws,
    length_curve,
    minimal_width,
    sweep,
)
from ..averaging.experiment import widths_text
from .estimators import FCNRetriever, SparseTokenRetriever
from .task import SparseRetrievalTask

LAWS = {"transformer": "log2", "fcn": "power"}
"""The law the theory gives each model's minimal width against T."""
ENCODINGS = ("stochastic", "fixed")
"""The positional encodings of the length part."""
_LABELS = {"transformer": "attention (SPE)", "fcn": "FCN"}

# The width search: Adam at 0.05 decayed by a cosine (its heads set to q by the run); over
# a fixed number of steps the width-following SGD's scores are too noisy to bracket a width
# (measured at T=16: 0.89 at width 16, 0.58 at 24, 300 steps). The FCN: Adam, as the
# separation's. The length part: the estimators' width-following SGD.
_SEARCH = SparseTokenRetriever(solver="adam", learning_rate_init=0.05, learning_rate="cosine")
_SGD = SparseTokenRetriever(
    solver="sgd", learning_rate_init="auto", learning_rate="cooldown", batch_size="auto"
)
_FCN = FCNRetriever(
    solver="adam", learning_rate_init=0.01, learning_rate="constant", batch_size=1024
)
_FCN_LONG = FCNRetriever(
    solver="adam", learning_rate_init=0.003, learning_rate="cosine", batch_size=256
)
_WIDTHS = {"transformer": (4, 6, 8, 12, 16, 24, 32, 48, 64), "fcn": (8, 32, 128, 512)}
_N_STEPS = {"transformer": 150, "fcn": 300}
_MODELS = ("transformer", "fcn")
_COUNT = [Interval(numbers.Integral, 1, None, closed="left")]
_STEPS = [*_COUNT, StrOptions({"auto"})]


class SparseRetrievalSettings(Settings):
    """The settings of :func:`sparse_retrieval`: the heads, widths and length parts.

    The defaults are the quick size's.

    Attributes
    ----------
    seq_len, n_features : int, default=16, 4
        T and d of the heads part.
    q_values : tuple of int, default=(2, 3)
        The numbers of named positions q of the heads part, increasing (at
        most ``seq_len``).
    n_heads : tuple of int, default=(1, 2, 3)
        The head counts H tried at each q (those up to q + 1), increasing.
    heads_width : int, default=32
        Width of the heads part's models.
    heads_steps : int or "auto", default=150
        Online steps of each (``"auto"``: the estimator's plan).
    heads_estimator : SparseTokenRetriever or None, default=Adam at 0.05 with a cosine decay
        The attention model of the heads part (its ``n_heads`` and ``width``
        set per model); None is ``estimator``. Over a short budget the
        width-following SGD does not reach the threshold at q = 3 (relative
        MSE 0.88 / 0.62 / 0.51 at H = 1 / 2 / 3, T=16, d=4, width 32, 200
        steps), Adam at 0.05 decayed by a cosine does (0.69 / 0.36 / 0.05 in
        150 steps).
    seq_lens : tuple of int, default=(4, 8, 16, 32)
        The lengths T of the width search, increasing.
    n_selected : int, default=2
        q (and H) of the width search; its tokens have ``n_features`` d.
    transformer : SparseTokenRetriever, default=Adam at 0.05 with a cosine decay
        The attention model of the width search (its ``n_heads`` set to q).
    fcn : FCNRetriever, default=Adam at 0.01, 1024 rows a step
        The FCN of the width search.
    widths : dict, default={"transformer": (4, 6, ..., 64), "fcn": (8, 32, 128, 512)}
        Width grids by model; a model left out keeps its default grid.
    n_steps : dict, default={"transformer": 150, "fcn": 300}
        Online steps per width by model (a model left out keeps its default).
    fcn_max_seq_len : int, default=16
        The longest T the FCN is searched at.
    target_r2 : float, default=0.9
        The R^2 a width must reach, in (0, 1).
    n_val : int, default=500
        Held-out rows scoring each width.
    stop_at_target : bool, default=True
        End each width's fit once it meets ``target_r2`` on the search's
        held-out rows, checked every 25 steps
        (:class:`~stsq_learn.studies.StopAtTarget`): the score at the stop
        is the width's score. False trains every width all its steps.
    estimator : SparseTokenRetriever, default=the width-following SGD
        The attention model of the length part (and of the heads part when
        ``heads_estimator`` is None).
    length_task : tuple of 3 int, default=(16, 4, 2)
        (T, d, q) the length part trains at, with q heads.
    length_width : int, default=32
        Width of the length part's models.
    length_steps : int or "auto", default=200
        Online steps of each.
    factors : tuple of int, default=(1, 2, 4)
        Evaluation lengths of the length part, as multiples of its T, increasing.
    n_test : int, default=3000
        Held-out rows of the heads and length parts (a row is one query, of
        q slots).

    Examples
    --------
    >>> from stsq_learn.experiments import SparseRetrievalSettings
    >>> SparseRetrievalSettings(q_values=(2,)).replace(n_heads=(1, 2)).n_heads
    (1, 2)
    """

    _parameter_constraints = {
        "seq_len": _COUNT,
        "n_features": _COUNT,
        "q_values": [positive_ints(increasing=True)],
        "n_heads": [positive_ints(increasing=True)],
        "heads_width": _COUNT,
        "heads_steps": _STEPS,
        "heads_estimator": [SparseTokenRetriever, None],
        "seq_lens": [positive_ints(increasing=True)],
        "n_selected": _COUNT,
        "transformer": [SparseTokenRetriever],
        "fcn": [FCNRetriever],
        "widths": [MappingOf(_MODELS, positive_ints(increasing=True))],
        "n_steps": [MappingOf(_MODELS, *_COUNT)],
        "fcn_max_seq_len": _COUNT,
        "target_r2": [Interval(numbers.Real, 0, 1, closed="neither")],
        "n_val": _COUNT,
        "stop_at_target": ["boolean"],
        "estimator": [SparseTokenRetriever],
        "length_task": [SequenceOf(*_COUNT, min_len=3)],
        "length_width": _COUNT,
        "length_steps": _STEPS,
        "factors": [positive_ints(increasing=True)],
        "n_test": _COUNT,
    }

    seq_len: int = 16
    n_features: int = 4
    q_values: tuple = (2, 3)
    n_heads: tuple = (1, 2, 3)
    heads_width: int = 32
    heads_steps: int | str = 150
    heads_estimator: SparseTokenRetriever | None = _SEARCH
    # Four lengths for the attention model's law (three gave R^2 0.75 from widths 8 / 16 /
    # 16), the FCN at three; T = 64 is out of this budget (no width to 64 reached R^2 0.9
    # there in 150 steps).
    seq_lens: tuple = (4, 8, 16, 32)
    n_selected: int = 2
    transformer: SparseTokenRetriever = _SEARCH
    fcn: FCNRetriever = _FCN
    widths: dict = field(default_factory=lambda: dict(_WIDTHS))
    n_steps: dict = field(default_factory=lambda: dict(_N_STEPS))
    fcn_max_seq_len: int = 16
    target_r2: float = 0.9
    n_val: int = 500
    stop_at_target: bool = True
    estimator: SparseTokenRetriever = _SGD
    length_task: tuple = (16, 4, 2)
    length_width: int = 32
    length_steps: int | str = 200
    factors: tuple = (1, 2, 4)
    n_test: int = 3000

    def __post_init__(self):
        for name, default in (("widths", _WIDTHS), ("n_steps", _N_STEPS)):
            if isinstance(self[name], dict):  # a model left out keeps its default
                object.__setattr__(self, name, {**default, **self[name]})
        super().__post_init__()

    def _validate(self):
        if len(self.length_task) != 3:
            raise ValueError(f"length_task must be (T, d, q), got {self.length_task!r}.")
        if self.q_values[-1] > self.seq_len:
            raise ValueError(
                f"q_values name up to {self.q_values[-1]} positions of seq_len={self.seq_len}."
            )
        for name in ("heads_estimator", "transformer", "fcn", "estimator"):
            if self[name] is not None:
                self[name]._validate_params()
        # Every task made once: a bad (T, d, q) is refused by its task before any fit.
        SparseRetrievalTask(self.seq_len, self.n_features, self.q_values[-1])
        SparseRetrievalTask(self.seq_lens[0], self.n_features, self.n_selected)
        SparseRetrievalTask(*self.length_task)


def _relative_mse(estimator, X, y):
    """The scorer of the heads part: the relative MSE of ``estimator`` on ``(X, y)``."""
    return relative_mse(y, estimator.predict(X))


# -- the studies -----------------------------------------------------------------------------
@reusing_batches
def run(cfg, seeds, *, device=None, progress=False, n_jobs=None):
    """The three studies over every seed: ``heads``, ``widths`` and ``length``.

    Every seed of a model at a point trains as one batched model where the
    seeds move in lockstep (``batch_seeds=True``).

    Parameters
    ----------
    cfg : SparseRetrievalSettings
        The settings.
    seeds : tuple of int
        The seeds.
    device : str or None, default=None
        Training device (None: each estimator's own).
    progress : bool, default=False
        Progress bars.
    n_jobs : int or None, default=None
        Fits at once in each study.

    Returns
    -------
    dict of str to StudyTable
        ``heads`` (:func:`~stsq_learn.studies.sweep` over ``n_selected`` and
        ``n_heads``: ``relative_mse``; its meta's ``solver`` names the
        heads' optimiser), ``widths`` (:func:`~stsq_learn.studies.minimal_width`
        per model) and ``length`` (:func:`~stsq_learn.studies.length_curve`).
    """
    common = dict(seeds=seeds, device=device, progress=progress, n_jobs=n_jobs, batch_seeds=True)
    heads = cfg.estimator if cfg.heads_estimator is None else cfg.heads_estimator
    heads = clone(heads).set_params(width=cfg.heads_width)
    table = sweep(
        heads,
        SparseRetrievalTask(cfg.seq_len, cfg.n_features, cfg.q_values[0]),
        [
            {"n_selected": [q], "n_heads": [h for h in cfg.n_heads if h <= q + 1]}
            for q in cfg.q_values
        ],
        n_steps=cfg.heads_steps,
        n_test=cfg.n_test,
        scoring={"relative_mse": _relative_mse},
        **common,
    )
    table.meta["solver"] = heads.get_params()["solver"]
    models = {
        "transformer": clone(cfg.transformer).set_params(n_heads=cfg.n_selected),
        "fcn": clone(cfg.fcn),
    }
    lens = {
        "transformer": cfg.seq_lens,
        "fcn": [t for t in cfg.seq_lens if t <= cfg.fcn_max_seq_len],
    }
    widths = [
        minimal_width(
            {name: model},
            SparseRetrievalTask(cfg.seq_lens[0], cfg.n_features, cfg.n_selected),
            cfg.widths[name],
            grid={"seq_len": list(lens[name])},
            n_steps=cfg.n_steps[name],
            target=cfg.target_r2,
            stop_at_target=cfg.stop_at_target,
            n_test=cfg.n_val,
            **common,
        )
        for name, model in models.items()
        if lens[name]
    ]
    T, d, q = cfg.length_task
    model = clone(cfg.estimator).set_params(n_heads=q, width=cfg.length_width)
    length = length_curve(
        {pe: clone(model).set_params(positional_encoding=pe) for pe in ENCODINGS},
        SparseRetrievalTask(T, d, q),
        [f * T for f in cfg.factors],
        n_steps=cfg.length_steps,
        n_test=cfg.n_test,
        **common,
    )
    return {"heads": table, "widths": StudyTable.concat(widths), "length": length}


# -- what the tables give --------------------------------------------------------------------
def thresholds(result):
    """Per seed and q, the fewest heads whose relative MSE is below ``1 / (2q)`` (theory: q).

    ``1 / (2q)`` is half the bound ``1 - (q - 1)/q`` of q - 1 heads.

    Parameters
    ----------
    result : ExperimentResult
        A run, or a one-seed view.

    Returns
    -------
    StudyTable
        ``seed``, ``n_selected`` (q), ``threshold`` (NaN where no H tried
        got there).
    """
    rows = {"seed": [], "n_selected": [], "threshold": []}
    for (seed, q), part in result.tables["heads"].groups("seed", "n_selected"):
        below = [h for h, e in zip(part["n_heads"], part["relative_mse"]) if e < 1 / (2 * q)]
        rows["seed"].append(seed)
        rows["n_selected"].append(q)
        rows["threshold"].append(float(min(below)) if below else math.nan)
    return StudyTable(rows)


def width_laws(result, model):
    """Per seed, the theory's law (:data:`LAWS`) of ``model``'s minimal widths against T.

    Parameters
    ----------
    result : ExperimentResult
        A run, or a one-seed view.
    model : {"transformer", "fcn"}
        The model.

    Returns
    -------
    dict of int to Law or None
        None for a seed with fewer than 3 widths found.
    """
    rows = result.tables["widths"].where(model=model)
    return fit_laws(rows, "seq_len", "value", LAWS[model])


def headline(result):
    """The numbers one seed's run is judged by: the error per head count, the threshold, laws.

    ``"relative_mse.q=<q>.H=<H>"`` for every (q, H) tried;
    ``"threshold.q=<q>"`` (:func:`thresholds`, NaN where none got there);
    each model's law of the minimal widths against T, ``"law.transformer.a"``,
    ``".b"``, ``".r2"`` (``a + b log2 T``) and ``"law.fcn.b"``, ``".c"``,
    ``".r2"`` (``b T^c``), NaN with fewer than 3 widths found.

    Parameters
    ----------
    result : ExperimentResult
        A one-seed view (:meth:`ExperimentResult.seed`).

    Returns
    -------
    dict of str to float
    """
    hd = result.tables["heads"]
    out = {
        f"relative_mse.q={q}.H={h}": e
        for q, h, e in zip(hd["n_selected"], hd["n_heads"], hd["relative_mse"])
    }
    for row in thresholds(result):
        out[f"threshold.q={row['n_selected']}"] = row["threshold"]
    for model, law_name in LAWS.items():
        (law,) = width_laws(result, model).values() or [None]
        for p in ("a", "b") if law_name == "log2" else ("b", "c"):
            out[f"law.{model}.{p}"] = math.nan if law is None else law.params[p]
        out[f"law.{model}.r2"] = math.nan if law is None else law.r2
    return out


def _heads_budget(result):
    """``"m=<width>, <steps> <SOLVER> steps"`` of the heads part."""
    hd = result.tables["heads"]
    steps = int(np.max(hd["n_iter"])) if len(hd) else 0
    return f"m={result.settings['heads_width']}, {steps} {hd.meta['solver'].upper()} steps"


def summary(result):
    """Summary rows: the error against heads and the thresholds, the widths, laws, length."""
    c, bands, tables = result.settings, result.bands(), result.tables

    def b(key):
        return fmt_band(bands[key])

    heads = c["n_heads"]
    rows = [
        f"| Retrieval heads (T={c['seq_len']}, d={c['n_features']}, {_heads_budget(result)}) "
        f"| relative MSE at H = {', '.join(map(str, heads))} | |"
    ]
    for q in c["q_values"]:
        text = " / ".join(b(f"relative_mse.q={q}.H={h}") if h <= q + 1 else "-" for h in heads)
        rows.append(f"| | q={q} | {text} |")
    for q in c["q_values"]:
        found = bands[f"threshold.q={q}"]["values"]
        reached = [v for v in found if math.isfinite(v)]
        text = f"H = {b(f'threshold.q={q}')}" if reached else "not reached within this budget"
        if reached and len(reached) < len(found):
            text += f" ({len(found) - len(reached)} of {len(found)} seeds not reached)"
        rows.append(
            f"| | q={q}: fewest H with relative MSE < 1/(2q) = {1 / (2 * q):.3f} "
            f"(theory: H = q) | {text} |"
        )
    wd = tables["widths"]
    rows.append(
        f"| Retrieval widths (d={c['n_features']}, q=H={c['n_selected']}, "
        f"R^2 >= {c['target_r2']}) | T = {', '.join(map(str, wd.unique('seq_len')))} | |"
    )
    for model, label in (("transformer", "attention"), ("fcn", "FCN")):
        rows.append(
            f"| | minimal width, {label} | {widths_text(wd.where(model=model), 'seq_len')} |"
        )
    laws = (("transformer", "attention", "a + b log2(T)", "ab"), ("fcn", "FCN", "b T^c", "bc"))
    for model, label, form, names in laws:
        if math.isfinite(bands[f"law.{model}.b"]["median"]):
            params = ", ".join(f"{p} {b(f'law.{model}.{p}')}" for p in names)
            rows.append(
                f"| | {label}: w = {form}, per seed | {params}, fit R^2 {b(f'law.{model}.r2')} |"
            )
    T, _, q = c["length_task"]
    lens = ", ".join(str(f * T) for f in c["factors"])
    rows.append(
        f"| Retrieval length (trained at T={T}, q=H={q}, m={c['length_width']}) "
        f"| R^2 at T' = {lens} | |"
    )
    for pe in ENCODINGS:
        scores = tables["length"].where(model=pe)
        text = " / ".join(
            fmt_band(band(scores.where(eval_seq_len=f * T)["score"])) for f in c["factors"]
        )
        rows.append(f"| | {pe} | {text} |")
    return rows


# -- the figure ------------------------------------------------------------------------------
def figure(result, axes=None):
    """The three panels over the seeds: error against heads, widths against T, length.

    Each q's relative MSE against H (median, min-max shaded) beside its
    bound ``1 - H/q`` (dotted, H <= q) and its threshold level ``1/(2q)``
    at H = q, a note naming a q that missed its threshold in any seed; both
    models' minimal widths against T (log-log; median, min-max error bars,
    open triangles for lower bounds), each with the median of its seeds'
    laws drawn over the lengths they were fitted on; the length part's R^2
    against the evaluation length (median, min-max shaded).

    Parameters
    ----------
    result : ExperimentResult
        A run of :func:`sparse_retrieval` (every seed).
    axes : sequence of 3 matplotlib Axes, default=None
        Where to draw; None makes a new figure (one row).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, (ax_h, ax_w, ax_l) = new_axes(axes, 3, ncols=3)
    c, tables = result.settings, result.tables
    _heads_panel(result, ax_h)
    laws = {model: Law.median(width_laws(result, model)) for model in LAWS}
    BandDisplay.from_table(
        tables["widths"],
        x="seq_len",
        y="value",
        hue="model",
        laws={model: law for model, law in laws.items() if law is not None},
        law_variable="T",
        bound="bound",
        ax=ax_w,
        style="errorbar",
        logx=True,
        logy=True,
        labels=_LABELS,
        xlabel="sequence length T (log scale)",
        ylabel=f"minimal width (R^2 >= {c['target_r2']})",
        title=f"Retrieval: width against T (d={c['n_features']}, q=H={c['n_selected']})",
    )
    T, _, q = c["length_task"]
    BandDisplay.from_table(
        tables["length"],
        x="eval_seq_len",
        y="score",
        hue="model",
        ax=ax_l,
        logx=True,
        colors={"stochastic": "C0", "fixed": "C3"},
        xlabel="evaluation length T' (log scale)",
        ylabel="$R^2$",
        title=f"Retrieval: length generalization (q=H={q}, m={c['length_width']})",
        legend=False,
    )
    ax_l.axvline(T, color="gray", ls=":", lw=1, label=f"training T={T}")
    ax_l.axhline(0.0, color="k", lw=0.5)
    scores = np.asarray(tables["length"]["score"], dtype=float)
    low = float(np.min(scores[np.isfinite(scores)], initial=0.0))
    ax_l.set_ylim(min(-0.1, low - 0.05), 1.02)
    ax_l.legend(fontsize="small", loc="lower left")
    return fig


def _heads_panel(result, ax):
    """Relative MSE against H per q, its bound ``1 - H/q`` dotted, the level ``1/(2q)`` dashed."""
    c, heads = result.settings, result.tables["heads"]
    qs = heads.unique("n_selected")
    display = BandDisplay.from_table(
        heads,
        x="n_heads",
        y="relative_mse",
        hue="n_selected",
        ax=ax,
        labels={q: f"q={q}" for q in qs},
        xlabel="heads H",
        ylabel="relative MSE (test)",
        legend=False,
    )
    found = thresholds(result)
    missed = []
    for i, q in enumerate(qs):
        color = display.lines_[q].get_color()
        hs = [h for h in heads.where(n_selected=q).unique("n_heads") if h <= q]
        label = "bound $1 - H/q$ (H <= q)" if i == 0 else "_nolegend_"
        ax.plot(hs, [1 - h / q for h in hs], ls=":", color=color, lw=1.2, label=label)
        ax.plot([q - 0.25, q + 0.25], [1 / (2 * q)] * 2, "--", color=color, lw=1)
        off = sum(v != q for v in found.where(n_selected=q)["threshold"])
        if off:
            of = f" ({off} of {len(result.seeds)} seeds)" if len(result.seeds) > 1 else ""
            missed.append(f"q={q}{of}")
    ax.plot([], [], "k--", lw=1, label="threshold level $1/(2q)$ at H = q")
    if missed:
        ax.text(
            0.02,
            0.02,
            f"no threshold at H = q for {', '.join(missed)} within this budget\n"
            "(relative MSE at H = q not below 1/(2q)): too few steps",
            transform=ax.transAxes,
            fontsize="small",
            color="C3",
            va="bottom",
        )
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(
        f"Retrieval: error against heads (T={c['seq_len']}, d={c['n_features']}, "
        f"{_heads_budget(result)})",
        fontsize="medium",
    )
    ax.legend(fontsize="small", loc="upper right")


@document_experiment
def sparse_retrieval(
    settings=None, *, seeds=3, device=None, progress=False, n_jobs=None, **changes
):
    """Heads, widths and length generalization on q-sparse token retrieval.

    The relative MSE against the number of heads H for several q, with its
    threshold at H = q; at H = q, the minimal widths against T of the
    attention model and the fully-connected net with their laws fitted per
    seed; the R^2 of stochastic and fixed encodings at longer lengths (see
    :mod:`stsq_learn.tasks.retrieval.experiment`; the settings:
    :class:`SparseRetrievalSettings`).

    Parameters
    ----------
    {parameters}

    Returns
    -------
    {returns}

    Examples
    --------
    >>> from stsq_learn.experiments import sparse_retrieval
    >>> result = sparse_retrieval("tiny", seeds=2)
    >>> sorted(result.tables), result.seeds
    (['heads', 'length', 'widths'], (0, 1))
    >>> result.bands()["relative_mse.q=2.H=2"]["median"] < 1
    True
    """
    return RECORD(settings, changes, seeds=seeds, device=device, progress=progress, n_jobs=n_jobs)


PROVENANCE = {
    "task": "paper: q-sparse token retrieval as Mousavi-Hosseini, Sanford, Wu and Erdogdu "
    "(2025) pose it (q positions named in order); the target, the named tokens side by "
    "side, is ours (their class takes any function of them)",
    "tokens": "paper: Gaussian tokens (the law of Wang et al.'s sparse token selection)",
    "subsets": "paper: a uniform q-subset of the T positions (here in a uniform order)",
    "batch": "ours: each estimator's batch size (a fresh batch at every step, as the paper trains)",
    "width_law": "paper: width O~(d + q log T) for the transformer, Omega~(T d) for "
    "fully-connected nets (Wang et al.'s separation); fitted here per seed",
    "seq_len, n_features, q_values, n_heads": "ours: the heads part's T, d, q and H",
    "heads_width, heads_steps, heads_estimator": "ours: the heads part's budget (quick: "
    "Adam at 0.05 decayed by a cosine, width 32, 150 steps)",
    "threshold": "ours: the threshold level 1/(2q), half the bound 1 - (q - 1)/q of q - 1 "
    "heads, by which the fewest heads that retrieve every token is read off",
    "seq_lens, n_selected, fcn_max_seq_len": "ours: the width search's lengths and q",
    "widths, n_steps": "ours: the width grids and the steps per width",
    "transformer, fcn, estimator": "ours: the optimisers and step sizes (Adam for the "
    "search; the estimators' width-following SGD for the length part)",
    "target_r2": "ours: R^2 >= 0.9 defines a width's success",
    "stop_at_target": "ours: a fit of the width search ends once it meets the target on "
    "the search's validation rows",
    "length_task, length_width, length_steps, factors": "ours: the length part's sizes, "
    "budget and test lengths",
    "n_val, n_test": "ours: held-out rows scoring each width and each model",
    "metric": "ours: the relative MSE sum ||y_hat - y||^2 / sum ||y||^2, and R^2",
}
"""Setting -> ``"paper: ..."`` or ``"ours: ..."``: where each setting comes from."""

_ATTENTION_GRID = (4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 128)
_FCN_GRID = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)

RECORD = Experiment(
    name="retrieval",
    function=sparse_retrieval,
    settings=SparseRetrievalSettings,
    presets={
        "tiny": dict(
            seq_len=6,
            n_features=2,
            q_values=(2,),
            n_heads=(1, 2),
            heads_width=8,
            heads_steps=20,
            heads_estimator=None,
            seq_lens=(4, 8),
            widths={"transformer": (4, 8), "fcn": (8, 16)},
            n_steps={"transformer": 20, "fcn": 20},
            fcn_max_seq_len=8,
            target_r2=0.5,
            n_val=100,
            length_task=(6, 2, 2),
            length_width=8,
            length_steps=20,
            factors=(1, 2),
            n_test=200,
        ),
        # q = 2, 3 and H to 3 at T=16; the heads part on Adam (see heads_estimator).
        "quick": {},
        # The sizes: q and H to 4 at T=16, d=4, width 64 with the planned steps; the
        # search T = 8 ... 256 (the FCN to 32); the length part at T=16, width 64.
        "full": dict(
            q_values=(1, 2, 3, 4),
            n_heads=(1, 2, 3, 4, 5),
            heads_width=64,
            heads_steps="auto",
            heads_estimator=None,
            seq_lens=(8, 16, 32, 64, 128, 256),
            fcn=_FCN_LONG,
            widths={"transformer": _ATTENTION_GRID, "fcn": _FCN_GRID},
            n_steps={"transformer": 600, "fcn": 2000},
            fcn_max_seq_len=32,
            n_val=1000,
            length_width=64,
            length_steps="auto",
            factors=(1, 2, 4, 8),
            n_test=8000,
        ),
        "gpu": dict(
            seq_len=32,
            q_values=(1, 2, 3, 4, 6),
            n_heads=(1, 2, 3, 4, 5, 6, 7),
            heads_width=128,
            heads_steps="auto",
            heads_estimator=None,
            seq_lens=(8, 16, 32, 64, 128, 256, 512, 1024),
            fcn=_FCN_LONG,
            widths={"transformer": _ATTENTION_GRID, "fcn": (*_FCN_GRID, 8192, 16384)},
            n_steps={"transformer": 1000, "fcn": 4000},
            fcn_max_seq_len=64,
            n_val=4000,
            length_task=(32, 4, 2),
            length_width=128,
            length_steps="auto",
            factors=(1, 2, 4, 8),
            n_test=32000,
        ),
    },
    run=run,
    figure=figure,
    headline=headline,
    summary=summary,
    provenance=PROVENANCE,
    # The threshold is a number of heads: one head either way.
    reference_rtol={"threshold.*": 0.5, "law.*": 0.5},
    aliases=("sparse_retrieval",),
)
