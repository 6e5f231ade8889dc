"""Single-location regression: where projected GD ends (oracle or swapped point); linear fails.

The erf predictor of Marion, Berthier, Biau and Boyer (ICLR 2025) trained by
projected gradient descent on its population risk (in closed form), from the
sphere and from their manifold, under the decaying temperature
``lambda_0 / (1 + c t)`` and a constant one; beside it the oracle
``(k*, v*)`` at the final temperature, the best linear predictor (closed
form and fitted), the Bayes risk (Monte Carlo) and softmax attention with
one learned query trained online on the same law. All the erf runs (starts
x schedules x seeds) are fitted in one batched computation
(:func:`~stsq_learn.tasks.single_location.batch.fit_online_batch`), and each
run's endpoint is classified: the oracle, the swapped point
(:func:`~stsq_learn.single_location_theory.swapped_point`) or neither.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LinearRegression

from ..._validation import check_positive_int
from ...experiments._common import dataclass_dict, derived_seed, jsonable, new_axes
from ...experiments._settings import Settings
from .. import SingleLocationTask
from .batch import fit_online_batch
from .estimators import ErfAttentionRegressor, SoftmaxAttentionRegressor
from .theory import bayes_risk, linear_risk, oracle_risk, swapped_point

INITS = ("sphere", "manifold")
SCHEDULES = ("decay", "constant")
_GAMMA = float(np.sqrt(0.5))  # gamma^2 = 1/2, the paper's


@dataclass
class SingleLocationResult:
    """Risk and alignments along projected gradient descent, with the baselines.

    Attributes
    ----------
    config : dict
        The task's sizes and the training settings.
    runs : list of dict
        One per (initialisation, schedule, seed): ``init``, ``schedule``,
        ``seed``, ``steps`` (recorded steps), ``risk``, ``key_alignment``
        and ``value_alignment`` at those steps (before the step), and
        ``final``: the last risk, the oracle risk at the last temperature,
        their relative gap, the five inner products at the end, whether the
        run reached the oracle, its ``endpoint`` (``"oracle"``: ``(k*, v*)``
        up to sign; ``"swapped"``: the key on the value direction,
        ``|<k, v*>| >= alignment``; ``"other"``) and its share of the
        batched fit's wall time (every run is fitted in one batch).
    baselines : dict
        ``linear`` (closed form), ``linear_fitted`` (a
        :class:`~sklearn.linear_model.LinearRegression` on flattened rows,
        test MSE), ``zero`` (the predictor 0), ``bayes`` and ``bayes_se``
        (Monte Carlo), ``oracle`` per schedule (at its final temperature),
        ``swapped`` per schedule: the stationary point near
        ``(k, v) = (v*, k*)`` at the final temperature
        (:func:`~stsq_learn.single_location_theory.swapped_point`: its
        ``risk``, ``relative_gap`` to the oracle's and products).
    softmax : dict
        Softmax attention trained online: its steps, batch losses, test MSE
        and final cosines with ``k*`` and ``v*``.

    Examples
    --------
    >>> from stsq_learn.tasks.single_location.experiment import single_location
    >>> res = single_location(seq_len=5, n_features=20, n_steps=50, n_seeds=1,
    ...                       n_softmax_steps=10, n_test=500, random_state=0)
    >>> sorted({(r["init"], r["schedule"]) for r in res.runs})[0]
    ('manifold', 'constant')
    """

    config: dict
    runs: list
    baselines: dict
    softmax: dict

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
            The fraction, in [0, 1].
        """
        hits = [
            r["final"]["reached"]
            for r in self.runs
            if (r["init"], r["schedule"]) == (init, schedule)
        ]
        return float(np.mean(hits)) if hits else float("nan")

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
            The fraction, in [0, 1].
        """
        hits = [
            r["final"]["endpoint"] == endpoint
            for r in self.runs
            if (r["init"], r["schedule"]) == (init, schedule)
        ]
        return float(np.mean(hits)) if hits else float("nan")

    def to_dict(self):
        """JSON-ready dict of everything."""
        out = dataclass_dict(self)
        out["reached"] = {f"{i}/{s}": self.reached(i, s) for i in INITS for s in SCHEDULES}
        out["swapped"] = {
            f"{i}/{s}": self.ended_at(i, s, "swapped") for i in INITS for s in SCHEDULES
        }
        return jsonable(out)

    def plot(self, axes=None):
        """Risk, key alignment and value alignment against steps, on 3 axes.

        Parameters
        ----------
        axes : sequence of 3 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure of the three panels.
        """
        fig, (ax_r, ax_k, ax_v) = new_axes(axes, 3, figsize=(15, 4))
        styles = {"decay": "-", "constant": "--"}
        colors = {"sphere": "C0", "manifold": "C1"}
        seen = set()
        for run in self.runs:
            key = (run["init"], run["schedule"])
            label = None if key in seen else f"{run['init']}, lambda {run['schedule']}"
            seen.add(key)
            kw = dict(color=colors[run["init"]], ls=styles[run["schedule"]], lw=1, alpha=0.7)
            steps = np.asarray(run["steps"]) + 1
            ax_r.plot(steps, run["risk"], label=label, **kw)
            ax_k.plot(steps, np.abs(run["key_alignment"]), **kw)
            ax_v.plot(steps, np.abs(run["value_alignment"]), **kw)
        b = self.baselines
        ax_r.axhline(b["linear"], color="k", ls=":", lw=1, label="best linear")
        ax_r.axhline(
            b["oracle"]["decay"], color="C2", ls="-.", lw=1, label="oracle (k*, v*), final lambda"
        )
        ax_r.axhline(
            self.softmax["test_mse"], color="C3", ls=":", lw=1.5, label="softmax attention (test)"
        )
        ax_r.set_yscale("log")
        ax_r.set_title("Population risk")
        ax_r.set_ylabel("risk E[(y - T(X))^2]")
        ax_r.legend(fontsize=7, loc="lower left")
        for ax, name in ((ax_k, "|<k, k*>|"), (ax_v, "|<v, v*>|")):
            ax.set_ylim(-0.02, 1.02)
            ax.set_title(f"Alignment {name}")
            ax.set_ylabel(name)
        for ax in (ax_r, ax_k, ax_v):
            ax.set_xscale("log")
            ax.set_xlabel("step + 1")
        return fig


def _run(task, model, record_every, constants, wall):
    k_star, v_star = task.directions
    idx = np.unique(np.r_[np.arange(0, model.n_iter_, record_every), model.n_iter_ - 1])
    final_risk = float(model.loss_curve_[-1])
    oracle = oracle_risk(task, model.lambda_curve_[-1])
    gap = (final_risk - oracle) / oracle
    k, v = model.k_, model.v_
    products = {
        "k.k*": k @ k_star,
        "k.v*": k @ v_star,
        "v.k*": v @ k_star,
        "v.v*": v @ v_star,
        "k.v": k @ v,
    }
    aligned = min(abs(products["k.k*"]), abs(products["v.v*"])) >= constants["alignment"]
    reached = bool(abs(gap) <= constants["rtol"] and aligned)
    swapped = abs(products["k.v*"]) >= constants["alignment"]
    endpoint = "oracle" if aligned else "swapped" if swapped else "other"
    return {
        "steps": idx.tolist(),
        "risk": model.loss_curve_[idx].tolist(),
        "key_alignment": model.alignment_curve_[idx, 0].tolist(),
        "value_alignment": model.alignment_curve_[idx, 1].tolist(),
        "final": {
            "risk": final_risk,
            "oracle": oracle,
            "relative_gap": gap,
            "lambda": float(model.lambda_curve_[-1]),
            **products,
            "reached": reached,
            "endpoint": endpoint,
            "seconds": wall,
        },
    }


def _swapped(task, final_lambda):
    """The swapped stationary point at each schedule's final temperature (computed once each)."""
    points = {}
    for lam in set(final_lambda.values()):
        point = swapped_point(task, lam)
        points[lam] = {k: point[k] for k in ("risk", "relative_gap", "k.v*", "v.k*", "converged")}
    return {s: points[final_lambda[s]] for s in SCHEDULES}


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
    n_seeds : int, default=2
        Runs per (initialisation, schedule).
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
    >>> SingleLocationSettings(n_features=20).replace(n_seeds=1).n_seeds
    1
    """

    seq_len: int = 5
    n_features: int = 50
    gamma: float = _GAMMA
    noise: float = 0.0
    n_steps: int = 3000
    n_seeds: int = 2
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


def single_location(settings=None, *, device="cpu", random_state=0, progress=True, **changes):
    """Projected gradient descent on single-location regression, beside the baselines.

    Parameters
    ----------
    settings : SingleLocationSettings, mapping or None, default=None
        The task, the runs and the baselines (None: the defaults).
    device : str
        Unused (the runs are NumPy); accepted as every experiment does.
    random_state : int
        Seed of the runs and rows.
    progress : bool
        Show a progress bar.
    **changes
        Settings of :class:`SingleLocationSettings` to change
        (``single_location(n_seeds=1)``).

    Returns
    -------
    SingleLocationResult
        The curves of every run, the baselines' risks and the fraction of
        runs that reached the oracle.
    """
    cfg = SingleLocationSettings.resolve(settings, changes)
    for name, value in (
        ("n_steps", cfg.n_steps),
        ("n_seeds", cfg.n_seeds),
        ("n_softmax_steps", cfg.n_softmax_steps),
        ("n_test", cfg.n_test),
        ("record_every", cfg.record_every),
    ):
        check_positive_int(value, name)
    task = SingleLocationTask(cfg.seq_len, cfg.n_features, gamma=cfg.gamma, noise=cfg.noise)
    constants = {"rtol": cfg.rtol, "alignment": cfg.alignment}
    keys, models = [], []
    for init in INITS:
        for schedule in SCHEDULES:
            for seed in range(cfg.n_seeds):
                lam = cfg.lambda_init if schedule == "decay" else cfg.constant_lambda
                keys.append({"init": init, "schedule": schedule, "seed": seed})
                models.append(
                    ErfAttentionRegressor(
                        solver="pgd",
                        lambda_init=lam,
                        lambda_schedule=schedule,
                        lambda_decay=cfg.lambda_decay,
                        init=init,
                        learning_rate_init=cfg.learning_rate,
                        max_iter=cfg.n_steps,
                        random_state=derived_seed(random_state, seed),
                        verbose=int(bool(progress)),
                    )
                )
    # Every run (starts x schedules x seeds) in one batched computation. Where a run ends
    # is what the experiment counts (reached, swapped, its gap to the oracle): at the tests'
    # size the constant-lambda runs end above the loss of predicting 0, and the estimator's
    # end-of-run "worse than no model" warning would print that once per run.
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*worse than no model", category=UserWarning)
        fit_online_batch(models, task)
    wall = (time.perf_counter() - start) / len(models)
    runs = [
        {**key, **_run(task, model, cfg.record_every, constants, wall)}
        for key, model in zip(keys, models)
    ]
    final_lambda = {
        "decay": cfg.lambda_init / (1 + cfg.lambda_decay * (cfg.n_steps - 1)),
        "constant": cfg.constant_lambda,
    }
    n_linear = cfg.n_linear or 10 * cfg.seq_len * cfg.n_features
    X, y = task.sample(n_linear, random_state=derived_seed(random_state, 101))
    X_test, y_test = task.sample(cfg.n_test, random_state=derived_seed(random_state, 102))
    fitted = LinearRegression().fit(X.reshape(len(X), -1), y)
    linear_fitted = float(np.mean((y_test - fitted.predict(X_test.reshape(cfg.n_test, -1))) ** 2))
    bayes, bayes_se = bayes_risk(task, cfg.n_test, random_state=derived_seed(random_state, 103))
    baselines = {
        "zero": task.trivial_mse,
        "linear": linear_risk(task),
        "linear_fitted": linear_fitted,
        "linear_train_rows": len(X),
        "bayes": bayes,
        "bayes_se": bayes_se,
        "oracle": {s: oracle_risk(task, final_lambda[s]) for s in SCHEDULES},
        "swapped": _swapped(task, final_lambda),
    }
    soft = SoftmaxAttentionRegressor(
        learning_rate_init=cfg.softmax_learning_rate,
        max_iter=cfg.n_softmax_steps,
        random_state=derived_seed(random_state, 104),
    )
    start = time.perf_counter()
    soft.fit_online(task)
    softmax = {
        "steps": cfg.n_softmax_steps,
        "loss": soft.loss_curve_[:: cfg.record_every].tolist(),
        "test_mse": float(np.mean((y_test - soft.predict(X_test)) ** 2)),
        "query_cosine": float(soft.alignment_curve_[-1, 0]),
        "value_cosine": float(soft.alignment_curve_[-1, 1]),
        "seconds": time.perf_counter() - start,
    }
    config = {
        "seq_len": cfg.seq_len,
        "n_features": cfg.n_features,
        "gamma": cfg.gamma,
        "noise": cfg.noise,
        "n_steps": cfg.n_steps,
        "n_seeds": cfg.n_seeds,
        "learning_rate": cfg.learning_rate,
        "lambda_init": cfg.lambda_init,
        "lambda_decay": cfg.lambda_decay,
        "constant_lambda": cfg.constant_lambda,
        "rtol": cfg.rtol,
        "alignment": cfg.alignment,
        "n_softmax_steps": cfg.n_softmax_steps,
        "seed": random_state,
    }
    return SingleLocationResult(config, runs, baselines, softmax)
