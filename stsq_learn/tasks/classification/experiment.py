"""Sparse-token classification: attention needs a signal growing like log L, linear sqrt L.

Three parts, after Barnfield, Cui and Lu (ICLR 2026):

- **law**: at each length L, the smallest signal theta at which each
  classifier (the attention classifier, the flattened and the pooled
  logistic regressions) reaches a target test error, found by bisection on
  ``log theta``; the laws ``a + b log L`` and ``c sqrt(L)`` fitted to each
  classifier's thresholds, with the R^2 of each fit;
- **alignment**: the cosine of the query with ``xi`` after the two-step
  protocol (``solver="two_step"``, :attr:`two_step_query_`) against ``n / d``
  at two token dimensions, beside :func:`~.theory.two_step_alignment`;
- **error**: test error against theta at one length, beside the pooled
  oracle's exact error (:func:`~.theory.pooled_error`) and, for attention,
  the signal at which the informative tokens hold half the softmax's
  normaliser at the fitted query's norm along ``xi``
  (:func:`~.theory.attention_threshold`).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from ..._validation import check_positive_int
from ...experiments._bands import bars_title, check_same
from ...experiments._common import (
    dataclass_dict,
    derived_seed,
    jsonable,
    new_axes,
    progress_bar,
    seed_results,
)
from ...experiments._settings import Settings
from .baselines import make_flat_logistic, make_pooled_logistic
from .estimators import SparseTokenClassifier
from .task import SparseTokenClassificationTask
from .theory import (
    attention_signal_share,
    attention_threshold,
    fit_laws,
    pooled_error,
    pooled_threshold,
    two_step_alignment,
)

CLASSIFIERS = ("attention", "flat", "pooled")
"""The three classifiers, in the order of every table and figure."""

_ATTENTION = SparseTokenClassifier(
    solver="adam", learning_rate_init=0.1, max_iter=80, batch_size="full"
)


@dataclass
class SparseTokenClassificationResult:
    """The three parts of the sparse-token classification experiment.

    Attributes
    ----------
    config : dict
        The sizes and settings of every part.
    law : dict
        ``seq_lens``, ``target_error``, ``thresholds`` (classifier -> the
        minimal theta at each L, None where the bracket's top failed),
        ``brackets`` (classifier -> ``[low, high]`` at each L), ``fits``
        (classifier -> :func:`~.theory.fit_laws`'s dict), ``pooled_oracle`` (the
        pooled oracle's threshold, :func:`~.theory.pooled_threshold`) and
        ``fits_done``.
    alignment : dict
        ``n_features``, ``ratios`` (n/d), ``cosine`` (d -> per ratio, the
        per-seed cosines of ``two_step_query_`` with ``xi``), ``mean`` (d ->
        per ratio) and ``theory`` (per ratio, the query's limit
        ``rho_2``; ``theory_readout``, the readout's ``rho_1``).
    error : dict
        ``seq_len``, ``signals``, ``test_error`` (classifier -> per theta),
        ``pooled_oracle`` (:func:`~.theory.pooled_error` per theta),
        ``query_along_xi`` (the fitted attention query's component along
        ``xi`` per theta), ``share`` (the informative tokens' share of the
        normaliser at that component, :func:`~.theory.attention_signal_share`)
        and ``attention_threshold`` (the signal where that share is 1/2 at
        the median component; None when no component is positive).
    seconds : dict
        Wall time of each part.

    Examples
    --------
    >>> from stsq_learn.tasks.classification.experiment import sparse_token_classification
    >>> res = sparse_token_classification(
    ...     seq_lens=(4, 8, 16), n_features=4, n_train=100, n_test=200, n_bisect=2,
    ...     alignment_features=(8,), alignment_ratios=(2,), n_seeds=1,
    ...     error_signals=(2.0,), progress=False)
    >>> sorted(res.law["fits"])
    ['attention', 'flat', 'pooled']
    """

    config: dict
    law: dict
    alignment: dict
    error: dict
    seconds: dict

    def to_dict(self):
        """JSON-ready dict of everything."""
        return dataclass_dict(self)

    def plot(self, axes=None):
        """Thresholds against L, two-step alignment against n/d, error against theta.

        Parameters
        ----------
        axes : sequence of 3 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure of the three panels.
        """
        return _plot([self], axes)

    @staticmethod
    def plot_bands(results, axes=None):
        """The figure of :meth:`plot` over seeds: medians with min-max bands and error bars.

        Parameters
        ----------
        results : sequence of SparseTokenClassificationResult
            One per seed, with the same lengths, classifiers, dimensions,
            ratios and signals (the experiment at several ``random_state``).
        axes : sequence of 3 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The panels and labels of :meth:`plot`. Each classifier's
            minimal theta is its median over the seeds that found one, with
            min-max error bars, and both laws are fitted to every seed's
            thresholds (named so in the legend); each d's cosine is the
            median of the seeds' means with the min-max of every seed's
            draws shaded; each classifier's test error is its median with
            the min-max shaded, the informative share's line at the seeds'
            median. The theory (the pooled oracle, the limit of the
            cosine) is the first result's: it depends on no seed. One
            result draws :meth:`plot`'s figure.
        """
        results = seed_results(results, SparseTokenClassificationResult, ())
        check_same(
            results,
            {
                "law['seq_lens']": lambda r: r.law["seq_lens"],
                "list(law['thresholds'])": lambda r: list(r.law["thresholds"]),
                "alignment['n_features']": lambda r: r.alignment["n_features"],
                "alignment['ratios']": lambda r: r.alignment["ratios"],
                "error['signals']": lambda r: r.error["signals"],
                "list(error['test_error'])": lambda r: list(r.error["test_error"]),
            },
        )
        return _plot(results, axes)


def _plot(results, axes):
    """The figure of :meth:`SparseTokenClassificationResult.plot` over one or several seeds."""
    from .experiment_plots import plot_alignment, plot_error, plot_law

    fig, (ax_l, ax_a, ax_e) = new_axes(axes, 3, figsize=(16, 4.5))
    plot_law(results, ax_l)
    plot_alignment(results, ax_a)
    plot_error(results, ax_e)
    if len(results) > 1:
        fig.suptitle(bars_title("Sparse-token classification", len(results)))
    return fig


def _classifiers(attention, seed):
    """Fresh copies of the three classifiers (the attention one seeded)."""
    return {
        "attention": clone(attention).set_params(random_state=seed),
        "flat": make_flat_logistic(max_iter=1000),
        "pooled": make_pooled_logistic(max_iter=1000),
    }


class _Errors:
    """Test error of a classifier at a signal, on rows that keep their noise as theta moves.

    The training and test rows are drawn once per length with ``theta = 1``
    and rescaled: the same noise, labels and positions at every theta
    (common random numbers), so the error is close to monotone in theta and
    the bisection stable.
    """

    def __init__(self, seq_len, n_features, n_train, n_test, seed):
        task = SparseTokenClassificationTask(seq_len, n_features, signal=1.0)
        self.fits = 0
        self.parts = []
        for n, offset in ((n_train, 1), (n_test, 2)):
            X, y = task.sample(n, random_state=derived_seed(seed, offset))
            noise = SparseTokenClassificationTask(seq_len, n_features, signal=0.0)
            X0, _ = noise.sample(n, random_state=derived_seed(seed, offset))
            self.parts.append((X0, X - X0, y))

    def rows(self, part, theta):
        noise, signal, y = self.parts[part]
        return noise + theta * signal, y

    def __call__(self, model, theta):
        X, y = self.rows(0, theta)
        Xt, yt = self.rows(1, theta)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, y)
        self.fits += 1
        return float(1.0 - model.score(Xt, yt)), model


_BOUNDS = {"attention": (2.0, 8.0), "flat": (2.0, 64.0), "pooled": (2.0, 64.0)}


def _bounds(signal_bounds):
    """The bracket of theta per classifier, checked."""
    if signal_bounds is None:
        return dict(_BOUNDS)
    if isinstance(signal_bounds, dict):
        unknown = sorted(set(signal_bounds) - set(CLASSIFIERS))
        if unknown:
            raise ValueError(
                f"signal_bounds names unknown classifiers {unknown}; use {CLASSIFIERS}."
            )
        given = {**_BOUNDS, **signal_bounds}
    else:
        given = dict.fromkeys(CLASSIFIERS, signal_bounds)
    out = {}
    for name, pair in given.items():
        try:
            low, high = (float(v) for v in pair)
        except (TypeError, ValueError):
            raise ValueError(f"signal_bounds must be (low, high) pairs, got {pair!r}.") from None
        if not 0 < low < high < np.inf:
            raise ValueError(
                f"signal_bounds must be (low, high) with 0 < low < high, got {pair!r} for {name}."
            )
        out[name] = (low, high)
    return out


def _bisect(errors, model, target, low, high, steps):
    """The smallest theta (geometric bisection) whose error is at most ``target``.

    Returns ``(threshold, [low, high])``: the threshold is the bracket's
    geometric mean after ``steps`` halvings, None when the bracket's top
    never reached the target.
    """
    reached = False
    for _ in range(steps):
        mid = float(np.sqrt(low * high))
        err, _ = errors(clone(model), mid)
        if err <= target:
            high, reached = mid, True
        else:
            low = mid
    if not reached:
        err, _ = errors(clone(model), high)
        if err > target:
            return None, [low, high]
    return float(np.sqrt(low * high)), [low, high]


class SparseTokenClassificationSettings(Settings):
    """The settings of :func:`sparse_token_classification`: the law, the alignment, the error.

    Attributes
    ----------
    seq_lens : tuple of int, default=(8, 16, 32, 64, 128)
        The lengths L of the law (at least 3 for the fits).
    n_features : int, default=8
        d of the law and of the error part.
    target_error : float, default=0.2
        The test error that defines a threshold.
    n_train, n_test : int, default=300, 1000
        Training and test rows at each fit.
    attention : SparseTokenClassifier or None, default=None
        The attention classifier of the law and the error part (None:
        80 Adam steps at 0.1).
    signal_bounds : dict of str to (float, float), or (float, float), or None, default=None
        The bisection's bracket of theta, per classifier or for all three
        (None: ``(2, 8)`` for attention, ``(2, 64)`` for the linear ones).
    n_bisect : int, default=5
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
        Draws of the rows per (d, n/d) of the alignment part.
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

    seq_lens: tuple = (8, 16, 32, 64, 128)
    n_features: int = 8
    target_error: float = 0.2
    n_train: int = 300
    n_test: int = 1000
    attention: SparseTokenClassifier | None = None
    signal_bounds: dict | tuple | None = None
    n_bisect: int = 5
    alignment_features: tuple = (16, 64)
    alignment_ratios: tuple = (1.0, 2.0, 4.0, 8.0)
    alignment_seq_len: int = 8
    alignment_signal: float = 3.0
    alignment_learning_rate: float = 0.1
    n_seeds: int = 2
    error_seq_len: int = 32
    error_signals: tuple = (1.0, 2.0, 4.0, 8.0, 16.0)


def sparse_token_classification(
    settings=None, *, device="cpu", random_state=0, progress=True, **changes
):
    """The log L against sqrt L law, the two-step alignment and error against theta.

    Parameters
    ----------
    settings : SparseTokenClassificationSettings, mapping or None, default=None
        The three parts' settings (None: the defaults).
    device : str
        Unused (the classifiers run on the CPU); accepted as every experiment does.
    random_state : int
        Seed of the rows and of the attention's initialisation.
    progress : bool
        Show a progress bar.
    **changes
        Settings of :class:`SparseTokenClassificationSettings` to change
        (``sparse_token_classification(n_bisect=3)``).

    Returns
    -------
    SparseTokenClassificationResult
        The thresholds and their fitted laws, the alignments, and the errors
        against theta, with ``to_dict()`` and ``plot()``.
    """
    cfg = SparseTokenClassificationSettings.resolve(settings, changes)
    for name, value in (
        ("n_features", cfg.n_features),
        ("n_train", cfg.n_train),
        ("n_test", cfg.n_test),
        ("n_bisect", cfg.n_bisect),
        ("alignment_seq_len", cfg.alignment_seq_len),
        ("n_seeds", cfg.n_seeds),
        ("error_seq_len", cfg.error_seq_len),
    ):
        check_positive_int(value, name)
    if not 0 < cfg.target_error < 0.5:
        raise ValueError(f"target_error must be in (0, 0.5), got {cfg.target_error!r}.")
    bounds = _bounds(cfg.signal_bounds)
    attention = _ATTENTION if cfg.attention is None else cfg.attention
    if not isinstance(attention, SparseTokenClassifier):
        raise TypeError(
            f"attention must be a SparseTokenClassifier, got {type(attention).__name__}."
        )
    seq_lens = tuple(int(L) for L in cfg.seq_lens)
    total = (
        len(seq_lens) * len(CLASSIFIERS)
        + len(cfg.alignment_features) * len(cfg.alignment_ratios)
        + len(cfg.error_signals)
    )
    bar = progress_bar(total, "classification", enabled=progress)
    seconds = {}

    # -- law: the minimal theta against L -------------------------------------------------
    start = time.perf_counter()
    thresholds = {name: [] for name in CLASSIFIERS}
    brackets = {name: [] for name in CLASSIFIERS}
    fits = 0
    for i, L in enumerate(seq_lens):
        errors = _Errors(
            L, cfg.n_features, cfg.n_train, cfg.n_test, derived_seed(random_state, 10 + i)
        )
        models = _classifiers(attention, derived_seed(random_state, 100 + i))
        for name in CLASSIFIERS:
            low, high = bounds[name]
            found, bracket = _bisect(
                errors, models[name], cfg.target_error, low, high, cfg.n_bisect
            )
            thresholds[name].append(found)
            brackets[name].append(bracket)
            bar.update()
        fits += errors.fits
    law = {
        "seq_lens": list(seq_lens),
        "target_error": cfg.target_error,
        "thresholds": thresholds,
        "brackets": brackets,
        "fits": {name: fit_laws(seq_lens, thresholds[name]) for name in CLASSIFIERS},
        "pooled_oracle": pooled_threshold(
            np.array(seq_lens), target_error=cfg.target_error
        ).tolist(),
        "fits_done": fits,
    }
    seconds["law"] = time.perf_counter() - start

    # -- alignment: the query after two steps against n/d ---------------------------------
    start = time.perf_counter()
    cosines, means = {}, {}
    for d in cfg.alignment_features:
        xi = SparseTokenClassificationTask(cfg.alignment_seq_len, d).signal_direction
        task = SparseTokenClassificationTask(cfg.alignment_seq_len, d, signal=cfg.alignment_signal)
        per_ratio = []
        for j, ratio in enumerate(cfg.alignment_ratios):
            n = max(8, round(ratio * d))
            draws = []
            for seed in range(cfg.n_seeds):
                draw = derived_seed(random_state, 1000 * d + 10 * j + seed)
                X, y = task.sample(n, random_state=draw)
                if len(np.unique(y)) < 2:  # a draw of one class: no gradient to align
                    continue
                model = SparseTokenClassifier(
                    solver="two_step",
                    learning_rate_init=cfg.alignment_learning_rate,
                    max_iter=1,
                    random_state=draw,  # the order of the rows summed in a full-batch step
                ).fit(X, y)
                q = model.two_step_query_
                norm = float(np.linalg.norm(q))
                draws.append(float(q @ xi / norm) if norm > 0 else 0.0)
            per_ratio.append(draws)
            bar.update()
        cosines[str(d)] = per_ratio
        means[str(d)] = [float(np.mean(c)) if c else None for c in per_ratio]
    readout, query = two_step_alignment(
        cfg.alignment_signal, cfg.alignment_seq_len, np.array(cfg.alignment_ratios, float)
    )
    alignment = {
        "seq_len": cfg.alignment_seq_len,
        "signal": cfg.alignment_signal,
        "n_features": list(cfg.alignment_features),
        "ratios": list(cfg.alignment_ratios),
        "cosine": cosines,
        "mean": means,
        "theory": np.atleast_1d(query).tolist(),
        "theory_readout": np.atleast_1d(readout).tolist(),
    }
    seconds["alignment"] = time.perf_counter() - start

    # -- error against theta at one length ------------------------------------------------
    start = time.perf_counter()
    errors = _Errors(
        cfg.error_seq_len, cfg.n_features, cfg.n_train, cfg.n_test, derived_seed(random_state, 5)
    )
    xi = SparseTokenClassificationTask(cfg.error_seq_len, cfg.n_features).signal_direction
    test_error = {name: [] for name in CLASSIFIERS}
    along = []
    for k, theta in enumerate(cfg.error_signals):
        models = _classifiers(attention, derived_seed(random_state, 200 + k))
        for name in CLASSIFIERS:
            err, model = errors(models[name], float(theta))
            test_error[name].append(err)
            if name == "attention":
                along.append(float(model.query_ @ xi))
        bar.update()
    bar.close()
    betas = [b for b in along if b > 0]
    share = [
        float(attention_signal_share(t, cfg.error_seq_len, query_norm=b)) if b > 0 else None
        for t, b in zip(cfg.error_signals, along)
    ]
    error = {
        "seq_len": cfg.error_seq_len,
        "signals": [float(t) for t in cfg.error_signals],
        "test_error": test_error,
        "pooled_oracle": np.atleast_1d(
            pooled_error(np.array(cfg.error_signals, float), cfg.error_seq_len)
        ).tolist(),
        "query_along_xi": along,
        "share": share,
        "attention_threshold": (
            float(attention_threshold(cfg.error_seq_len, query_norm=float(np.median(betas))))
            if betas and cfg.error_seq_len > 1
            else None
        ),
    }
    seconds["error"] = time.perf_counter() - start
    config = {
        "seq_lens": list(seq_lens),
        "n_features": cfg.n_features,
        "target_error": cfg.target_error,
        "n_train": cfg.n_train,
        "n_test": cfg.n_test,
        "attention": {
            k: v
            for k, v in attention.get_params().items()
            if k in ("solver", "learning_rate_init", "max_iter", "alpha")
        },
        "baselines": "LogisticRegression(max_iter=1000) after FlattenTokens / MeanPoolTokens",
        "signal_bounds": {name: list(b) for name, b in bounds.items()},
        "n_bisect": cfg.n_bisect,
        "alignment_learning_rate": cfg.alignment_learning_rate,
        "n_seeds": cfg.n_seeds,
        "seed": random_state,
    }
    return SparseTokenClassificationResult(
        jsonable(config), jsonable(law), jsonable(alignment), jsonable(error), seconds
    )
