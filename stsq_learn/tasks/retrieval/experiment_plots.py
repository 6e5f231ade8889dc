"""The figure of the q-sparse token retrieval experiment: the three panels of its ``plot()``.

The relative MSE against the number of heads for each q, beside the bound
``1 - H/q`` of fewer heads than named tokens; both models' minimal widths
against T at H = q on log-log axes, with their laws (as the separation's
middle panel); R^2 of stochastic and fixed encodings at longer lengths.

Each panel takes a list of results, one per seed of the same experiment:
one draws its numbers (``plot()``); several draw each curve as its median
over the seeds with the min-max shaded, each minimal width as its median
with min-max error bars (``plot_bands``).
"""

from __future__ import annotations

import numpy as np

from ...experiments._bands import band
from ...experiments._separation_plots import plot_both_models_bands
from ...experiments._task_parts import plot_length_parts


def plot_heads(results, ax):
    """Relative MSE against H per q, with the bound ``max(0, 1 - H/q)`` dotted.

    Each q's threshold level ``1 / (2q)`` is a short dashed mark at H = q; a
    q whose threshold is not at H = q within the budget is named in a note.
    Over several seeds: each q's relative MSE is its median over the seeds
    with the min-max shaded, and the note says in how many seeds a q missed.
    """
    hd = results[0].heads
    heads = np.array(hd["n_heads"], float)
    missed = []
    for i, q in enumerate(hd["q_values"]):
        if len(results) == 1:
            errors = hd["relative_mse"][str(q)]
            tried = [(h, e) for h, e in zip(heads, errors) if e is not None]
            ax.plot(*zip(*tried), "o-", color=f"C{i}", ms=6, label=f"q={q}")
        else:
            columns = [r.heads["relative_mse"][str(q)] for r in results]
            band(ax, heads, columns, "o-", color=f"C{i}", ms=6, label=f"q={q}")
        bound = [(h, b) for h, b in zip(heads, hd["bound"][str(q)]) if h <= q + 1]
        ax.plot(*zip(*bound), ":", color=f"C{i}", lw=1.2)
        level = hd.get("threshold_level", {}).get(str(q))
        if level is not None:
            ax.plot([q - 0.25, q + 0.25], [level, level], "--", color=f"C{i}", lw=1)
            off = sum(r.heads["threshold"][str(q)] != q for r in results)
            if off:
                missed.append(q if len(results) == 1 else f"{q} ({off} of {len(results)} seeds)")
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


def plot_widths(results, ax):
    """Minimal widths of the attention model and the FCN against T (log-log), at H = q."""
    plot_both_models_bands([r.by_length for r in results], ax)
    cfg = results[0].by_length.config
    ax.set_title(f"Retrieval: width against T (d={cfg['n_features']}, q=H={cfg['n_selected']})")
    for text in ax.get_legend().get_texts():
        text.set_text(text.get_text().replace("transformer (SPE)", "attention (SPE)"))


def plot_lengths(results, ax):
    """R^2 of stochastic and fixed encodings at the evaluation lengths."""
    ln = results[0].length
    title = f"Retrieval: length generalization (q=H={ln['n_selected']}, m={ln['width']})"
    xlabel = "evaluation length T' (log scale)"
    lns = [r.length for r in results]
    plot_length_parts(lns, ax, symbol="T", xlabel=xlabel, ylabel="$R^2$", title=title)
