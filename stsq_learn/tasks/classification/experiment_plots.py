"""The figure of the sparse-token classification experiment: the three panels of its ``plot()``.

The minimal theta against L with the fitted laws ``a + b log L`` (solid)
and ``c sqrt(L)`` (dotted); the query's cosine with ``xi`` after two steps
against n/d beside the theory's limit; test error against theta beside the
pooled oracle's exact error.
"""

from __future__ import annotations

import numpy as np

_COLORS = {"attention": "C0", "flat": "C1", "pooled": "C2"}
_LABELS = {"attention": "attention", "flat": "flattened logistic", "pooled": "pooled logistic"}


def plot_law(res, ax):
    """Minimal theta against L per classifier, with both fitted laws and their R^2."""
    law = res.law
    Ls = np.array(law["seq_lens"], float)
    grid = np.geomspace(Ls.min(), Ls.max(), 100)
    for name, found in law["thresholds"].items():
        pts = [(L, t) for L, t in zip(Ls, found) if t is not None]
        color = _COLORS.get(name)
        fit = law["fits"][name]
        text = ""
        if fit["log_r2"] is not None:
            text = f" (R$^2$ log {fit['log_r2']:.2f}, sqrt {fit['sqrt_r2']:.2f})"
        if pts:
            x, y = zip(*pts)
            ax.plot(x, y, "o", color=color, label=_LABELS.get(name, name) + text)
        if fit["log_a"] is not None:
            ax.plot(grid, fit["log_a"] + fit["log_b"] * np.log(grid), "-", color=color, lw=1)
            ax.plot(grid, fit["sqrt_c"] * np.sqrt(grid), ":", color=color, lw=1)
    ax.plot(Ls, law["pooled_oracle"], "x", color="k", label="pooled oracle (theory)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(Ls, [str(int(L)) for L in Ls])
    ax.set_xlabel("tokens L (log scale)")
    ax.set_ylabel(f"minimal theta for test error {law['target_error']:g}")
    ax.set_title("Signal needed: a + b log L (solid) vs c sqrt L (dotted)")
    ax.legend(fontsize=7)


def plot_alignment(res, ax):
    """The two-step query's cosine with xi against n/d at each d, beside the theory."""
    al = res.alignment
    ratios = np.array(al["ratios"], float)
    for k, d in enumerate(al["n_features"]):
        draws = al["cosine"][str(d)]
        mean = [np.nan if m is None else m for m in al["mean"][str(d)]]
        lo = [min(c) if c else np.nan for c in draws]
        hi = [max(c) if c else np.nan for c in draws]
        ax.plot(ratios, mean, "o-", color=f"C{k}", label=f"two steps, d={d}")
        ax.fill_between(ratios, lo, hi, color=f"C{k}", alpha=0.2)
    ax.plot(ratios, al["theory"], "k--", label="theory (d, n -> inf)")
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.05, 1.02)
    ax.set_xlabel("n / d (log scale)")
    ax.set_ylabel("cos(query, xi)")
    ax.set_title(f"Query after two steps (L={al['seq_len']}, theta={al['signal']:g})")
    ax.legend(fontsize=7)


def plot_error(res, ax):
    """Test error against theta at one length, beside the pooled oracle's exact error."""
    er = res.error
    thetas = np.array(er["signals"], float)
    for name, values in er["test_error"].items():
        ax.plot(thetas, values, "o-", color=_COLORS.get(name), label=_LABELS.get(name, name))
    grid = np.geomspace(thetas.min(), thetas.max(), 100) if thetas.min() > 0 else thetas
    from .theory import pooled_error

    ax.plot(grid, pooled_error(grid, er["seq_len"]), "k--", lw=1, label="pooled oracle (exact)")
    if er["attention_threshold"] is not None:
        ax.axvline(
            er["attention_threshold"],
            color=_COLORS["attention"],
            ls=":",
            label="informative share 1/2 (theory, fitted query)",
        )
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.02, 0.55)
    ax.set_xlabel("signal theta (log scale)")
    ax.set_ylabel("test error")
    ax.set_title(f"Test error against theta (L={er['seq_len']})")
    ax.legend(fontsize=7)
