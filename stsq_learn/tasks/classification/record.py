"""The record of sparse-token classification: the log L against sqrt L law, two steps, error.

:data:`PROVENANCE` says, setting by setting, what comes from the paper and
what is ours; :func:`headline` gives the numbers a run is checked by.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import ConvergenceWarning

from ...experiments._record import Experiment, Work
from ...experiments._records._format import fmt
from .baselines import make_flat_logistic, make_pooled_logistic
from .estimators import SparseTokenClassifier
from .experiment import (
    _ATTENTION,
    CLASSIFIERS,
    SparseTokenClassificationResult,
    SparseTokenClassificationSettings,
    sparse_token_classification,
)
from .task import SparseTokenClassificationTask
from .theory import pooled_error

PROVENANCE = {
    "task": "paper: Barnfield, Cui and Lu (ICLR 2026): positive rows X = theta v xi^T + Z "
    "with R informative tokens at random places, negative rows X = Z",
    "law": "paper: attention reaches vanishing test error with theta growing like log L, "
    "linear classifiers (flattened or pooled) need sqrt L; the fitted laws a + b log L and "
    "c sqrt L and their R^2 are ours",
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

PRESETS = {
    "tiny": SparseTokenClassificationSettings(
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
    "quick": SparseTokenClassificationSettings(
        seq_lens=(8, 16, 32, 64, 128),
        n_features=8,
        n_train=300,
        n_test=1000,
        attention=_ATTENTION,
        n_bisect=6,
        alignment_features=(16, 64),
        alignment_ratios=(1.0, 2.0, 4.0, 8.0),
        n_seeds=2,
        error_seq_len=32,
        error_signals=(1.0, 2.0, 4.0, 8.0, 16.0),
    ),
    # L = 8 ... 1024 (128x), more rows, 7 halvings, 5 draws per alignment point.
    "full": SparseTokenClassificationSettings(
        seq_lens=(8, 16, 32, 64, 128, 256, 512, 1024),
        n_features=8,
        n_train=1000,
        n_test=4000,
        attention=SparseTokenClassifier(learning_rate_init=0.05, max_iter=300, batch_size="full"),
        signal_bounds={"attention": (2.0, 16.0), "flat": (2.0, 256.0), "pooled": (2.0, 256.0)},
        n_bisect=7,
        alignment_features=(32, 128),
        alignment_ratios=(0.5, 1.0, 2.0, 4.0, 8.0, 16.0),
        n_seeds=5,
        error_seq_len=64,
        error_signals=(1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0),
    ),
}
PRESETS["gpu"] = PRESETS["full"]  # CPU float64 models: the same work on any machine


class _FitsOnRows(BaseEstimator):
    """A classifier fitted on drawn rows, with ``fit_online(task, n_steps)`` for the plan.

    The plan times models by ``fit_online``; the classifiers fit on arrays.
    This wraps one: ``fit_online`` draws ``n_rows`` rows of ``task`` and fits
    with ``max_iter = n_steps`` (a step: one iteration of the solver).
    """

    def __init__(self, estimator=None, n_rows=300, max_iter_param="max_iter"):
        self.estimator = estimator
        self.n_rows = n_rows
        self.max_iter_param = max_iter_param

    def fit_online(self, task, n_steps):
        X, y = task.sample(self.n_rows, random_state=0)
        params = {self.max_iter_param: n_steps}
        with warnings.catch_warnings():  # a timing run of a few iterations does not converge
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.model_ = clone(self.estimator).set_params(**params).fit(X, y)
        return self

    def predict(self, X):
        return self.model_.predict(X)


def work(settings):
    """The fits of each part: ``n_bisect`` (plus one where a bracket fails) per classifier and L.

    A linear baseline's step is one L-BFGS iteration (about 30 per fit
    expected); the two-step fits are timed as one readout iteration.
    """
    s = settings
    attention = _ATTENTION if s.attention is None else s.attention
    steps = attention.get_params()["max_iter"]
    out = []
    linear = {"flat": make_flat_logistic(), "pooled": make_pooled_logistic()}
    for L in s.seq_lens:
        task = SparseTokenClassificationTask(L, s.n_features, signal=4.0)
        est = _FitsOnRows(attention, s.n_train)
        out.append(Work(f"classification: attention L={L}", s.n_bisect, steps, est, task, s.n_test))
        for name in CLASSIFIERS[1:]:
            est = _FitsOnRows(linear[name], s.n_train, "logisticregression__max_iter")
            out.append(Work(f"classification: {name} L={L}", s.n_bisect, 30, est, task, s.n_test))
    for d in s.alignment_features:
        task = SparseTokenClassificationTask(s.alignment_seq_len, d, signal=3.0)
        n = max(8, round(max(s.alignment_ratios) * d))
        est = _FitsOnRows(SparseTokenClassifier(solver="two_step"), n)
        fits = len(s.alignment_ratios) * s.n_seeds
        out.append(Work(f"classification: two steps d={d}", fits, 1, est, task))
    task = SparseTokenClassificationTask(s.error_seq_len, s.n_features, signal=4.0)
    fits = len(s.error_signals)
    est = _FitsOnRows(attention, s.n_train)
    out.append(Work("classification: error, attention", fits, steps, est, task, s.n_test))
    for name in CLASSIFIERS[1:]:
        est = _FitsOnRows(linear[name], s.n_train, "logisticregression__max_iter")
        out.append(Work(f"classification: error, {name}", fits, 30, est, task, s.n_test))
    return out


def headline(result):
    """The numbers a run is checked by: each classifier's laws and R^2, the alignments.

    Parameters
    ----------
    result : SparseTokenClassificationResult
        A run of :func:`~stsq_learn.experiments.sparse_token_classification`.

    Returns
    -------
    dict of str to float
        ``"<classifier>.log_a"``, ``".log_b"``, ``".log_r2"`` (the law
        ``a + b log L``), ``".sqrt_c"`` and ``".sqrt_r2"`` (the law
        ``c sqrt(L)``) for each of ``attention``, ``flat`` and
        ``pooled``; ``"alignment.d=<d>.ratio=<n/d>"`` (the mean cosine) and
        ``"alignment.theory.ratio=<n/d>"``; NaN where a value is missing.
    """
    out = {}
    for name, laws in result.laws.items():
        log, sqrt = laws["log"], laws["sqrt"]
        out[f"{name}.log_a"] = math.nan if log is None else log.params["a"]
        out[f"{name}.log_b"] = math.nan if log is None else log.params["b"]
        out[f"{name}.log_r2"] = math.nan if log is None else log.r2
        out[f"{name}.sqrt_c"] = math.nan if sqrt is None else sqrt.params["b"]
        out[f"{name}.sqrt_r2"] = math.nan if sqrt is None else sqrt.r2
    ratios = result.config["alignment_ratios"]
    for d, means in result.alignment_means.items():
        for ratio, value in zip(ratios, means):
            out[f"alignment.d={d}.ratio={ratio:g}"] = math.nan if value is None else float(value)
    for ratio, value in zip(ratios, result.alignment_theory):
        out[f"alignment.theory.ratio={ratio:g}"] = float(value)
    return out


def summary_rows(rows, res):
    """Summary rows of sparse-token classification: thresholds, laws, alignment, error."""
    cfg = res.config
    Ls = ", ".join(map(str, cfg["seq_lens"]))
    rows.append(
        f"| classification (d={cfg['n_features']}, {cfg['n_train']} rows, test error "
        f"{cfg['target_error']:g}) | minimal theta at L = {Ls} | |"
    )
    for name in CLASSIFIERS:
        found = " / ".join("-" if t is None else f"{t:.2f}" for t in res.thresholds(name))
        rows.append(f"| | {name} | {found} |")
    numbers = headline(res)
    for name in CLASSIFIERS:
        f = {k: numbers[f"{name}.{k}"] for k in ("log_b", "log_r2", "sqrt_c", "sqrt_r2")}
        rows.append(
            f"| | {name}: a + b log L, R^2 / c sqrt L, R^2 | b = {fmt(f['log_b'], 3)}, "
            f"{fmt(f['log_r2'], 3)} / c = {fmt(f['sqrt_c'], 3)}, {fmt(f['sqrt_r2'], 3)} |"
        )
    ratios = ", ".join(f"{r:g}" for r in cfg["alignment_ratios"])
    rows.append(
        f"| classification two steps (L={cfg['alignment_seq_len']}, "
        f"theta={cfg['alignment_signal']:g}) | cos(query, xi) at n/d = {ratios} | |"
    )
    for d, means in res.alignment_means.items():
        rows.append(f"| | d={d} | {' / '.join(fmt(v, 2) for v in means)} |")
    theory = " / ".join(fmt(v, 2) for v in res.alignment_theory)
    rows.append(f"| | theory (d, n -> inf) | {theory} |")
    thetas = ", ".join(f"{t:g}" for t in cfg["error_signals"])
    rows.append(
        f"| classification error (L={cfg['error_seq_len']}) | test error at theta = {thetas} | |"
    )
    for name in CLASSIFIERS:
        errors = res.error.where(model=name)["test_error"]
        rows.append(f"| | {name} | {' / '.join(fmt(v, 3) for v in errors)} |")
    oracle = pooled_error(np.array(cfg["error_signals"], float), cfg["error_seq_len"])
    rows.append(f"| | pooled oracle (exact) | {' / '.join(fmt(v, 3) for v in oracle)} |")


RECORD = Experiment(
    name="classification",
    function=sparse_token_classification,
    settings=SparseTokenClassificationSettings,
    presets=PRESETS,
    summary_rows=summary_rows,
    work=work,
    headline=headline,
    provenance=PROVENANCE,
    seeds_batched=True,
    aliases=("sparse_token_classification",),
    result=SparseTokenClassificationResult,
)
