"""Sparse-token classification: attention needs a signal growing like log L, linear sqrt L.

Three parts, after Barnfield, Cui and Lu (ICLR 2026), each a study of
:mod:`stsq_learn.studies`; the result's tables bear their names:

- ``law``: at each length L, the smallest signal theta at which each
  classifier (the attention classifier, the flattened and the pooled
  logistic regressions) reaches a target test error
  (:func:`~stsq_learn.studies.search_threshold` on the task's ``signal``,
  ``method="geometric"``: bisection on ``log theta``); per seed, the laws
  ``a + b ln L`` and ``c sqrt(L)`` (through 0, as the pooled oracle's) are
  fitted to each classifier's thresholds (:func:`threshold_laws`);
- ``alignment``: the cosine of the query with ``xi`` after the two-step
  protocol (``solver="two_step"``, :attr:`two_step_query_`) against ``n / d``
  at two token dimensions (a :func:`~stsq_learn.studies.sweep` per ratio,
  ``n_seeds`` draws of the rows per seed), beside
  :func:`~.theory.two_step_alignment`;
- ``error``: test error against theta at one length
  (:func:`~stsq_learn.studies.sweep` over ``signal``), beside the pooled
  oracle's exact error (:func:`~.theory.pooled_error`) and, for attention,
  the signal at which the informative tokens hold half the softmax's
  normaliser at the fitted query's norm along ``xi``
  (:func:`attention_thresholds`).

Every classifier of seed ``s`` is fitted with ``random_state=s`` on the
rows of ``stream_seed(s, "train")`` and scored on those of
``stream_seed(s, "test")``; the task draws its noise independently of
theta, so one seed's rows keep their noise as the search moves theta. The
classifiers are not on the members engine's batched path: their seeds are
fitted one after another.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, FitFailedWarning
from sklearn.utils._param_validation import Interval

from ...experiments import Experiment, Settings
from ...experiments._common import new_axes
from ...experiments._result import fmt_band
from ...experiments._settings import MappingOf, SequenceOf, positive_ints
from ...studies import (
    BandDisplay,
    Law,
    StudyTable,
    fit_laws,
    search_threshold,
    stream_seed,
    sweep,
)
from .baselines import make_flat_logistic, make_pooled_logistic
from .estimators import SparseTokenClassifier
from .task import SparseTokenClassificationTask
from .theory import attention_threshold, pooled_error, pooled_threshold, two_step_alignment

CLASSIFIERS = ("attention", "flat", "pooled")
"""The three classifiers, in the order of every table and figure."""
LAWS = ("log", "sqrt")
"""The laws fitted to the thresholds: ``a + b ln L`` and ``c sqrt(L)`` (through 0)."""

_ATTENTION = SparseTokenClassifier(
    solver="adam", learning_rate_init=0.1, max_iter=80, batch_size="full"
)
_BOUNDS = {"attention": (2.0, 8.0), "flat": (2.0, 64.0), "pooled": (2.0, 64.0)}
_COLORS = {"attention": "C0", "flat": "C1", "pooled": "C2"}
_LABELS = {"attention": "attention", "flat": "flattened logistic", "pooled": "pooled logistic"}
_POSITIVE = Interval(numbers.Real, 0, None, closed="neither")
_COUNT = [Interval(numbers.Integral, 1, None, closed="left")]
_PAIR = SequenceOf(_POSITIVE, min_len=2, increasing=True)


class SparseTokenClassificationSettings(Settings):
    """The settings of :func:`sparse_token_classification`: the law, the alignment, the error.

    Attributes
    ----------
    seq_lens : tuple of int, default=(8, 16, 32, 64, 128)
        The lengths L of the law, increasing (at least 3 for the fits).
    n_features : int, default=8
        d of the law and of the error part.
    target_error : float, default=0.2
        The test error that defines a threshold, in (0, 0.5).
    n_train, n_test : int, default=300, 1000
        Training and test rows at each fit.
    attention : SparseTokenClassifier or None, default=None
        The attention classifier of the law and the error part (None:
        80 full-batch Adam steps at 0.1).
    signal_bounds : dict of str to (float, float), or (float, float), or None, default=None
        The bisection's bracket ``(low, high)`` of theta, per classifier
        (the others keep theirs) or for all three (None: ``(2, 8)`` for
        attention, ``(2, 64)`` for the linear ones).
    n_bisect : int, default=6
        Halvings of the bracket (in ``log theta``).
    alignment_features : tuple of int, default=(16, 64)
        The token dimensions d of the alignment part.
    alignment_ratios : tuple of float, default=(1.0, 2.0, 4.0, 8.0)
        The ratios n/d of the alignment part.
    alignment_seq_len : int, default=8
        L of the alignment part.
    alignment_signal : float, default=3.0
        theta of the alignment part.
    alignment_learning_rate : float, default=0.1
        Step size of the two steps.
    n_seeds : int, default=2
        Draws of the rows per (d, n/d) of the alignment part, for each seed.
    error_seq_len : int, default=32
        L of the error part.
    error_signals : tuple of float, default=(1.0, 2.0, 4.0, 8.0, 16.0)
        The thetas of the error part.

    Examples
    --------
    >>> from stsq_learn.experiments import SparseTokenClassificationSettings
    >>> SparseTokenClassificationSettings(seq_lens=(4, 8, 16)).replace(n_bisect=2).n_bisect
    2
    """

    _parameter_constraints = {
        "seq_lens": [positive_ints(increasing=True)],
        "n_features": _COUNT,
        "target_error": [Interval(numbers.Real, 0, 0.5, closed="neither")],
        "n_train": _COUNT,
        "n_test": _COUNT,
        "attention": [SparseTokenClassifier, None],
        "signal_bounds": [MappingOf(CLASSIFIERS, _PAIR), _PAIR, None],
        "n_bisect": _COUNT,
        "alignment_features": [positive_ints()],
        "alignment_ratios": [SequenceOf(_POSITIVE)],
        "alignment_seq_len": _COUNT,
        "alignment_signal": [_POSITIVE],
        "alignment_learning_rate": [_POSITIVE],
        "n_seeds": _COUNT,
        "error_seq_len": _COUNT,
        "error_signals": [SequenceOf(_POSITIVE)],
    }

    seq_lens: tuple = (8, 16, 32, 64, 128)
    n_features: int = 8
    target_error: float = 0.2
    n_train: int = 300
    n_test: int = 1000
    attention: SparseTokenClassifier | None = None
    signal_bounds: dict | tuple | None = None
    n_bisect: int = 6
    alignment_features: tuple = (16, 64)
    alignment_ratios: tuple = (1.0, 2.0, 4.0, 8.0)
    alignment_seq_len: int = 8
    alignment_signal: float = 3.0
    alignment_learning_rate: float = 0.1
    n_seeds: int = 2
    error_seq_len: int = 32
    error_signals: tuple = (1.0, 2.0, 4.0, 8.0, 16.0)

    def _validate(self):
        for name, pair in signal_bounds(self).items():
            if len(pair) != 2:
                raise ValueError(
                    f"signal_bounds must give (low, high) pairs with 0 < low < high, got "
                    f"{pair!r} for {name}."
                )


def signal_bounds(settings):
    """Classifier to the bisection's bracket ``(low, high)`` of theta, of settings (or JSON)."""
    given = settings["signal_bounds"]
    if given is None:
        return dict(_BOUNDS)
    if isinstance(given, dict):
        return {**_BOUNDS, **{k: tuple(v) for k, v in given.items()}}
    return dict.fromkeys(CLASSIFIERS, tuple(given))


# -- the studies -----------------------------------------------------------------------------
def _test_error(estimator, X, y):
    """The studies' scorer: the test error ``1 - accuracy``."""
    return 1.0 - estimator.score(X, y)


def _query_along_xi(estimator, X, y):
    """The fitted attention query's component along ``xi`` (NaN for the linear baselines)."""
    query = getattr(estimator, "query_", None)
    if query is None:
        return np.nan
    return float(query @ estimator.task_.signal_direction)


def _two_step_cosine(estimator, X, y):
    """The cosine of ``two_step_query_`` with ``xi`` (0 for a zero query)."""
    query = estimator.two_step_query_
    norm = float(np.linalg.norm(query))
    return float(query @ estimator.task_.signal_direction / norm) if norm > 0 else 0.0


def run(cfg, seeds, *, device=None, progress=False, n_jobs=None):
    """The three studies over every seed (the record's ``run``): ``law``, ``alignment``, ``error``.

    ``law`` holds :func:`~stsq_learn.studies.search_threshold`'s rows, one
    per (classifier, seed, L): ``value`` is the minimal theta (NaN where the
    bracket's top failed, ``bound`` then its top). ``alignment`` holds one
    row per (seed, d, n/d, draw): ``draw`` (its rows' seed,
    ``stream_seed(seed, "alignment <k>")``), ``n_features``, ``ratio``,
    ``n_train`` and ``cosine`` (NaN for a draw of one class). ``error``
    holds the sweep's rows, one per (classifier, seed, theta):
    ``test_error`` and ``query_along_xi``. ``device`` is the attention
    classifier's (None: its own).
    """
    bounds = signal_bounds(cfg)
    attention = clone(_ATTENTION if cfg.attention is None else cfg.attention)
    if device is not None:
        attention.set_params(device=device)
    models = {
        "attention": attention,
        "flat": make_flat_logistic(max_iter=1000),
        "pooled": make_pooled_logistic(max_iter=1000),
    }
    rows = dict(seeds=seeds, n_train=cfg.n_train, n_test=cfg.n_test, progress=progress)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        law = StudyTable.concat(
            [
                search_threshold(
                    {name: models[name]},
                    SparseTokenClassificationTask(cfg.seq_lens[0], cfg.n_features),
                    "signal",
                    bounds[name],
                    target=cfg.target_error,
                    grid={"seq_len": list(cfg.seq_lens)},
                    method="geometric",
                    n_iter=cfg.n_bisect,
                    start=None,
                    skip_after_miss=False,
                    greater_is_better=False,
                    scoring=_test_error,
                    n_jobs=n_jobs,
                    **rows,
                )
                for name in CLASSIFIERS
            ]
        )
        alignment = _alignment(cfg, seeds, progress, n_jobs)
        error = sweep(
            models,
            SparseTokenClassificationTask(cfg.error_seq_len, cfg.n_features),
            {"signal": [float(t) for t in cfg.error_signals]},
            scoring={"test_error": _test_error, "query_along_xi": _query_along_xi},
            n_jobs=n_jobs,
            **rows,
        )
    return {"law": law, "alignment": alignment, "error": error}


def _alignment(cfg, seeds, progress, n_jobs):
    """The two-step fits of every seed's draws: one sweep per (d, n/d), its rows labelled."""
    draws = {s: [stream_seed(s, f"alignment {k}") for k in range(cfg.n_seeds)] for s in seeds}
    outer = {draw: s for s, ds in draws.items() for draw in ds}
    model = SparseTokenClassifier(
        solver="two_step", learning_rate_init=cfg.alignment_learning_rate, max_iter=1
    )
    parts = []
    for d in cfg.alignment_features:
        task = SparseTokenClassificationTask(cfg.alignment_seq_len, d, signal=cfg.alignment_signal)
        for ratio in cfg.alignment_ratios:
            n = max(8, round(ratio * d))
            with warnings.catch_warnings():  # a draw of one class: no gradient to align (NaN)
                warnings.simplefilter("ignore", FitFailedWarning)
                fits = sweep(
                    {"two_step": model},
                    task,
                    seeds=[draw for s in seeds for draw in draws[s]],
                    n_train=n,
                    n_test=1,
                    scoring={"cosine": _two_step_cosine},
                    n_jobs=n_jobs,
                    progress=progress,
                )
            parts.append(
                StudyTable(
                    {
                        "seed": [outer[draw] for draw in fits["seed"]],
                        "draw": fits["seed"],
                        "n_features": [d] * len(fits),
                        "ratio": [float(ratio)] * len(fits),
                        "n_train": [n] * len(fits),
                        "cosine": fits["cosine"],
                        "fit_failure": fits["fit_failure"],
                    },
                    meta={"study": "sweep", "draws_per_seed": cfg.n_seeds},
                )
            )
    return StudyTable.concat(parts)


# -- what the tables give --------------------------------------------------------------------
def threshold_laws(result, name, law):
    """Seed to ``law`` fitted to classifier ``name``'s thresholds against L (:func:`fit_laws`).

    ``law`` is ``"log"`` (``a + b ln L``) or ``"sqrt"`` (``c sqrt(L)``
    through 0, the pooled oracle's law: c is ``params["b"]``); thresholds
    not reached are left out, a seed with too few points gets None.
    """
    rows = result.tables["law"].where(model=name)
    return fit_laws(rows, "seq_len", "value", law, origin=law == "sqrt")


def alignment_theory(settings):
    """The query's limiting cosine ``rho_2`` (:func:`~.theory.two_step_alignment`) at each n/d."""
    ratios = np.array(settings["alignment_ratios"], float)
    _, query = two_step_alignment(
        settings["alignment_signal"], settings["alignment_seq_len"], ratios
    )
    return np.atleast_1d(query).tolist()


def attention_thresholds(result):
    """Seed to the signal where the informative share is 1/2 at its fitted query (or None).

    The query's norm is the median of the seed's positive ``query_along_xi``
    in the error part (:func:`~.theory.attention_threshold`); None where no
    query was positive, or ``L = 1``.
    """
    L = result.settings["error_seq_len"]
    out = {}
    for (seed,), rows in result.tables["error"].where(model="attention").groups("seed"):
        along = rows["query_along_xi"]
        positive = along[np.isfinite(along) & (along > 0)]
        ok = len(positive) and L > 1
        out[seed] = float(attention_threshold(L, query_norm=np.median(positive))) if ok else None
    return out


def headline(result):
    """The numbers one seed's run is judged by, flat.

    ``<classifier>.log_a``, ``.log_b``, ``.log_r2`` (the law ``a + b ln L``),
    ``.sqrt_c`` and ``.sqrt_r2`` (the law ``c sqrt(L)``) for each of
    ``attention``, ``flat`` and ``pooled``; ``alignment.d=<d>.ratio=<n/d>``
    (the mean cosine over the seed's draws) and
    ``alignment.theory.ratio=<n/d>``; NaN where a value is missing.
    """
    out = {}
    for name in CLASSIFIERS:
        (log,) = threshold_laws(result, name, "log").values()
        (sqrt,) = threshold_laws(result, name, "sqrt").values()
        out[f"{name}.log_a"] = math.nan if log is None else log.params["a"]
        out[f"{name}.log_b"] = math.nan if log is None else log.params["b"]
        out[f"{name}.log_r2"] = math.nan if log is None else log.r2
        out[f"{name}.sqrt_c"] = math.nan if sqrt is None else sqrt.params["b"]
        out[f"{name}.sqrt_r2"] = math.nan if sqrt is None else sqrt.r2
    c, alignment = result.settings, result.tables["alignment"]
    for d in c["alignment_features"]:
        for ratio in c["alignment_ratios"]:
            values = alignment.where(n_features=d, ratio=float(ratio))["cosine"]
            values = values[np.isfinite(values)]
            out[f"alignment.d={d}.ratio={ratio:g}"] = (
                float(values.mean()) if len(values) else math.nan
            )
    for ratio, value in zip(c["alignment_ratios"], alignment_theory(c)):
        out[f"alignment.theory.ratio={ratio:g}"] = float(value)
    return out


def summary(result):
    """Summary rows: the thresholds, the laws, the alignment and the error (over the seeds)."""
    c, bands = result.settings, result.bands()

    def medians(table, x, y):
        found = table.bands(x, y, by=()).xy(x, "median", finite=False)[1]
        return " / ".join("-" if not np.isfinite(v) else f"{v:.3g}" for v in found)

    def band(key):
        return fmt_band(bands[key], 3)

    n = len(result.seeds)
    rows = [
        f"| classification (d={c['n_features']}, {c['n_train']} rows, test error "
        f"{c['target_error']:g}, {n} seed{'s' * (n > 1)}) | minimal theta at L = "
        f"{', '.join(map(str, c['seq_lens']))} (median) | |"
    ]
    for name in CLASSIFIERS:
        rows.append(
            f"| | {name} | {medians(result.tables['law'].where(model=name), 'seq_len', 'value')} |"
        )
    for name in CLASSIFIERS:
        rows.append(
            f"| | {name}: a + b ln L, R^2 / c sqrt L, R^2 | b = {band(f'{name}.log_b')}, "
            f"{band(f'{name}.log_r2')} / c = {band(f'{name}.sqrt_c')}, {band(f'{name}.sqrt_r2')} |"
        )
    ratios = ", ".join(f"{r:g}" for r in c["alignment_ratios"])
    rows.append(
        f"| classification two steps (L={c['alignment_seq_len']}, "
        f"theta={c['alignment_signal']:g}) | cos(query, xi) at n/d = {ratios} | |"
    )
    for d in c["alignment_features"]:
        means = " / ".join(band(f"alignment.d={d}.ratio={r:g}") for r in c["alignment_ratios"])
        rows.append(f"| | d={d} | {means} |")
    theory = " / ".join(f"{v:.2f}" for v in alignment_theory(c))
    rows.append(f"| | theory (d, n -> inf) | {theory} |")
    thetas = ", ".join(f"{t:g}" for t in c["error_signals"])
    rows.append(
        f"| classification error (L={c['error_seq_len']}) | test error at theta = {thetas} "
        "(median) | |"
    )
    for name in CLASSIFIERS:
        error = result.tables["error"].where(model=name)
        rows.append(f"| | {name} | {medians(error, 'signal', 'test_error')} |")
    oracle = pooled_error(np.array(c["error_signals"], float), c["error_seq_len"])
    rows.append(f"| | pooled oracle (exact) | {' / '.join(f'{v:.3g}' for v in oracle)} |")
    return rows


# -- the figure ------------------------------------------------------------------------------
def figure(result, axes=None):
    """The four panels of ``result.plot(axes)`` (None: a new figure, two rows of two).

    Each classifier's minimal theta against L (the median over the seeds,
    min-max error bars; open triangles where the bracket's top failed) with
    the median of its seeds' laws ``a + b ln L``, then ``c sqrt L``, beside
    the pooled oracle's threshold; each d's cosine after two steps against
    n/d (over every draw) beside the theory's limit; the test error against
    theta beside the pooled oracle's and the signal of informative share 1/2.
    """
    new = axes is None
    fig, (ax_log, ax_sqrt, ax_al, ax_err) = new_axes(axes, 4, ncols=2)
    c = result.settings
    Ls = np.array(c["seq_lens"], float)
    oracle = pooled_threshold(Ls, target_error=c["target_error"])
    for ax, law, title in (
        (ax_log, "log", "Signal needed: a + b ln L"),
        (ax_sqrt, "sqrt", "Signal needed: c sqrt L"),
    ):
        BandDisplay.from_table(
            result.tables["law"],
            x="seq_len",
            y="value",
            laws={name: Law.median(threshold_laws(result, name, law)) for name in CLASSIFIERS},
            law_variable="L",
            theory={"pooled oracle (theory)": (Ls, oracle)},
            bound="bound",
            ax=ax,
            style="errorbar",
            logx=True,
            labels=_LABELS,
            colors=_COLORS,
            xlabel="tokens L",
            ylabel=f"minimal theta for test error {c['target_error']:g}",
            title=title,
            legend=False,
            line_kw={"ls": ""},
        )
        ax.legend(fontsize="x-small")
    ratios = np.array(c["alignment_ratios"], float)
    alignment = result.tables["alignment"]
    BandDisplay.from_table(
        alignment,
        x="ratio",
        y="cosine",
        hue="n_features",
        theory={"theory (d, n -> inf)": (ratios, alignment_theory(c))},
        ax=ax_al,
        logx=True,
        labels={d: f"two steps, d={d}" for d in c["alignment_features"]},
        xlabel="n / d",
        ylabel="cos(query, xi)",
        title=f"Query after two steps (L={c['alignment_seq_len']}, "
        f"theta={c['alignment_signal']:g})",
    )
    ax_al.set_ylim(min(-0.05, np.nanmin(alignment["cosine"], initial=0.0) - 0.05), 1.02)
    L = c["error_seq_len"]
    BandDisplay.from_table(
        result.tables["error"],
        x="signal",
        y="test_error",
        theory={"pooled oracle (exact)": lambda t: pooled_error(t, L)},
        ax=ax_err,
        logx=True,
        labels=_LABELS,
        colors=_COLORS,
        xlabel="signal theta",
        ylabel="test error",
        title=f"Test error against theta (L={L})",
        legend=False,
    )
    shares = [v for v in attention_thresholds(result).values() if v is not None]
    if shares:
        ax_err.axvline(
            float(np.median(shares)),
            color=_COLORS["attention"],
            ls=":",
            label="informative share 1/2 (theory, fitted query)",
        )
        if max(shares) > min(shares):
            ax_err.axvspan(min(shares), max(shares), color=_COLORS["attention"], alpha=0.1, lw=0)
    ax_err.set_ylim(-0.02, 0.55)
    ax_err.legend(fontsize="x-small")
    if new:
        n = len(result.seeds)
        seeds = "one seed" if n == 1 else f"median over {n} seeds, bars and bands: min-max"
        fig.suptitle(f"Sparse-token classification (d={c['n_features']}; {seeds})")
    return fig


PROVENANCE = {
    "task": "paper: Barnfield, Cui and Lu (ICLR 2026): positive rows X = theta v xi^T + Z "
    "with R informative tokens at random places, negative rows X = Z",
    "law": "paper: attention reaches vanishing test error with theta growing like log L, "
    "linear classifiers (flattened or pooled) need sqrt L; the fitted laws a + b ln L and "
    "c sqrt L (per seed) and their R^2 are ours",
    "two_step": "paper: two gradient steps (readout, then query) align the query with xi; "
    "the step size, the reuse of the same rows and the cosine as the measure are ours",
    "theory": "ours: pooled_error, pooled_threshold, attention_threshold and "
    "two_step_alignment are derived in this package (the paper's formulas were out of reach)",
    "seq_lens, n_features": "ours: the lengths (spanning 16x at every size but tiny) and d",
    "target_error": "ours: a test error of 0.2 defines the threshold",
    "signal_bounds, n_bisect": "ours: geometric bisection on theta, its bracket and halvings",
    "n_train, n_test": "ours: training and test rows per fit (the same noise at every theta)",
    "attention": "ours: Adam on the penalised logistic loss (80 steps at 0.1 from a small "
    "random query) for the law and the error part",
    "baselines": "ours: scikit-learn's LogisticRegression (max_iter=1000) after FlattenTokens "
    "or MeanPoolTokens",
    "alignment_features, alignment_ratios, alignment_seq_len, alignment_signal": "ours: "
    "the two-step part's d, n/d, L and theta",
    "alignment_learning_rate, n_seeds": "ours: the two steps' size and the draws per point",
    "error_seq_len, error_signals": "ours: the error part's L and thetas",
}
"""Each setting: ``"paper: ..."`` where the paper fixes it, else ``"ours: ..."``."""

RECORD = Experiment(
    name="classification",
    function_name="sparse_token_classification",
    doc="""The log L against sqrt L law, the two-step alignment and error against theta.

    The smallest signal at which the attention classifier and the two linear
    baselines reach a target test error, against L, with the laws
    ``a + b ln L`` and ``c sqrt(L)`` fitted per seed; the query's cosine with
    ``xi`` after two steps against n/d; test error against theta beside the
    pooled oracle (see :mod:`stsq_learn.tasks.classification.experiment`;
    the settings: :class:`SparseTokenClassificationSettings`).

    Examples
    --------
    >>> from stsq_learn.experiments import sparse_token_classification
    >>> result = sparse_token_classification(
    ...     "tiny", seeds=1, n_bisect=1, alignment_features=(8,), error_signals=(2.0,))
    >>> sorted(result.tables), result.seeds
    (['alignment', 'error', 'law'], (0,))
    >>> result.tables["law"].unique("seq_len")
    [4, 8, 16]
    """,
    settings=SparseTokenClassificationSettings,
    presets={
        "tiny": dict(
            seq_lens=(4, 8, 16),
            n_features=4,
            n_train=100,
            n_test=300,
            attention=SparseTokenClassifier(learning_rate_init=0.1, max_iter=20, batch_size="full"),
            n_bisect=2,
            alignment_features=(8, 16),
            alignment_ratios=(1.0, 4.0),
            n_seeds=1,
            error_seq_len=8,
            error_signals=(2.0, 8.0),
        ),
        # About 12 s on one core: L = 8 ... 128 (16x), 6 halvings of each bracket.
        "quick": {},
        # L = 8 ... 1024 (128x), more rows, 7 halvings, 5 draws per alignment point.
        "full": dict(
            seq_lens=(8, 16, 32, 64, 128, 256, 512, 1024),
            n_train=1000,
            n_test=4000,
            attention=SparseTokenClassifier(
                learning_rate_init=0.05, max_iter=300, batch_size="full"
            ),
            signal_bounds={"attention": (2.0, 16.0), "flat": (2.0, 256.0), "pooled": (2.0, 256.0)},
            n_bisect=7,
            alignment_features=(32, 128),
            alignment_ratios=(0.5, 1.0, 2.0, 4.0, 8.0, 16.0),
            n_seeds=5,
            error_seq_len=64,
            error_signals=(1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0),
        ),
        "gpu": "full",  # CPU float64 models: the same work on any machine
    },
    run=run,
    figure=figure,
    headline=headline,
    summary=summary,
    provenance=PROVENANCE,
    aliases=("sparse_token_classification",),
)
sparse_token_classification = RECORD.function
