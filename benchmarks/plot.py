"""Figures of a benchmark report, for the performance page.

::

    python benchmarks/plot.py FILE.json [FILE.json ...] --out DIR

Later files override the entries of earlier ones (e.g. a ``--quick`` run
for the comparisons, then a full ``--only accuracy`` run). Writes

* ``perf_time_ratio.png``: the package's time over each peer's (median of
  the per-repeat ratios; below 1 the package is faster), one bar per
  comparison, with both sides' accuracy on the bar;
* ``perf_accuracy_floor.png``: relative MSE after training per width and
  recipe, against :func:`stsq_learn.isotropic_floor` over the widths;
* ``perf_sampler_steps.png``: the ``sampler`` entry's step time of
  ``fit_online`` against the length T (log-log), marginal and full
  encoding samplers, with the time of drawing the batch itself.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from stsq_learn import isotropic_floor

ENTRY_LABELS = {"fit": "fit", "online": "fit_online"}


def load(paths):
    """The merged report; ``sources`` keeps the command and machine of every entry."""
    merged = None
    for path in paths:
        report = json.loads(Path(path).read_text())
        if merged is None:
            merged = {"results": {}, "sources": {}}
        merged["results"].update(report["results"])
        for name in report["results"]:
            merged["sources"][name] = {"command": report["command"], "machine": report["machine"]}
    return merged


def ratio_bars(results):
    """``(label, time ratio, accuracy text)`` for every comparison in ``results``."""
    bars = []
    for name, rec in results.items():
        for c in rec.get("comparisons", ()):
            if name == "fcn":
                label = f"FCN width {c['width']} vs {c['peer']}"
            else:
                variant = c["ours"].removeprefix("stsq-learn")
                label = f"{ENTRY_LABELS.get(name, name)}{variant} vs {c['peer']}"
            if "ours_r2" in c and name == "fcn":
                acc = f"R² {c['ours_r2']:.3f} vs {c['peer_r2']:.3f}"
            elif "ours_relative_mse" in c:
                acc = f"rel. MSE {c['ours_relative_mse']:.3f} vs {c['peer_relative_mse']:.3f}"
            else:
                acc = ""
            bars.append((label, c["time_ratio"], acc))
    return bars


def _subtitle(report, names):
    """Machine, date and command(s) of the entries ``names``."""
    sources = [report["sources"][n] for n in names if n in report["sources"]]
    m = sources[0]["machine"]
    load = f", load {m['load_average'][0]:.1f}" if m.get("load_average") else ""
    commands = []
    for src in sources:
        # the output path is the user's own: show its name only
        cmd = re.sub(r"--out[ =](\S+)", lambda g: f"--out {Path(g[1]).name}", src["command"])
        if cmd not in commands:
            commands.append(cmd)
    return (
        f"{m['cpu']} ({m['cpu_count']} cores{load}), {m['threads']} thread(s), "
        f"{m['date']}\n" + "\n".join(commands)
    )


def plot_ratios(report, path):
    bars = ratio_bars(report["results"])
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(bars) + 1.6))
    y = np.arange(len(bars))[::-1]
    ratios = [b[1] for b in bars]
    colors = ["tab:green" if r <= 1 else "tab:red" for r in ratios]
    ax.barh(y, ratios, color=colors, alpha=0.8)
    ax.axvline(1.0, color="k", lw=1)
    ax.set_yticks(y, [b[0] for b in bars])
    for yi, (_, r, acc) in zip(y, bars):
        ax.text(max(r, 1.0) + 0.03, yi, f"x{r:.2f}   {acc}", va="center", fontsize=8)
    ax.set_xlim(0, max([*ratios, 1.0]) + 1.0)
    ax.set_xlabel("stsq-learn time / peer time (median of paired repeats; < 1: faster)")
    names = [n for n, rec in report["results"].items() if rec.get("comparisons")]
    ax.set_title(_subtitle(report, names), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_accuracy(report, path, floor_samples=30_000):
    rec = report["results"]["accuracy"]
    cfg = rec.get("config", {})
    T, q = cfg.get("seq_len", 64), cfg.get("n_selected", 4)
    rows = [r for r in rec["rows"] if "finetuned_with_pe_samples" not in r]
    widths = sorted({r["width"] for r in rows})
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    grid = np.unique(np.geomspace(min(widths) / 2, max(widths) * 2, 9).round().astype(int))
    curve = [isotropic_floor(T, q, int(m), n_samples=floor_samples, random_state=0) for m in grid]
    ax.plot(grid, [f.relative_mse for f in curve], "k-", lw=1.5, label="isotropic floor")
    floors = [f for f in rec.get("floors", ()) if f["n_pe_samples"] == 1]
    ax.plot([f["width"] for f in floors], [f["relative_mse"] for f in floors], "ko", ms=4)
    for recipe, marker in zip(sorted({r["recipe"] for r in rows}), "sD^v"):
        pts = sorted((r["width"], r["relative_mse_k1"]) for r in rows if r["recipe"] == recipe)
        ax.plot(*zip(*pts), marker=marker, ls="--", label=f"trained, {recipe}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("width m")
    ax.set_ylabel("test relative MSE (1 - R²)")
    title = f"T={T}, q={q}: trained models against the floor"
    ax.set_title(f"{title}\n{_subtitle(report, ['accuracy'])}", fontsize=8)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_sampler(report, path):
    rows = report["results"]["sampler"]["rows"]
    cfg = report["results"]["sampler"].get("config", {})
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    series = [
        ("full_ms", "fit_online step, pe_sampling='full'", "tab:red", "s-"),
        ("marginal_ms", "fit_online step, pe_sampling='marginal'", "tab:blue", "o-"),
        ("sampling_ms", "drawing the batch (task.sample_torch)", "0.4", "^--"),
    ]
    for key, label, color, style in series:
        pts = [(r["seq_len"], r[key]) for r in rows if key in r]
        if pts:
            ax.plot(*zip(*pts), style, color=color, label=label)
    for r in rows:
        if "marginal_over_full" in r:
            ax.annotate(
                f"x{r['marginal_over_full']:.2f}",
                (r["seq_len"], r["marginal_ms"]),
                textcoords="offset points",
                xytext=(4, -12),
                fontsize=8,
                color="tab:blue",
            )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length T")
    ax.set_ylabel("milliseconds (median)")
    sizes = (
        f"batch {cfg.get('batch_size', 256)}, d={cfg.get('n_features', 16)}, "
        f"q={cfg.get('n_selected', 4)}, width {cfg.get('width', 256)}"
    )
    title = f"fit_online step time against T ({sizes}; xR: marginal / full)"
    ax.set_title(f"{title}\n{_subtitle(report, ['sampler'])}", fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reports", nargs="+", help="JSON files written by benchmarks/run.py --out")
    p.add_argument("--out", required=True, help="folder for the PNG files")
    a = p.parse_args(argv)
    report = load(a.reports)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if ratio_bars(report["results"]):
        written.append(out / "perf_time_ratio.png")
        plot_ratios(report, written[-1])
    if "rows" in report["results"].get("accuracy", {}):
        written.append(out / "perf_accuracy_floor.png")
        plot_accuracy(report, written[-1])
    if "rows" in report["results"].get("sampler", {}):
        written.append(out / "perf_sampler_steps.png")
        plot_sampler(report, written[-1])
    for path in written:
        print(f"wrote {path}")
    return written


if __name__ == "__main__":
    main()
