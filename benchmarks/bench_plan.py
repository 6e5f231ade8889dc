"""What a study's plan says it takes, against what it takes.

Every study answers ``dry_run=True`` with its :class:`~stsq_learn.studies.StudyPlan`,
whose ``estimate()`` times a few steps of each part on this machine and
scales them (what ``stsq-learn reproduce --plan`` prints). For four studies,
each with its seeds one after another and with ``batch_seeds=True``, this
entry takes the plan's estimate (timing it too) and then runs the study,
in one process, and reports their ratio (``target``: between 1 / 1.5 and
1.5):

* ``sweep``: 2 widths at 2 lengths, ``seeds`` seeds;
* ``length_curve``: one width, scored at 4 lengths;
* ``training_curve``: measured every ``every`` steps (the alignment of W,
  and a test R^2 every fourth time);
* ``search``: :func:`~stsq_learn.studies.minimal_width` whose fits stop at
  their target (the plan counts :data:`~stsq_learn.studies.plan.STOP_SHARE`
  of their steps, and their checks).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector
from stsq_learn.nn import positional_alignment
from stsq_learn.studies import length_curve, minimal_width, sweep, training_curve

CONFIG = dict(
    seq_len=16,
    n_features=4,
    n_selected=2,
    seeds=4,
    n_steps=200,
    n_test=1000,
    every=10,
    studies=("sweep", "length_curve", "training_curve", "search"),
    bound=1.5,
)
QUICK = dict(seeds=2, n_steps=80, n_test=500)


def _gamma(est):
    return positional_alignment(est.key_query_, est.n_features_in_)["gamma"]


class _TestR2:
    def __init__(self, task, n_test, stride):
        self.X, self.y = task.sample(n_test, random_state=12345)
        self.stride = stride

    def __call__(self, est):
        step = sum(len(epoch["batches"]) for epoch in est.net_.history)
        return est.score(self.X, self.y) if step % self.stride == 0 else np.nan


def studies(cfg):
    """Name to ``study(batch_seeds, dry_run)``."""
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])
    est = SparseTokenSelector(dtype="float32")
    common = dict(seeds=cfg["seeds"], n_steps=cfg["n_steps"])
    grid = {"seq_len": [8, 16]}
    return {
        "sweep": lambda b, d: sweep(
            est,
            task,
            {"width": [8, 32], **grid},
            n_test=cfg["n_test"],
            batch_seeds=b,
            dry_run=d,
            **common,
        ),
        "length_curve": lambda b, d: length_curve(
            est.set_params(width=16),
            task,
            [8, 16, 32, 64],
            n_test=cfg["n_test"],
            batch_seeds=b,
            dry_run=d,
            **common,
        ),
        "training_curve": lambda b, d: training_curve(
            est.set_params(width=32),
            task,
            {"gamma": _gamma, "test_r2": _TestR2(task, cfg["n_test"], 4 * cfg["every"])},
            every=cfg["every"],
            batch_seeds=b,
            dry_run=d,
            **common,
        ),
        "search": lambda b, d: minimal_width(
            est,
            task,
            [4, 8, 16, 32, 64],
            target=0.8,
            grid=grid,
            stop_at_target=True,
            n_test=cfg["n_test"],
            batch_seeds=b,
            dry_run=d,
            **common,
        ),
    }


def run(cfg, ctx):
    out = {}
    made = studies(cfg)
    for name in cfg["studies"]:
        for batched in (False, True):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                plan = made[name](batched, True)
                planned = sum(p["seconds"] for p in plan.estimate())
                estimating = time.perf_counter() - t0
                t0 = time.perf_counter()
                made[name](batched, False)
                seconds = time.perf_counter() - t0
            key = f"{name}, {'batched' if batched else 'seed by seed'}"
            out[key] = {
                "planned_seconds": planned,
                "seconds": seconds,
                "ratio": planned / seconds,
                "estimate_seconds": estimating,
                "fits": plan.fits,
                "steps": plan.steps,
            }
            if ctx is not None:
                ctx.log(
                    f"  {key}: plan {planned:.1f} s, run {seconds:.1f} s: "
                    f"x{planned / seconds:.2f} (estimating took {estimating:.1f} s)"
                )
    return {"bound": cfg["bound"], "cases": out}


def table(rec):
    return [
        (
            name,
            f"plan {r['planned_seconds']:.1f} s, run {r['seconds']:.1f} s: plan / run "
            f"x{r['ratio']:.2f} (within x{rec['bound']} either way: "
            f"{1 / rec['bound'] <= r['ratio'] <= rec['bound']})",
        )
        for name, r in rec["cases"].items()
    ]
