"""The figure of the q-sparse token retrieval experiment: the three panels of its ``plot()``.

Each panel is a :class:`~stsq_learn.studies.BandDisplay` of one study's
table, every seed's rows together (one seed draws its numbers; several,
the median with the min-max): the relative MSE against the number of heads
for each q, beside the bound ``1 - H/q`` of fewer heads than named tokens;
both models' minimal widths against T at H = q on log-log axes, each with
its theory's law drawn over the lengths it was fitted on; R^2 of stochastic
and fixed encodings at longer lengths.
"""

from __future__ import annotations

import numpy as np

from ...studies import BandDisplay, StudyTable, fit_law

LAWS = {"transformer": "log2", "fcn": "power"}
"""The law the theory gives each model's minimal width against T (drawn in the figure)."""

_LABELS = {"transformer": "attention (SPE)", "fcn": "FCN"}


def plot_figure(results, axes=None):
    """The three panels over the results of one experiment's seeds (see ``plot_bands``).

    Parameters
    ----------
    results : list of SparseRetrievalResult
        One per seed, of the same settings.
    axes : sequence of 3 matplotlib Axes, default=None
        Where to draw (None: a new figure, one row of 3 axes).

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    import matplotlib.pyplot as plt

    if axes is None:
        fig, axes = plt.subplots(1, 3, figsize=(17, 4.8), layout="constrained")
    else:
        axes = list(np.ravel(axes))
        if len(axes) != 3:
            raise ValueError(f"axes must be 3 matplotlib Axes, got {len(axes)}.")
        fig = axes[0].figure
    tables = {
        name: StudyTable.concat([getattr(r, name) for r in results])
        for name in ("heads", "widths", "length")
    }
    plot_heads(results, tables["heads"], axes[0])
    plot_widths(results, tables["widths"], axes[1])
    plot_lengths(results, tables["length"], axes[2])
    if len(results) > 1:
        fig.suptitle(f"q-sparse retrieval, median over {len(results)} seeds, band: min-max")
    return fig


def plot_heads(results, heads, ax):
    """Relative MSE against H per q, its bound ``1 - H/q`` dotted, the level ``1/(2q)`` dashed.

    A q whose threshold is not at H = q in some seed is named in a note.
    """
    cfg = results[0].config
    qs = heads.unique("n_selected")
    bound = {}
    for q in qs:
        hs = [h for h in heads.where(n_selected=q).unique("n_heads") if h <= q]
        bound[q] = (hs, [1 - h / q for h in hs])
    display = BandDisplay(
        heads.bands("n_heads", "relative_mse", by=("n_selected",)),
        x="param_n_heads",
        hue="param_n_selected",
        theory=bound,
        xlabel="heads H",
        ylabel="relative MSE (test)",
    ).plot(ax, labels={q: f"q={q}" for q in qs}, legend=False)
    for i, line in enumerate(display.theory_lines_.values()):
        line.set_linestyle(":")
        line.set_label("bound $1 - H/q$ (H <= q)" if i == 0 else "_nolegend_")
    missed = []
    for q in qs:
        color = display.lines_[q].get_color()
        ax.plot([q - 0.25, q + 0.25], [1 / (2 * q)] * 2, "--", color=color, lw=1)
        off = sum(r.threshold[str(q)] != q for r in results)
        if off:
            of = f" ({off} of {len(results)} seeds)" if len(results) > 1 else ""
            missed.append(f"q={q}{of}")
    ax.plot([], [], "k--", lw=1, label="threshold level $1/(2q)$ at H = q")
    if missed:
        ax.text(
            0.02,
            0.02,
            f"no threshold at H = q for {', '.join(missed)} within this budget\n"
            "(relative MSE at H = q not below 1/(2q)): too few steps",
            transform=ax.transAxes,
            fontsize="small",
            color="C3",
            va="bottom",
        )
    hs = heads.unique("n_heads")
    ax.set_xticks(hs, [str(h) for h in hs])
    ax.set_ylim(-0.03, 1.03)
    budget = cfg["heads_budget"]
    ax.set_title(
        f"Retrieval: error against heads (T={cfg['seq_len']}, d={cfg['n_features']}, "
        f"m={cfg['heads_width']}, {budget['n_steps']} {budget['solver'].upper()} steps)",
        fontsize="medium",
    )
    ax.legend(fontsize="small", loc="upper right")


def plot_widths(results, widths, ax):
    """Minimal widths of the attention model and the FCN against T (log-log), at H = q.

    Each model's theory law (:data:`LAWS`) is fitted to every seed's widths
    and drawn over the lengths it was fitted on; a model with fewer than 3
    widths at 2 lengths has none.
    """
    cfg = results[0].config
    laws = {}
    for name, law in LAWS.items():
        try:
            laws[name] = fit_law(*widths.where(model=name).xy("seq_len", "value"), law)
        except (KeyError, ValueError):  # too few widths for a law
            pass
    BandDisplay.from_table(
        widths,
        x="seq_len",
        y="value",
        hue="model",
        laws=laws,
        bound="bound",
        ax=ax,
        style="errorbar",
        logx=True,
        logy=True,
        labels=_LABELS,
        xlabel="T",
        ylabel=f"minimal width (R^2 >= {cfg['target_r2']})",
        title=f"Retrieval: width against T (d={cfg['n_features']}, q=H={cfg['n_selected']})",
    )
    ax.set_xlabel("sequence length T (log scale)")
    lens = widths.unique("seq_len") if len(widths) else []
    ax.set_xticks(lens, [str(t) for t in lens])
    seen = np.concatenate([widths.xy("seq_len", y)[1] for y in ("value", "bound")])
    ax.set_yticks(sorted(set(seen)), [f"{w:g}" for w in sorted(set(seen))])
    ax.minorticks_off()


def plot_lengths(results, length, ax):
    """R^2 of stochastic and fixed encodings at the evaluation lengths."""
    cfg = results[0].config
    T, _, q = cfg["length_task"]
    BandDisplay.from_table(
        length,
        x="eval_seq_len",
        y="score",
        hue="model",
        ax=ax,
        logx=True,
        colors={"stochastic": "C0", "fixed": "C3"},
        xlabel="evaluation length T' (log scale)",
        ylabel="$R^2$",
        title=f"Retrieval: length generalization (q=H={q}, m={cfg['length_width']})",
    )
    ax.axvline(T, color="gray", ls=":", lw=1, label=f"training T={T}")
    ax.axhline(0.0, color="k", lw=0.5)
    scores = np.asarray(length["score"], dtype=float)
    low = float(np.min(scores[np.isfinite(scores)], initial=0.0))
    ax.set_ylim(min(-0.1, low - 0.05), 1.02)
    ax.legend(fontsize="small", loc="lower left")
