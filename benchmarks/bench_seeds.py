"""Seeds trained as one batched model against the same fits one after another.

``fit_online_members`` trains S seeds of one estimator together, as one
model with a member axis, and splits them back into S fitted estimators
(each its own fit, to float rounding). For each model of ``models`` and
each S of ``seeds``, two runners alternate in one process (float32, the
thread count of the run):

* ``batched``: ``fit_online_members`` of S clones (seeds ``r S .. r S + S -
  1`` at repeat r), the whole call timed (validation, the members' starting
  losses, the run, the judgement and the split);
* ``sequential``: ``fit_online`` of the same S clones in turn.

Reported per model and S: the medians of the seconds, the median of the
per-repeat ratios batched / sequential (``target``: at most 0.35 for S = 8
seeds of SparseTokenSelector), the same ratio of process (CPU) seconds,
which a loaded machine disturbs less, and the largest difference between
a batched member's weights and its sequential fit's (float32 rounding).
"""

from __future__ import annotations

import time
import warnings

from _harness import compare
from sklearn.base import clone

from stsq_learn import FCNSelector, SparseTokenSelectionTask, SparseTokenSelector
from stsq_learn.engine.members import fit_online_members

CONFIG = dict(
    seq_len=16,
    n_features=4,
    n_selected=2,
    width=32,
    n_steps=300,
    seeds=(3, 8),
    models=("attention", "fcn"),
    repeats=5,
    target=0.35,
)
QUICK = dict(n_steps=60, repeats=3)

MODELS = {"attention": SparseTokenSelector, "fcn": FCNSelector}


def _runner(cfg, model, n_seeds, batched):
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])
    est = MODELS[model](cfg["width"], dtype="float32")
    weights = {}

    def run(rep):
        seeds = range(rep * n_seeds, (rep + 1) * n_seeds)
        models = [clone(est).set_params(random_state=s) for s in seeds]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*worse than no model")
            t0, c0 = time.perf_counter(), time.process_time()
            if batched:
                fit_online_members(models, task, n_steps=cfg["n_steps"])
            else:
                for m in models:
                    m.fit_online(task, n_steps=cfg["n_steps"])
            seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        for seed, m in zip(seeds, models):
            weights[seed] = [p.detach().clone() for p in m.net_.module_.parameters()]
        return {"seconds": seconds, "cpu_seconds": cpu}

    run.weights = weights
    return run


def run(cfg, ctx):
    out = {}
    for model in cfg["models"]:
        for n_seeds in cfg["seeds"]:
            runners = {
                "batched": _runner(cfg, model, n_seeds, True),
                "sequential": _runner(cfg, model, n_seeds, False),
            }
            rec = compare(runners, [("batched", "sequential")], cfg["repeats"])
            a, b = runners["batched"].weights, runners["sequential"].weights
            rec["max_weight_difference"] = max(
                float((x - y).abs().max()) for s in a for x, y in zip(a[s], b[s], strict=True)
            )
            cpu_a = rec["runners"]["batched"]["all_cpu_seconds"]
            cpu_b = rec["runners"]["sequential"]["all_cpu_seconds"]
            rec["cpu_ratio"] = sorted(x / y for x, y in zip(cpu_a, cpu_b))[len(cpu_a) // 2]
            out[f"{model}, {n_seeds} seeds"] = rec
            if ctx is not None:
                c = rec["comparisons"][0]
                ctx.log(
                    f"  {model}, S={n_seeds}: batched {c['ours_seconds']:.2f} s, sequential "
                    f"{c['peer_seconds']:.2f} s: x{c['time_ratio']:.3f} "
                    f"(CPU x{rec['cpu_ratio']:.3f})"
                )
    return {"target": cfg["target"], "cases": out}


def table(rec):
    lines = []
    for name, r in rec["cases"].items():
        c = r["comparisons"][0]
        lines.append(
            (
                name,
                f"batched {c['ours_seconds']:.2f} s, sequential {c['peer_seconds']:.2f} s: "
                f"x{c['time_ratio']:.3f} (CPU x{r['cpu_ratio']:.3f}; target "
                f"<= {rec['target']} at 8 seeds of the attention model); weights within "
                f"{r['max_weight_difference']:.1e}",
            )
        )
    return lines
