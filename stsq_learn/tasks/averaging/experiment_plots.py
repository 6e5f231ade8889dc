"""The figure of the q-sparse averaging experiment: the four panels of its ``plot()``.

Both models' minimal widths against N on log-log axes, with their laws (as
the separation's middle panel); the attention model's minimal widths against
q with the widths its isotropic floor allows; the transfer's relative MSEs
against the floor; R^2 of stochastic and fixed encodings at longer lengths.

Each panel takes a list of results, one per seed of the same experiment:
one draws its numbers (``plot()``); several draw each curve as its median
over the seeds with the min-max shaded, each point (widths, relative MSEs)
as its median with min-max error bars (``plot_bands``).
"""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import NullFormatter

from ...experiments._bands import (
    bars,
    empty_log_range,
    every_bound,
    finite,
    legend_in_order,
    nan_extreme,
)
from ...experiments._separation_plots import plot_both_models_bands
from ...experiments._task_parts import plot_length_parts


def plot_widths(results, ax):
    """Minimal widths of the attention model and the FCN against N (log-log)."""
    res = results[0]
    plot_both_models_bands([r.by_length for r in results], ax)
    ticks = res.by_length.seq_lens
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("positions N (log scale)")
    cfg = res.by_length.config
    ax.set_title(f"qSA: width against N (d={cfg['n_features']}, q={cfg['n_selected']})")
    names = (("transformer (SPE)", "attention (SPE)"), ("log$_2$ T", "log$_2$ N"), ("T$^{", "N$^{"))
    for text in ax.get_legend().get_texts():
        label = text.get_text()
        for old, new in names:
            label = label.replace(old, new)
        text.set_text(label)


def plot_q(results, ax):
    """The attention model's minimal widths against q, and the widths its floor allows.

    Over several seeds: the minimal widths and the floor's as their median
    over the seeds that have one, with min-max error bars; every seed's
    lower bounds.
    """
    res = results[0]
    by_q = res.by_q
    qs = np.array(by_q["q_values"], float)
    if len(results) == 1:
        found = [(q, w) for q, w in zip(qs, by_q["minimal_width"]) if w is not None]
        if found:
            ax.plot(*zip(*found), "o-", color="C0", ms=7, label="trained: smallest width reaching")
        bounds = [(q, b) for q, b in zip(qs, by_q["lower_bound"]) if b is not None]
        if bounds:
            ax.plot(*zip(*bounds), "^", color="C0", mfc="none", ms=9, label="lower bound")
        floors = [(q, w) for q, w in zip(qs, by_q["floor_width"]) if w is not None]
        if floors:
            label = "isotropic floor allows"
            ax.plot(*zip(*floors), "s--", color="gray", mfc="none", ms=11, label=label)
    else:
        widths = [r.by_q["minimal_width"] for r in results]
        bars(ax, qs, widths, "o-", color="C0", ms=7, label="trained: smallest width reaching")
        every_bound(ax, qs, [r.by_q["lower_bound"] for r in results], "lower bound", color="C0")
        floors = [r.by_q["floor_width"] for r in results]
        style = dict(color="gray", mfc="none", ms=11, label="isotropic floor allows")
        bars(ax, qs, floors, "s--", **style)
    ax.set_xscale("log", base=2)
    ax.set_xticks(qs, [str(int(q)) for q in qs])
    ax.xaxis.set_minor_formatter(NullFormatter())
    if len(results) > 1:
        empty_log_range(ax, by_q.get("widths"))
    ax.set_yscale("log", base=2)
    ax.set_xlabel("subset size q (log scale)")
    ax.set_ylabel(f"smallest width reaching $R^2 \\geq {res.config['target_r2']}$")
    ax.set_title(f"qSA: width against q (N={by_q['seq_len']}, d={by_q['n_features']})")
    if len(results) == 1:
        ax.legend(fontsize="small", loc="lower right")
    else:
        legend_in_order(ax, fontsize="small", loc="lower right")


def plot_transfer(results, ax):
    """Relative MSE of the STS_q selector (on STS_q, on qSA), of the averager, and the floor.

    Over several seeds: each bar is the median over the seeds with min-max
    error bars, labelled with the median and its median ratio to the floor;
    the floor line is the seeds' median floor.
    """
    if len(results) > 1:
        _plot_transfer_bands(results, ax)
        return
    tr = results[0].transfer
    names = list(tr["relative_mse"])
    values = [tr["relative_mse"][n] for n in names]
    bars = ax.bar(range(len(names)), values, color=["C1", "C0", "C2"][: len(names)])
    ax.axhline(tr["floor"], color="k", ls="--", lw=1, label=f"isotropic floor {tr['floor']:.3f}")
    for bar, name in zip(bars, names):
        ratio = tr["floor_ratio"][name]
        text = f"{bar.get_height():.3f}" + (f"\n({ratio:.2f}x)" if ratio is not None else "")
        ax.annotate(
            text,
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize="small",
        )
    ax.set_xticks(range(len(names)), [n.replace(" on ", "\non ") for n in names])
    ax.set_ylim(0, 1.45 * max([*values, tr["floor"]]) + 1e-9)
    ax.set_ylabel("relative MSE (1 - $R^2$)")
    where = f"N={tr['seq_len']}, d={tr['n_features']}, q={tr['n_selected']}, m={tr['width']}"
    ax.set_title(f"Zero-shot transfer STS$_q$ -> qSA ({where})")
    ax.legend(fontsize="small", loc="upper center")


def _median(values):
    """The median of the finite values (NaN where none is)."""
    found = [v for v in map(finite, values) if v is not None]
    return float(np.median(found)) if found else float("nan")


def _plot_transfer_bands(results, ax):
    """:func:`plot_transfer` over several seeds: median bars, min-max error bars."""
    tr = results[0].transfer
    names = list(tr["relative_mse"])
    columns = [[r.transfer["relative_mse"][n] for r in results] for n in names]
    med = np.array([_median(col) for col in columns])
    lo = np.array([nan_extreme(col, np.min) for col in columns])
    hi = np.array([nan_extreme(col, np.max) for col in columns])
    # No seed's value: an empty bar without error bar (NaN ones make older matplotlib warn).
    bars_ = ax.bar(
        range(len(names)),
        np.nan_to_num(med),
        yerr=np.nan_to_num(np.array([med - lo, hi - med])),
        capsize=4,
        color=["C1", "C0", "C2"][: len(names)],
    )
    floor = _median([r.transfer["floor"] for r in results])
    ax.axhline(floor, color="k", ls="--", lw=1, label=f"isotropic floor {floor:.3f} (median)")
    for k, (bar, name) in enumerate(zip(bars_, names)):
        ratio = _median([r.transfer["floor_ratio"][name] for r in results])
        text = f"{med[k]:.3f}" + (f"\n({ratio:.2f}x)" if np.isfinite(ratio) else "")
        top = hi[k] if np.isfinite(hi[k]) else 0.0
        x = bar.get_x() + bar.get_width() / 2
        ax.annotate(text, (x, top), ha="center", va="bottom", fontsize="small")
    ax.set_xticks(range(len(names)), [n.replace(" on ", "\non ") for n in names])
    top = nan_extreme([*hi, floor], np.max)
    ax.set_ylim(0, 1.45 * (top if np.isfinite(top) else 1.0) + 1e-9)
    ax.set_ylabel("relative MSE (1 - $R^2$)")
    where = f"N={tr['seq_len']}, d={tr['n_features']}, q={tr['n_selected']}, m={tr['width']}"
    ax.set_title(f"Zero-shot transfer STS$_q$ -> qSA ({where})")
    ax.legend(fontsize="small", loc="upper center")


def plot_lengths(results, ax):
    """R^2 of stochastic and fixed encodings at the evaluation lengths."""
    ln = results[0].length
    title = f"qSA: length generalization (q={ln['n_selected']}, m={ln['width']})"
    xlabel = "evaluation positions N' (log scale)"
    ylabel = "$R^2$ over every position"
    lns = [r.length for r in results]
    plot_length_parts(lns, ax, symbol="N", xlabel=xlabel, ylabel=ylabel, title=title)
