"""Are the baselines at their best by default? The FCNs' step and the linear classifiers' C.

The claim is attention against the baselines, so the baselines must be at
their best as a user gets them, as the attention models are (their steps
follow the width: the ``defaults`` entry).

* **fcn**: every fully-connected estimator on its own task, d = 4 and
  q = 2 (``FCNSelector`` on sparse token selection, ``FCNAverager`` on
  q-sparse averaging, ``FCNRetriever`` on q-sparse token retrieval,
  ``FCNRegressor`` on single-location regression, a task without an FCN of
  its own), at its default width, for each length T of ``seq_lens`` and
  each budget of ``budgets`` online steps: ``fit_online(task, n_steps)``
  with the defaults (``learning_rate_init="auto"``, its cooldown), and with
  each step of ``steps`` under the same schedule (``learning_rate="cooldown"``);
  R^2 on ``n_test`` held-out rows, the mean over ``seeds``. The default
  passes where its R^2 is within ``tolerance`` of the sweep's best.
* **fit**: ``FCNSelector.fit`` on ``fit_rows`` rows (T = ``fit_seq_len``,
  d = ``fit_features``, q = 2), at each width of ``fit_widths``, with the
  defaults (the ``"auto"`` step of the reference plan, ``"adaptive"`` over
  the epochs) and with 0.6's (Adam at 0.001, constant, early stopping):
  R^2 on ``n_test`` other rows, the epochs run.
* **classifiers**: the linear baselines of sparse-token classification
  (``make_flat_logistic``, ``make_pooled_logistic``: scikit-learn's
  ``LogisticRegression``, whose default is ``C=1``) on ``n_train`` rows at
  each length L of ``classifier_seq_lens`` (d = ``classifier_features``,
  one informative token of signal ``classifier_signal * sqrt(L)``, where
  both are neither at chance nor perfect), with the default and with each
  ``C`` of ``cs``: accuracy on ``n_test`` rows, the mean over ``seeds``.

Every fit of a comparison draws the same batches (the same ``random_state``)
and is scored on the same rows.
"""

from __future__ import annotations

import math
import statistics
import time
import warnings

from stsq_learn import (
    FCNAverager,
    FCNRegressor,
    FCNRetriever,
    FCNSelector,
    SingleLocationTask,
    SparseAveragingTask,
    SparseRetrievalTask,
    SparseTokenClassificationTask,
    SparseTokenSelectionTask,
    make_flat_logistic,
    make_pooled_logistic,
)

CONFIG = dict(
    estimators=("FCNSelector", "FCNAverager", "FCNRetriever", "FCNRegressor"),
    seq_lens=(8, 16, 32),
    budgets=(300, 600, 2000),
    steps=(0.001, 0.003, 0.01, 0.03, 0.1),
    n_features=4,
    n_selected=2,
    seeds=(0, 1),
    n_test=4000,
    tolerance=0.03,
    classifiers=("flat", "pooled"),
    classifier_seq_lens=(8, 32, 128),
    classifier_features=8,
    classifier_signal=1.0,
    n_train=(300, 1000),
    cs=(0.01, 0.1, 1.0, 10.0, 100.0),
    fit_widths=(64, 256, 1024),
    fit_seq_len=16,
    fit_features=2,
    fit_rows=8000,
)
QUICK = dict(
    seq_lens=(8, 16),
    budgets=(300, 600),
    seeds=(0,),
    n_test=2000,
    classifier_seq_lens=(8, 32),
    n_train=(300,),
    fit_widths=(256,),
    fit_rows=2000,
)

#: Each estimator and the task it is measured on (d, q from the config).
_FCNS = {
    "FCNSelector": (FCNSelector, {}, lambda T, d, q: SparseTokenSelectionTask(T, d, q)),
    "FCNAverager": (FCNAverager, {}, lambda T, d, q: SparseAveragingTask(T, d, q)),
    "FCNRetriever": (FCNRetriever, {}, lambda T, d, q: SparseRetrievalTask(T, d, q)),
    "FCNRegressor": (
        FCNRegressor,
        {"task": "single_location"},
        lambda T, d, q: SingleLocationTask(T, d),
    ),
}
#: What 0.6's FCNs trained with when only the width was set.
DEFAULTS_0_6 = dict(learning_rate_init=0.001, learning_rate="constant")
_CLASSIFIERS = {"flat": make_flat_logistic, "pooled": make_pooled_logistic}


def _fcn_score(name, task, test, n_steps, seed, **params):
    """R^2 and step of one fit; a swept step's "worse than no model" is no news (too far)."""
    cls, fixed, _ = _FCNS[name]
    with warnings.catch_warnings():
        if params:
            warnings.filterwarnings(
                "ignore", message=r".*worse than no model", category=UserWarning
            )
        model = cls(random_state=seed, **fixed, **params).fit_online(task, n_steps=n_steps)
    return model.score(*test), model.learning_rate_init_


def _row(label, default, sweep, tolerance):
    """Default and sweep (value -> mean score) as one record: the best, its value, the gap."""
    best = max(sweep, key=sweep.get)
    gap = sweep[best] - default
    return {
        **label,
        "default": default,
        "best": sweep[best],
        "best_at": best,
        "gap": gap,
        "sweep": {str(k): v for k, v in sweep.items()},
        "ok": gap <= tolerance,
    }


def _fcn_rows(cfg, ctx):
    d, q, rows = cfg["n_features"], cfg["n_selected"], []
    for name in cfg["estimators"]:
        for T in cfg["seq_lens"]:
            task = _FCNS[name][2](T, d, q)
            test = task.sample(cfg["n_test"], random_state=10_000)
            for n_steps in cfg["budgets"]:
                t0 = time.perf_counter()
                runs = [_fcn_score(name, task, test, n_steps, s) for s in cfg["seeds"]]
                default = statistics.fmean(r2 for r2, _ in runs)
                sweep = {
                    step: statistics.fmean(
                        _fcn_score(
                            name,
                            task,
                            test,
                            n_steps,
                            s,
                            learning_rate_init=step,
                            learning_rate="cooldown",
                        )[0]
                        for s in cfg["seeds"]
                    )
                    for step in cfg["steps"]
                }
                label = {
                    "estimator": name,
                    "seq_len": T,
                    "n_steps": n_steps,
                    "default_step": runs[0][1],
                }
                rows.append(_row(label, default, sweep, cfg["tolerance"]))
                ctx.log(
                    "  {}: {} ({:.0f} s)".format(*_fcn_line(rows[-1]), time.perf_counter() - t0)
                )
    return rows


def _classifier_rows(cfg, ctx):
    rows = []
    for name in cfg["classifiers"]:
        for L in cfg["classifier_seq_lens"]:
            signal = cfg["classifier_signal"] * math.sqrt(L)
            for n_train in cfg["n_train"]:
                scores = {"default": [], **{c: [] for c in cfg["cs"]}}
                for seed in cfg["seeds"]:
                    task = SparseTokenClassificationTask(
                        L, cfg["classifier_features"], signal=signal, random_state=seed
                    )
                    X, y = task.sample(n_train, random_state=seed)
                    test = task.sample(cfg["n_test"], random_state=10_000 + seed)
                    scores["default"].append(
                        _CLASSIFIERS[name](max_iter=1000).fit(X, y).score(*test)
                    )
                    for c in cfg["cs"]:
                        model = _CLASSIFIERS[name](C=c, max_iter=1000).fit(X, y)
                        scores[c].append(model.score(*test))
                means = {k: statistics.fmean(v) for k, v in scores.items()}
                default = means.pop("default")
                label = {"classifier": name, "seq_len": L, "signal": signal, "n_train": n_train}
                rows.append(_row(label, default, means, cfg["tolerance"]))
                ctx.log("  {}: {}".format(*_classifier_line(rows[-1])))
    return rows


def _fit_rows(cfg, ctx):
    task = SparseTokenSelectionTask(cfg["fit_seq_len"], cfg["fit_features"], 2)
    X, y = task.sample(cfg["fit_rows"], random_state=0)
    test = task.sample(cfg["n_test"], random_state=10_000)
    rows = []
    for width in cfg["fit_widths"]:
        new = FCNSelector(width=width, random_state=0).fit(X, y)
        old = FCNSelector(width=width, random_state=0, **DEFAULTS_0_6).fit(X, y)
        rows.append(
            {
                "width": width,
                "default": new.score(*test),
                "default_step": new.learning_rate_init_,
                "epochs": new.n_iter_,
                "default_0_6": old.score(*test),
                "epochs_0_6": old.n_iter_,
            }
        )
        ctx.log("  {}: {}".format(*_fit_line(rows[-1])))
    return rows


def run(cfg, ctx):
    return {
        "fcn": _fcn_rows(cfg, ctx),
        "fit": _fit_rows(cfg, ctx),
        "classifiers": _classifier_rows(cfg, ctx),
    }


def _fcn_line(r):
    label = f"{r['estimator']} T={r['seq_len']} {r['n_steps']} steps"
    return label, (
        f"default {r['default']:.3f} (step {r['default_step']:.4f}), best {r['best']:.3f} at "
        f"{r['best_at']}, gap {r['gap']:+.3f}{'' if r['ok'] else ' OVER'}"
    )


def _fit_line(r):
    return f"FCNSelector.fit width {r['width']}", (
        f"default {r['default']:.3f} (step {r['default_step']:.4f}, {r['epochs']} epochs); "
        f"0.6's {r['default_0_6']:.3f} ({r['epochs_0_6']} epochs)"
    )


def _classifier_line(r):
    label = f"{r['classifier']} logistic L={r['seq_len']} n={r['n_train']}"
    return label, (
        f"C=1 {r['default']:.3f}, best {r['best']:.3f} at C={r['best_at']}, gap "
        f"{r['gap']:+.3f}{'' if r['ok'] else ' OVER'}"
    )


def table(rec):
    lines = [*map(_fcn_line, rec["fcn"]), *map(_fit_line, rec.get("fit", []))]
    return [*lines, *map(_classifier_line, rec["classifiers"])]
