"""The q-sparse averaging experiment's parts: the search against q, and zero-shot transfer."""

from __future__ import annotations

from sklearn.base import clone

from ...encodings.floor import isotropic_floor
from ...experiments._common import derived_seed, planned_steps, progress_bar, train_online
from ...experiments._task_parts import test_rows
from ...experiments._width_search import floor_widths, search_bracket
from .. import SparseTokenSelectionTask
from ..selection.estimators import SparseTokenSelector
from .estimators import SparseTokenAverager

_FLOOR_SAMPLES = 20_000
"""Rows simulated per isotropic floor (standard error about 0.001 near R^2 = 0.9)."""


def search_q(
    tasks, estimator, grid, n_steps, n_val, target, random_state, progress, stop_fits=False
):
    """The search against q: one bracketed search per q, from its start width.

    With ``stop_fits``, each fit stops once it reaches ``target`` on the
    search's held-out rows.
    """
    out = {
        "seq_len": tasks[0].seq_len,
        "n_features": tasks[0].n_features,
        "q_values": [t.n_selected for t in tasks],
        "widths": list(grid),
        "n_steps": n_steps,
        "scores": {},
        "minimal_width": [],
        "lower_bound": [],
        "floor_width": [],
    }
    minimal = out["minimal_width"]
    with progress_bar(len(tasks), "qsa: searches against q", enabled=progress) as bar:
        for task in tasks:
            q = task.n_selected
            fw = floor_widths([task.seq_len], q, grid, target, n_samples=_FLOOR_SAMPLES)[0]
            out["floor_width"].append(fw)
            if minimal and minimal[-1] is None:
                found = {}  # the previous q reached no width: this one is assumed not to
            else:
                # The larger of the floor's width and the previous q's (widths grow with q).
                begin = grid[-1] if fw is None else max(fw, minimal[-1] if minimal else fw)
                found = search_bracket(
                    estimator,
                    task,
                    grid,
                    grid.index(begin),
                    n_steps,
                    n_val,
                    target,
                    derived_seed(random_state, 300 + q),
                    progress,
                    f"qsa: q={q}",
                    stop_fits=stop_fits,
                )
            out["scores"][str(q)] = {str(w): s for w, s in sorted(found.items())}
            reached = [w for w, s in sorted(found.items()) if s >= target]
            minimal.append(reached[0] if reached else None)
            failed = [w for w, s in found.items() if s < target]
            inherited = out["lower_bound"][-1] if not found and out["lower_bound"] else None
            out["lower_bound"].append(None if reached else max(failed, default=inherited))
            bar.update()
    return out


def transfer(task, estimator, width, n_steps, n_test, random_state, progress):
    """Selector trained on STS_q, used on qSA with no training; averager trained on qSA."""
    N, d, q = task.seq_len, task.n_features, task.n_selected
    sts = SparseTokenSelectionTask(N, d, q)
    averager = clone(estimator).set_params(width=width)
    selector = SparseTokenSelector(**averager.get_params())
    train_online(selector, sts, n_steps, desc="qsa: selector on STS_q", progress=progress)
    train_online(averager, task, n_steps, desc="qsa: averager on qSA", progress=progress)
    X, y = test_rows(task, n_test, derived_seed(random_state, 21))
    X_sts, y_sts = test_rows(sts, n_test, derived_seed(random_state, 22))
    transferred = SparseTokenAverager.from_selector(selector, n_selected=q)
    rel = {
        "selector on STS_q": 1 - float(selector.score(X_sts, y_sts)),
        "selector on qSA": 1 - float(transferred.score(X, y)),
        "averager on qSA": 1 - float(averager.score(X, y)),
    }
    floor = isotropic_floor(N, q, width, random_state=derived_seed(random_state, 23)).relative_mse
    return {
        "seq_len": N,
        "n_features": d,
        "n_selected": q,
        "width": width,
        "n_steps": {
            "selector": planned_steps(selector, n_steps),
            "averager": planned_steps(averager, n_steps),
        },
        "batch_size": {"selector": selector.batch_size, "averager": averager.batch_size},
        "relative_mse": rel,
        "floor": float(floor),
        "floor_ratio": {k: v / floor if floor > 0 else None for k, v in rel.items()},
    }
