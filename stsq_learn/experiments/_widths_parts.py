"""How the width experiments (qSA, retrieval: :mod:`._widths`) show a search, written once.

The tiny preset's search, the figure's panels and the summary's rows.
"""

from __future__ import annotations

import math

from ..studies import BandDisplay
from ._result import band, fmt_band
from ._widths import ENCODINGS, median_laws, widths_text

TINY_SEARCH = dict(
    seq_lens=(4, 8),
    n_steps={"transformer": 20, "fcn": 20},
    target_r2=0.5,
    n_val=100,
    length_width=8,
    length_steps=20,
    factors=(1, 2),
)
"""The tiny preset's width search and length part."""
WIDTHS_STYLE = dict(y="value", bound="bound", style="errorbar", logx=True, logy=True)
"""How minimal widths are drawn: log-log, medians with min-max error bars, bounds as triangles."""


def widths_panel(ax, table, laws, variable, xlabel, **kw):
    """Minimal widths against the length, each model (attention, FCN) with its seeds' median law."""
    xlabel, labels = f"{xlabel} {variable} (log scale)", dict(zip(laws, ("attention (SPE)", "FCN")))
    kw = dict(law_variable=variable, xlabel=xlabel, labels=labels, **kw, **WIDTHS_STYLE)
    return BandDisplay.from_table(table, x="seq_len", laws=median_laws(table, laws), ax=ax, **kw)


def length_panel(ax, table, **kw):
    """The length part's R^2 against the evaluation length, log x: medians, min-max shaded."""
    kw = dict(
        x="eval_seq_len", y="score", logx=True, colors={"stochastic": "C0", "fixed": "C3"}, **kw
    )
    return BandDisplay.from_table(table, ax=ax, **kw)


def search_rows(table, bands, laws, keys, variable):
    """Summary rows: each model's minimal widths, then its law per seed (``keys``: its prefix)."""
    labels = dict(zip(laws, ("attention", "FCN")))
    rows = [
        f"| | minimal width, {labels[m]} | {widths_text(table.where(model=m), 'seq_len')} |"
        for m in laws
    ]
    for model, key in keys.items():
        if math.isfinite(bands[f"{key}b"]["median"]):
            log = laws[model] == "log2"
            form = f"a + b log2({variable})" if log else f"b {variable}^c"
            params = ", ".join(f"{p} {fmt_band(bands[key + p])}" for p in ("ab" if log else "bc"))
            fit = fmt_band(bands[f"{key}r2"])
            rows.append(f"| | {labels[model]}: w = {form}, per seed | {params}, fit R^2 {fit} |")
    return rows


def length_rows(table, head, seq_len, factors):
    """Summary rows of the length part: ``head`` with the lengths, then R^2 per encoding."""
    rows = [f"{head} {', '.join(str(f * seq_len) for f in factors)} | |"]
    for pe in ENCODINGS:
        scores = [table.where(model=pe, eval_seq_len=f * seq_len)["score"] for f in factors]
        rows.append(f"| | {pe} | {' / '.join(fmt_band(band(s)) for s in scores)} |")
    return rows
