"""The figure of the width separation: log or power for the transformer, and both models.

Three panels of :meth:`SeparationResult.plot`: the transformer's minimal
widths on a log-T axis with a linear width axis, where ``a + b log2 T`` is a
straight line and a power ``b T^c`` bends upwards; both models on log-log axes,
with the FCN's lower bounds and its ``b T^c`` law (one result, or several
seeds' medians with their error bars: the width panels of q-sparse averaging
and retrieval draw it too); the residuals of the transformer's laws
(``a + b log2 T``, ``a + b T^c``, ``b T^c``) against T.
"""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import NullFormatter

from ._bands import bars, empty_log_range, every_bound, finite, legend_in_order

_LABELS = {"transformer": "transformer (SPE)", "fcn": "FCN"}
LEGEND_WRAP = 44
"""Characters a legend line of the both-models panel holds (its labels are wrapped)."""
# The transformer's laws drawn: the logarithm, a shifted power (whose c -> 0 is the
# logarithm again) and a pure power.
_TRANSFORMER_LAWS = (("log_T", "-"), ("power", "--"), ("power_0", ":"))


def _bound_text(res, model):
    """What a lower bound means: no width up to it reached the target in its steps."""
    steps = (res.config.get("n_steps") or {}).get(model)
    within = f" within {steps} steps" if steps else ""
    return f"lower bound: not reached{within} (no width up to it reached the target)"


def _points(res, model):
    """``(Ts, widths)`` where a minimal width was found."""
    pairs = [(T, w) for T, w in zip(res.seq_lens, res.minimal_width[model]) if w is not None]
    return np.array([T for T, _ in pairs], float), np.array([w for _, w in pairs], float)


def _law_values(law, name, Ts):
    """The fitted widths of ``law`` (a dict of growth_laws) at ``Ts``."""
    a, b = law["intercept"], law["slope"]
    if name == "log_T":
        return a + b * np.log2(Ts)
    return a + b * Ts ** law["exponent"]


def _law_text(law, name):
    """The law with its coefficients and its fit quality, for a legend."""
    a, b = law["intercept"], law["slope"]
    quality = f"R$^2$ {law['r2']:.3f}, rms {law['rms_residual']:.2f}"
    if name == "log_T":
        return f"{a:.1f} + {b:.2f} log$_2$ T ({quality})"
    if name == "power":
        return f"{a:.1f} + {b:.2f} T$^{{{law['exponent']:.3f}}}$ ({quality})"
    return f"{b:.2f} T$^{{{law['exponent']:.3f}}}$ ({quality})"


def _log_t_axis(ax, seq_lens):
    ax.set_xscale("log", base=2)
    ticks = seq_lens if len(seq_lens) <= 8 else seq_lens[::2]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())  # only the chosen lengths are labelled
    ax.set_xlabel("sequence length T (log scale)")


def plot_transformer_laws(res, ax):
    """Transformer minimal widths (linear axis) against log T, with both fitted laws."""
    Ts, ws = _points(res, "transformer")
    ax.plot(Ts, ws, "o", color="C0", ms=8, zorder=3, label=_LABELS["transformer"])
    grid = np.geomspace(min(res.seq_lens), max(res.seq_lens), 200)
    for name, style in _TRANSFORMER_LAWS:
        law = res.growth_laws["transformer"].get(name)
        if law is not None:
            ax.plot(grid, _law_values(law, name, grid), style, color="k", lw=1)
            ax.lines[-1].set_label(f"fit: {_law_text(law, name)}")
    _log_t_axis(ax, res.seq_lens)
    ax.set_ylabel(f"smallest width reaching $R^2 \\geq {res.config['target_r2']}$")
    ax.set_title("Transformer: log T is a straight line here")
    ax.legend(fontsize="small", loc="upper left")


def plot_both_models(res, ax):
    """Both models' minimal widths on log-log axes; FCN lower bounds as open triangles."""
    grid = np.geomspace(min(res.seq_lens), max(res.seq_lens), 200)
    for i, model in enumerate(("transformer", "fcn")):
        Ts, ws = _points(res, model)
        ax.plot(Ts, ws, "os"[i], color=f"C{i}", ms=7, zorder=3, label=_LABELS[model])
        bounds = res.lower_bound.get(model) or []
        have = [(T, b) for T, b in zip(res.seq_lens, bounds) if b is not None]
        if have:
            ax.plot(
                [T for T, _ in have],
                [b for _, b in have],
                "^",
                color=f"C{i}",
                mfc="none",
                ms=9,
                label=f"{_LABELS[model]}: {_bound_text(res, model)}",
            )
        name = "log_T" if model == "transformer" else "power_0"
        law = res.growth_laws[model].get(name)
        if law is not None:
            span = grid if model == "transformer" else grid[grid <= 2 * Ts.max()]
            ax.plot(span, np.clip(_law_values(law, name, span), 0.5, None), "-", color=f"C{i}")
            ax.lines[-1].set_label(f"fit: {_law_text(law, name)}")
    _log_t_axis(ax, res.seq_lens)
    ax.set_yscale("log", base=2)
    ax.set_ylabel("smallest width (log scale)")
    d, q = res.config["n_features"], res.config["n_selected"]
    ax.set_title(f"Width separation (d={d}, q={q})")
    # Clear of the FCN's points (top left) and of the transformer's (bottom), its long
    # labels wrapped to stay within the panel.
    legend_in_order(ax, wrap=LEGEND_WRAP, fontsize="small", loc="center right")


def plot_residuals(res, ax):
    """Residuals (width - fit) of the transformer's log and power laws against T."""
    Ts, _ = _points(res, "transformer")
    for (name, style), marker in zip(_TRANSFORMER_LAWS, "osd"):
        law = res.growth_laws["transformer"].get(name)
        if law is not None:
            ax.plot(Ts, law["residuals"], marker + style, ms=5, label=_law_text(law, name))
    ax.axhline(0, color="gray", lw=0.8)
    _log_t_axis(ax, res.seq_lens)
    ax.set_ylabel("residual: width - fitted width")
    ax.set_title("Transformer: residuals of the laws")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small", loc="best")


def _spread(curves, widths_of):
    """``(Ts, median, min, max)`` of the widths of one curve over seeds, where any seed has one.

    At each T the widths of the seeds that found one (a width of None is no
    number to spread); Ts where no seed found one are left out.
    """
    rows = []
    for T in curves[0].seq_lens:
        found = [
            w for c in curves for t, w in zip(c.seq_lens, widths_of(c)) if t == T and w is not None
        ]
        if found:
            rows.append((T, float(np.median(found)), min(found), max(found)))
    return tuple(np.array(column, float) for column in zip(*rows)) if rows else ((),) * 4


def _widths(ax, curves, widths_of, fmt, *, always, **style):
    """One seed's widths as ``ax.plot`` draws them; several seeds' as median, min-max bars.

    With no width found, nothing is drawn unless ``always`` (then an empty
    line keeps the legend entry).
    """
    if len(curves) == 1:
        pairs = [(T, w) for T, w in zip(curves[0].seq_lens, widths_of(curves[0])) if w is not None]
        if pairs or always:
            Ts, ws = (np.array(column, float) for column in zip(*pairs)) if pairs else ([], [])
            ax.plot(Ts, ws, fmt, **style)
        return
    Ts, med, lo, hi = _spread(curves, widths_of)
    if not len(Ts):
        if always:
            ax.plot([], [], fmt, **style)
    else:
        ax.errorbar(Ts, med, yerr=[med - lo, hi - med], fmt=fmt, capsize=3, **style)


def plot_by_q(results, ax):
    """Measured minimal widths (filled) and the floor's (open, dashed) against T, per q.

    ``results`` is a list of :class:`SeparationByQResult`, one per seed of
    the same experiment: one draws its widths; several draw each width as
    its median over the seeds with min-max error bars, every seed's lower
    bounds, and the law ``w = a + b q log2 T`` fitted to every seed's
    measured widths.
    """
    from ._width_search import joint_law

    first = results[0]
    law = first.law
    if len(results) > 1:
        law = joint_law(
            [c for r in results for c in r.curves], lambda c: c.minimal_width["transformer"]
        )
    for i, label in enumerate(first.labels):
        curves = [r.curves[i] for r in results]
        curve = curves[0]
        q, d = curve.config["n_selected"], curve.config["n_features"]
        color = f"C{i}"
        _widths(
            ax,
            curves,
            lambda c: c.minimal_width["transformer"],
            "o-",
            always=True,
            color=color,
            ms=8,
            zorder=3,
            label=f"q={q}, d={d}: measured ({label})",
        )
        named = False  # every seed's lower bounds, named once in the legend
        for one in curves:
            bounds = one.lower_bound.get("transformer") or []
            have = [(T, b) for T, b in zip(one.seq_lens, bounds) if b is not None]
            if have:
                ax.plot(
                    *zip(*have),
                    "^",
                    color=color,
                    mfc="none",
                    ms=9,
                    label="_nolegend_" if named else f"q={q}: {_bound_text(one, 'transformer')}",
                )
                named = True
        _widths(
            ax,
            curves,
            lambda c: c.floor_width,
            "s--",
            always=False,
            color=color,
            mfc="none",
            ms=11,
            lw=1,
            label=f"q={q}: the floor's minimal width (isotropic_floor)",
        )
        if law is not None:
            grid = np.geomspace(min(curve.seq_lens), max(curve.seq_lens), 100)
            fitted = law["intercept"] + law["slope"] * q * np.log2(grid)
            # On the log axis only where the law is a width (>= 1); the fit may dip below.
            ax.plot(grid, np.where(fitted >= 1, fitted, np.nan), ":", color=color)
    if law is not None:
        every = "" if len(results) == 1 else ", over every seed's widths"
        ax.lines[-1].set_label(
            f"fit: w = {law['intercept']:.1f} + {law['slope']:.2f} q log$_2$ T "
            f"(R$^2$ {law['r2']:.3f}{every})"
        )
    seq_lens = sorted({T for c in first.curves for T in c.seq_lens})
    _log_t_axis(ax, seq_lens)
    ax.set_yscale("log", base=2)
    target = first.curves[0].config["target_r2"]
    ax.set_ylabel(f"smallest width reaching $R^2 \\geq {target}$ (log scale)")
    ax.set_title("Transformer: measured minimal width beside the floor's, per q")
    legend_in_order(ax, fontsize="x-small", loc="lower right")


def plot_both_models_bands(seps, ax):
    """Both models' minimal widths against T over seeds (``seps``: SeparationResults).

    One result is :func:`plot_both_models`. Several: each
    model's minimal widths as their median over the seeds that found one,
    with min-max error bars; every seed's lower bounds; the law (``a + b
    log2 T`` for the transformer, ``b T^c`` for the FCN) fitted to every
    seed's widths, where they span as many lengths as one seed's law needs.
    """
    from ._width_search import fit_growth_law, fit_power_law

    first = seps[0]
    if len(seps) == 1:
        return plot_both_models(first, ax)
    Ts = first.seq_lens
    grid = np.geomspace(min(Ts), max(Ts), 200)
    for i, model in enumerate(("transformer", "fcn")):
        color = f"C{i}"
        columns = [s.minimal_width[model] for s in seps]
        style = dict(color=color, ms=7, zorder=3)
        bars(ax, Ts, columns, "os"[i], always=True, label=_LABELS[model], **style)
        every_bound(
            ax,
            Ts,
            [s.lower_bound.get(model) or [] for s in seps],
            f"{_LABELS[model]}: {_bound_text(first, model)}",
            color=color,
        )
        pairs = [(T, w) for col in columns for T, w in zip(Ts, map(finite, col)) if w is not None]
        if len({T for T, _ in pairs}) < 3:
            continue  # one seed's law needs three lengths: so does every seed's
        xs, ws = [T for T, _ in pairs], [w for _, w in pairs]
        if model == "transformer":
            name, law = "log_T", fit_growth_law(np.log2(xs), ws)
        else:
            name, law = "power_0", fit_power_law(xs, ws, offset=False)
        if law is not None:
            found = max(T for T, _ in pairs)
            span = grid if model == "transformer" else grid[grid <= 2 * found]
            ax.plot(span, np.clip(_law_values(law, name, span), 0.5, None), "-", color=color)
            ax.lines[-1].set_label(f"fit, every seed's widths: {_law_text(law, name)}")
    _log_t_axis(ax, Ts)
    grids = (first.config.get("widths") or {}).values()
    empty_log_range(ax, [w for grid in grids for w in grid])
    ax.set_yscale("log", base=2)
    ax.set_ylabel("smallest width (log scale)")
    d, q = first.config["n_features"], first.config["n_selected"]
    ax.set_title(f"Width separation (d={d}, q={q})")
    legend_in_order(ax, wrap=LEGEND_WRAP, fontsize="small", loc="center right")


def plot_fcn_curves(res, ax):
    """Both models on log-log axes for the first curve that searched the FCN (or the first)."""
    searched = [c for c in res.curves if any(w is not None for w in c.minimal_width["fcn"])]
    curve = searched[0] if searched else res.curves[0]
    plot_both_models(curve, ax)
