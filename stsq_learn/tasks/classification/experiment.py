"""Sparse-token classification: attention needs a signal growing like log L, linear sqrt L.

Three parts, after Barnfield, Cui and Lu (ICLR 2026), each a study of
:mod:`stsq_learn.studies`:

- **law**: at each length L, the smallest signal theta at which each
  classifier (the attention classifier, the flattened and the pooled
  logistic regressions) reaches a target test error
  (:func:`~stsq_learn.studies.search_threshold` on the task's ``signal``,
  ``method="geometric"``: bisection on ``log theta``); the laws
  ``a + b log L`` (:func:`~stsq_learn.studies.fit_law`) and ``c sqrt(L)``
  (through 0, as the pooled oracle's) fitted to each classifier's
  thresholds, with the R^2 of each;
- **alignment**: the cosine of the query with ``xi`` after the two-step
  protocol (``solver="two_step"``, :attr:`two_step_query_`) against ``n / d``
  at two token dimensions (a :func:`~stsq_learn.studies.sweep` per ratio),
  beside :func:`~.theory.two_step_alignment`;
- **error**: test error against theta at one length
  (:func:`~stsq_learn.studies.sweep` over ``signal``), beside the pooled
  oracle's exact error (:func:`~.theory.pooled_error`) and, for attention,
  the signal at which the informative tokens hold half the softmax's
  normaliser at the fitted query's norm along ``xi``
  (:func:`~.theory.attention_threshold`).

Seeds follow the studies' rule (:mod:`stsq_learn.studies.seeds`): every
classifier of seed ``s`` is fitted with ``random_state=s`` on the rows of
``stream_seed(s, "train")`` and scored on those of ``stream_seed(s,
"test")``; the task draws its noise independently of theta, so one seed's
rows keep their noise as the search moves theta. The classifiers are not
on the members engine's batched path: their seeds are fitted one after
another.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, FitFailedWarning

from ..._validation import check_positive_int
from ...experiments._settings import Settings
from ...studies import (
    BandDisplay,
    Law,
    StudyTable,
    check_seeds,
    fit_law,
    search_threshold,
    stream_seed,
    sweep,
)
from .baselines import make_flat_logistic, make_pooled_logistic
from .estimators import SparseTokenClassifier
from .task import SparseTokenClassificationTask
from .theory import (
    attention_signal_share,
    attention_threshold,
    pooled_error,
    pooled_threshold,
    two_step_alignment,
)

CLASSIFIERS = ("attention", "flat", "pooled")
"""The three classifiers, in the order of every table and figure."""

LAWS = ("log", "sqrt")
"""The laws fitted to the thresholds: ``a + b log L`` and ``c sqrt(L)``."""

_ATTENTION = SparseTokenClassifier(
    solver="adam", learning_rate_init=0.1, max_iter=80, batch_size="full"
)
_COLORS = {"attention": "C0", "flat": "C1", "pooled": "C2"}
_LABELS = {"attention": "attention", "flat": "flattened logistic", "pooled": "pooled logistic"}


def _test_error(estimator, X, y):
    """The study's scorer: the test error ``1 - accuracy``."""
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


def _law(table, name):
    """``name``'s law fitted to the table's thresholds against L (None under 3 points).

    ``"log"`` is :func:`~stsq_learn.studies.fit_law`'s ``a + b log L``;
    ``"sqrt"`` the theory's ``c sqrt(L)``, through 0 (the pooled oracle's
    law; ``fit_law`` fits ``a + b sqrt(L)``): a :class:`~stsq_learn.studies.Law`
    of ``a = 0``, its R^2 against the thresholds' mean.
    """
    x, y = table.xy("seq_len", "value")
    constant = len(y) > 0 and np.ptp(y) == 0  # every threshold the same bracket's mean
    if name == "log":
        try:
            law = fit_law(x, y, "log")
        except ValueError:
            return None
        # Equal thresholds: a flat line fits them exactly (fit_law's R^2 would divide
        # the rounding of the mean's subtraction by itself).
        return dataclasses.replace(law, r2=1.0) if constant else law
    if len(x) < 3:
        return None
    s = np.sqrt(x)
    c = float(s @ y / (s @ s))
    resid = y - c * s
    total = 0.0 if constant else float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / total if total > 0 else float(np.allclose(resid, 0))
    return Law(
        name="sqrt",
        params={"a": 0.0, "b": c},
        r2=r2,
        rms=float(np.sqrt(np.mean(resid**2))),
        residuals=tuple(float(r) for r in resid),
        x_range=(float(x.min()), float(x.max())),
        n_points=len(x),
    )


@dataclass
class SparseTokenClassificationResult:
    """One seed of the sparse-token classification experiment: its three studies' rows.

    Attributes
    ----------
    config : dict
        The sizes and settings of every part, and the ``seed``.
    law : StudyTable
        :func:`~stsq_learn.studies.search_threshold`'s rows, one per
        (classifier, L): ``model``, ``seed``, ``param_seq_len``, ``value``
        (the minimal theta; NaN where the bracket's top failed), ``bound``
        (then, the top: the threshold lies above it), ``reached``,
        ``n_fits``, ...
    alignment : StudyTable
        The two-step fits, one row per (d, n/d, draw): ``seed``, ``draw``
        (the draw's seed, ``stream_seed(seed, "alignment <k>")``),
        ``n_features``, ``ratio``, ``n_train``, ``cosine`` (of
        ``two_step_query_`` with ``xi``; NaN for a draw of one class).
    error : StudyTable
        :func:`~stsq_learn.studies.sweep`'s rows, one per (classifier,
        theta): ``model``, ``seed``, ``param_signal``, ``test_error``,
        ``query_along_xi`` (the attention query's component along ``xi``).
    seconds : dict
        Wall time of each part, the call's shared equally among its seeds.

    Examples
    --------
    >>> from stsq_learn.tasks.classification.experiment import sparse_token_classification
    >>> res = sparse_token_classification(
    ...     seq_lens=(4, 8, 16), n_features=4, n_train=100, n_test=200, n_bisect=2,
    ...     alignment_features=(8,), alignment_ratios=(2,), n_seeds=1,
    ...     error_signals=(2.0,), progress=False)
    >>> sorted(res.laws)
    ['attention', 'flat', 'pooled']
    """

    config: dict
    law: StudyTable
    alignment: StudyTable
    error: StudyTable
    seconds: dict

    @property
    def seq_lens(self):
        """The lengths L of the law."""
        return list(self.config["seq_lens"])

    def thresholds(self, name):
        """``name``'s minimal theta at each L (None where none was reached).

        Parameters
        ----------
        name : str
            One of :data:`CLASSIFIERS`.

        Returns
        -------
        list of float or None
            The threshold at each length of :attr:`seq_lens`.
        """
        rows = self.law.where(model=name)
        found = dict(zip(rows["param_seq_len"].tolist(), rows["value"].tolist()))
        return [None if np.isnan(found[L]) else float(found[L]) for L in self.seq_lens]

    @property
    def laws(self):
        """Classifier to ``{"log": Law, "sqrt": Law}`` fitted to its thresholds (None: < 3)."""
        return {
            name: {law: _law(self.law.where(model=name), law) for law in LAWS}
            for name in CLASSIFIERS
        }

    @property
    def alignment_means(self):
        """d to the mean cosine over the draws at each n/d (None where no draw fitted)."""
        out = {}
        for d in self.config["alignment_features"]:
            means = []
            for ratio in self.config["alignment_ratios"]:
                values = self.alignment.where(n_features=d, ratio=ratio)["cosine"]
                values = values[np.isfinite(values)]
                means.append(float(values.mean()) if len(values) else None)
            out[d] = means
        return out

    @property
    def alignment_theory(self):
        """The query's limiting cosine ``rho_2`` at each n/d (:func:`~.theory.two_step_alignment`).

        Returns
        -------
        list of float
            ``rho_2`` at each ratio of the config's ``alignment_ratios``.
        """
        cfg = self.config
        ratios = np.array(cfg["alignment_ratios"], float)
        _, query = two_step_alignment(cfg["alignment_signal"], cfg["alignment_seq_len"], ratios)
        return np.atleast_1d(query).tolist()

    @property
    def attention_threshold(self):
        """The signal where the informative share is 1/2 at the median positive query along
        ``xi`` of the error part (None when none is positive)."""
        along = self.error.where(model="attention")["query_along_xi"]
        positive = along[np.isfinite(along) & (along > 0)]
        L = self.config["error_seq_len"]
        if not len(positive) or L <= 1:
            return None
        return float(attention_threshold(L, query_norm=float(np.median(positive))))

    def to_dict(self):
        """JSON-ready dict: the config, the three tables and what they give.

        Returns
        -------
        dict
            ``config``, ``law``, ``alignment``, ``error`` (each
            :meth:`StudyTable.to_dict`), ``seconds``, and ``laws``
            (classifier to each law's ``to_dict()`` or None),
            ``alignment_means``, ``alignment_theory``,
            ``attention_threshold``, ``share`` (the informative share per
            theta at the fitted query) for a reader of the JSON;
            :meth:`from_dict` reads it back.
        """
        er = self.error.where(model="attention")
        share = [
            float(attention_signal_share(t, self.config["error_seq_len"], query_norm=b))
            if b > 0
            else None
            for t, b in zip(er["param_signal"], er["query_along_xi"])
        ]
        return {
            "config": self.config,
            "law": self.law.to_dict(),
            "alignment": self.alignment.to_dict(),
            "error": self.error.to_dict(),
            "seconds": self.seconds,
            "laws": {
                name: {k: None if law is None else law.to_dict() for k, law in laws.items()}
                for name, laws in self.laws.items()
            },
            "alignment_means": {str(d): m for d, m in self.alignment_means.items()},
            "alignment_theory": self.alignment_theory,
            "attention_threshold": self.attention_threshold,
            "share": share,
        }

    @classmethod
    def from_dict(cls, data):
        """The result :meth:`to_dict` described.

        Parameters
        ----------
        data : dict
            As :meth:`to_dict` returns it (or as JSON read it back).

        Returns
        -------
        SparseTokenClassificationResult
        """
        tables = {k: StudyTable.from_dict(data[k]) for k in ("law", "alignment", "error")}
        return cls(config=data["config"], seconds=data["seconds"], **tables)

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
        return self.plot_bands([self], axes)

    @staticmethod
    def plot_bands(results, axes=None):
        """The figure of :meth:`plot` over seeds: medians with their min-max.

        Parameters
        ----------
        results : sequence of SparseTokenClassificationResult
            One per seed, with the same lengths, dimensions, ratios and
            signals.
        axes : sequence of 3 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure.

        Returns
        -------
        fig : matplotlib.figure.Figure
            Three panels (:class:`~stsq_learn.studies.BandDisplay`): each
            classifier's minimal theta against L, its median over the seeds
            with min-max error bars (open triangles where the bracket's top
            failed), both laws fitted to every seed's thresholds and drawn
            over the lengths fitted, the pooled oracle's threshold; each
            d's cosine after two steps against n/d, the median over every
            seed's draws with their min-max shaded, beside the theory's
            limit; each classifier's test error against theta, its median
            with the min-max shaded, beside the pooled oracle's exact
            error and the signal of informative share 1/2 (the seeds'
            median).
        """
        return _plot(results, axes)


def _check_results(results):
    """``results`` as a list of results of one experiment, or the error naming the odd one."""
    name = SparseTokenClassificationResult.__name__
    if isinstance(results, SparseTokenClassificationResult):
        raise TypeError(f"results must be a list of {name}, got one {name}: pass [result].")
    results = list(results)
    if not results:
        raise ValueError(f"results must hold at least one {name}, got none.")
    keys = ("seq_lens", "alignment_features", "alignment_ratios", "error_signals")
    for i, res in enumerate(results):
        if not isinstance(res, SparseTokenClassificationResult):
            raise TypeError(f"results[{i}] must be a {name}, got {type(res).__name__}.")
        for key in keys:
            if res.config[key] != results[0].config[key]:
                raise ValueError(
                    f"results[{i}].config[{key!r}] differs from results[0]'s: "
                    f"{res.config[key]} != {results[0].config[key]}."
                )
    return results


def _plot(results, axes):
    """The figure of :meth:`SparseTokenClassificationResult.plot_bands`."""
    import matplotlib.pyplot as plt

    results = _check_results(results)
    if axes is None:
        fig, axes = plt.subplots(1, 3, figsize=(17, 4.8), layout="constrained")
    elif len(axes) != 3:
        raise ValueError(f"axes must hold 3 Axes, got {len(axes)}.")
    fig = axes[0].figure
    cfg = results[0].config
    law = StudyTable.concat([r.law for r in results])
    logs = {name: _law(law.where(model=name), "log") for name in CLASSIFIERS}
    sqrts = {name: _law(law.where(model=name), "sqrt") for name in CLASSIFIERS}
    labels = {}
    for name in CLASSIFIERS:
        r2 = [f"{k} {f.r2:.2f}" for k, f in (("log", logs[name]), ("sqrt", sqrts[name])) if f]
        labels[name] = _LABELS[name] + (f" (R$^2$ {', '.join(r2)})" if r2 else "")
    Ls = np.array(cfg["seq_lens"], float)
    display = BandDisplay.from_table(
        law,
        x="seq_len",
        y="value",
        laws={k: v for k, v in logs.items() if v is not None},
        theory={
            "pooled oracle (theory)": (Ls, pooled_threshold(Ls, target_error=cfg["target_error"]))
        },
        bound="bound",
        ax=axes[0],
        style="errorbar",
        logx=True,
        labels=labels,
        colors=_COLORS,
        xlabel="tokens L (log scale)",
        ylabel=f"minimal theta for test error {cfg['target_error']:g}",
        title="Signal needed: a + b log L (dotted) vs c sqrt L (dash-dot)",
    )
    for name, fitted in sqrts.items():
        if fitted is not None:  # drawn over the lengths it was fitted on, as the log law
            xs = np.geomspace(*fitted.x_range, 50)
            axes[0].plot(xs, fitted(xs), "-.", color=_COLORS[name], lw=1, label="_nolegend_")
    for line in display.lines_.values():  # thresholds are points; the laws are the lines
        line.set_linestyle("")
    for line in display.law_lines_.values():  # the legend gives each law's R^2
        line.set_label("_nolegend_")
    axes[0].legend(fontsize=7)
    alignment = StudyTable.concat([r.alignment for r in results])
    ratios = np.array(cfg["alignment_ratios"], float)
    BandDisplay.from_table(
        alignment,
        x="ratio",
        y="cosine",
        hue="n_features",
        theory={"theory (d, n -> inf)": (ratios, results[0].alignment_theory)},
        ax=axes[1],
        logx=True,
        labels={d: f"two steps, d={d}" for d in cfg["alignment_features"]},
        xlabel="n / d (log scale)",
        ylabel="cos(query, xi)",
        title=f"Query after two steps (L={cfg['alignment_seq_len']}, "
        f"theta={cfg['alignment_signal']:g})",
    )
    lowest = np.nanmin(alignment["cosine"], initial=0.0)
    axes[1].set_ylim(min(-0.05, lowest - 0.05), 1.02)
    error = StudyTable.concat([r.error for r in results])
    L = cfg["error_seq_len"]
    display = BandDisplay.from_table(
        error,
        x="signal",
        y="test_error",
        theory={"pooled oracle (exact)": lambda t: pooled_error(t, L)},
        ax=axes[2],
        logx=True,
        labels=_LABELS,
        colors=_COLORS,
        xlabel="signal theta (log scale)",
        ylabel="test error",
        title=f"Test error against theta (L={L})",
    )
    shares = [r.attention_threshold for r in results if r.attention_threshold is not None]
    if shares:
        axes[2].axvline(
            float(np.median(shares)),
            color=_COLORS["attention"],
            ls=":",
            label="informative share 1/2 (theory, fitted query"
            + ("" if len(results) == 1 else "; median over seeds")
            + ")",
        )
        if max(shares) > min(shares):
            axes[2].axvspan(min(shares), max(shares), color=_COLORS["attention"], alpha=0.1, lw=0)
    axes[2].set_ylim(-0.02, 0.55)
    axes[2].legend(fontsize=7)
    for ax in axes:
        ax.title.set_fontsize("medium")
    n = len(results)
    seeds = "one seed" if n == 1 else f"median over {n} seeds, bars and bands: min-max"
    fig.suptitle(f"Sparse-token classification (d={cfg['n_features']}; {seeds})")
    return fig


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


def _alignment(cfg, seeds, progress):
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
                rows = sweep(
                    {"two_step": model},
                    task,
                    seeds=[draw for s in seeds for draw in draws[s]],
                    n_train=n,
                    n_test=1,
                    scoring={"cosine": _two_step_cosine},
                    progress=progress,
                )
            parts.append(
                StudyTable(
                    {
                        "seed": [outer[draw] for draw in rows["seed"]],
                        "draw": rows["seed"],
                        "n_features": [d] * len(rows),
                        "ratio": [float(ratio)] * len(rows),
                        "n_train": [n] * len(rows),
                        "cosine": rows["cosine"],
                        "error": rows["error"],
                    },
                    meta={"study": "sweep", "draws": {str(s): ds for s, ds in draws.items()}},
                )
            )
    return StudyTable.concat(parts)


def _per_seed(table, seed):
    """The rows of ``seed``, with the study's meta naming that seed alone."""
    rows = table.where(seed=seed)
    meta = dict(table.meta)
    if "seeds" in meta:
        meta["seeds"] = [seed]
    if "draws" in meta:
        meta["draws"] = {str(seed): meta["draws"][str(seed)]}
    return StudyTable({c: rows[c] for c in rows.columns}, meta=meta)


def sparse_token_classification(
    settings=None, *, device="cpu", random_state=0, seeds=None, progress=True, **changes
):
    """The log L against sqrt L law, the two-step alignment and error against theta.

    Parameters
    ----------
    settings : SparseTokenClassificationSettings, mapping or None, default=None
        The three parts' settings (None: the defaults).
    device : str, default="cpu"
        Unused (the classifiers run on the CPU); accepted as every experiment does.
    random_state : int, default=0
        The seed of one run (its rows, the attention's initialisation and
        the alignment's draws, by the studies' rule).
    seeds : int, sequence of int or None, default=None
        Several seeds at once (``n``: the seeds ``0 .. n-1``), in place of
        ``random_state``: one result per seed, in order.
    progress : bool, default=True
        Show the studies' progress bars.
    **changes
        Settings of :class:`SparseTokenClassificationSettings` to change
        (``sparse_token_classification(n_bisect=3)``).

    Returns
    -------
    SparseTokenClassificationResult or list of SparseTokenClassificationResult
        The thresholds, the alignments and the errors against theta, with
        ``to_dict()`` and ``plot()``: one result, or with ``seeds`` one per
        seed.
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
    one = seeds is None
    try:
        seeds = check_seeds([random_state] if one else seeds)
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).replace("seeds[0]", "random_state") if one else exc) from None
    seq_lens = tuple(int(L) for L in cfg.seq_lens)
    models = {
        "attention": clone(attention),
        "flat": make_flat_logistic(max_iter=1000),
        "pooled": make_pooled_logistic(max_iter=1000),
    }
    rows = dict(n_train=cfg.n_train, n_test=cfg.n_test, progress=progress)
    seconds = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        law = StudyTable.concat(
            [
                search_threshold(
                    {name: models[name]},
                    SparseTokenClassificationTask(seq_lens[0], cfg.n_features),
                    "signal",
                    bounds[name],
                    target=cfg.target_error,
                    grid={"seq_len": list(seq_lens)},
                    method="geometric",
                    n_iter=cfg.n_bisect,
                    start=None,
                    skip_after_miss=False,
                    greater_is_better=False,
                    seeds=seeds,
                    scoring=_test_error,
                    **rows,
                )
                for name in CLASSIFIERS
            ]
        )
        seconds["law"] = time.perf_counter() - start
        start = time.perf_counter()
        alignment = _alignment(cfg, seeds, progress)
        seconds["alignment"] = time.perf_counter() - start
        start = time.perf_counter()
        error = sweep(
            models,
            SparseTokenClassificationTask(cfg.error_seq_len, cfg.n_features),
            {"signal": [float(t) for t in cfg.error_signals]},
            seeds=seeds,
            scoring={"test_error": _test_error, "query_along_xi": _query_along_xi},
            **rows,
        )
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
        "alignment_features": [int(d) for d in cfg.alignment_features],
        "alignment_ratios": [float(r) for r in cfg.alignment_ratios],
        "alignment_seq_len": cfg.alignment_seq_len,
        "alignment_signal": float(cfg.alignment_signal),
        "alignment_learning_rate": cfg.alignment_learning_rate,
        "n_seeds": cfg.n_seeds,
        "error_seq_len": cfg.error_seq_len,
        "error_signals": [float(t) for t in cfg.error_signals],
    }
    shared = {part: value / len(seeds) for part, value in seconds.items()}
    results = [
        SparseTokenClassificationResult(
            config={**config, "seed": s},
            law=_per_seed(law, s),
            alignment=_per_seed(alignment, s),
            error=_per_seed(error, s),
            seconds=dict(shared),
        )
        for s in seeds
    ]
    return results[0] if one else results
