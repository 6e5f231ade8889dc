"""``FCNSelector`` against scikit-learn's ``MLPRegressor`` on the flattened rows.

Same rows (T=16, d=8, q=3), same hidden width, same epochs, Adam at 0.001,
minibatches of 200, no L2 penalty, every epoch run; time of the whole ``fit``
call and R^2 on the same held-out rows, at each width of ``widths``. Both
sides get the same number of threads (torch's for ``FCNSelector``, BLAS's for
``MLPRegressor``).
"""

from __future__ import annotations

import time

import baselines
from _harness import accuracy, compare

from stsq_learn import FCNSelector, SparseTokenSelectionTask

CONFIG = dict(
    seq_len=16,
    n_features=8,
    n_selected=3,
    widths=(256, 1024),
    n_samples=8192,
    epochs=20,
    batch_size=200,
    lr=0.001,
    n_test=4096,
    repeats=5,
)
QUICK = dict(n_samples=4096, epochs=5, n_test=2048, repeats=3)


def ours_name(width):
    return f"FCNSelector width {width}"


def peer_name(width):
    return f"{baselines.MLP} width {width}"


def runners(cfg):
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])
    X, y = task.sample(cfg["n_samples"], random_state=0)
    X_test, y_test = task.sample(cfg["n_test"], random_state=1)
    out = {}
    for width in cfg["widths"]:

        def ours(seed, width=width):
            model = FCNSelector(
                width=width,
                learning_rate_init=cfg["lr"],
                batch_size=cfg["batch_size"],
                max_iter=cfg["epochs"],
                n_iter_no_change=cfg["epochs"],
                tol=0.0,
                device="cpu",
                random_state=seed,
            )
            t0 = time.perf_counter()
            model.fit(X, y)
            seconds = time.perf_counter() - t0
            return {"seconds": seconds, **accuracy(y_test, model.predict(X_test))}

        def peer(seed, width=width):
            model, seconds = baselines.mlp_fit(
                X,
                y,
                width=width,
                epochs=cfg["epochs"],
                lr=cfg["lr"],
                batch_size=cfg["batch_size"],
                seed=seed,
            )
            pred = model.predict(X_test.reshape(len(X_test), -1))
            return {"seconds": seconds, **accuracy(y_test, pred)}

        out[ours_name(width)] = ours
        out[peer_name(width)] = peer
    return out


def warm_up():
    small = dict(seq_len=4, n_features=2, n_selected=2, widths=(8,), n_samples=64, epochs=1)
    small.update(batch_size=32)
    for fn in runners({**CONFIG, **small, "n_test": 16}).values():
        fn(0)


def run(cfg, ctx):
    pairs = [(ours_name(w), peer_name(w)) for w in cfg["widths"]]
    rec = compare(runners(cfg), pairs=pairs, repeats=cfg["repeats"])
    for comp, width in zip(rec["comparisons"], cfg["widths"]):
        comp["ours_runner"], comp["peer_runner"] = comp["ours"], comp["peer"]
        comp.update(ours="FCNSelector", peer=baselines.MLP, width=width)
    return rec
