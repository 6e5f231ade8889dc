"""q-sparse token retrieval: the error against heads, widths against T, length generalization.

The settings, the studies (tables ``heads``, ``widths`` and ``length``, every seed in each), the
numbers, the figure and the record.
"""

import math
from dataclasses import field

import numpy as np
from sklearn.base import clone
from sklearn.metrics import make_scorer

from ...engine.batch_reuse import reusing_batches
from ...experiments import Experiment, _widths
from ...experiments._common import length_axes, new_axes
from ...experiments._result import fmt_band
from ...experiments._settings import COUNTS, STEPS, positive_ints
from ...scoring import relative_mse
from ...studies import BandDisplay, StudyTable, sweep
from .estimators import FCNRetriever, SparseTokenRetriever
from .task import SparseRetrievalTask

LAWS = {"transformer": "log2", "fcn": "power"}
"""The law the theory gives each model's minimal width against T."""

# Adam for the width search (its heads set to q by the run) and the heads part: in a fixed
# budget the width-following SGD's scores are too noisy to bracket a width (T=16: 0.89 at
# width 16, 0.58 at 24, 300 steps) and miss the threshold at q = 3 (the reproduce page).
_SEARCH = SparseTokenRetriever(solver="adam", learning_rate_init=0.05, learning_rate="cosine")
_SGD = SparseTokenRetriever(
    solver="sgd", learning_rate_init="auto", learning_rate="cooldown", batch_size="auto"
)
_FCN = FCNRetriever(**_widths.FCN_ADAM)
_WIDTHS = {"transformer": (4, 6, 8, 12, 16, 24, 32, 48, 64), "fcn": (8, 32, 128, 512)}


class SparseRetrievalSettings(_widths.WidthsAndLengthSettings):
    """The settings of :func:`sparse_retrieval` (the defaults are the quick size's).

    Attributes
    ----------
    seq_len, n_features : int
        T and d of the heads part (d also of the width search).
    q_values, n_heads : tuple of int
        The q of the heads part (at most ``seq_len``) and the H tried at each
        (those up to q + 1), increasing.
    heads_width, heads_steps, heads_estimator
        Width, online steps (or ``"auto"``) and attention model (None:
        ``estimator``) of the heads part.
    seq_lens, n_selected, transformer, fcn, widths, n_steps, fcn_max_seq_len, target_r2, \
n_val, stop_at_target
        The width search against T at H = q (:class:`WidthsAndLengthSettings`),
        four lengths for the attention model's law (three gave fit R^2 0.75).
    estimator, length_task, length_width, length_steps, factors
        The length part's attention model (with q heads) and sizes
        (:class:`WidthsAndLengthSettings`).
    n_test : int
        Held-out rows (queries of q slots) of the heads and length parts.

    Examples
    --------
    >>> from stsq_learn.experiments import SparseRetrievalSettings
    >>> SparseRetrievalSettings(q_values=(2,)).replace(n_heads=(1, 2)).n_heads
    (1, 2)
    """

    _parameter_constraints = {
        **_widths.WidthsAndLengthSettings._parameter_constraints,
        **dict.fromkeys(("seq_len", "n_features", "heads_width", "n_test"), COUNTS),
        **{key: [positive_ints(increasing=True)] for key in ("q_values", "n_heads")},
        **{key: [SparseTokenRetriever] for key in ("transformer", "estimator")},
        "fcn": [FCNRetriever],
        "heads_steps": STEPS,
        "heads_estimator": [SparseTokenRetriever, None],
    }

    seq_lens: tuple = (4, 8, 16, 32)  # no width to 64 reached R^2 0.9 at T = 64 in 150 steps
    n_selected: int = 2
    transformer: SparseTokenRetriever = _SEARCH
    fcn: FCNRetriever = _FCN
    widths: dict = field(default_factory=_WIDTHS.copy)
    n_steps: dict = field(default_factory=lambda: {"transformer": 150, "fcn": 300})
    fcn_max_seq_len: int = 16
    seq_len: int = 16
    n_features: int = 4
    q_values: tuple = (2, 3)
    n_heads: tuple = (1, 2, 3)
    heads_width: int = 32
    heads_steps: int | str = 150
    heads_estimator: SparseTokenRetriever | None = _SEARCH
    estimator: SparseTokenRetriever = _SGD
    length_task: tuple = (16, 4, 2)
    length_width: int = 32
    length_steps: int | str = 200
    factors: tuple = (1, 2, 4)
    n_test: int = 3000

    def _validate(self):
        super()._validate()
        if self.q_values[-1] > self.seq_len:
            raise ValueError(
                f"q_values name up to {self.q_values[-1]} positions of seq_len={self.seq_len}."
            )
        # Every task made once: a bad (T, d, q) is refused by its task before any fit.
        SparseRetrievalTask(self.seq_lens[0], self.n_features, self.n_selected)
        SparseRetrievalTask(*self.length_task)


@reusing_batches
def run(cfg, seeds, *, device=None, progress=False, n_jobs=None):
    """The studies over every seed; the ``heads`` table's meta names the heads' ``solver``."""
    common = dict(seeds=seeds, device=device, progress=progress, n_jobs=n_jobs, batch_seeds=True)
    heads = cfg.estimator if cfg.heads_estimator is None else cfg.heads_estimator
    heads = clone(heads).set_params(width=cfg.heads_width)
    grid = [
        {"n_selected": [q], "n_heads": [h for h in cfg.n_heads if h <= q + 1]} for q in cfg.q_values
    ]
    scoring = {"relative_mse": make_scorer(relative_mse)}
    kw = dict(n_steps=cfg.heads_steps, n_test=cfg.n_test, scoring=scoring)
    task = SparseRetrievalTask(cfg.seq_len, cfg.n_features, cfg.q_values[0])
    table = sweep(heads, task, grid, **kw, **common)
    table.meta["solver"] = heads.get_params()["solver"]
    models = {"transformer": clone(cfg.transformer).set_params(n_heads=cfg.n_selected)}
    task = SparseRetrievalTask(cfg.seq_lens[0], cfg.n_features, cfg.n_selected)
    widths = _widths.search_widths(cfg, {**models, "fcn": cfg.fcn}, task, **common)
    task = SparseRetrievalTask(*cfg.length_task)
    model = clone(cfg.estimator).set_params(n_heads=task.n_selected, width=cfg.length_width)
    length = _widths.encodings_curve(cfg, model, task, cfg.n_test, **common)
    return {"heads": table, "widths": widths, "length": length}


def head_thresholds(result):
    """Per seed and q, the fewest heads whose relative MSE is below ``1 / (2q)`` (theory: q).

    ``1 / (2q)`` is half the bound ``1 - (q - 1)/q`` of q - 1 heads. A
    :class:`~stsq_learn.studies.StudyTable` of ``seed``, ``n_selected`` (q)
    and ``threshold`` (NaN where no H tried got there).
    """
    rows = {"seed": [], "n_selected": [], "threshold": []}
    for (seed, q), part in result.tables["heads"].groups("seed", "n_selected"):
        below = [h for h, e in zip(part["n_heads"], part["relative_mse"]) if e < 1 / (2 * q)]
        rows["seed"].append(seed)
        rows["n_selected"].append(q)
        rows["threshold"].append(float(min(below)) if below else math.nan)
    return StudyTable(rows)


def headline(result):
    """The numbers one seed's run is judged by: the error per (q, H), thresholds, laws."""
    hd = result.tables["heads"]
    out = {
        f"relative_mse.q={q}.H={h}": e
        for q, h, e in zip(hd["n_selected"], hd["n_heads"], hd["relative_mse"])
    }
    for row in head_thresholds(result):
        out[f"threshold.q={row['n_selected']}"] = row["threshold"]
    for model, law in LAWS.items():
        for p, value in _widths.law_numbers(result.tables["widths"], model, law).items():
            out[f"law.{model}.{p}"] = value
    return out


def _heads_budget(result):
    """``"m=<width>, <steps> <SOLVER> steps"`` of the heads part."""
    hd = result.tables["heads"]
    steps = int(np.max(hd["n_iter"])) if len(hd) else 0
    return f"m={result.settings['heads_width']}, {steps} {hd.meta['solver'].upper()} steps"


def summary(result):
    """Summary rows: the error against heads and the thresholds, the widths and laws, length."""
    c, bands, tables = result.settings, result.bands(), result.tables
    rows = [
        f"| Retrieval heads (T={c['seq_len']}, d={c['n_features']}, {_heads_budget(result)}) "
        f"| relative MSE at H = {', '.join(map(str, c['n_heads']))} | |"
    ]
    for q in c["q_values"]:
        errors = [fmt_band(bands[f"relative_mse.q={q}.H={h}"]) for h in c["n_heads"] if h <= q + 1]
        errors += ["-"] * (len(c["n_heads"]) - len(errors))
        rows.append(f"| | q={q} | {' / '.join(errors)} |")
    for q in c["q_values"]:
        found = bands[f"threshold.q={q}"]
        n, missed = len(found["values"]), sum(not math.isfinite(v) for v in found["values"])
        text = "not reached" if missed == n else f"H = {fmt_band(found)}"
        text += f" ({missed} of {n} seeds not reached)" if 0 < missed < n else ""
        level = f"fewest H with relative MSE < 1/(2q) = {1 / (2 * q):.3f} (theory: H = q)"
        rows.append(f"| | q={q}: {level} | {text}{' within this budget' if missed else ''} |")
    wd, (T, _, q) = tables["widths"], c["length_task"]
    rows.append(
        f"| Retrieval widths (d={c['n_features']}, q=H={c['n_selected']}, "
        f"R^2 >= {c['target_r2']}) | T = {', '.join(map(str, wd.unique('seq_len')))} | |"
    )
    rows += _widths.search_rows(wd, bands, LAWS, {m: f"law.{m}." for m in LAWS}, "T")
    head = f"| Retrieval length (trained at T={T}, q=H={q}, m={c['length_width']}) | R^2 at T' ="
    return rows + _widths.length_rows(tables["length"], head, T, c["factors"])


def figure(result, axes=None):
    """The error against heads, widths against T, the length (``axes``: 3 matplotlib Axes)."""
    fig, (ax_h, ax_w, ax_l) = new_axes(axes, 3)
    c, tables, heads = result.settings, result.tables, result.tables["heads"]
    # Relative MSE against H per q, its bound 1 - H/q dotted, the level 1/(2q) dashed.
    labels = {q: f"q={q}" for q in heads.unique("n_selected")}
    kw = dict(x="n_heads", y="relative_mse", hue="n_selected", labels=labels, legend=False)
    display = BandDisplay.from_table(heads, ax=ax_h, **kw)
    found, missed = head_thresholds(result), []
    for i, q in enumerate(labels):
        color = display.lines_[q].get_color()
        hs = [h for h in heads.where(n_selected=q).unique("n_heads") if h <= q]
        label = "bound $1 - H/q$ (H <= q)" if i == 0 else "_nolegend_"
        ax_h.plot(hs, [1 - h / q for h in hs], ls=":", color=color, lw=1.2, label=label)
        ax_h.plot([q - 0.25, q + 0.25], [1 / (2 * q)] * 2, "--", color=color, lw=1)
        off = sum(v != q for v in found.where(n_selected=q)["threshold"])
        if off:
            of = f" ({off} of {len(result.seeds)} seeds)" if len(result.seeds) > 1 else ""
            missed.append(f"q={q}{of}")
    ax_h.plot([], [], "k--", lw=1, label="threshold level $1/(2q)$ at H = q")
    if missed:
        text = (
            f"no threshold at H = q for {', '.join(missed)} within this budget\n"
            "(relative MSE at H = q not below 1/(2q)): too few steps"
        )
        kw = dict(transform=ax_h.transAxes, fontsize="small", color="C3", va="bottom")
        ax_h.text(0.02, 0.02, text, **kw)
    ax_h.set(xlabel="heads H", ylabel="relative MSE (test)", ylim=(-0.03, 1.03))
    title = f"Retrieval: error against heads (T={c['seq_len']}, d={c['n_features']}, "
    ax_h.set_title(f"{title}{_heads_budget(result)})", fontsize="medium")
    ax_h.legend(fontsize="small", loc="upper right")
    kw = dict(ylabel=f"minimal width (R^2 >= {c['target_r2']})")
    kw["title"] = f"Retrieval: width against T (d={c['n_features']}, q=H={c['n_selected']})"
    _widths.widths_panel(ax_w, tables["widths"], LAWS, "T", "sequence length", **kw)
    T, _, q = c["length_task"]
    kw = dict(xlabel="evaluation length T' (log scale)", ylabel="$R^2$", legend=False)
    kw["title"] = f"Retrieval: length generalization (q=H={q}, m={c['length_width']})"
    _widths.length_panel(ax_l, tables["length"], **kw)
    length_axes(ax_l, T, tables["length"]["score"], "training")
    ax_l.legend(fontsize="small", loc="lower left")
    return fig


PROVENANCE = {
    "task": "paper: q-sparse token retrieval as Mousavi-Hosseini, Sanford, Wu and Erdogdu "
    "(2025) pose it (q positions named in order); the target, the named tokens side by "
    "side, is ours (their class takes any function of them)",
    "tokens": "paper: Gaussian tokens (the law of Wang et al.'s sparse token selection)",
    "subsets": "paper: a uniform q-subset of the T positions (here in a uniform order)",
    "batch": "ours: each estimator's batch size (a fresh batch at every step, as the paper trains)",
    "width_law": "paper: width O~(d + q log T) for the transformer, Omega~(T d) for "
    "fully-connected nets (Wang et al.'s separation); fitted here per seed",
    "seq_len, n_features, q_values, n_heads": "ours: the heads part's T, d, q and H",
    "heads_width, heads_steps, heads_estimator": "ours: the heads part's budget (quick: "
    "Adam at 0.05 decayed by a cosine, width 32, 150 steps)",
    "threshold": "ours: the threshold level 1/(2q), half the bound 1 - (q - 1)/q of q - 1 "
    "heads, by which the fewest heads that retrieve every token is read off",
    "seq_lens, n_selected, fcn_max_seq_len, widths, n_steps": "ours: the width search's "
    "lengths, q, grids and steps per width",
    "transformer, fcn, estimator": "ours: the optimisers and step sizes (Adam for the "
    "search; the estimators' width-following SGD for the length part)",
    "target_r2, stop_at_target": "ours: R^2 >= 0.9 defines a width's success; a fit of the "
    "search ends once it meets it on the search's validation rows",
    "length_task, length_width, length_steps, factors": "ours: the length part's sizes, "
    "budget and test lengths",
    "n_val, n_test": "ours: held-out rows scoring each width and each model",
    "metric": "ours: the relative MSE sum ||y_hat - y||^2 / sum ||y||^2, and R^2",
}
"""Setting -> ``"paper: ..."`` or ``"ours: ..."``: where each setting comes from."""

_ATTENTION_GRID = (4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 128)
_FCN_GRID = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
_FCN_LONG = FCNRetriever(**_widths.FCN_COSINE)
# The sizes (q and H to 4 at T=16, d=4, width 64 with the planned steps), a line a
# part: the heads, the width search, the length part.
_FULL = (
    dict(q_values=(1, 2, 3, 4), n_heads=(1, 2, 3, 4, 5), heads_width=64, heads_steps="auto")
    | dict(heads_estimator=None, n_test=8000)
    | dict(seq_lens=(8, 16, 32, 64, 128, 256), fcn=_FCN_LONG, fcn_max_seq_len=32, n_val=1000)
    | dict(widths={"transformer": _ATTENTION_GRID, "fcn": _FCN_GRID})
    | dict(n_steps={"transformer": 600, "fcn": 2000})
    | dict(length_width=64, length_steps="auto", factors=(1, 2, 4, 8))
)

RECORD = Experiment(
    name="retrieval",
    function_name="sparse_retrieval",
    aliases=("sparse_retrieval",),
    doc="""The error against heads, widths against T and length generalization on retrieval.

    A readout of H heads retrieves at most H of q named tokens: the error
    has its threshold at H = q (see :mod:`stsq_learn.tasks.retrieval.experiment`;
    the settings: :class:`SparseRetrievalSettings`).

    Examples
    --------
    >>> from stsq_learn.experiments import sparse_retrieval
    >>> result = sparse_retrieval("tiny", seeds=2)
    >>> sorted(result.tables)
    ['heads', 'length', 'widths']
    >>> result.bands()["relative_mse.q=2.H=2"]["median"] < 1
    True
    """,
    settings=SparseRetrievalSettings,
    provenance=PROVENANCE,
    presets={
        "tiny": dict(_widths.TINY_SEARCH, widths={"transformer": (4, 8), "fcn": (8, 16)})
        | dict(seq_len=6, n_features=2, q_values=(2,), n_heads=(1, 2), n_test=200)
        | dict(heads_width=8, heads_steps=20, heads_estimator=None)
        | dict(fcn_max_seq_len=8, length_task=(6, 2, 2)),
        "quick": {},  # q = 2, 3 and H to 3 at T=16; the heads part on Adam
        "full": _FULL,
        "gpu": _FULL
        | dict(seq_len=32, q_values=(1, 2, 3, 4, 6), n_heads=(1, 2, 3, 4, 5, 6, 7), heads_width=128)
        | dict(seq_lens=(8, 16, 32, 64, 128, 256, 512, 1024), fcn_max_seq_len=64, n_val=4000)
        | dict(widths={"transformer": _ATTENTION_GRID, "fcn": (*_FCN_GRID, 8192, 16384)})
        | dict(n_steps={"transformer": 1000, "fcn": 4000})
        | dict(length_task=(32, 4, 2), length_width=128, n_test=32000),
    },
    # A threshold moves by one head, a law's parameters with the widths: by grid steps.
    reference_rtol={"threshold.*": 0.5, "law.*": 0.5},
)
sparse_retrieval = RECORD.function
