"""Single-location regression: where projected GD ends (oracle or swapped point); linear fails.

The erf predictor of Marion, Berthier, Biau and Boyer (ICLR 2025) trained by
projected gradient descent on its population risk (in closed form), from the
sphere and from their manifold, under the decaying temperature
``lambda_0 / (1 + c t)`` and a constant one, for each seed of the run; beside
it the oracle ``(k*, v*)`` at the final temperature, the best linear
predictor (closed form and fitted), the Bayes risk (Monte Carlo) and softmax
attention with one learned query trained online on the same law.

Seeds follow the studies' one rule (:mod:`stsq_learn.studies.seeds`): every
model of seed ``s`` is fitted with ``random_state=s``, every row it draws
comes from a stream :func:`~stsq_learn.studies.stream_seed` ``(s, name)``.
The softmax model is a :func:`~stsq_learn.studies.sweep` over the seeds
(trained as one batched model). The erf runs record their risk and
alignments along the steps, which a study's table of scores does not hold:
all of them (starts x schedules x seeds) are fitted in one batched
computation (:func:`~stsq_learn.tasks.single_location.batch.fit_online_batch`)
and their rows written to :class:`~stsq_learn.studies.StudyTable` s here.
Each run's endpoint is classified: the oracle, the swapped point
(:func:`~stsq_learn.single_location_theory.swapped_point`) or neither.
"""

from __future__ import annotations

import numbers
import time
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone
from sklearn.linear_model import LinearRegression

from ..._validation import check_positive_int
from ...experiments._common import new_axes, seed_results
from ...experiments._settings import Settings
from ...studies import BandDisplay, StudyTable, Work, check_seeds, stream_seed, sweep
from ...studies.plan import active_plan
from .. import SingleLocationTask
from .batch import fit_online_batch
from .estimators import ErfAttentionRegressor, SoftmaxAttentionRegressor
from .theory import bayes_risk, linear_risk, oracle_risk, swapped_point

INITS = ("sphere", "manifold")
SCHEDULES = ("decay", "constant")
MODELS = tuple(f"{init}/{schedule}" for init in INITS for schedule in SCHEDULES)
"""The erf runs' labels, ``"<init>/<schedule>"``: the ``model`` column of the tables."""
PRODUCTS = ("k.k*", "k.v*", "v.k*", "v.v*", "k.v")
"""The inner products of a run's final ``(k, v)`` with ``k*``, ``v*`` and each other."""
ENDPOINTS = ("oracle", "swapped", "other")
_GAMMA = float(np.sqrt(0.5))  # gamma^2 = 1/2, the paper's


@dataclass
class SingleLocationResult:
    """Risk and alignments along projected gradient descent, with the baselines, for one seed.

    Attributes
    ----------
    config : dict
        The settings and the seed (``random_state``).
    curves : StudyTable
        One row per erf run (``model``: ``"<init>/<schedule>"``, of
        :data:`MODELS`) and recorded step: ``seed``, ``param_init``,
        ``param_schedule``, ``step`` (0, ``record_every``, ..., and the
        last), ``risk`` (the population risk before that step),
        ``key_alignment`` and ``value_alignment`` (``<k, k*>``,
        ``<v, v*>`` before it).
    runs : StudyTable
        One row per erf run: ``model``, ``seed``, ``param_init``,
        ``param_schedule``, the final ``risk``, the ``oracle`` risk at the
        final temperature ``lambda``, their ``relative_gap``, the five
        inner products of :data:`PRODUCTS`, ``reached`` (1 where the run
        reached the oracle: gap within ``rtol``, ``|<k, k*>|`` and
        ``|<v, v*>|`` at least ``alignment``, else 0), ``endpoint``
        (``"oracle"``: ``(k*, v*)`` up to sign; ``"swapped"``: the key on
        the value direction, ``|<k, v*>| >= alignment``; ``"other"``) and
        ``seconds`` (its share of the batched fit's wall time).
    baselines : dict
        ``zero`` (the predictor 0), ``linear`` (closed form),
        ``linear_fitted`` (a :class:`~sklearn.linear_model.LinearRegression`
        on flattened rows, test MSE) and ``linear_train_rows``, ``bayes`` and
        ``bayes_se`` (Monte Carlo), ``oracle`` per schedule (at its final
        temperature) and ``swapped`` per schedule: the stationary point near
        ``(k, v) = (v*, k*)`` at the final temperature
        (:func:`~stsq_learn.single_location_theory.swapped_point`: its
        ``risk``, ``relative_gap`` to the oracle's, products, ``converged``).
    softmax : StudyTable
        Softmax attention trained online (a :func:`~stsq_learn.studies.sweep`
        of one model): ``test_mse`` on the seed's held-out rows,
        ``query_cosine`` and ``value_cosine`` (final cosines with ``k*`` and
        ``v*``), ``n_iter``, ``seconds``, ``error``.

    Examples
    --------
    >>> from stsq_learn.tasks.single_location.experiment import single_location
    >>> res = single_location(seq_len=5, n_features=20, n_steps=50, n_softmax_steps=10,
    ...                       n_test=500, random_state=0)
    >>> res.runs["model"].tolist()
    ['sphere/decay', 'sphere/constant', 'manifold/decay', 'manifold/constant']
    """

    config: dict
    curves: StudyTable
    runs: StudyTable
    baselines: dict
    softmax: StudyTable

    def reached(self, init, schedule):
        """Fraction of the runs of ``(init, schedule)`` that reached the oracle.

        Parameters
        ----------
        init : str
            The start of the runs (one of ``INITS``).
        schedule : str
            Their temperature schedule (one of ``SCHEDULES``).

        Returns
        -------
        float
            The fraction, in [0, 1] (for one seed's result: 0 or 1).
        """
        rows = self.runs.where(model=f"{init}/{schedule}")
        return float(np.mean(rows["reached"])) if len(rows) else float("nan")

    def ended_at(self, init, schedule, endpoint):
        """Fraction of the runs of ``(init, schedule)`` that ended at ``endpoint``.

        Parameters
        ----------
        init : str
            The start of the runs (one of ``INITS``).
        schedule : str
            Their temperature schedule (one of ``SCHEDULES``).
        endpoint : {"oracle", "swapped", "other"}
            Where they ended (see ``runs``).

        Returns
        -------
        float
            The fraction, in [0, 1] (for one seed's result: 0 or 1).
        """
        rows = self.runs.where(model=f"{init}/{schedule}")
        hits = [e == endpoint for e in rows["endpoint"]]
        return float(np.mean(hits)) if hits else float("nan")

    def to_dict(self):
        """JSON-ready dict of the fields, each table as its ``to_dict()``.

        Returns
        -------
        dict
            ``config``, ``curves``, ``runs``, ``baselines`` and ``softmax``.
        """
        out = {name: getattr(self, name) for name in _FIELDS}
        out.update({name: getattr(self, name).to_dict() for name in _TABLES})
        return out

    @classmethod
    def from_dict(cls, data):
        """The result :meth:`to_dict` described.

        Parameters
        ----------
        data : dict
            A :meth:`to_dict` (or its JSON read back).

        Returns
        -------
        SingleLocationResult
            The result, its tables rebuilt.
        """
        tables = {name: StudyTable.from_dict(data[name]) for name in _TABLES}
        return cls(**{name: data[name] for name in _FIELDS}, **tables)

    def plot(self, axes=None):
        """Risk, key and value alignment against steps, and where the runs ended, on 4 axes.

        Parameters
        ----------
        axes : sequence of 4 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 4 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure holding the axes.
        """
        return self.plot_bands([self], axes)

    @staticmethod
    def plot_bands(results, axes=None):
        """The figure of :meth:`plot` over seeds: medians with their min-max bands.

        Parameters
        ----------
        results : sequence of SingleLocationResult
            One per seed of one experiment (the same settings).
        axes : sequence of 4 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 4 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            Each erf run's population risk against the step (log-log;
            median over the seeds, min-max shaded), beside the best linear
            risk, the oracle's at each schedule's final temperature and the
            softmax model's test MSE (median over the seeds); ``|<k, k*>|``
            and ``|<v, v*>|`` against the step, the same way; and, per start
            and schedule, the share of the seeds whose run ended at the
            oracle, at the swapped point or elsewhere.
        """
        return _plot(_checked(results), axes)


_FIELDS = ("config", "baselines")
_TABLES = ("curves", "runs", "softmax")
_COLORS = {m: f"C{i}" for i, m in enumerate(MODELS)}
_N_PLOTTED = 60  # steps drawn per curve, spaced geometrically (the x axis is logarithmic)


def _checked(results):
    """``results`` as a list of results of one experiment's seeds, or raise naming the fault."""
    results = seed_results(results, SingleLocationResult, ())
    first = {k: v for k, v in results[0].config.items() if k != "random_state"}
    for i, r in enumerate(results[1:], 1):
        if differ := [k for k in first if r.config.get(k) != first[k]]:
            raise ValueError(
                f"results[{i}] differs from results[0] in {', '.join(differ)}: the seeds of "
                "one experiment share their settings."
            )
    return results


def _plot(results, axes):
    """The four panels of :meth:`SingleLocationResult.plot_bands`."""
    fig, (ax_r, ax_k, ax_v, ax_e) = new_axes(axes, 4, figsize=(20, 4.5))
    curves = StudyTable.concat([r.curves for r in results])
    steps = np.asarray(curves.unique("step"), dtype=float)
    wanted = np.geomspace(1, steps.max() + 1, _N_PLOTTED) - 1
    shown = set(steps[np.abs(steps[:, None] - wanted[None, :]).argmin(axis=0)].tolist())
    curves = curves.where(step=lambda s: np.isin(s, list(shown)))
    curves = curves.with_columns(
        step=curves["step"] + 1,
        key_alignment=np.abs(curves["key_alignment"]),
        value_alignment=np.abs(curves["value_alignment"]),
    )
    labels = {m: f"{m.split('/')[0]}, lambda {m.split('/')[1]}" for m in MODELS}
    for ax, column, ylabel, title in (
        (ax_r, "risk", "risk E[(y - T(X))^2]", "Population risk"),
        (ax_k, "key_alignment", "|<k, k*>|", "Key alignment |<k, k*>|"),
        (ax_v, "value_alignment", "|<v, v*>|", "Value alignment |<v, v*>|"),
    ):
        display = BandDisplay.from_table(
            curves,
            x="step",
            y=column,
            ax=ax,
            labels=labels,
            colors=_COLORS,
            xlabel="step + 1",
            ylabel=ylabel,
            title=title,
        )
        display.ax_.set_xscale("log")
        for line in display.lines_.values():
            line.set_marker("")
    b = results[0].baselines
    softmax = float(np.median(np.concatenate([r.softmax["test_mse"] for r in results])))
    ax_r.axhline(b["linear"], color="k", ls=":", lw=1, label="best linear")
    for schedule, ls in (("decay", "-."), ("constant", (0, (1, 3)))):
        ax_r.axhline(
            b["oracle"][schedule], color="C5", ls=ls, lw=1, label=f"oracle, final lambda {schedule}"
        )
    ax_r.axhline(softmax, color="C6", ls=":", lw=1.5, label="softmax attention (test)")
    ax_r.set_yscale("log")
    ax_r.legend(fontsize="x-small", loc="lower left")
    for ax in (ax_k, ax_v):
        ax.set_ylim(-0.02, 1.02)
        ax.legend().remove()
    _plot_endpoints(ax_e, results)
    if len(results) > 1:
        fig.suptitle(f"Single-location regression, median over {len(results)} seeds, band: min-max")
    return fig


def _plot_endpoints(ax, results):
    """Stacked bars: per start and schedule, the share of the seeds ending at each endpoint."""
    runs = StudyTable.concat([r.runs for r in results])
    x = np.arange(len(MODELS))
    bottom = np.zeros(len(MODELS))
    for endpoint, color in zip(ENDPOINTS, ("C2", "C3", "0.6")):
        share = np.array(
            [np.mean([e == endpoint for e in runs.where(model=m)["endpoint"]]) for m in MODELS]
        )
        ax.bar(x, share, bottom=bottom, color=color, width=0.6, label=endpoint)
        bottom += share
    ax.set_xticks(x, [m.replace("/", "\nlambda ") for m in MODELS], fontsize="small")
    ax.set_ylim(0, 1.2)
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.set_ylabel(f"share of the seeds ({len(results)})")
    ax.set_title("Where the runs ended")
    ax.legend(fontsize="small", loc="upper center", ncol=3)


class SingleLocationSettings(Settings):
    """The settings of :func:`single_location`: the task, the erf runs and the baselines.

    Attributes
    ----------
    seq_len, n_features : int, default=5, 50
        L and d of the task.
    gamma, noise : float, default=sqrt(1/2), 0.0
        The relevant token's spread and the target's noise.
    n_steps : int, default=3000
        Projected gradient steps of each run.
    learning_rate : float, default=0.02
        Step size of projected gradient descent.
    lambda_init, lambda_decay : float, default=1.0, 3e-3
        The decaying temperature ``lambda_init / (1 + lambda_decay t)``.
    constant_lambda : float, default=0.1
        The constant temperature of the other schedule.
    n_softmax_steps : int, default=300
        Online Adam steps of softmax attention (batches of 200 rows).
    softmax_learning_rate : float, default=0.02
        Its step size.
    n_test : int, default=5000
        Rows of the Monte Carlo Bayes risk and of the test sets.
    n_linear : int or None, default=None
        Training rows of the fitted linear regression; None: ``10 L d``.
    record_every : int, default=10
        Steps between recorded points of the curves.
    rtol, alignment : float, default=1e-3, 0.999
        A run reaches the oracle when its final risk is within ``rtol``
        (relative) of the oracle's at its final temperature and both
        ``|<k, k*>|`` and ``|<v, v*>|`` are at least ``alignment``.

    Examples
    --------
    >>> from stsq_learn.experiments import SingleLocationSettings
    >>> SingleLocationSettings(n_features=20).replace(n_steps=100).n_steps
    100
    """

    seq_len: int = 5
    n_features: int = 50
    gamma: float = _GAMMA
    noise: float = 0.0
    n_steps: int = 3000
    learning_rate: float = 0.02
    lambda_init: float = 1.0
    lambda_decay: float = 3e-3
    constant_lambda: float = 0.1
    n_softmax_steps: int = 300
    softmax_learning_rate: float = 0.02
    n_test: int = 5000
    n_linear: int | None = None
    record_every: int = 10
    rtol: float = 1e-3
    alignment: float = 0.999


def single_location(
    settings=None, *, device="cpu", random_state=None, seeds=None, progress=False, **changes
):
    """Projected gradient descent on single-location regression, beside the baselines.

    For each seed: the erf predictor
    (:class:`~stsq_learn.ErfAttentionRegressor`, ``solver="pgd"``) trained
    on the population risk from the sphere and from the manifold, under the
    decaying and the constant temperature (four runs); the oracle's and the
    swapped point's risks at each schedule's final temperature; the best
    linear predictor in closed form and fitted on ``n_linear`` rows; the
    Bayes risk by Monte Carlo; softmax attention
    (:class:`~stsq_learn.SoftmaxAttentionRegressor`) trained online.

    Seeds follow the studies' one rule (:mod:`stsq_learn.studies.seeds`):
    every model of seed ``s`` (the four erf runs, the softmax model) is
    fitted with ``random_state=s``; the linear fit's rows, the held-out rows
    (:func:`~stsq_learn.studies.stream_seed` ``(s, "train")`` and
    ``(s, "test")``) and the Bayes estimate's (``(s, "bayes")``) come from
    the streams of ``s``. All the erf runs of all the seeds are one batched
    computation (:func:`~stsq_learn.tasks.single_location.batch.fit_online_batch`),
    the softmax model's seeds one batched model
    (:func:`~stsq_learn.studies.sweep`, ``batch_seeds=True``).

    Parameters
    ----------
    settings : SingleLocationSettings, mapping or None, default=None
        The task, the runs and the baselines (None: the defaults).
    device : str, default="cpu"
        Unused (the runs are NumPy); accepted as every experiment does.
    random_state : int or None, default=None
        The seed of a one-seed run (None: 0). Not with ``seeds``.
    seeds : sequence of int or None, default=None
        Run these seeds together and return one result per seed.
    progress : bool, default=False
        Show the erf runs' progress bar.
    **changes
        Settings of :class:`SingleLocationSettings` to change
        (``single_location(n_steps=500)``).

    Returns
    -------
    SingleLocationResult or list of SingleLocationResult
        The seed's runs and baselines; with ``seeds``, one result per seed,
        in order. Inside :func:`~stsq_learn.studies.planning`: None, the
        work recorded in the plan.

    Raises
    ------
    TypeError, ValueError
        For a bad setting or seed (naming it), before any fit.
    """
    if seeds is not None and random_state is not None:
        raise ValueError("give random_state (one seed) or seeds (several), not both.")
    one = [0 if random_state is None else random_state]
    run_seeds = check_seeds(one if seeds is None else seeds)
    cfg = SingleLocationSettings.resolve(settings, changes)
    task, erf, softmax = _parts(cfg)
    plan = active_plan()
    if plan is not None:
        fits = len(MODELS) * len(run_seeds)
        plan.append(Work("single_location: erf, projected GD", fits, cfg.n_steps, erf, task))
        _softmax_table(cfg, task, softmax, run_seeds)
        return None
    curves, runs = _erf_tables(cfg, task, erf, run_seeds, progress)
    soft = _softmax_table(cfg, task, softmax, run_seeds)
    shared = _shared_baselines(cfg, task)
    results = [
        SingleLocationResult(
            config={**dict(cfg), "random_state": s},
            curves=_of_seed(curves, s),
            runs=_of_seed(runs, s),
            baselines={**shared, **_seed_baselines(cfg, task, s)},
            softmax=_of_seed(soft, s),
        )
        for s in run_seeds
    ]
    return results if seeds is not None else results[0]


def _real(value, name, *, low=0.0, strict=True, high=None):
    """``value`` as a float, or raise naming ``name``: above ``low`` (or at it), up to ``high``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}: {value!r}.")
    value = float(value)
    below = value <= low if strict else value < low
    if not np.isfinite(value) or below or (high is not None and value > high):
        where = f"{'above' if strict else 'at least'} {low:g}"
        where += "" if high is None else f" and at most {high:g}"
        raise ValueError(f"{name} must be a finite number {where}, got {value!r}.")
    return value


def _parts(cfg):
    """The task and the two models' settings, every setting checked (naming it)."""
    for name in ("seq_len", "n_features", "n_steps", "n_softmax_steps", "n_test", "record_every"):
        check_positive_int(cfg[name], name)
    if cfg.n_linear is not None:
        check_positive_int(cfg.n_linear, "n_linear")
    for name in ("gamma", "learning_rate", "lambda_init", "constant_lambda"):
        _real(cfg[name], name)
    _real(cfg.softmax_learning_rate, "softmax_learning_rate")
    for name in ("noise", "lambda_decay", "rtol"):
        _real(cfg[name], name, strict=False)
    _real(cfg.alignment, "alignment", high=1.0)
    task = SingleLocationTask(cfg.seq_len, cfg.n_features, gamma=cfg.gamma, noise=cfg.noise)
    erf = ErfAttentionRegressor(
        solver="pgd",
        lambda_decay=cfg.lambda_decay,
        learning_rate_init=cfg.learning_rate,
        max_iter=cfg.n_steps,
    )
    softmax = SoftmaxAttentionRegressor(
        learning_rate_init=cfg.softmax_learning_rate, max_iter=cfg.n_softmax_steps
    )
    return task, erf, softmax


def _erf_tables(cfg, task, erf, seeds, progress):
    """The curves and final rows of every erf run (starts x schedules x seeds), fitted at once."""
    keys, models = [], []
    for label in MODELS:
        init, schedule = label.split("/")
        lam = cfg.lambda_init if schedule == "decay" else cfg.constant_lambda
        for s in seeds:
            keys.append((label, init, schedule, s))
            models.append(
                clone(erf).set_params(
                    init=init,
                    lambda_schedule=schedule,
                    lambda_init=lam,
                    random_state=s,
                    verbose=int(bool(progress)),
                )
            )
    # Where a run ends is what the experiment counts (reached, swapped, its gap to the
    # oracle): at the tests' size the constant-lambda runs end above the loss of predicting
    # 0, and the estimator's end-of-run "worse than no model" warning would print that once
    # per run.
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*worse than no model", category=UserWarning)
        fit_online_batch(models, task)
    share = (time.perf_counter() - start) / len(models)
    k_star, v_star = task.directions
    curves, runs = {}, {}
    for (label, init, schedule, s), model in zip(keys, models):
        base = {"model": label, "seed": s, "param_init": init, "param_schedule": schedule}
        idx = np.unique(np.r_[np.arange(0, model.n_iter_, cfg.record_every), model.n_iter_ - 1])
        rows = {
            "step": idx,
            "risk": model.loss_curve_[idx],
            "key_alignment": model.alignment_curve_[idx, 0],
            "value_alignment": model.alignment_curve_[idx, 1],
        }
        for name, value in {**{k: [v] * len(idx) for k, v in base.items()}, **rows}.items():
            curves.setdefault(name, []).extend(value)
        final = _final(cfg, task, model, k_star, v_star)
        for name, value in {**base, **final, "seconds": share}.items():
            runs.setdefault(name, []).append(value)
    meta = {"study": "single_location erf runs", "seeds": list(seeds), "batch_seeds": True}
    return StudyTable(curves, meta=meta), StudyTable(runs, meta=meta)


def _final(cfg, task, model, k_star, v_star):
    """Where a fitted run ended: its risk against the oracle's, its products, its endpoint."""
    risk = float(model.loss_curve_[-1])
    lam = float(model.lambda_curve_[-1])
    oracle = oracle_risk(task, lam)
    gap = (risk - oracle) / oracle
    k, v = model.k_, model.v_
    values = (k @ k_star, k @ v_star, v @ k_star, v @ v_star, k @ v)
    products = {name: float(x) for name, x in zip(PRODUCTS, values)}
    aligned = min(abs(products["k.k*"]), abs(products["v.v*"])) >= cfg.alignment
    swapped = abs(products["k.v*"]) >= cfg.alignment
    return {
        "risk": risk,
        "oracle": float(oracle),
        "relative_gap": float(gap),
        "lambda": lam,
        **products,
        "reached": int(abs(gap) <= cfg.rtol and aligned),
        "endpoint": "oracle" if aligned else "swapped" if swapped else "other",
    }


def _softmax_table(cfg, task, softmax, seeds):
    """Softmax attention over the seeds (:func:`~stsq_learn.studies.sweep`, seeds batched)."""
    return sweep(
        {"softmax": softmax},
        task,
        seeds=seeds,
        n_steps=cfg.n_softmax_steps,
        n_test=cfg.n_test,
        scoring={"test_mse": _test_mse, "query_cosine": _query, "value_cosine": _value},
        error_score="raise",
        batch_seeds=True,
    )


def _test_mse(estimator, X, y):
    return float(np.mean((y - estimator.predict(X)) ** 2))


def _query(estimator, X, y):
    return float(estimator.alignment_curve_[-1, 0])


def _value(estimator, X, y):
    return float(estimator.alignment_curve_[-1, 1])


def _shared_baselines(cfg, task):
    """The baselines every seed shares: closed forms and the swapped point (computed once)."""
    final_lambda = {
        "decay": cfg.lambda_init / (1 + cfg.lambda_decay * (cfg.n_steps - 1)),
        "constant": cfg.constant_lambda,
    }
    points = {}
    for lam in set(final_lambda.values()):
        point = swapped_point(task, lam)
        points[lam] = {k: point[k] for k in ("risk", "relative_gap", "k.v*", "v.k*", "converged")}
    return {
        "zero": float(task.trivial_mse),
        "linear": float(linear_risk(task)),
        "oracle": {s: float(oracle_risk(task, final_lambda[s])) for s in SCHEDULES},
        "swapped": {s: points[final_lambda[s]] for s in SCHEDULES},
    }


def _seed_baselines(cfg, task, seed):
    """The baselines drawn from seed ``seed``'s streams: the fitted linear model, the Bayes risk."""
    n_linear = cfg.n_linear or 10 * cfg.seq_len * cfg.n_features
    X, y = task.sample(n_linear, random_state=stream_seed(seed, "train"))
    X_test, y_test = task.sample(cfg.n_test, random_state=stream_seed(seed, "test"))
    fitted = LinearRegression().fit(X.reshape(len(X), -1), y)
    linear_fitted = float(np.mean((y_test - fitted.predict(X_test.reshape(len(X_test), -1))) ** 2))
    bayes, bayes_se = bayes_risk(task, cfg.n_test, random_state=stream_seed(seed, "bayes"))
    return {
        "linear_fitted": linear_fitted,
        "linear_train_rows": int(n_linear),
        "bayes": float(bayes),
        "bayes_se": float(bayes_se),
    }


def _of_seed(table, seed):
    """The rows of ``seed``, its ``meta`` naming that seed alone."""
    data = table.where(seed=seed).to_dict()
    data["meta"]["seeds"] = [seed]
    return StudyTable.from_dict(data)
