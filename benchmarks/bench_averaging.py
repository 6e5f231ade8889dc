"""q-sparse averaging: what a step costs, and how close the defaults end to the floor.

A qSA row asks N questions, one per position, over the same tokens and
encodings; every encoding is in some subset, so all N are drawn (the marginal
sampler of sparse token selection does not apply). For each length N of
``seq_lens`` (d, q and the width as set):

* **step**: seconds per step of ``fit_online`` (median of the timed steps,
  as in the ``sampler`` entry), alternated in one process, for three runners
  that see the same number of queries per step (the defaults otherwise):

  - ``averager``: ``SparseTokenAverager`` with ``batch_size="auto"``
    (``ceil(256 / N)`` rows of N queries);
  - ``selector_marginal``: ``SparseTokenSelector`` at ``rows * N`` rows of
    one query, the marginal sampler (its default);
  - ``selector_full``: the same with ``pe_sampling="full"`` (all N encodings
    of every row drawn, as the averager must).

  Ratios: averager / selector_full (the same draws, N queries sharing them)
  and averager / selector_marginal.
* **fit**: at ``fit_seq_len``, ``SparseTokenAverager(width, random_state)``
  with the defaults on ``n_train`` rows against
  :func:`stsq_learn.isotropic_floor` ``(N, q, width)`` (the per-query floor),
  for each batch size of ``fit_batch_sizes`` ("auto" is the default), with
  the time of each fit.
"""

from __future__ import annotations

import math
import time

from _harness import accuracy, compare
from bench_sampler import step_seconds

from stsq_learn import (
    SparseAveragingTask,
    SparseTokenAverager,
    SparseTokenSelectionTask,
    SparseTokenSelector,
    isotropic_floor,
    make_sparse_averaging,
)

CONFIG = dict(
    seq_lens=(16, 64, 256),
    n_features=8,
    n_selected=4,
    width=256,
    warmup_steps=2,
    timed_steps=10,
    repeats=5,
    fit_seq_len=64,
    fit_batch_sizes=("auto", 16),
    n_train=2000,
    n_test=500,
    seed=0,
)
QUICK = dict(seq_lens=(16, 64), timed_steps=5, repeats=3, fit_batch_sizes=("auto",))


def _step_runners(N, cfg):
    d, q, m = cfg["n_features"], cfg["n_selected"], cfg["width"]
    qsa, sts = SparseAveragingTask(N, d, q), SparseTokenSelectionTask(N, d, q)
    rows = math.ceil(256 / N)
    steps = (cfg["warmup_steps"], cfg["timed_steps"])

    def averager(seed):
        model = SparseTokenAverager(m, random_state=seed)
        return {"seconds": step_seconds(model, qsa, *steps)[0], "queries": rows * N}

    def selector(sampling):
        def run(seed):
            model = SparseTokenSelector(
                m, pe_sampling=sampling, batch_size=rows * N, random_state=seed
            )
            return {"seconds": step_seconds(model, sts, *steps)[0], "queries": rows * N}

        return run

    return {
        "averager": averager,
        "selector_full": selector("full"),
        "selector_marginal": selector("marginal"),
    }


def _fit_rows(cfg):
    N, d, q, m = cfg["fit_seq_len"], cfg["n_features"], cfg["n_selected"], cfg["width"]
    X, y = make_sparse_averaging(cfg["n_train"], N, d, q, random_state=0)
    X_test, y_test = make_sparse_averaging(cfg["n_test"], N, d, q, random_state=1)
    floor = isotropic_floor(N, q, m, random_state=0).relative_mse
    out = []
    for batch in cfg["fit_batch_sizes"]:
        model = SparseTokenAverager(m, batch_size=batch, random_state=cfg["seed"])
        t0 = time.perf_counter()
        model.fit(X, y)
        seconds = time.perf_counter() - t0
        err = accuracy(y_test.reshape(-1, d), model.predict(X_test).reshape(-1, d))
        out.append(
            {
                "seq_len": N,
                "batch_size": batch,
                "floor": floor,
                "relative_mse": err["relative_mse"],
                "ratio_to_floor": err["relative_mse"] / floor,
                "seconds": seconds,
                "planned_steps": model.planned_steps_,
            }
        )
    return out


def run(cfg, ctx):
    steps = {}
    for N in cfg["seq_lens"]:
        rec = compare(
            _step_runners(N, cfg),
            [("averager", "selector_full"), ("averager", "selector_marginal")],
            cfg["repeats"],
        )
        steps[str(N)] = rec
        c = rec["comparisons"]
        ctx.log(
            f"  N={N}: averager {rec['runners']['averager']['seconds'] * 1e3:.1f} ms a step, "
            f"x{c[0]['time_ratio']:.2f} the full-sampler selector, "
            f"x{c[1]['time_ratio']:.2f} the marginal one (same queries)"
        )
    fits = _fit_rows(cfg)
    for r in fits:
        ctx.log(f"  fit batch {r['batch_size']}: {r['ratio_to_floor']:.3f}x floor")
    return {"steps": steps, "fit": fits}


def table(rec):
    lines = []
    for N, r in rec["steps"].items():
        full, marginal = r["comparisons"]
        lines.append(
            (
                f"step N={N} ({int(r['runners']['averager']['queries'])} queries)",
                f"averager {r['runners']['averager']['seconds'] * 1e3:.1f} ms; "
                f"x{full['time_ratio']:.2f} selector (full draws), "
                f"x{marginal['time_ratio']:.2f} selector (marginal)",
            )
        )
    for r in rec["fit"]:
        lines.append(
            (
                f"fit N={r['seq_len']} batch {r['batch_size']}",
                f"{r['ratio_to_floor']:.3f}x floor ({r['relative_mse']:.4f}) in "
                f"{r['seconds']:.1f} s, {r['planned_steps']} steps",
            )
        )
    return lines
