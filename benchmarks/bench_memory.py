"""Peak memory of ``SparseTokenSelector.fit``, ``predict`` and ``fit_online``.

Two parts:

* **by length**: ``fit`` and ``predict`` (the default sampler) at every
  length of ``seq_lens``;
* **online by width**: ``fit_online`` for ``online_steps`` steps at
  ``online_seq_len`` (16384), batch ``online_batch_size`` (32), for every
  ``(width, pe_sampling)`` of ``online_cases``, and the ratio of the
  marginal sampler's peak at the largest width to its peak at the smallest:
  a step of the marginal sampler has no batch x T x width term, so the width
  should add only W, its gradient and Adam's two moments (reported next to
  the measured difference, with the batch x T x width floats full draws
  would add).

Each case runs in a fresh process (this file run as a script), so one case's
allocations never count towards another's, after a tiny warm-up fit (lazy
imports, first kernels). On the CPU the peak is the resident set's
high-water mark above its level just before the call (reset through
``/proc/self/clear_refs`` on Linux); on CUDA, torch's peak allocation. The
children run with glibc's ``MALLOC_MMAP_THRESHOLD_`` fixed at
``mmap_threshold`` bytes (None: the allocator's default): every larger
block is mapped when allocated and unmapped when freed, so the high-water
mark is the peak of the live memory. With the default, glibc raises the
threshold as blocks are freed and serves later blocks from its heap, and the
same run's peak moved by 20 MiB from process to process.
"""

from __future__ import annotations

import gc
import json
import os
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
    online_seq_len=16384,
    online_batch_size=32,
    online_steps=5,
    online_cases=((16, "marginal"), (1024, "marginal"), (16, "full")),
    mmap_threshold=131072,
)
QUICK = dict(seq_lens=(1024, 4096, 16384), batch_size=16, n_samples=32, online_steps=3)


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


class _Peak:
    """The extra memory of one call: ``with _Peak(cuda) as peak: ...``, then ``peak.mib``."""

    def __init__(self, cuda):
        self.cuda = cuda

    def __enter__(self):
        gc.collect()
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
        else:
            self.exact = _reset_peak()
            self.base = _rss_kib("VmRSS") if self.exact else 0
        return self

    def __exit__(self, *exc):
        if self.cuda:
            torch.cuda.synchronize()
            self.mib = (torch.cuda.max_memory_allocated() - self.base) / 2**20
            self.method = "torch.cuda.max_memory_allocated"
        else:
            self.mib = (_rss_kib("VmHWM") - self.base) / 1024
            self.method = "VmHWM - VmRSS (clear_refs)" if self.exact else "VmHWM (absolute)"


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
        with _Peak(cuda) as peak:
            if phase == "fit":
                model.fit(X, y)
            else:
                model.predict(X)
        out[f"{phase}_peak_mib"] = peak.mib
        out["method"] = peak.method
    return out


def child_online(cfg):
    """Peak extra memory (MiB) of one ``fit_online`` call of ``cfg['online_steps']`` steps."""
    device = cfg["device"]
    kw = dict(width=cfg["width"], pe_sampling=cfg["pe_sampling"], device=device, random_state=0)
    small = SparseTokenSelectionTask(16, cfg["n_features"], cfg["n_selected"])
    SparseTokenSelector(batch_size=8, **{**kw, "width": 8}).fit_online(small, n_steps=2)
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])
    model = SparseTokenSelector(batch_size=cfg["batch_size"], **kw)
    with _Peak(device.startswith("cuda")) as peak:
        model.fit_online(task, n_steps=cfg["online_steps"])
    return {
        "seq_len": cfg["seq_len"],
        "width": cfg["width"],
        "pe_sampling": cfg["pe_sampling"],
        "batch_size": cfg["batch_size"],
        "device": device,
        "fit_online_peak_mib": peak.mib,
        "method": peak.method,
    }


def _in_child(sizes, what, mmap_threshold):
    env = dict(os.environ)
    if mmap_threshold:
        env["MALLOC_MMAP_THRESHOLD_"] = str(int(mmap_threshold))
    proc = subprocess.run(
        [sys.executable, __file__, json.dumps(sizes)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"memory child ({what}) failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(cfg, ctx):
    if not sys.platform.startswith("linux"):
        return {"skipped": f"reads /proc/self/status, which {sys.platform} does not have"}
    device = cfg["device"]
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    common = {k: cfg[k] for k in ("n_features", "n_selected")}
    common.update(device=device, threads=ctx.threads)
    rows = []
    for T in cfg["seq_lens"]:
        sizes = {k: cfg[k] for k in ("width", "batch_size", "n_samples")}
        sizes.update(common, seq_len=T, kind="fit")
        rows.append(_in_child(sizes, f"seq_len={T}", cfg["mmap_threshold"]))
    rec = {"device": device, "rows": rows, "malloc_mmap_threshold": cfg["mmap_threshold"]}
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
    online = []
    for width, sampler in cfg["online_cases"]:
        sizes = dict(common, kind="online", seq_len=cfg["online_seq_len"], width=width)
        sizes.update(
            pe_sampling=sampler,
            batch_size=cfg["online_batch_size"],
            online_steps=cfg["online_steps"],
        )
        what = f"fit_online width={width} {sampler}"
        online.append(_in_child(sizes, what, cfg["mmap_threshold"]))
    if online:
        rec["online"] = online
        marginal = sorted((r["width"], r) for r in online if r["pe_sampling"] == "marginal")
        if len(marginal) >= 2 and marginal[0][1]["fit_online_peak_mib"] > 0:
            (w0, small), (w1, large) = marginal[0], marginal[-1]
            d = cfg["n_features"]
            # What the width adds by design: W ((d + m) x m floats), its gradient
            # and Adam's two moments; and what full draws would add on top, the
            # batch x T x width encodings.
            state = [4 * (d + w) * w * 4 / 2**20 for w in (w0, w1)]
            rec["online_width_ratio"] = {
                "widths": [w0, w1],
                "ratio": large["fit_online_peak_mib"] / small["fit_online_peak_mib"],
                "excess_mib": large["fit_online_peak_mib"] - small["fit_online_peak_mib"],
                "parameter_state_mib": state[1] - state[0],
                "full_encodings_mib": cfg["online_batch_size"]
                * cfg["online_seq_len"]
                * w1
                * 4
                / 2**20,
            }
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
    for r in rec.get("online", ()):
        lines.append(
            (
                f"fit_online T={r['seq_len']} width {r['width']} {r['pe_sampling']} peak",
                f"{r['fit_online_peak_mib']:.1f} MiB",
            )
        )
    if "online_width_ratio" in rec:
        w0, w1 = rec["online_width_ratio"]["widths"]
        ratio = rec["online_width_ratio"]
        lines.append(
            (f"fit_online peak width {w1} / width {w0} (marginal)", f"{ratio['ratio']:.2f}x")
        )
        if "excess_mib" in ratio:
            lines.append(
                (
                    f"fit_online width {w1} - width {w0} (marginal)",
                    f"{ratio['excess_mib']:.1f} MiB; W, gradient and Adam moments "
                    f"{ratio['parameter_state_mib']:.1f} MiB; full draws would add "
                    f"{ratio['full_encodings_mib']:.0f} MiB",
                )
            )
    return lines


if __name__ == "__main__":
    sizes = json.loads(sys.argv[1])
    torch.set_num_threads(sizes.pop("threads", 1))
    warnings.simplefilter("ignore", ConvergenceWarning)
    kind = sizes.pop("kind", "fit")
    print(json.dumps(child_online(sizes) if kind == "online" else child(sizes)))
