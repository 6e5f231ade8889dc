"""Peak memory of ``SparseTokenSelector.fit`` and ``predict`` as the sequence grows.

Each length runs in a fresh process (this file run as a script), so one
length's allocations never count towards another's. On the CPU the peak is
the resident set's high-water mark above its level just before the call
(reset through ``/proc/self/clear_refs`` on Linux); on CUDA, torch's peak
allocation.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector

CONFIG = dict(
    seq_lens=(256, 1024, 4096, 16384),
    n_features=8,
    n_selected=4,
    width=64,
    batch_size=32,
    n_samples=64,
    device="auto",
)
QUICK = dict(seq_lens=(1024, 4096, 16384), batch_size=16, n_samples=32)


def _rss_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak():
    """Reset the process's peak RSS (Linux); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def child(cfg):
    """Peak extra memory (MiB) of one fit and one predict at ``cfg['seq_len']``, here."""
    device = cfg["device"]
    cuda = device.startswith("cuda")
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])
    small = SparseTokenSelectionTask(16, cfg["n_features"], cfg["n_selected"])
    model = SparseTokenSelector(
        width=cfg["width"], batch_size=cfg["batch_size"], max_iter=1, device=device, random_state=0
    )
    model.fit(*small.sample(cfg["batch_size"], random_state=0)).predict(small.sample(4)[0])
    X, y = task.sample(cfg["n_samples"], random_state=0)
    X, y = X.astype(np.float32), y.astype(np.float32)
    out = {"seq_len": cfg["seq_len"], "device": device}
    for phase in ("fit", "predict"):
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        else:
            exact = _reset_peak()
            base = _rss_kib("VmRSS") if exact else 0
        if phase == "fit":
            model.fit(X, y)
        else:
            model.predict(X)
        if cuda:
            torch.cuda.synchronize()
            out[f"{phase}_peak_mib"] = (torch.cuda.max_memory_allocated() - base) / 2**20
        else:
            out[f"{phase}_peak_mib"] = (_rss_kib("VmHWM") - base) / 1024
            out["method"] = "VmHWM - VmRSS (clear_refs)" if exact else "VmHWM (absolute)"
    return out


def run(cfg, ctx):
    if not sys.platform.startswith("linux"):
        return {"skipped": f"reads /proc/self/status, which {sys.platform} does not have"}
    device = cfg["device"]
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = []
    for T in cfg["seq_lens"]:
        sizes = {k: v for k, v in cfg.items() if k != "seq_lens"}
        sizes.update(seq_len=T, device=device, threads=ctx.threads)
        proc = subprocess.run(
            [sys.executable, __file__, json.dumps(sizes)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"memory child at seq_len={T} failed:\n{proc.stderr}")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    rec = {"rows": rows}
    by_T = {r["seq_len"]: r for r in rows}
    if 4096 in by_T and 16384 in by_T:
        for phase in ("fit", "predict"):
            key = f"{phase}_peak_mib"
            if by_T[4096][key] > 0:
                rec[f"{phase}_growth_4096_to_16384"] = by_T[16384][key] / by_T[4096][key]
    # Log-log slope of the peak over the two largest lengths: 1 = linear, 2 = quadratic.
    if len(rows) >= 2:
        a, b = rows[-2], rows[-1]
        for phase in ("fit", "predict"):
            key = f"{phase}_peak_mib"
            if a[key] > 0 and b[key] > 0:
                slope = np.log(b[key] / a[key]) / np.log(b["seq_len"] / a["seq_len"])
                rec[f"{phase}_loglog_slope"] = float(slope)
    return rec


def table(rec):
    lines = [
        (
            f"T={r['seq_len']} fit / predict peak",
            f"{r['fit_peak_mib']:.1f} / {r['predict_peak_mib']:.1f} MiB",
        )
        for r in rec["rows"]
    ]
    for key in ("fit_growth_4096_to_16384", "predict_growth_4096_to_16384"):
        if key in rec:
            lines.append((key.replace("_", " "), f"{rec[key]:.2f}x"))
    for key in ("fit_loglog_slope", "predict_loglog_slope"):
        if key in rec:
            lines.append((key.replace("_", " "), f"{rec[key]:.2f}"))
    return lines


if __name__ == "__main__":
    sizes = json.loads(sys.argv[1])
    torch.set_num_threads(sizes.pop("threads", 1))
    warnings.simplefilter("ignore", ConvergenceWarning)
    print(json.dumps(child(sizes)))
