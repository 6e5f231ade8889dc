"""The classifier's seeds and single-location's erf runs as members, against one after another.

Three parts, each timed in one process with its runners alternated
(repeat r starts with runner r mod k), float32 for the classifier, one
thread, medians of the per-repeat ratios of wall-clock and of process (CPU)
time (which a shared machine disturbs less):

* ``classifier``: ``classifier_seeds`` seeds of ``SparseTokenClassifier``
  at the classification experiment's settings (80 full-batch Adam steps at
  0.1, ``n_train`` rows of d = ``n_features``, each seed its own rows, as a
  study's ``batch_seeds=True`` fits them) at each length of
  ``classifier_seq_lens``: ``batched`` (``fit_members`` with each seed's
  rows: one stacked model) against ``sequential`` (``fit`` of each seed in
  turn). The largest difference between a member's logits and its own
  fit's is reported (0: to the bit).
* ``single_location``: the experiment's erf runs (both starts, both
  temperature schedules, ``sl_seeds`` seeds each: projected GD on the
  population risk, d = ``sl_n_features``, L = ``sl_seq_len``): ``batched``
  (``fit_online_batch``: every run in one batched computation, what the
  experiment runs), ``per setting`` (``fit_online_seeds`` of each of the
  four settings: the engine's members, seeds of one estimator) and
  ``sequential`` (``fit_online`` of each run in turn).
* ``engine_step``: what a step of the engine's training loop costs with
  almost no arithmetic (``floor_members`` stacked members of the smallest
  classifier, d = L = 2, one row a step, float64), beside one such fit and
  beside the batched erf step above: why single-location's steps are not
  the engine's.
"""

from __future__ import annotations

import time

import numpy as np
from _harness import compare
from sklearn.base import clone

from stsq_learn import (
    ErfAttentionRegressor,
    SingleLocationTask,
    SparseTokenClassificationTask,
    SparseTokenClassifier,
)
from stsq_learn.engine.members import fit_members
from stsq_learn.tasks.single_location.batch import fit_online_batch, fit_online_seeds

CONFIG = dict(
    classifier_seeds=8,
    classifier_seq_lens=(8, 32),
    n_features=8,
    n_train=300,
    classifier_steps=80,
    sl_seeds=(3, 10),
    sl_n_features=50,
    sl_seq_len=5,
    sl_steps=3000,
    floor_members=12,
    floor_steps=300,
    repeats=5,
)
QUICK = dict(classifier_steps=20, sl_steps=300, floor_steps=100, repeats=3)

BATCHED, PER_SETTING, SEQUENTIAL = "batched", "per setting", "sequential"


def _classifier_runners(cfg, seq_len):
    task = SparseTokenClassificationTask(seq_len, cfg["n_features"], signal=4.0)
    est = SparseTokenClassifier(
        learning_rate_init=0.1, max_iter=cfg["classifier_steps"], batch_size="full"
    )
    n = cfg["classifier_seeds"]
    fitted = {}

    def runner(batched):
        def run(rep):
            seeds = range(rep * n, (rep + 1) * n)
            rows = [task.sample(cfg["n_train"], random_state=s) for s in seeds]
            models = [clone(est).set_params(random_state=s) for s in seeds]
            t0, c0 = time.perf_counter(), time.process_time()
            if batched:
                fit_members(models, [X for X, _ in rows], [y for _, y in rows])
            else:
                for model, (X, y) in zip(models, rows):
                    model.fit(X, y)
            seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
            fitted.setdefault(rep, []).append([m.decision_function(rows[0][0]) for m in models])
            return {"seconds": seconds, "cpu_seconds": cpu}

        return run

    return {BATCHED: runner(True), SEQUENTIAL: runner(False)}, fitted


def _erf_models(cfg, seeds):
    pgd = ErfAttentionRegressor(
        solver="pgd", max_iter=cfg["sl_steps"], lambda_decay=3e-3, learning_rate_init=0.02
    )
    lams = {"decay": 1.0, "constant": 0.1}
    return [
        [
            clone(pgd).set_params(init=i, lambda_schedule=k, lambda_init=lams[k], random_state=s)
            for s in seeds
        ]
        for i in ("sphere", "manifold")
        for k in ("decay", "constant")
    ]


def _single_location_runners(cfg, n_seeds):
    task = SingleLocationTask(cfg["sl_seq_len"], cfg["sl_n_features"])
    fitted = {}

    def runner(kind):
        def run(rep):
            settings = _erf_models(cfg, range(rep * n_seeds, (rep + 1) * n_seeds))
            t0, c0 = time.perf_counter(), time.process_time()
            if kind == BATCHED:
                fit_online_batch([m for models in settings for m in models], task)
            elif kind == PER_SETTING:
                for models in settings:
                    template = clone(models[0]).set_params(random_state=None)
                    fitted_seeds = fit_online_seeds(
                        template, task, [m.random_state for m in models]
                    )
                    models[:] = fitted_seeds
            else:
                for models in settings:
                    for m in models:
                        m.fit_online(task)
            seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
            fitted.setdefault(rep, []).append([m.k_ for models in settings for m in models])
            us = 1e6 * seconds / cfg["sl_steps"]
            return {"seconds": seconds, "cpu_seconds": cpu, "us_per_step": us}

        return run

    runners = {kind: runner(kind) for kind in (BATCHED, PER_SETTING, SEQUENTIAL)}
    return runners, fitted


def _engine_step(cfg):
    """Microseconds a step of the engine takes for the smallest classifier: one fit, S members."""
    task = SparseTokenClassificationTask(seq_len=2, n_features=2)
    X, y = task.sample(cfg["floor_steps"], random_state=0)
    est = SparseTokenClassifier(
        solver="sgd", batch_size=1, max_iter=1, dtype="float64", learning_rate_init=1e-3
    )
    S = cfg["floor_members"]

    def one(rep):
        t0 = time.perf_counter()
        clone(est).set_params(random_state=rep).fit(X, y)
        return {"seconds": (time.perf_counter() - t0)}

    def stacked(rep):
        models = [clone(est).set_params(random_state=rep * S + s) for s in range(S)]
        t0 = time.perf_counter()
        fit_members(models, X, y)
        return {"seconds": (time.perf_counter() - t0)}

    rec = compare({"one fit": one, f"{S} members": stacked}, [], cfg["repeats"])
    steps = cfg["floor_steps"]
    return {
        "one_fit_us_per_step": 1e6 * rec["runners"]["one fit"]["seconds"] / steps,
        "members_us_per_step": 1e6 * rec["runners"][f"{S} members"]["seconds"] / steps,
        "members": S,
        "runs": rec,
    }


def _cpu_ratios(rec):
    """Per pair of ``rec`` (:func:`compare`), the median of the per-repeat CPU-time ratios."""
    runs = rec["runners"]
    for c in rec["comparisons"]:
        a, b = runs[c["ours"]]["all_cpu_seconds"], runs[c["peer"]]["all_cpu_seconds"]
        c["cpu_ratio"] = sorted(x / y for x, y in zip(a, b))[len(a) // 2]
    return rec


def _largest(fitted, a, b):
    """The largest difference between the fits of runs ``a`` and ``b`` of the same repeat."""
    return max(
        float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
        for rep in fitted.values()
        for x, y in zip(rep[a], rep[b])
    )


def run(cfg, ctx):
    out = {"classifier": {}, "single_location": {}}
    for seq_len in cfg["classifier_seq_lens"]:
        runners, fitted = _classifier_runners(cfg, seq_len)
        rec = _cpu_ratios(compare(runners, [(BATCHED, SEQUENTIAL)], cfg["repeats"]))
        rec["max_logit_difference"] = _largest(fitted, 0, 1)  # a repeat's two runs
        out["classifier"][f"L={seq_len}"] = rec
        if ctx is not None:
            c = rec["comparisons"][0]
            ctx.log(
                f"  classifier L={seq_len}, {cfg['classifier_seeds']} seeds: batched "
                f"{c['ours_seconds']:.2f} s, sequential {c['peer_seconds']:.2f} s: "
                f"x{c['time_ratio']:.3f} (CPU x{c['cpu_ratio']:.3f})"
            )
    for n_seeds in cfg["sl_seeds"]:
        runners, fitted = _single_location_runners(cfg, n_seeds)
        pairs = [(BATCHED, SEQUENTIAL), (PER_SETTING, SEQUENTIAL), (BATCHED, PER_SETTING)]
        rec = _cpu_ratios(compare(runners, pairs, cfg["repeats"]))
        rec["max_k_difference"] = max(_largest(fitted, 0, 1), _largest(fitted, 0, 2))
        out["single_location"][f"{4 * n_seeds} runs"] = rec
        if ctx is not None:
            r = rec["runners"]
            ctx.log(
                f"  single-location, {4 * n_seeds} runs: batched {r[BATCHED]['us_per_step']:.0f}"
                f" us/step, per setting {r[PER_SETTING]['us_per_step']:.0f}, sequential "
                f"{r[SEQUENTIAL]['us_per_step']:.0f}"
            )
    out["engine_step"] = _engine_step(cfg)
    return out


def table(rec):
    rows = []
    for name, r in rec["classifier"].items():
        c = r["comparisons"][0]
        rows.append(
            (
                f"classifier {name}",
                f"batched {c['ours_seconds']:.2f} s, sequential {c['peer_seconds']:.2f} s: "
                f"x{c['time_ratio']:.3f} (CPU x{c['cpu_ratio']:.3f}); logits within "
                f"{r['max_logit_difference']:.1e}",
            )
        )
    for name, r in rec["single_location"].items():
        steps = {k: v["us_per_step"] for k, v in r["runners"].items()}
        ratios = ", ".join(
            f"{c['ours']} / {c['peer']} x{c['time_ratio']:.3f} (CPU x{c['cpu_ratio']:.3f})"
            for c in r["comparisons"]
        )
        rows.append(
            (
                f"single-location {name}",
                ", ".join(f"{k} {v:.0f} us/step" for k, v in steps.items())
                + f"; {ratios}; k within {r['max_k_difference']:.1e}",
            )
        )
    e = rec["engine_step"]
    rows.append(
        (
            "engine step, smallest model",
            f"one fit {e['one_fit_us_per_step']:.0f} us/step, {e['members']} members "
            f"{e['members_us_per_step']:.0f} us/step",
        )
    )
    return rows
