"""``SparseTokenSelector.fit`` against the plain PyTorch loop and skorch used directly.

All runners train on the same rows (T=64, d=16, q=4, width 256, batch 256,
Adam at 0.01, a fixed number of epochs) and are scored on the same held-out
rows, one encoding draw per row:

* ``stsq-learn``: ``learn_token_block=False``, the plain loop's model (a
  ``(width, width)`` W), and the default ``pe_sampling="marginal"``;
* ``stsq-learn (full W)``: the defaults, the paper's ``(d + width, width)``
  W, the same model as the ``AttentionSelector`` that skorch runs;
* ``stsq-learn (full draws)`` and ``stsq-learn (full W, full draws)``: the
  same two with ``pe_sampling="full"``, which draws every encoding of every
  row as both peers do: the like-for-like comparisons of the data path;
* the plain loop and skorch of ``baselines.py`` (both draw all T encodings
  of every row at every step).

Early stopping is off (``n_iter_no_change=max_iter``, ``tol=0``) and the entry
checks that every epoch ran. The package's time is the whole ``fit`` call
(validation, conversion, the skorch net it builds).
"""

from __future__ import annotations

import time

import baselines
from _harness import accuracy, compare

from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector

OURS, OURS_FULL = "stsq-learn", "stsq-learn (full W)"
OURS_DRAWS, OURS_FULL_DRAWS = "stsq-learn (full draws)", "stsq-learn (full W, full draws)"

CONFIG = dict(
    seq_len=64,
    n_features=16,
    n_selected=4,
    width=256,
    n_samples=8192,
    batch_size=256,
    epochs=8,
    lr=0.01,
    n_test=4096,
    repeats=5,
)
QUICK = dict(n_samples=4096, epochs=2, n_test=2048)


def _ours(X, y, X_test, y_test, cfg, learn_token_block, pe_sampling="marginal"):
    def fit(seed):
        model = SparseTokenSelector(
            width=cfg["width"],
            solver="adam",  # the plain loop's optimiser (the default "auto" resolves to SGD)
            learning_rate="constant",
            learning_rate_init=cfg["lr"],
            batch_size=cfg["batch_size"],
            max_iter=cfg["epochs"],
            n_iter_no_change=cfg["epochs"],
            tol=0.0,
            learn_token_block=learn_token_block,
            pe_sampling=pe_sampling,
            device="cpu",
            random_state=seed,
        )
        t0 = time.perf_counter()
        model.fit(X, y)
        seconds = time.perf_counter() - t0
        if model.n_iter_ != cfg["epochs"]:
            raise RuntimeError(f"early stopping ran {model.n_iter_} of {cfg['epochs']} epochs")
        return {"seconds": seconds, **accuracy(y_test, model.predict(X_test))}

    return fit


def runners(cfg):
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])
    X, y = task.sample(cfg["n_samples"], random_state=0)
    X_test, y_test = task.sample(cfg["n_test"], random_state=1)
    kw = dict(width=cfg["width"], batch_size=cfg["batch_size"], epochs=cfg["epochs"], lr=cfg["lr"])

    def plain(seed):
        W, seconds = baselines.plain_loop_fit(X, y, seed=seed, **kw)
        return {"seconds": seconds, **accuracy(y_test, baselines.plain_predict(W, X_test))}

    def skorch(seed):
        net, seconds = baselines.skorch_fit(X, y, seed=seed, **kw)
        return {"seconds": seconds, **accuracy(y_test, baselines.skorch_predict(net, X_test))}

    return {
        OURS: _ours(X, y, X_test, y_test, cfg, learn_token_block=False),
        OURS_FULL: _ours(X, y, X_test, y_test, cfg, learn_token_block=True),
        OURS_DRAWS: _ours(X, y, X_test, y_test, cfg, learn_token_block=False, pe_sampling="full"),
        OURS_FULL_DRAWS: _ours(X, y, X_test, y_test, cfg, True, pe_sampling="full"),
        baselines.PLAIN_LOOP: plain,
        baselines.SKORCH: skorch,
    }


def warm_up():
    """Lazy imports and first kernels of every runner, outside the timings."""
    small = dict(seq_len=8, n_features=2, n_selected=2, width=8, n_samples=64, batch_size=32)
    cfg = {**CONFIG, **small, "epochs": 1, "n_test": 16}
    for fn in runners(cfg).values():
        fn(0)


def run(cfg, ctx):
    rec = compare(
        runners(cfg),
        pairs=[
            (OURS, baselines.PLAIN_LOOP),
            (OURS_FULL, baselines.SKORCH),
            (OURS_DRAWS, baselines.PLAIN_LOOP),
            (OURS_FULL_DRAWS, baselines.SKORCH),
        ],
        repeats=cfg["repeats"],
    )
    rec["rows_seen"] = cfg["n_samples"] * cfg["epochs"]
    return rec
