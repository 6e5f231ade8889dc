"""``SparseTokenSelector.fit_online`` against the plain PyTorch loop, both drawing batches.

All train for ``n_steps`` steps on a fresh batch of the task at every step
(T=64, d=16, q=4, width 256, batch 256, Adam at 0.01), each drawing its own
batches, and are scored on the same held-out rows. The package runs
``learn_token_block=False``, the plain loop's model, twice: with the default
``pe_sampling="marginal"`` (``stsq-learn``) and with ``"full"``, which draws
every encoding of every row as the plain loop does (``stsq-learn (full
draws)``, the like-for-like comparison).
"""

from __future__ import annotations

import time

import baselines
from _harness import accuracy, compare

from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector

OURS, OURS_DRAWS = "stsq-learn", "stsq-learn (full draws)"

CONFIG = dict(
    seq_len=64,
    n_features=16,
    n_selected=4,
    width=256,
    batch_size=256,
    n_steps=64,
    lr=0.01,
    n_test=4096,
    repeats=5,
)
QUICK = dict(n_steps=24, n_test=2048)


def runners(cfg):
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])
    X_test, y_test = task.sample(cfg["n_test"], random_state=1)
    rows = cfg["n_steps"] * cfg["batch_size"]

    def ours(pe_sampling):
        def fit(seed):
            model = SparseTokenSelector(
                width=cfg["width"],
                pe_sampling=pe_sampling,
                solver="adam",  # the plain loop's optimiser (the default "auto" resolves to SGD)
                learning_rate="constant",
                learning_rate_init=cfg["lr"],
                batch_size=cfg["batch_size"],
                learn_token_block=False,
                device="cpu",
                random_state=seed,
            )
            t0 = time.perf_counter()
            model.fit_online(task, n_steps=cfg["n_steps"])
            seconds = time.perf_counter() - t0
            acc = accuracy(y_test, model.predict(X_test))
            return {"seconds": seconds, "samples_per_second": rows / seconds, **acc}

        return fit

    def plain(seed):
        W, seconds = baselines.plain_loop_online(
            seq_len=cfg["seq_len"],
            n_features=cfg["n_features"],
            n_selected=cfg["n_selected"],
            width=cfg["width"],
            batch_size=cfg["batch_size"],
            n_steps=cfg["n_steps"],
            lr=cfg["lr"],
            seed=seed,
        )
        acc = accuracy(y_test, baselines.plain_predict(W, X_test))
        return {"seconds": seconds, "samples_per_second": rows / seconds, **acc}

    return {OURS: ours("marginal"), OURS_DRAWS: ours("full"), baselines.PLAIN_LOOP: plain}


def warm_up():
    small = dict(seq_len=8, n_features=2, n_selected=2, width=8, batch_size=16, n_steps=2)
    for fn in runners({**CONFIG, **small, "n_test": 16}).values():
        fn(0)


def run(cfg, ctx):
    pairs = [(OURS, baselines.PLAIN_LOOP), (OURS_DRAWS, baselines.PLAIN_LOOP)]
    rec = compare(runners(cfg), pairs=pairs, repeats=cfg["repeats"])
    for c in rec["comparisons"]:
        # samples/s ratio: how many times as many rows per second the package trains
        c["throughput_ratio"] = 1.0 / c["time_ratio"]
    return rec
