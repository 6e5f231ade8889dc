"""Batch streams drawn once: a width search and a comparison of models, with and without reuse.

``stsq_learn.engine.batch_reuse.reuse_batches`` keeps the batches an online
fit draws, so that the next fit of the same task, batch size and seed replays
them (``reproduce`` runs every experiment so). Two workloads of the
experiments, alternated in one process against the same fits drawing their
own batches (what a user's loop over widths does):

* ``search``: a width search's fits at one length: the attention model at
  each of ``widths`` and the FCN at each of ``fcn_widths`` (1,024-row
  batches), one seed, ``n_steps`` each;
* ``models``: the encodings comparison's models on one stream: the four
  families (stochastic, randomized, fixed, sinusoidal) at one width.

Each record has the time ratio reused / drawn (median of the per-repeat
ratios) and checks the numbers: every fit's final weights must be the same
bit for bit, or the entry fails.
"""

from __future__ import annotations

import contextlib
import time

import torch
from _harness import compare

from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector
from stsq_learn.engine.batch_reuse import reuse_batches
from stsq_learn.regressors import FCNSelector

CONFIG = dict(
    seq_len=32,
    n_features=2,
    n_selected=2,
    widths=(12, 16, 24, 32),
    fcn_widths=(128, 256),
    n_steps=200,
    models_seq_len=16,
    models_n_features=8,
    models_n_selected=3,
    models_width=64,
    families=("stochastic", "randomized", "fixed", "sinusoidal"),
    repeats=5,
)
QUICK = dict(n_steps=60, repeats=3)

_ADAM = dict(solver="adam", learning_rate_init=0.01, learning_rate="constant", batch_size=256)


def _search_fits(cfg):
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])
    models = [SparseTokenSelector(w, random_state=0, **_ADAM) for w in cfg["widths"]]
    models += [
        FCNSelector(
            w,
            solver="adam",
            learning_rate_init=0.001,
            learning_rate="constant",
            batch_size=1024,
            random_state=0,
        )
        for w in cfg["fcn_widths"]
    ]
    return task, models


def _models_fits(cfg):
    task = SparseTokenSelectionTask(
        cfg["models_seq_len"], cfg["models_n_features"], cfg["models_n_selected"]
    )
    models = [
        SparseTokenSelector(
            cfg["models_width"],
            positional_encoding=family,
            max_positions=8 * cfg["models_seq_len"] if family == "randomized" else None,
            random_state=0,
            **_ADAM,
        )
        for family in cfg["families"]
    ]
    return task, models


def _runner(build, cfg, reuse):
    """``fn(seed)``: the workload's fits, timed; their final weights kept for the check."""
    weights = []

    def run(seed):
        task, models = build(cfg)
        context = reuse_batches() if reuse else contextlib.nullcontext()
        t0 = time.perf_counter()
        with context:
            for model in models:
                model.fit_online(task, n_steps=cfg["n_steps"])
        seconds = time.perf_counter() - t0
        weights.append([[p.detach().clone() for p in m.net_.module_.parameters()] for m in models])
        return {"seconds": seconds, "fits": len(models)}

    run.weights = weights
    return run


def _same(a, b):
    return all(
        torch.equal(x, y) for fa, fb in zip(a, b, strict=True) for x, y in zip(fa, fb, strict=True)
    )


def run(cfg, ctx):
    out = {}
    for name, build in WORKLOADS.items():
        runners = {"reused": _runner(build, cfg, True), "drawn": _runner(build, cfg, False)}
        rec = compare(runners, [("reused", "drawn")], cfg["repeats"])
        reused, drawn = runners["reused"].weights, runners["drawn"].weights
        if not all(_same(a, b) for a, b in zip(reused, drawn, strict=True)):
            raise RuntimeError(f"{name}: the fits with reused batches ended with other weights")
        rec["same_weights"] = True
        out[name] = rec
        if ctx is not None:
            c = rec["comparisons"][0]
            ctx.log(
                f"  {name}: {int(rec['runners']['reused']['fits'])} fits in "
                f"{c['ours_seconds']:.2f} s reused, {c['peer_seconds']:.2f} s drawn "
                f"(x{c['time_ratio']:.2f}), the same weights"
            )
    return out


WORKLOADS = {"search": _search_fits, "models": _models_fits}


def table(rec):
    lines = []
    for name in WORKLOADS:
        r = rec[name]
        c = r["comparisons"][0]
        lines.append(
            (
                f"{name} ({int(r['runners']['reused']['fits'])} fits)",
                f"reused {c['ours_seconds']:.2f} s, drawn {c['peer_seconds']:.2f} s: "
                f"x{c['time_ratio']:.2f}; same weights: {r['same_weights']}",
            )
        )
    return lines
