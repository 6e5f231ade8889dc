"""What the q-sparse averaging and retrieval experiments share: the settings, studies, figure
panels and summary rows of a width search against the length (a law fitted per seed) and of
stochastic against fixed encodings on longer rows."""

from __future__ import annotations

import math
import numbers

from sklearn.base import clone
from sklearn.utils._param_validation import HasMethods, Interval

from ..studies import BandDisplay, Law, StudyTable, fit_laws, length_curve, minimal_width
from ._result import band, fmt_band
from ._settings import COUNT, COUNTS, STEPS, MappingOf, SequenceOf, Settings, positive_ints

ENCODINGS = ("stochastic", "fixed")
"""The positional encodings of the length part."""
MODELS = ("transformer", "fcn")
"""The keys of ``widths`` and ``n_steps``: the attention model and the FCN."""
FCN_ADAM = dict(solver="adam", learning_rate_init=0.01, learning_rate="constant", batch_size=1024)
"""The FCN's training in the width searches (the separation's, size for size)."""
FCN_COSINE = dict(solver="adam", learning_rate_init=0.003, learning_rate="cosine", batch_size=256)
"""The FCN's training in the full presets' longer searches."""


class WidthsAndLengthSettings(Settings):
    """The settings of the width search against the length (:func:`search_widths`) and of
    the length part (:func:`encodings_curve`); each experiment's give the defaults.

    Attributes
    ----------
    seq_lens : tuple of int
        The lengths searched, increasing.
    n_selected : int
        q of the search's task.
    transformer, fcn : estimator
        The attention model and the fully-connected net (cloned per width and seed).
    widths, n_steps : dict
        Width grid and online steps per width by model (``"transformer"``,
        ``"fcn"``); a model left out keeps its default.
    fcn_max_seq_len : int
        The longest length the FCN is searched at.
    target_r2 : float, default=0.9
        The R^2 a width must reach, in (0, 1).
    n_val : int, default=500
        Held-out rows scoring each width.
    stop_at_target : bool, default=True
        End each fit once it meets ``target_r2`` on those rows, checked every
        25 steps (:class:`~stsq_learn.studies.StopAtTarget`); False trains
        every width all its steps.
    length_task : tuple of 3 int
        (length, d, q) the length part trains at.
    length_width : int
        Width of its models.
    length_steps : int or "auto"
        Online steps of each (``"auto"``: the estimator's own plan).
    factors : tuple of int
        Its evaluation lengths, as multiples of its length, increasing.
    """

    _parameter_constraints = {
        **dict.fromkeys(("n_selected", "fcn_max_seq_len", "n_val", "length_width"), COUNTS),
        **{key: [HasMethods(["fit_online"])] for key in ("transformer", "fcn")},
        "seq_lens": [positive_ints(increasing=True)],
        "widths": [MappingOf(MODELS, positive_ints(increasing=True))],
        "n_steps": [MappingOf(MODELS, COUNT)],
        "target_r2": [Interval(numbers.Real, 0, 1, closed="neither")],
        "stop_at_target": ["boolean"],
        "length_task": [SequenceOf(COUNT, min_len=3)],
        "length_steps": STEPS,
        "factors": [positive_ints(increasing=True)],
    }

    seq_lens: tuple
    n_selected: int
    transformer: object
    fcn: object
    widths: dict
    n_steps: dict
    fcn_max_seq_len: int
    target_r2: float = 0.9
    n_val: int = 500
    stop_at_target: bool = True
    length_task: tuple
    length_width: int
    length_steps: int | str
    factors: tuple

    def __post_init__(self):
        for name in ("widths", "n_steps"):  # a model left out keeps its default
            default = self.__dataclass_fields__[name].default_factory
            if isinstance(self[name], dict) and callable(default):
                object.__setattr__(self, name, {**default(), **self[name]})
        super().__post_init__()

    def _validate(self):
        for name, value in self.items():
            if hasattr(value, "_validate_params"):  # an estimator: its own constraints
                value._validate_params()
            if name.endswith("_task") and len(value) != 3:
                raise ValueError(f"{name} must be (length, d, q), got {value!r}.")


def search_widths(cfg, models, task, **common):
    """The minimal width of each model (label to estimator, in :data:`MODELS` order) against
    ``cfg.seq_lens``, the FCN's up to ``fcn_max_seq_len``."""
    parts = []
    for key, (label, model) in zip(MODELS, models.items()):
        lens = [n for n in cfg.seq_lens if key == "transformer" or n <= cfg.fcn_max_seq_len]
        if lens:
            kw = dict(grid={"seq_len": lens}, n_steps=cfg.n_steps[key], n_test=cfg.n_val, **common)
            kw.update(target=cfg.target_r2, stop_at_target=cfg.stop_at_target)
            parts.append(minimal_width({label: model}, task, cfg.widths[key], **kw))
    return StudyTable.concat(parts)


def encodings_curve(cfg, model, task, n_test, **common):
    """The length part: ``model`` with stochastic and fixed encodings trained at ``task``,
    R^2 on ``n_test`` held-out rows at ``cfg.factors`` times its length."""
    return length_curve(
        {pe: clone(model).set_params(positional_encoding=pe) for pe in ENCODINGS},
        task,
        [f * task.seq_len for f in cfg.factors],
        n_steps=cfg.length_steps,
        n_test=n_test,
        **common,
    )


def law_numbers(table, model, law):
    """One seed's law of ``model``'s minimal widths against the length: ``a`` and ``b`` (``b``
    and ``c`` of ``"power"``) and ``r2``, NaN where it found widths at fewer than 3 lengths."""
    (fit,) = fit_laws(table.where(model=model), "seq_len", "value", law).values() or [None]
    names = ("b", "c") if law == "power" else ("a", "b")
    out = {p: math.nan if fit is None else fit.params[p] for p in names}
    return {**out, "r2": math.nan if fit is None else fit.r2}


def median_laws(table, laws):
    """Model to the median of its seeds' laws (:meth:`Law.median`), where a seed has one."""
    fits = {
        m: Law.median(fit_laws(table.where(model=m), "seq_len", "value", law))
        for m, law in laws.items()
    }
    return {model: fit for model, fit in fits.items() if fit is not None}


def widths_text(table, x):
    """A search's minimal widths along ``x`` over the seeds: ``median [min, max]`` of those found
    (``(k of n none)`` where k seeds found none), ``>b`` where none did (``b``: the largest width
    that failed), ``-`` where none was searched."""
    out = []
    for (_,), rows in table.groups(x):
        values, bounds = rows.xy("seed", "value")[1], rows.xy("seed", "bound")[1]
        if len(values) == len(rows):
            out.append(fmt_band(band(values)))
        elif len(values):
            out.append(f"{fmt_band(band(values))} ({len(rows) - len(values)} of {len(rows)} none)")
        else:
            out.append(f">{max(bounds):g}" if len(bounds) else "-")
    return " / ".join(out) or "-"


TINY_SEARCH = dict(seq_lens=(4, 8), n_steps={"transformer": 20, "fcn": 20}, target_r2=0.5)
TINY_SEARCH |= dict(n_val=100, length_width=8, length_steps=20, factors=(1, 2))
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
