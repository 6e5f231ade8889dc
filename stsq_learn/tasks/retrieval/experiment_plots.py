"""The figure of the q-sparse token retrieval experiment: the three panels of its ``plot()``.

The relative MSE against the number of heads for each q, beside the bound
``1 - H/q`` of fewer heads than named tokens; both models' minimal widths
against T at H = q on log-log axes, with their laws (as the separation's
middle panel); R^2 of stochastic and fixed encodings at longer lengths.
"""

from __future__ import annotations

import numpy as np

from ...experiments._separation_plots import plot_both_models
from ...experiments._task_parts import plot_length_part


def plot_heads(res, ax):
    """Relative MSE against H per q, with the bound ``max(0, 1 - H/q)`` dotted.

    Each q's threshold level ``1 / (2q)`` is a short dashed mark at H = q; a
    q whose threshold is not at H = q within the budget is named in a note.
    """
    hd = res.heads
    heads = np.array(hd["n_heads"], float)
    missed = []
    for i, q in enumerate(hd["q_values"]):
        errors = hd["relative_mse"][str(q)]
        tried = [(h, e) for h, e in zip(heads, errors) if e is not None]
        ax.plot(*zip(*tried), "o-", color=f"C{i}", ms=6, label=f"q={q}")
        bound = [(h, b) for h, b in zip(heads, hd["bound"][str(q)]) if h <= q + 1]
        ax.plot(*zip(*bound), ":", color=f"C{i}", lw=1.2)
        level = hd.get("threshold_level", {}).get(str(q))
        if level is not None:
            ax.plot([q - 0.25, q + 0.25], [level, level], "--", color=f"C{i}", lw=1)
            if hd["threshold"][str(q)] != q:
                missed.append(q)
    ax.plot([], [], "k:", lw=1.2, label="bound $1 - H/q$ (H < q)")
    if "threshold_level" in hd:
        ax.plot([], [], "k--", lw=1, label="threshold level $1/(2q)$ at H = q")
    ax.set_xticks(heads, [str(int(h)) for h in heads])
    ax.set_xlabel("heads H")
    ax.set_ylabel("relative MSE (test)")
    ax.set_ylim(-0.03, 1.03)
    solver = hd.get("solver")
    budget = f", {hd['n_steps']} {solver.upper()} steps" if solver else ""
    ax.set_title(
        f"Retrieval: error against heads (T={hd['seq_len']}, d={hd['n_features']}, "
        f"m={hd['width']}{budget})",
        fontsize="medium",
    )
    if missed:
        names = ", ".join(f"q={q}" for q in missed)
        ax.text(
            0.02,
            0.02,
            f"no threshold at H = q for {names} within this budget\n"
            f"(relative MSE at H = q not below 1/(2q)): too few steps",
            transform=ax.transAxes,
            fontsize="small",
            color="C3",
            va="bottom",
        )
    ax.legend(fontsize="small", loc="upper right")


def plot_widths(res, ax):
    """Minimal widths of the attention model and the FCN against T (log-log), at H = q."""
    plot_both_models(res.by_length, ax)
    cfg = res.by_length.config
    ax.set_title(f"Retrieval: width against T (d={cfg['n_features']}, q=H={cfg['n_selected']})")
    for text in ax.get_legend().get_texts():
        text.set_text(text.get_text().replace("transformer (SPE)", "attention (SPE)"))


def plot_lengths(res, ax):
    """R^2 of stochastic and fixed encodings at the evaluation lengths."""
    ln = res.length
    title = f"Retrieval: length generalization (q=H={ln['n_selected']}, m={ln['width']})"
    xlabel = "evaluation length T' (log scale)"
    plot_length_part(ln, ax, symbol="T", xlabel=xlabel, ylabel="$R^2$", title=title)
