"""The figure of the q-sparse averaging experiment: its four panels, over one seed or several.

Every panel reads the seeds' tables together: minimal widths against N
(both models, log-log, each law drawn over the N it was fitted on) and
against q (beside the widths the isotropic floor allows), as medians with
min-max error bars and the lower bounds of seeds that reached no width
(:class:`~stsq_learn.studies.BandDisplay`); the transfer's relative MSEs as
median bars with min-max error bars beside the floor; R^2 of stochastic and
fixed encodings at longer lengths, medians with the min-max shaded.
"""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import NullFormatter, ScalarFormatter

from ...studies import BandDisplay, StudyTable


def plot_figure(results, laws, axes=None):
    """The experiment's figure from one result per seed (one result: that seed's numbers).

    Parameters
    ----------
    results : list of SparseAveragingResult
        One per seed, of the same settings.
    laws : dict of str to Law
        The growth laws of the widths against N to draw (over the N each was
        fitted on), by model.
    axes : sequence of 4 matplotlib Axes, default=None
        Where to draw (None: a new figure of one row of 4).

    Returns
    -------
    matplotlib.figure.Figure
        The figure of the four panels.
    """
    import matplotlib.pyplot as plt

    if axes is None:
        fig, axes = plt.subplots(1, 4, figsize=(22, 4.8), layout="constrained")
    else:
        axes = list(axes)
        if len(axes) != 4:
            raise ValueError(f"axes must be 4 matplotlib Axes, got {len(axes)}.")
        fig = axes[0].figure
    tables = {
        name: StudyTable.concat([getattr(r, name) for r in results])
        for name in ("by_length", "by_q", "transfer", "length")
    }
    cfg = results[0].config
    ylabel = f"smallest width reaching $R^2 \\geq {cfg['target_r2']}$"
    _widths(tables["by_length"], laws, axes[0], cfg, ylabel)
    _widths_q(tables["by_q"], axes[1], cfg, ylabel)
    for ax, x in ((axes[0], cfg["seq_lens"]), (axes[1], cfg["q_values"])):
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xticks(x, [str(v) for v in x])
        ax.xaxis.set_minor_formatter(NullFormatter())
    _transfer(tables["transfer"], axes[2])
    N, _, q = cfg["length_task"]
    BandDisplay.from_table(
        tables["length"],
        x="eval_seq_len",
        y="score",
        ax=axes[3],
        logx=True,
        colors={"stochastic": "C0", "fixed": "C3"},
        labels={pe: f"{pe} encodings (trained at N={N})" for pe in ("stochastic", "fixed")},
        xlabel="evaluation positions N' (log scale)",
        ylabel="$R^2$ over every position",
        title=f"qSA: length generalization (q={q}, m={cfg['length_width']})",
    )
    if len(results) > 1:
        fig.suptitle(f"q-sparse averaging: medians over {len(results)} seeds, min-max bands")
    return fig


def _widths(table, laws, ax, cfg, ylabel):
    """Both models' minimal widths against N, with their laws where they describe them."""
    BandDisplay.from_table(
        table,
        x="seq_len",
        y="value",
        laws=laws,
        bound="bound",
        ax=ax,
        style="errorbar",
        logx=True,
        logy=True,
        labels={"attention": "attention (SPE)", "fcn": "FCN"},
        xlabel="positions N (log scale)",
        ylabel=ylabel,
        title=f"qSA: width against N (d={cfg['n_features']}, q={cfg['n_selected']})",
    )


def _widths_q(table, ax, cfg, ylabel):
    """The attention model's minimal widths against q, beside the widths its floor allows."""
    qs, floors = table.where(seed=table["seed"][0]).xy("n_selected", "floor_width")
    BandDisplay.from_table(
        table,
        x="n_selected",
        y="value",
        theory={"isotropic floor allows": (qs, floors)} if len(qs) else None,
        bound="bound",
        ax=ax,
        style="errorbar",
        logx=True,
        logy=True,
        labels={"attention": "trained: smallest width reaching"},
        xlabel="subset size q (log scale)",
        ylabel=ylabel,
        title=f"qSA: width against q (N={cfg['q_seq_len']}, d={cfg['n_features']})",
    )


def _transfer(table, ax):
    """Median relative MSE of each transfer model, min-max error bars, beside the floor."""
    bands = table.bands("model", "relative_mse", by=())
    names = list(bands["model"])
    med, lo, hi = (np.nan_to_num(np.asarray(bands[k], float)) for k in ("median", "min", "max"))
    bars = ax.bar(
        range(len(names)),
        med,
        yerr=[med - lo, hi - med] if len(table) > len(names) else None,
        capsize=4,
        color=["C1", "C0", "C2"][: len(names)],
    )
    floor = float(np.median(table["floor"]))
    ax.axhline(floor, color="k", ls="--", lw=1, label=f"isotropic floor {floor:.3f}")
    for bar, name, top, value in zip(bars, names, hi, med):
        ratio = float(np.nanmedian(table.where(model=name)["floor_ratio"]))
        text = f"{value:.3f}" + (f"\n({ratio:.2f}x)" if np.isfinite(ratio) else "")
        x = bar.get_x() + bar.get_width() / 2
        ax.annotate(text, (x, top), ha="center", va="bottom", fontsize="small")
    ax.set_xticks(range(len(names)), [n.replace(" on ", "\non ") for n in names])
    ax.set_ylim(0, 1.45 * max([*hi, floor]) + 1e-9)
    ax.set_ylabel("relative MSE (1 - $R^2$)")
    m = table.meta
    where = f"N={m['seq_len']}, d={m['n_features']}, q={m['n_selected']}, m={m['width']}"
    ax.set_title(f"Zero-shot transfer STS$_q$ -> qSA ({where})")
    ax.legend(fontsize="small", loc="upper center")
