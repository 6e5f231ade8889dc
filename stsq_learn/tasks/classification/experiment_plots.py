"""The figure of the sparse-token classification experiment: the three panels of its ``plot()``.

The minimal theta against L with the fitted laws ``a + b log L`` (solid)
and ``c sqrt(L)`` (dotted); the query's cosine with ``xi`` after two steps
against n/d beside the theory's limit; test error against theta beside the
pooled oracle's exact error.

Each panel takes a list of results, one per seed of the same experiment:
one draws its numbers (``plot()``); several draw each curve as its median
over the seeds with the min-max shaded, each threshold as its median with
min-max error bars (``plot_bands``); the theory's curves depend on no seed
and are the first result's.
"""

from __future__ import annotations

import numpy as np

from ...experiments._bands import band, bars, finite, legend_in_order

_COLORS = {"attention": "C0", "flat": "C1", "pooled": "C2"}
_LABELS = {"attention": "attention", "flat": "flattened logistic", "pooled": "pooled logistic"}


def plot_law(results, ax):
    """Minimal theta against L per classifier, with both fitted laws and their R^2.

    Over several seeds: each threshold is its median over the seeds that
    found one, with min-max error bars, and both laws are fitted to every
    seed's thresholds (where they span three lengths, as one seed's fit needs).
    """
    if len(results) > 1:
        _plot_law_bands(results, ax)
        return
    law = results[0].law
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
    _law_axes(law, ax)
    ax.legend(fontsize=7)


def _law_axes(law, ax):
    """The pooled oracle's thresholds, the axes, their labels and the title of the law panel."""
    Ls = np.array(law["seq_lens"], float)
    ax.plot(Ls, law["pooled_oracle"], "x", color="k", label="pooled oracle (theory)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(Ls, [str(int(L)) for L in Ls])
    ax.set_xlabel("tokens L (log scale)")
    ax.set_ylabel(f"minimal theta for test error {law['target_error']:g}")
    ax.set_title("Signal needed: a + b log L (solid) vs c sqrt L (dotted)")


def _plot_law_bands(results, ax):
    """:func:`plot_law` over several seeds: median thresholds, min-max error bars."""
    from .theory import fit_laws

    law = results[0].law
    Ls = np.array(law["seq_lens"], float)
    grid = np.geomspace(Ls.min(), Ls.max(), 100)
    for name in law["thresholds"]:
        columns = [r.law["thresholds"][name] for r in results]
        pairs = [(L, t) for col in columns for L, t in zip(Ls, map(finite, col)) if t is not None]
        fit = None
        if len({L for L, _ in pairs}) >= 3:  # one seed's fit needs three lengths: so does this
            fit = fit_laws([L for L, _ in pairs], [t for _, t in pairs])
        color = _COLORS.get(name)
        text = ""
        if fit is not None:
            text = f" (every seed's: R$^2$ log {fit['log_r2']:.2f}, sqrt {fit['sqrt_r2']:.2f})"
        bars(ax, Ls, columns, "o", color=color, label=_LABELS.get(name, name) + text)
        if fit is not None:
            ax.plot(grid, fit["log_a"] + fit["log_b"] * np.log(grid), "-", color=color, lw=1)
            ax.plot(grid, fit["sqrt_c"] * np.sqrt(grid), ":", color=color, lw=1)
    _law_axes(law, ax)
    legend_in_order(ax, fontsize=7)


def plot_alignment(results, ax):
    """The two-step query's cosine with xi against n/d at each d, beside the theory.

    One result: each d's mean over its draws, the draws' min-max shaded.
    Several: the median over the seeds of their means, the min-max of every
    seed's draws shaded.
    """
    al = results[0].alignment
    ratios = np.array(al["ratios"], float)
    for k, d in enumerate(al["n_features"]):
        if len(results) == 1:
            draws = al["cosine"][str(d)]
            mean = [np.nan if m is None else m for m in al["mean"][str(d)]]
            lo = [min(c) if c else np.nan for c in draws]
            hi = [max(c) if c else np.nan for c in draws]
        else:
            means = [r.alignment["mean"][str(d)] for r in results]
            mean = [_median([m[i] for m in means]) for i in range(len(ratios))]
            draws = [
                [c for r in results for c in r.alignment["cosine"][str(d)][i]]
                for i in range(len(ratios))
            ]
            lo = [_extreme(c, min) for c in draws]
            hi = [_extreme(c, max) for c in draws]
        ax.plot(ratios, mean, "o-", color=f"C{k}", label=f"two steps, d={d}")
        ax.fill_between(ratios, lo, hi, color=f"C{k}", alpha=0.2)
    ax.plot(ratios, al["theory"], "k--", label="theory (d, n -> inf)")
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.05, 1.02)
    ax.set_xlabel("n / d (log scale)")
    ax.set_ylabel("cos(query, xi)")
    ax.set_title(f"Query after two steps (L={al['seq_len']}, theta={al['signal']:g})")
    ax.legend(fontsize=7)


def _median(values):
    """The median of the finite values (NaN where none is)."""
    found = [v for v in map(finite, values) if v is not None]
    return float(np.median(found)) if found else np.nan


def _extreme(values, pick):
    """``pick`` (min, max) of the finite values (NaN where none is)."""
    found = [v for v in map(finite, values) if v is not None]
    return pick(found) if found else np.nan


def plot_error(results, ax):
    """Test error against theta at one length, beside the pooled oracle's exact error.

    Over several seeds: each classifier's error is its median over the
    seeds with the min-max shaded; the line where the informative share is
    1/2 is at the seeds' median, their min-max shaded.
    """
    er = results[0].error
    thetas = np.array(er["signals"], float)
    for name, values in er["test_error"].items():
        style = dict(color=_COLORS.get(name), label=_LABELS.get(name, name))
        if len(results) == 1:
            ax.plot(thetas, values, "o-", **style)
        else:
            band(ax, thetas, [r.error["test_error"][name] for r in results], "o-", **style)
    grid = np.geomspace(thetas.min(), thetas.max(), 100) if thetas.min() > 0 else thetas
    from .theory import pooled_error

    ax.plot(grid, pooled_error(grid, er["seq_len"]), "k--", lw=1, label="pooled oracle (exact)")
    if len(results) == 1 and er["attention_threshold"] is not None:
        ax.axvline(
            er["attention_threshold"],
            color=_COLORS["attention"],
            ls=":",
            label="informative share 1/2 (theory, fitted query)",
        )
    shares = [r.error["attention_threshold"] for r in results]
    if len(results) > 1 and any(finite(t) is not None for t in shares):
        ax.axvline(
            _median(shares),
            color=_COLORS["attention"],
            ls=":",
            label="informative share 1/2 (theory, fitted query; median over seeds)",
        )
        low, high = _extreme(shares, min), _extreme(shares, max)
        if high > low:
            ax.axvspan(low, high, color=_COLORS["attention"], alpha=0.1, lw=0)
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.02, 0.55)
    ax.set_xlabel("signal theta (log scale)")
    ax.set_ylabel("test error")
    ax.set_title(f"Test error against theta (L={er['seq_len']})")
    ax.legend(fontsize=7)
