"""Studies with their seeds trained as one batched model, against the same studies seed by seed.

``batch_seeds=True`` trains the seeds of a study that fit the same model at
the same point as one batched model (:mod:`stsq_learn.engine.members`),
each seed's callbacks acting on its own member. Two studies, each run
both ways alternately in one process (float32, the thread count of the
run), and checked to give the same numbers:

* ``search``: :func:`~stsq_learn.studies.minimal_width` with
  ``stop_at_target=True`` over ``search_seeds`` seeds: every fit ends once
  it reaches the target on its held-out rows (a member that stops leaves
  the batched run); the seeds of a length that try one width train
  together. The widths found must be the same, seed by seed
  (``target``: the batched search at most 0.5 of the time);
* ``curve``: :func:`~stsq_learn.studies.training_curve` over
  ``curve_seeds`` seeds, measuring the alignment of W every ``every``
  steps and the test R^2 every fourth time (the convergence experiment's
  measures); the measures must agree (``target``: at most 0.6).

Reported per study: the medians of the seconds, the median of the
per-repeat ratios batched / seed by seed, the same ratio of process (CPU)
seconds, and the largest difference between the two tables' numbers.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from _harness import compare

from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector
from stsq_learn.nn import positional_alignment
from stsq_learn.studies import minimal_width, training_curve

CONFIG = dict(
    seq_len=16,
    n_features=4,
    n_selected=2,
    search_widths=(4, 8, 16, 32, 64),
    search_lengths=(8, 16),
    target=0.8,
    n_steps=300,
    n_test=1000,
    search_seeds=8,
    curve_seeds=6,
    curve_width=32,
    curve_steps=300,
    every=10,
    repeats=3,
    targets={"search": 0.5, "curve": 0.6},
)
QUICK = dict(n_steps=150, curve_steps=100, search_seeds=4, curve_seeds=3, repeats=1)


def _gamma(est):
    return positional_alignment(est.key_query_, est.n_features_in_)["gamma"]


class _TestR2:
    """R^2 on held-out rows, measured every ``stride`` steps (NaN between)."""

    def __init__(self, task, n_test, stride):
        self.X, self.y = task.sample(n_test, random_state=12345)
        self.stride = stride

    def __call__(self, est):
        step = sum(len(epoch["batches"]) for epoch in est.net_.history)
        return est.score(self.X, self.y) if step % self.stride == 0 else np.nan


def _studies(cfg):
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])
    est = SparseTokenSelector(dtype="float32")

    def search(batched):
        return minimal_width(
            est,
            task,
            list(cfg["search_widths"]),
            target=cfg["target"],
            grid={"seq_len": list(cfg["search_lengths"])},
            stop_at_target=True,
            seeds=cfg["search_seeds"],
            n_steps=cfg["n_steps"],
            n_test=cfg["n_test"],
            batch_seeds=batched,
        )

    def curve(batched):
        stride = 4 * cfg["every"]
        measures = {"gamma": _gamma, "test_r2": _TestR2(task, cfg["n_test"], stride)}
        return training_curve(
            est.set_params(width=cfg["curve_width"]),
            task,
            measures,
            every=cfg["every"],
            seeds=cfg["curve_seeds"],
            n_steps=cfg["curve_steps"],
            batch_seeds=batched,
        )

    return {
        "search": (search, ("value", "n_iter")),
        "curve": (curve, ("gamma", "test_r2", "loss")),
    }


def _runner(study, batched, tables):
    def run(rep):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0, c0 = time.perf_counter(), time.process_time()
            table = study(batched)
            seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        tables[batched] = table
        return {"seconds": seconds, "cpu_seconds": cpu}

    return run


def run(cfg, ctx):
    out = {}
    for name, (study, columns) in _studies(cfg).items():
        tables = {}
        runners = {
            "batched": _runner(study, True, tables),
            "seed by seed": _runner(study, False, tables),
        }
        rec = compare(runners, [("batched", "seed by seed")], cfg["repeats"])
        a, b = tables[True], tables[False]
        rec["max_difference"] = {
            col: float(np.nanmax(np.abs(np.asarray(a[col], float) - np.asarray(b[col], float))))
            for col in columns
        }
        cpu_a = rec["runners"]["batched"]["all_cpu_seconds"]
        cpu_b = rec["runners"]["seed by seed"]["all_cpu_seconds"]
        rec["cpu_ratio"] = sorted(x / y for x, y in zip(cpu_a, cpu_b))[len(cpu_a) // 2]
        rec["target"] = cfg["targets"][name]
        out[name] = rec
        if ctx is not None:
            c = rec["comparisons"][0]
            ctx.log(
                f"  {name}: batched {c['ours_seconds']:.2f} s, seed by seed "
                f"{c['peer_seconds']:.2f} s: x{c['time_ratio']:.3f} (CPU x{rec['cpu_ratio']:.3f}); "
                f"largest difference {rec['max_difference']}"
            )
    return {"cases": out}


def table(rec):
    lines = []
    for name, r in rec["cases"].items():
        c = r["comparisons"][0]
        lines.append(
            (
                name,
                f"batched {c['ours_seconds']:.2f} s, seed by seed {c['peer_seconds']:.2f} s: "
                f"x{c['time_ratio']:.3f} (CPU x{r['cpu_ratio']:.3f}; target <= {r['target']}); "
                f"largest difference {r['max_difference']}",
            )
        )
    return lines
