"""The figure of the q-sparse averaging experiment: the four panels of its ``plot()``.

Both models' minimal widths against N on log-log axes, with their laws (as
the separation's middle panel); the attention model's minimal widths against
q with the widths its isotropic floor allows; the transfer's relative MSEs
against the floor; R^2 of stochastic and fixed encodings at longer lengths.
"""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import NullFormatter

from ...experiments._separation_plots import plot_both_models
from ...experiments._task_parts import plot_length_part


def plot_widths(res, ax):
    """Minimal widths of the attention model and the FCN against N (log-log)."""
    plot_both_models(res.by_length, ax)
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


def plot_q(res, ax):
    """The attention model's minimal widths against q, and the widths its floor allows."""
    by_q = res.by_q
    qs = np.array(by_q["q_values"], float)
    found = [(q, w) for q, w in zip(qs, by_q["minimal_width"]) if w is not None]
    if found:
        ax.plot(*zip(*found), "o-", color="C0", ms=7, label="trained: smallest width reaching")
    bounds = [(q, b) for q, b in zip(qs, by_q["lower_bound"]) if b is not None]
    if bounds:
        ax.plot(*zip(*bounds), "^", color="C0", mfc="none", ms=9, label="lower bound")
    floors = [(q, w) for q, w in zip(qs, by_q["floor_width"]) if w is not None]
    if floors:
        ax.plot(
            *zip(*floors), "s--", color="gray", mfc="none", ms=11, label="isotropic floor allows"
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(qs, [str(int(q)) for q in qs])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_yscale("log", base=2)
    ax.set_xlabel("subset size q (log scale)")
    ax.set_ylabel(f"smallest width reaching $R^2 \\geq {res.config['target_r2']}$")
    ax.set_title(f"qSA: width against q (N={by_q['seq_len']}, d={by_q['n_features']})")
    ax.legend(fontsize="small", loc="lower right")


def plot_transfer(res, ax):
    """Relative MSE of the STS_q selector (on STS_q, on qSA), of the averager, and the floor."""
    tr = res.transfer
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


def plot_lengths(res, ax):
    """R^2 of stochastic and fixed encodings at the evaluation lengths."""
    ln = res.length
    title = f"qSA: length generalization (q={ln['n_selected']}, m={ln['width']})"
    xlabel = "evaluation positions N' (log scale)"
    ylabel = "$R^2$ over every position"
    plot_length_part(ln, ax, symbol="N", xlabel=xlabel, ylabel=ylabel, title=title)
