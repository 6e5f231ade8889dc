"""The sparse-token classification experiment (Barnfield, Cui and Lu, ICLR 2026): attention
needs a signal growing like log L, linear classifiers sqrt L; two gradient steps align the query
with the signal direction (:func:`sparse_token_classification`)."""

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
from ...experiments._settings import COUNTS, POSITIVE, MappingOf, SequenceOf, positive_ints
from ...studies import BandDisplay, Law, StudyTable, fit_laws, search_threshold, stream_seed, sweep
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
_PAIR = SequenceOf(POSITIVE, min_len=2, increasing=True)


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
        Training and test rows of each fit.
    attention : SparseTokenClassifier or None, default=None
        The attention classifier (None: 80 full-batch Adam steps at 0.1).
    signal_bounds : dict of str to (float, float), or (float, float), or None, default=None
        The bisection's bracket ``(low, high)`` of theta, per classifier or
        for all (None: ``(2, 8)`` for attention, ``(2, 64)`` for the others).
    n_bisect : int, default=6
        Halvings of the bracket (in ``log theta``).
    alignment_features, alignment_ratios : tuple, default=(16, 64), (1.0, 2.0, 4.0, 8.0)
        The token dimensions d and the ratios n/d of the two-step part.
    alignment_seq_len, alignment_signal : int, float, default=8, 3.0
        L and theta of the two-step part.
    alignment_learning_rate, n_seeds : float, int, default=0.1, 2
        Step size of the two steps; draws of the rows per (d, n/d) of the
        two-step part, for each seed.
    error_seq_len, error_signals : int, tuple of float, default=32, (1.0, 2.0, 4.0, 8.0, 16.0)
        L and the thetas of the error part.

    Examples
    --------
    >>> from stsq_learn.experiments import SparseTokenClassificationSettings
    >>> settings = SparseTokenClassificationSettings(seq_lens=(4, 8, 16))
    >>> settings.replace(n_bisect=2).n_bisect
    2
    """

    _parameter_constraints = {
        "seq_lens": [positive_ints(increasing=True)],
        "target_error": [Interval(numbers.Real, 0, 0.5, closed="neither")],
        "attention": [SparseTokenClassifier, None],
        "signal_bounds": [MappingOf(CLASSIFIERS, _PAIR), _PAIR, None],
        "alignment_features": [positive_ints()],
        **{key: [SequenceOf(POSITIVE)] for key in ("alignment_ratios", "error_signals")},
        **{key: [POSITIVE] for key in ("alignment_signal", "alignment_learning_rate")},
        **dict.fromkeys(("n_features", "n_train", "n_test", "n_bisect", "n_seeds"), COUNTS),
        **dict.fromkeys(("alignment_seq_len", "error_seq_len"), COUNTS),
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
        wrong = {name: pair for name, pair in signal_bounds(self).items() if len(pair) != 2}
        if wrong:
            raise ValueError(f"signal_bounds must give (low, high) pairs, got {wrong}.")


def signal_bounds(settings):
    """Classifier to the bisection's bracket ``(low, high)`` of theta, of settings (or JSON)."""
    given = settings["signal_bounds"] or {}
    if not isinstance(given, dict):  # one bracket for all
        given = dict.fromkeys(CLASSIFIERS, given)
    return {**_BOUNDS, **{k: tuple(v) for k, v in given.items()}}


def _test_error(estimator, X, y):
    return 1.0 - estimator.score(X, y)


def _query_along_xi(estimator, X, y):
    """The fitted attention query's component along ``xi`` (NaN for the linear baselines)."""
    query = getattr(estimator, "query_", None)
    return np.nan if query is None else float(query @ estimator.task_.signal_direction)


def _two_step_cosine(estimator, X, y):
    """The cosine of ``two_step_query_`` with ``xi`` (0 for a zero query)."""
    query = estimator.two_step_query_
    norm = float(np.linalg.norm(query))
    return float(query @ estimator.task_.signal_direction / norm) if norm > 0 else 0.0


def run(cfg, seeds, *, device=None, progress=False, n_jobs=None):
    """The three studies, seeds one after another: ``law`` (``value`` the minimal theta; NaN
    where the bracket's top failed, ``bound`` then its top), ``alignment`` (a ``cosine`` per
    seed, d, n/d and draw; NaN for one class), ``error`` (``test_error``, ``query_along_xi``)."""
    attention = clone(_ATTENTION if cfg.attention is None else cfg.attention)
    if device is not None:
        attention.set_params(device=device)
    flat, pooled = make_flat_logistic(max_iter=1000), make_pooled_logistic(max_iter=1000)
    models, bounds = dict(zip(CLASSIFIERS, (attention, flat, pooled))), signal_bounds(cfg)
    jobs = dict(n_jobs=n_jobs, progress=progress)
    rows = dict(seeds=seeds, n_train=cfg.n_train, n_test=cfg.n_test, batch_seeds=True, **jobs)
    # Bisection on log theta from the bracket's geometric mean, every point searched alone.
    search = dict(method="geometric", start=None, skip_after_miss=False, greater_is_better=False)
    search.update(grid={"seq_len": list(cfg.seq_lens)}, n_iter=cfg.n_bisect, **rows)
    search.update(target=cfg.target_error, scoring=_test_error)
    law_task = SparseTokenClassificationTask(cfg.seq_lens[0], cfg.n_features)
    error_task = SparseTokenClassificationTask(cfg.error_seq_len, cfg.n_features)
    signals = {"signal": [float(t) for t in cfg.error_signals]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        laws = [
            search_threshold({name: models[name]}, law_task, "signal", bounds[name], **search)
            for name in CLASSIFIERS
        ]
        alignment = _alignment(cfg, seeds, jobs)
        scoring = {"test_error": _test_error, "query_along_xi": _query_along_xi}
        error = sweep(models, error_task, signals, scoring=scoring, **rows)
    return {"law": StudyTable.concat(laws), "alignment": alignment, "error": error}


def _alignment(cfg, seeds, jobs):
    """The two-step fits of every seed's draws: one sweep per (d, n/d), its rows labelled."""
    outer = {stream_seed(s, f"alignment {k}"): s for s in seeds for k in range(cfg.n_seeds)}
    model = SparseTokenClassifier(
        solver="two_step", learning_rate_init=cfg.alignment_learning_rate, max_iter=1
    )
    draws = dict(seeds=list(outer), n_test=1, scoring={"cosine": _two_step_cosine}, **jobs)
    parts = []
    for d in cfg.alignment_features:
        task = SparseTokenClassificationTask(cfg.alignment_seq_len, d, signal=cfg.alignment_signal)
        for ratio in cfg.alignment_ratios:
            n = max(8, round(ratio * d))
            with warnings.catch_warnings():  # a draw of one class: no gradient to align (NaN)
                warnings.simplefilter("ignore", FitFailedWarning)
                fits = sweep({"two_step": model}, task, n_train=n, **draws)
            same = {"n_features": d, "ratio": float(ratio), "n_train": n}
            columns = {"seed": [outer[draw] for draw in fits["seed"]], "draw": fits["seed"]}
            columns |= {k: [v] * len(fits) for k, v in same.items()}
            columns |= {k: fits[k] for k in ("cosine", "fit_failure")}
            meta = {"study": "sweep", "draws_per_seed": cfg.n_seeds}
            parts.append(StudyTable(columns, meta=meta))
    return StudyTable.concat(parts)


def threshold_laws(result, name, law):
    """Seed to ``law`` (of :data:`LAWS`; ``"sqrt"`` through 0, c its ``params["b"]``) fitted to
    classifier ``name``'s thresholds against L; None for fewer than two finite thresholds."""
    rows = result.tables["law"].where(model=name)
    return fit_laws(rows, "seq_len", "value", law, origin=law == "sqrt")


def alignment_theory(settings):
    """The query's limiting cosine ``rho_2`` (:func:`~.theory.two_step_alignment`) at each n/d."""
    theta, L, ratios = (settings[f"alignment_{k}"] for k in ("signal", "seq_len", "ratios"))
    return np.atleast_1d(two_step_alignment(theta, L, np.array(ratios, float))[1]).tolist()


def attention_thresholds(result):
    """Seed to the signal of informative share 1/2 (:func:`~.theory.attention_threshold`) at the
    median of its positive ``query_along_xi``; None where none is positive, or L = 1."""
    L = result.settings["error_seq_len"]
    out = {}
    for (seed,), rows in result.tables["error"].where(model="attention").groups("seed"):
        along = rows["query_along_xi"]
        positive = along[np.isfinite(along) & (along > 0)]
        ok = len(positive) and L > 1
        out[seed] = float(attention_threshold(L, query_norm=np.median(positive))) if ok else None
    return out


def headline(result):
    """One seed's numbers: per classifier ``.log_a``, ``.log_b``, ``.log_r2``, ``.sqrt_c`` and
    ``.sqrt_r2``; ``alignment.d=<d>.ratio=<n/d>`` (the mean cosine of the seed's draws) and
    ``alignment.theory.ratio=<n/d>``; NaN where a value is missing."""
    out = {}
    for name in CLASSIFIERS:
        for law, params in zip(LAWS, ({"a": "a", "b": "b"}, {"c": "b"})):
            (fit,) = threshold_laws(result, name, law).values()
            for key, param in params.items():
                out[f"{name}.{law}_{key}"] = math.nan if fit is None else fit.params[param]
            out[f"{name}.{law}_r2"] = math.nan if fit is None else fit.r2
    c, alignment = result.settings, result.tables["alignment"]
    for d in c["alignment_features"]:
        for ratio in c["alignment_ratios"]:
            values = alignment.where(n_features=d, ratio=float(ratio))["cosine"]
            values = values[np.isfinite(values)]
            out[f"alignment.d={d}.ratio={ratio:g}"] = values.mean() if len(values) else math.nan
    for ratio, value in zip(c["alignment_ratios"], alignment_theory(c)):
        out[f"alignment.theory.ratio={ratio:g}"] = float(value)
    return out


def summary(result):
    """Summary rows: the thresholds, the laws, the alignment and the error (over the seeds)."""
    c, n = result.settings, len(result.seeds)
    b = {key: fmt_band(value) for key, value in result.bands().items()}

    def medians(part, x, y):  # a row per classifier: its medians over the seeds along x
        rows = []
        for name in CLASSIFIERS:
            table = result.tables[part].where(model=name).bands(x, y, by=())
            values = table.xy(x, "median", finite=False)[1]
            text = " / ".join(f"{v:.3g}" if np.isfinite(v) else "-" for v in values)
            rows.append(f"| | {name} | {text} |")
        return rows

    ratios = [f"{r:g}" for r in c["alignment_ratios"]]
    thetas = ", ".join(f"{t:g}" for t in c["error_signals"])
    oracle = pooled_error(np.array(c["error_signals"], float), c["error_seq_len"])
    return [
        f"| classification (d={c['n_features']}, {c['n_train']} rows, test error "
        f"{c['target_error']:g}, {n} seed{'s' * (n > 1)}) | minimal theta at L = "
        f"{', '.join(map(str, c['seq_lens']))} (median) | |",
        *medians("law", "seq_len", "value"),
        *(
            f"| | {m}: a + b ln L, R^2 / c sqrt L, R^2 | b = {b[f'{m}.log_b']}, "
            f"{b[f'{m}.log_r2']} / c = {b[f'{m}.sqrt_c']}, {b[f'{m}.sqrt_r2']} |"
            for m in CLASSIFIERS
        ),
        f"| classification two steps (L={c['alignment_seq_len']}, "
        f"theta={c['alignment_signal']:g}) | cos(query, xi) at n/d = {', '.join(ratios)} | |",
        *(
            f"| | d={d} | {' / '.join(b[f'alignment.d={d}.ratio={r}'] for r in ratios)} |"
            for d in c["alignment_features"]
        ),
        f"| | theory (d, n -> inf) | {' / '.join(f'{v:.2f}' for v in alignment_theory(c))} |",
        f"| classification error (L={c['error_seq_len']}) | test error at theta = {thetas} "
        "(median) | |",
        *medians("error", "signal", "test_error"),
        f"| | pooled oracle (exact) | {' / '.join(f'{v:.3g}' for v in oracle)} |",
    ]


def figure(result, axes=None):
    """The four panels of ``result.plot(axes)`` (None: a new figure, two rows of two)."""
    fig, (ax_log, ax_sqrt, ax_al, ax_err) = new_axes(axes, 4)
    c, L = result.settings, result.settings["error_seq_len"]
    Ls, ratios = (np.array(c[k], float) for k in ("seq_lens", "alignment_ratios"))
    oracle = {"pooled oracle (theory)": (Ls, pooled_threshold(Ls, target_error=c["target_error"]))}
    each = dict(logx=True, labels=_LABELS, colors=_COLORS, legend=False)
    thresholds = dict(x="seq_len", y="value", law_variable="L", bound="bound", style="errorbar")
    thresholds.update(theory=oracle, line_kw={"ls": ""}, xlabel="tokens L", **each)
    thresholds["ylabel"] = f"minimal theta for test error {c['target_error']:g}"
    for ax, law, title in zip((ax_log, ax_sqrt), LAWS, ("a + b ln L", "c sqrt L")):
        laws = {name: Law.median(threshold_laws(result, name, law)) for name in CLASSIFIERS}
        title = f"Signal needed: {title}"
        BandDisplay.from_table(result.tables["law"], laws=laws, ax=ax, title=title, **thresholds)
        ax.legend(fontsize="small")
    alignment = result.tables["alignment"]
    where = f"L={c['alignment_seq_len']}, theta={c['alignment_signal']:g}"
    kw = dict(theory={"theory (d, n -> inf)": (ratios, alignment_theory(c))}, ax=ax_al, logx=True)
    kw.update(xlabel="n / d", ylabel="cos(query, xi)", title=f"Query after two steps ({where})")
    labels = {d: f"two steps, d={d}" for d in c["alignment_features"]}
    BandDisplay.from_table(alignment, x="ratio", y="cosine", hue="n_features", labels=labels, **kw)
    ax_al.set_ylim(min(-0.05, np.nanmin(alignment["cosine"], initial=0.0) - 0.05), 1.02)
    kw = dict(x="signal", y="test_error", xlabel="signal theta", ylabel="test error", **each)
    kw.update(theory={"pooled oracle (exact)": lambda t: pooled_error(t, L)}, ax=ax_err)
    BandDisplay.from_table(result.tables["error"], title=f"Test error against theta (L={L})", **kw)
    shares = [v for v in attention_thresholds(result).values() if v is not None]
    if shares:
        label = "informative share 1/2 (theory, fitted query)"
        ax_err.axvline(float(np.median(shares)), color=_COLORS["attention"], ls=":", label=label)
        if max(shares) > min(shares):
            ax_err.axvspan(min(shares), max(shares), color=_COLORS["attention"], alpha=0.1, lw=0)
    ax_err.set_ylim(-0.02, 0.55)
    ax_err.legend(fontsize="small")
    if axes is None:
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
    aliases=("sparse_token_classification",),
    doc="""The log L against sqrt L law, the two-step alignment and error against theta.

    The tables: ``law``, the least signal theta at which each classifier (attention, the
    flattened and the pooled logistic regressions) reaches a target test error, against L, with
    the laws ``a + b ln L`` and ``c sqrt(L)`` fitted per seed, beside the pooled oracle's;
    ``alignment``, the query's cosine with ``xi`` after two steps against n/d, beside its limit;
    ``error``, the test error against theta beside the pooled oracle's. Settings:
    :class:`SparseTokenClassificationSettings`.

    Examples
    --------
    >>> from stsq_learn.experiments import sparse_token_classification
    >>> result = sparse_token_classification(
    ...     "tiny", seeds=1, n_bisect=1, alignment_features=(8,),
    ...     error_signals=(2.0,))
    >>> sorted(result.tables), result.seeds
    (['alignment', 'error', 'law'], (0,))
    >>> result.tables["law"].unique("seq_len")
    [4, 8, 16]
    """,
    settings=SparseTokenClassificationSettings,
    provenance=PROVENANCE,
    presets={
        "tiny": dict(seq_lens=(4, 8, 16), n_features=4, n_train=100, n_test=300, n_bisect=2)
        | dict(attention=clone(_ATTENTION).set_params(max_iter=20))
        | dict(alignment_features=(8, 16), alignment_ratios=(1.0, 4.0), n_seeds=1)
        | dict(error_seq_len=8, error_signals=(2.0, 8.0)),
        # About 12 s on one core: L = 8 ... 128 (16x), 6 halvings of each bracket.
        "quick": {},
        "full": dict(seq_lens=(8, 16, 32, 64, 128, 256, 512, 1024), n_train=1000, n_test=4000)
        | dict(attention=clone(_ATTENTION).set_params(learning_rate_init=0.05, max_iter=300))
        | dict(signal_bounds=dict(attention=(2.0, 16.0), flat=(2.0, 256.0), pooled=(2.0, 256.0)))
        | dict(n_bisect=7, alignment_features=(32, 128), n_seeds=5, error_seq_len=64)
        | dict(alignment_ratios=(0.5, 1.0, 2.0, 4.0, 8.0, 16.0))
        | dict(error_signals=(1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0)),
        "gpu": "full",  # CPU float64 models: the same work on any machine
    },
)
sparse_token_classification = RECORD.function
