"""The shared part of the benchmarks: alternating timer, medians, ratios, report.

An entry is a module ``bench_<name>.py`` beside this file with

* ``CONFIG``: its sizes at full size (a dict), and ``QUICK``: what ``--quick``
  changes;
* ``run(cfg, ctx) -> dict``: runs it with the merged ``cfg`` and returns a
  JSON-ready record (``{"skipped": "why"}`` when it cannot run here);
* optionally ``warm_up()`` (one-time costs paid before any timing) and
  ``table(rec) -> [(label, text), ...]`` (its lines of the printed table;
  records with ``comparisons`` get a default).

Entries that compare the package with peers build their record with
:func:`compare`: it runs every runner ``repeats`` times in one process,
rotating which goes first, and reports for each runner its median seconds
and accuracy, and for each (ours, peer) pair the median of the per-repeat
time ratios (ours / peer: below 1 means the package is faster).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import torch
from sklearn.metrics import r2_score

from stsq_learn import relative_mse

ACCURACY_KEYS = ("relative_mse", "r2")


@dataclass
class Context:
    """What every entry gets besides its sizes."""

    quick: bool = False
    threads: int = 1
    log: Callable[[str], None] = print


@contextlib.contextmanager
def timing_run():
    """Silence the estimators' "worse than no model" warning of runs that only time steps.

    A timing run of a few steps is not there to learn: the warning that it
    ended worse than predicting 0 is true and useless, and printed by every
    such run it would teach readers to ignore it. Only that warning, only in
    the block (as ``stsq_learn.experiments`` does for ``reproduce --plan``).
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*worse than no model", category=UserWarning)
        yield


def merge_config(module, quick=False, overrides=None):
    """An entry's sizes: ``CONFIG``, then ``QUICK`` under ``--quick``, then ``overrides``."""
    cfg = dict(module.CONFIG)
    if quick:
        cfg.update(getattr(module, "QUICK", {}))
    unknown = set(overrides or {}) - set(cfg)
    if unknown:
        raise ValueError(
            f"unknown setting(s) {sorted(unknown)} for this entry; it has {sorted(cfg)}"
        )
    cfg.update(overrides or {})
    return cfg


def accuracy(y_true, y_pred):
    """Relative MSE (the package's own measure) and R^2 of a prediction."""
    return {
        "relative_mse": relative_mse(y_true, y_pred),
        "r2": float(r2_score(y_true, np.asarray(y_pred).reshape(np.shape(y_true)))),
    }


def median(values):
    return float(statistics.median(values))


def compare(runners, pairs, repeats):
    """Alternate ``runners`` in one process; medians per runner and ratios per pair.

    Parameters
    ----------
    runners : dict of str to callable
        ``name -> fn(seed) -> {"seconds": float, "relative_mse": float, "r2": float, ...}``.
        Extra numeric keys are kept (as medians) too.
    pairs : list of (str, str)
        ``(ours, peer)`` names to compare.
    repeats : int
        Runs of every runner; repeat ``r`` starts with runner ``r mod len(runners)``.

    Returns
    -------
    dict
        ``runners``: per name the medians and every run; ``comparisons``: per
        pair ``time_ratio`` (median of the per-repeat ratios ours / peer),
        ``ratio_of_medians``, ``ratio_of_best`` and both sides' accuracy.
    """
    names = list(runners)
    runs = {n: [] for n in names}
    for rep in range(repeats):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            runs[name].append(runners[name](rep))
    out = {"runners": {}, "comparisons": []}
    for name in names:
        rec = {}
        for key in runs[name][0]:
            values = [r[key] for r in runs[name]]
            if all(isinstance(v, (int, float)) for v in values):
                rec[key] = median(values)
                rec[f"all_{key}"] = values
            else:
                rec[key] = values[0]
        out["runners"][name] = rec
    for ours, peer in pairs:
        a, b = runs[ours], runs[peer]
        ta, tb = [r["seconds"] for r in a], [r["seconds"] for r in b]
        comp = {
            "ours": ours,
            "peer": peer,
            "time_ratio": median([x / y for x, y in zip(ta, tb)]),
            "ratio_of_medians": median(ta) / median(tb),
            "ratio_of_best": min(ta) / min(tb),
            "ours_seconds": median(ta),
            "peer_seconds": median(tb),
        }
        for key in ACCURACY_KEYS:
            if key in a[0] and key in b[0]:
                comp[f"ours_{key}"] = median([r[key] for r in a])
                comp[f"peer_{key}"] = median([r[key] for r in b])
        out["comparisons"].append(comp)
    return out


def comparison_table(rec):
    """Default table lines of a record built by :func:`compare`."""
    lines = []
    for name, r in rec["runners"].items():
        acc = "  ".join(f"{k} {r[k]:.4f}" for k in ACCURACY_KEYS if k in r)
        lines.append((f"{name}", f"{r['seconds']:.3f} s  {acc}"))
    for c in rec["comparisons"]:
        acc = "  ".join(
            f"{k} {c[f'ours_{k}']:.4f} vs {c[f'peer_{k}']:.4f}"
            for k in ACCURACY_KEYS
            if f"ours_{k}" in c
        )
        lines.append((f"{c['ours']} / {c['peer']}", f"time x{c['time_ratio']:.2f}  {acc}"))
    return lines


def machine_info(threads):
    """The machine, the software and the load: what the figures depend on."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    import sklearn
    import skorch

    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "platform": platform.platform(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "scikit-learn": sklearn.__version__,
        "skorch": skorch.__version__,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def format_table(results, modules):
    """The results as plain text, one figure per line."""
    lines = []
    for name, rec in results.items():
        lines.append(f"== {name} ({rec.get('wall_seconds', 0):.0f} s)")
        if "skipped" in rec:
            lines.append(f"   skipped: {rec['skipped']}")
            continue
        table = getattr(modules[name], "table", None)
        rows = table(rec) if table else comparison_table(rec) if "comparisons" in rec else []
        width = max((len(label) for label, _ in rows), default=0)
        lines += [f"   {label:<{width}}  {text}" for label, text in rows]
    return "\n".join(lines)


def write_report(path, report):
    with open(path, "w") as f:
        json.dump(report, f, indent=2, default=_jsonable)
        f.write("\n")


def _jsonable(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
