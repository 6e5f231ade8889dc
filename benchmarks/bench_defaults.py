"""Do the defaults give every width its floor? Error against width, with time.

For each ``(seq_len, n_selected)`` of ``settings`` and each width of
``widths`` (``large_widths`` adds more at ``seq_len=64``):

* **fit**: ``SparseTokenSelector(width=m, random_state=seed).fit(X, y)``
  with nothing else set, on ``n_train`` rows of ``make_sparse_token_selection``,
  scored on ``n_test`` other rows: test relative MSE, its ratio to
  :func:`stsq_learn.isotropic_floor` at that width, the time, the epochs run
  and what ``"auto"`` resolved to. Beside it, the peer a user had before:
  0.3.0's defaults, spelled out (Adam at 0.01, a constant rate, 200 epochs
  at most, early stopping after 10 epochs without an improvement of 1e-4,
  one rate for all of W); the time ratio is new / 0.3.0 on the same rows.
* **fit_online**: at each ``(seq_len, n_selected)`` of ``online_settings``
  and each width of ``online_widths``, ``fit_online(task)`` with the
  defaults (the planned steps), scored on the same test rows, against the
  floor.

Times are single runs, alternated (0.3.0's, then the new defaults', width by
width) in one process with the same thread count.
"""

from __future__ import annotations

import time

from _harness import accuracy

from stsq_learn import (
    SparseTokenSelectionTask,
    SparseTokenSelector,
    isotropic_floor,
    make_sparse_token_selection,
)

#: The hyperparameters 0.3.0 trained with when a user set only the width.
DEFAULTS_0_3 = dict(
    solver="adam",
    learning_rate_init=0.01,
    token_block_rate=1.0,
    learning_rate="constant",
    max_iter=200,
    n_iter_no_change=10,
)

CONFIG = dict(
    settings=((16, 3), (64, 4), (256, 4)),
    n_features=8,
    widths=(16, 64, 256, 1024),
    large_widths=(2048,),
    online_widths=(64, 256, 1024),
    online_settings=((64, 4),),
    n_train=8000,
    n_test=4000,
    seed=0,
    floor_samples=100_000,
)
QUICK = dict(
    settings=((16, 3),),
    widths=(16, 64, 256),
    large_widths=(),
    online_widths=(64,),
    online_settings=((16, 3),),
    n_train=2000,
    n_test=2000,
    floor_samples=20_000,
)


def _fit(model, X, y, X_test, y_test):
    t0 = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, **accuracy(y_test, model.predict(X_test))}


def _resolved(model):
    return {
        "solver": model.solver_,
        "learning_rate_init": model.learning_rate_init_,
        "planned_steps": model.planned_steps_,
        "epochs": model.n_iter_,
    }


def _fit_row(T, q, m, cfg, data, floor):
    X, y, X_test, y_test = data
    old = SparseTokenSelector(width=m, random_state=cfg["seed"], **DEFAULTS_0_3)
    new = SparseTokenSelector(width=m, random_state=cfg["seed"])
    before = _fit(old, X, y, X_test, y_test)
    after = _fit(new, X, y, X_test, y_test)
    return {
        "seq_len": T,
        "n_selected": q,
        "width": m,
        "floor": floor,
        "relative_mse": after["relative_mse"],
        "ratio_to_floor": after["relative_mse"] / floor,
        "seconds": after["seconds"],
        **_resolved(new),
        "relative_mse_0_3": before["relative_mse"],
        "ratio_to_floor_0_3": before["relative_mse"] / floor,
        "seconds_0_3": before["seconds"],
        "epochs_0_3": old.n_iter_,
        "time_ratio": after["seconds"] / before["seconds"],
    }


def _online_row(task, m, cfg, X_test, y_test, floor):
    model = SparseTokenSelector(width=m, random_state=cfg["seed"])
    t0 = time.perf_counter()
    model.fit_online(task)
    seconds = time.perf_counter() - t0
    err = accuracy(y_test, model.predict(X_test))["relative_mse"]
    return {
        "seq_len": task.seq_len,
        "n_selected": task.n_selected,
        "width": m,
        "floor": floor,
        "relative_mse": err,
        "ratio_to_floor": err / floor,
        "seconds": seconds,
        **_resolved(model),
    }


def run(cfg, ctx):
    d, fit_rows, online_rows = cfg["n_features"], [], []
    for T, q in cfg["settings"]:
        task = SparseTokenSelectionTask(T, d, q)
        data = (
            *make_sparse_token_selection(cfg["n_train"], T, d, q, random_state=0),
            *make_sparse_token_selection(cfg["n_test"], T, d, q, random_state=1),
        )
        widths = list(cfg["widths"]) + (list(cfg["large_widths"]) if T == 64 else [])
        online = (T, q) in {tuple(s) for s in cfg["online_settings"]}
        online_widths = list(cfg["online_widths"]) if online else []
        for m in sorted({*widths, *online_widths}):
            floor = isotropic_floor(
                T, q, m, n_samples=cfg["floor_samples"], random_state=0
            ).relative_mse
            if m in widths:
                fit_rows.append(_fit_row(T, q, m, cfg, data, floor))
                r = fit_rows[-1]
                ctx.log(
                    f"  fit T={T} q={q} width {m}: {r['ratio_to_floor']:.3f}x floor "
                    f"in {r['seconds']:.1f} s (0.3.0: {r['ratio_to_floor_0_3']:.3f}x "
                    f"in {r['seconds_0_3']:.1f} s)"
                )
            if m in online_widths:
                online_rows.append(_online_row(task, m, cfg, data[2], data[3], floor))
                r = online_rows[-1]
                ctx.log(f"  fit_online T={T} width {m}: {r['ratio_to_floor']:.3f}x floor")
    return {"fit": fit_rows, "fit_online": online_rows}


def table(rec):
    lines = []
    for r in rec["fit"]:
        label = f"fit T={r['seq_len']} q={r['n_selected']} width {r['width']}"
        lines.append(
            (
                label,
                f"{r['ratio_to_floor']:.3f}x floor ({r['relative_mse']:.4f}) in "
                f"{r['seconds']:.1f} s, {r['epochs']} epochs; 0.3.0: "
                f"{r['ratio_to_floor_0_3']:.3f}x in {r['seconds_0_3']:.1f} s; "
                f"time x{r['time_ratio']:.2f}",
            )
        )
    for r in rec["fit_online"]:
        label = f"fit_online T={r['seq_len']} q={r['n_selected']} width {r['width']}"
        lines.append(
            (
                label,
                f"{r['ratio_to_floor']:.3f}x floor ({r['relative_mse']:.4f}) in "
                f"{r['seconds']:.1f} s, {r['planned_steps']} steps",
            )
        )
    return lines
