"""q-sparse averaging (qSA): widths against N and q, zero-shot transfer, length generalization.

q-sparse averaging (Sanford, Hsu and Telgarsky, 2023) asks every position
for the mean of its own subset of q tokens: N sparse token selection
queries over the same tokens. Four studies (:mod:`stsq_learn.studies`),
every seed in each:

1. ``by_length``: the smallest width reaching ``target_r2`` against N at
   fixed q, for the attention model (:class:`~stsq_learn.SparseTokenAverager`)
   and the fully-connected net (:class:`~stsq_learn.FCNAverager`, up to
   ``fcn_max_seq_len``), by :func:`~stsq_learn.studies.minimal_width`;
   the laws ``a + b log2 N`` and ``b N^c`` fitted per seed
   (:func:`~stsq_learn.studies.fit_laws`);
2. ``by_q``: the attention model's smallest width against q at
   N = ``q_seq_len``, each q's search starting at the larger of the previous
   q's width and the smallest width whose isotropic floor
   (:func:`~stsq_learn.isotropic_floor`) allows the target (column
   ``floor_width``: for q >= 3 the floor, not the training, sets the width);
3. ``transfer``: a :class:`~stsq_learn.SparseTokenSelector` trained on sparse
   token selection predicts qSA through
   :meth:`~stsq_learn.SparseTokenAverager.from_selector`, with no training,
   beside an averager trained on qSA and the isotropic floor
   (:func:`~stsq_learn.studies.sweep`; ``relative_mse`` and ``floor`` per
   model and seed);
4. ``length``: averagers with stochastic and fixed encodings, R^2 on
   held-out rows lengthened to ``factors`` times N
   (:func:`~stsq_learn.studies.length_curve`).

The growth, the laws and the floor ratios are functions of these tables
(:func:`width_laws`, :func:`headline`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import field

import numpy as np
from sklearn.base import clone
from sklearn.utils._param_validation import Interval, StrOptions

from ...encodings.floor import isotropic_floor
from ...engine.batch_reuse import reusing_batches
from ...experiments import Experiment, Settings, document_experiment
from ...experiments._common import new_axes
from ...experiments._result import band, fmt_band
from ...experiments._settings import MappingOf, SequenceOf, positive_ints
from ...studies import (
    BandDisplay,
    Law,
    StudyTable,
    fit_laws,
    length_curve,
    minimal_width,
    stream_seed,
    sweep,
)
from ...studies.fits import test_rows
from ..selection.estimators import SparseTokenSelector
from ..selection.task import SparseTokenSelectionTask
from .estimators import FCNAverager, SparseTokenAverager
from .task import SparseAveragingTask

LABELS = {"transformer": "attention", "fcn": "fcn"}
"""Setting name of each model of the search against N to its label in the tables."""
LAWS = {"attention": "log2", "fcn": "power"}
"""The law the theory gives each model's minimal width against N."""
TRANSFER = ("selector on STS_q", "selector on qSA", "averager on qSA")
"""The models of the transfer, in the table's order."""
ENCODINGS = ("stochastic", "fixed")
"""The positional encodings of the length part."""
_FLOOR_SAMPLES = 20_000
"""Rows simulated per isotropic floor of the search against q (standard error about 0.001)."""

# The search against N (q = 2): Adam at 0.1 decayed by a cosine, 256 queries a step
# (batch_size="auto": ceil(256 / N) rows). The width-following SGD keeps gamma's travel
# fixed, and q=2's best gamma is infinite: at N=256 it needs width 40 where this needs 24
# (measured, 1000 steps). The FCN: the separation's, size for size.
_ATTENTION = SparseTokenAverager(
    solver="adam", learning_rate_init=0.1, learning_rate="cosine", batch_size="auto"
)
_FCN = FCNAverager(
    solver="adam", learning_rate_init=0.01, learning_rate="constant", batch_size=1024
)
_FCN_LONG = FCNAverager(
    solver="adam", learning_rate_init=0.003, learning_rate="cosine", batch_size=256
)
# Against q, the transfer and the length part: the estimators' width-following SGD.
_SGD = SparseTokenAverager(
    solver="sgd", learning_rate_init="auto", learning_rate="cooldown", batch_size="auto"
)
_WIDTHS = {
    "transformer": (4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 64),
    "fcn": (8, 32, 512),
}
_N_STEPS = {"transformer": 300, "fcn": 500}
_COUNT = [Interval(numbers.Integral, 1, None, closed="left")]
_STEPS = [*_COUNT, StrOptions({"auto"})]
_MODELS = ("transformer", "fcn")


class SparseAveragingSettings(Settings):
    """The settings of :func:`sparse_averaging`: the two searches, the transfer, the length part.

    The defaults are the quick size's.

    Attributes
    ----------
    seq_lens : tuple of int, default=(4, 8, 16, 32)
        The numbers of positions N of the search against N, increasing.
    n_features, n_selected : int, default=2, 2
        Token dimension d and subset size q of the search against N (d also
        of the search against q). With q = 2 the floor is about 0 at a few
        dozen widths; keep d small so the FCN reaches the target in its grid.
    transformer : SparseTokenAverager, default=Adam at 0.1 with a cosine decay
        The attention model of the search against N (cloned per width and seed).
    fcn : FCNAverager, default=Adam at 0.01, 1024 rows a step
        The FCN of the search against N.
    widths : dict, default={"transformer": (4, 6, ..., 64), "fcn": (8, 32, 512)}
        Width grids of the search against N by model; a model left out
        keeps its default grid.
    n_steps : dict, default={"transformer": 300, "fcn": 500}
        Online steps per width by model (a model left out keeps its default).
    fcn_max_seq_len : int, default=8
        The longest N the FCN is searched at.
    target_r2 : float, default=0.9
        The R^2 a width must reach, in (0, 1).
    n_val : int, default=500
        Held-out rows scoring each width (N queries each).
    stop_at_target : bool, default=True
        End each width's fit of the two searches once it meets
        ``target_r2`` on the search's held-out rows, checked every 25 steps
        (:class:`~stsq_learn.studies.StopAtTarget`): the score at the stop is
        the width's score. False trains every width all its steps.
    estimator : SparseTokenAverager, default=the width-following SGD
        The attention model of the search against q, of the transfer (its
        hyperparameters give the selector's too) and of the length part.
    q_values : tuple of int, default=(1, 2, 3)
        Subset sizes q of the search against q, increasing.
    q_seq_len : int, default=16
        N of the search against q.
    q_widths : tuple of int, default=(4, 6, 8, 12, ..., 256)
        Its width grid, increasing.
    q_steps : int or "auto", default=400
        Its online steps per width; ``"auto"`` is the estimator's own plan,
        which grows with the width.
    transfer_task : tuple of 3 int, default=(32, 8, 4)
        (N, d, q) of the transfer.
    transfer_width : int, default=64
        Width of both transfer models.
    transfer_steps : int or "auto", default=300
        Online steps of each transfer model.
    length_task : tuple of 3 int, default=(16, 8, 2)
        (N, d, q) the length part trains at.
    length_width : int, default=32
        Width of the length part's models.
    length_steps : int or "auto", default=400
        Online steps of each.
    factors : tuple of int, default=(1, 2, 4)
        Evaluation lengths of the length part, as multiples of its N, increasing.
    n_test : int, default=4000
        Held-out queries of the transfer and length parts: ``n_test`` rows of
        sparse token selection, ``ceil(n_test / N)`` rows of qSA.

    Examples
    --------
    >>> from stsq_learn.experiments import SparseAveragingSettings
    >>> SparseAveragingSettings(seq_lens=(4, 8)).replace(q_values=(1, 2)).q_values
    (1, 2)
    """

    _parameter_constraints = {
        "seq_lens": [positive_ints(increasing=True)],
        "n_features": _COUNT,
        "n_selected": _COUNT,
        "transformer": [SparseTokenAverager],
        "fcn": [FCNAverager],
        "widths": [MappingOf(_MODELS, positive_ints(increasing=True))],
        "n_steps": [MappingOf(_MODELS, *_COUNT)],
        "fcn_max_seq_len": _COUNT,
        "target_r2": [Interval(numbers.Real, 0, 1, closed="neither")],
        "n_val": _COUNT,
        "stop_at_target": ["boolean"],
        "estimator": [SparseTokenAverager],
        "q_values": [positive_ints(increasing=True)],
        "q_seq_len": _COUNT,
        "q_widths": [positive_ints(increasing=True)],
        "q_steps": _STEPS,
        "transfer_task": [SequenceOf(*_COUNT, min_len=3)],
        "transfer_width": _COUNT,
        "transfer_steps": _STEPS,
        "length_task": [SequenceOf(*_COUNT, min_len=3)],
        "length_width": _COUNT,
        "length_steps": _STEPS,
        "factors": [positive_ints(increasing=True)],
        "n_test": _COUNT,
    }

    seq_lens: tuple = (4, 8, 16, 32)
    n_features: int = 2
    n_selected: int = 2
    transformer: SparseTokenAverager = _ATTENTION
    fcn: FCNAverager = _FCN
    widths: dict = field(default_factory=lambda: dict(_WIDTHS))
    n_steps: dict = field(default_factory=lambda: dict(_N_STEPS))
    fcn_max_seq_len: int = 8
    target_r2: float = 0.9
    n_val: int = 500
    stop_at_target: bool = True
    estimator: SparseTokenAverager = _SGD
    q_values: tuple = (1, 2, 3)
    q_seq_len: int = 16
    q_widths: tuple = (4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
    q_steps: int | str = 400  # q = 3 (width 96) as good as the planned 1470 steps
    transfer_task: tuple = (32, 8, 4)
    transfer_width: int = 64
    transfer_steps: int | str = 300  # 1.01x the floor, as the planned 1200 steps
    length_task: tuple = (16, 8, 2)
    length_width: int = 32
    length_steps: int | str = 400  # the planned 960 steps took 2.4x the time, same shape
    factors: tuple = (1, 2, 4)
    n_test: int = 4000

    def __post_init__(self):
        for name, default in (("widths", _WIDTHS), ("n_steps", _N_STEPS)):
            if isinstance(self[name], dict):  # a model left out keeps its default
                object.__setattr__(self, name, {**default, **self[name]})
        super().__post_init__()

    def _validate(self):
        for name in ("transfer_task", "length_task"):
            if len(self[name]) != 3:
                raise ValueError(f"{name} must be (N, d, q), got {self[name]!r}.")
        for name in ("transformer", "fcn", "estimator"):
            self[name]._validate_params()
        # Every task made once: a bad (N, d, q) is refused by its task before any fit.
        SparseAveragingTask(self.seq_lens[0], self.n_features, self.n_selected)
        SparseAveragingTask(self.q_seq_len, self.n_features, self.q_values[-1])
        SparseTokenSelectionTask(*self.transfer_task)
        SparseAveragingTask(*self.transfer_task)
        SparseAveragingTask(*self.length_task)


class FloorWidths:
    """The smallest width of a grid whose isotropic floor allows the target, per q.

    The floor is a property of (N, q, width): simulated once, on fixed
    draws (``random_state=0``), it sets where every seed's search against q
    starts (:meth:`start`).

    Parameters
    ----------
    seq_len : int
        N.
    grid : sequence of int
        The widths, increasing.
    target : float
        The R^2 to allow: ``1 - floor >= target``.
    """

    def __init__(self, seq_len, grid, target):
        self.seq_len, self.grid, self.target, self.found = seq_len, grid, target, {}

    def allows(self, q, width):
        """Whether the floor at (N, q, width) allows the target."""
        floor = isotropic_floor(
            self.seq_len, q, width, n_samples=_FLOOR_SAMPLES, random_state=0
        ).relative_mse
        return 1.0 - floor >= self.target

    def __call__(self, q):
        """The width (None if the grid's largest does not allow the target), by bisection."""
        if q not in self.found:
            grid = self.grid
            lo, hi = -1, len(grid) - 1
            if self.allows(q, grid[hi]):
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    lo, hi = (lo, mid) if self.allows(q, grid[mid]) else (mid, hi)
                self.found[q] = grid[hi]
            else:
                self.found[q] = None
        return self.found[q]

    def start(self, params, previous):
        """Where q's search starts: the larger of its floor's width and the previous q's."""
        width = self(params["n_selected"])
        begin = self.grid[-1] if width is None else width
        if width is not None and previous is not None and previous["reached"]:
            begin = max(begin, previous["value"])
        return begin


class TransferredScore:
    """Scorer of a fitted selector: R^2 on qSA of its W, with no training (picklable).

    Parameters
    ----------
    task : SparseAveragingTask
        The qSA law.
    n_rows : int
        Held-out qSA rows (the seed's :func:`~stsq_learn.studies.fits.test_rows`).
    """

    def __init__(self, task, n_rows):
        self.task, self.n_rows = task, n_rows

    def __call__(self, selector, X, y):
        """R^2 of :meth:`SparseTokenAverager.from_selector` on the seed's qSA rows."""
        X_qsa, y_qsa = test_rows(self.task, selector.random_state, self.n_rows)
        averager = SparseTokenAverager.from_selector(selector, n_selected=self.task.n_selected)
        return averager.score(X_qsa, y_qsa)


def _own_score(estimator, X, y):
    return estimator.score(X, y)


# -- the studies -----------------------------------------------------------------------------
@reusing_batches
def run(cfg, seeds, *, device=None, progress=False, n_jobs=None):
    """The experiment's studies over every seed: ``by_length``, ``by_q``, ``transfer``, ``length``.

    Every seed of a model at a point trains as one batched model where the
    seeds move in lockstep; the searches' fits that stop at the target fit
    one after another (the studies decide).

    Parameters
    ----------
    cfg : SparseAveragingSettings
        The settings.
    seeds : tuple of int
        The seeds.
    device : str or None, default=None
        Training device (None: each estimator's own).
    progress : bool, default=False
        Progress bars.
    n_jobs : int or None, default=None
        Fits at once in each study.

    Returns
    -------
    dict of str to StudyTable
        ``by_length`` and ``by_q`` (:func:`~stsq_learn.studies.minimal_width`;
        ``by_q`` with ``floor_width``), ``transfer`` (``model``, ``seed``,
        ``relative_mse``, ``floor``) and ``length``
        (:func:`~stsq_learn.studies.length_curve`).
    """
    common = dict(seeds=seeds, device=device, progress=progress, n_jobs=n_jobs, batch_seeds=True)
    search = dict(target=cfg.target_r2, stop_at_target=cfg.stop_at_target, n_test=cfg.n_val)
    task = SparseAveragingTask(cfg.seq_lens[0], cfg.n_features, cfg.n_selected)
    parts = []
    for name in _MODELS:
        lens = [N for N in cfg.seq_lens if name == "transformer" or N <= cfg.fcn_max_seq_len]
        if lens:
            parts.append(
                minimal_width(
                    {LABELS[name]: cfg[name]},
                    task,
                    cfg.widths[name],
                    grid={"seq_len": lens},
                    n_steps=cfg.n_steps[name],
                    **search,
                    **common,
                )
            )
    floors = FloorWidths(cfg.q_seq_len, cfg.q_widths, cfg.target_r2)
    by_q = minimal_width(
        {"attention": cfg.estimator},
        SparseAveragingTask(cfg.q_seq_len, cfg.n_features, cfg.q_values[0]),
        cfg.q_widths,
        grid={"n_selected": list(cfg.q_values)},
        start=floors.start,
        n_steps=cfg.q_steps,
        **search,
        **common,
    )
    by_q = by_q.with_columns(floor_width=[floors(int(q)) for q in by_q["param_n_selected"]])

    N, d, q = cfg.transfer_task
    averager = clone(cfg.estimator).set_params(width=cfg.transfer_width)
    qsa, rows = SparseAveragingTask(N, d, q), -(-cfg.n_test // N)
    selector = sweep(
        {"selector": SparseTokenSelector(**averager.get_params())},
        SparseTokenSelectionTask(N, d, q),
        scoring={"sts_q": _own_score, "qsa": TransferredScore(qsa, rows)},
        n_steps=cfg.transfer_steps,
        n_test=cfg.n_test,
        **common,
    )
    trained = sweep({"averager": averager}, qsa, n_steps=cfg.transfer_steps, n_test=rows, **common)
    transfer = {"model": [], "seed": [], "relative_mse": [], "floor": []}
    for seed in selector.unique("seed"):
        own, other = selector.where(seed=seed)[0], trained.where(seed=seed)[0]
        floor = isotropic_floor(N, q, cfg.transfer_width, random_state=stream_seed(seed, "floor"))
        transfer["model"] += list(TRANSFER)
        transfer["seed"] += [seed] * 3
        transfer["relative_mse"] += [1.0 - own["sts_q"], 1.0 - own["qsa"], 1.0 - other["score"]]
        transfer["floor"] += [floor.relative_mse] * 3

    N, d, q = cfg.length_task
    model = clone(cfg.estimator).set_params(width=cfg.length_width)
    length = length_curve(
        {pe: clone(model).set_params(positional_encoding=pe) for pe in ENCODINGS},
        SparseAveragingTask(N, d, q),
        [f * N for f in cfg.factors],
        n_steps=cfg.length_steps,
        n_test=-(-cfg.n_test // N),
        **common,
    )
    return {
        "by_length": StudyTable.concat(parts),
        "by_q": by_q,
        "transfer": StudyTable(transfer),
        "length": length,
    }


# -- what the tables give --------------------------------------------------------------------
def width_laws(result, model="attention"):
    """Per seed, the law of ``model``'s minimal widths against N (:data:`LAWS`).

    ``a + b log2 N`` for the attention model, ``b N^c`` for the FCN; a seed
    with minimal widths at fewer than 3 N has none (None).

    Parameters
    ----------
    result : ExperimentResult
        A run, or a one-seed view.
    model : {"attention", "fcn"}, default="attention"
        The model.

    Returns
    -------
    dict of int to Law or None
    """
    rows = result.tables["by_length"].where(model=model)
    return fit_laws(rows, "seq_len", "value", LAWS[model])


def headline(result):
    """The numbers one seed's run is judged by, flat.

    Minimal widths against N (``attention_width_N<N>``, ``fcn_width_N<N>``;
    NaN where none of the grid reached the target or N was not searched);
    ``attention_width_growth``, the attention model's width at the longest
    N reached over the shortest; the laws ``attention_log_law_a``, ``_b``,
    ``_r2`` and ``fcn_power_law_b``, ``_c``, ``_r2`` (NaN with widths at
    fewer than 3 N); against q, ``attention_width_q<q>`` and the isotropic
    floor's ``floor_width_q<q>``; the transfer's ``transfer_floor``,
    ``transfer_<model>_relative_mse`` and ``transfer_<model>_floor_ratio``;
    the length part's R^2, ``length_<encoding>_r2_at_<k>N``.

    Parameters
    ----------
    result : ExperimentResult
        A one-seed view (:meth:`ExperimentResult.seed`).

    Returns
    -------
    dict of str to float
    """
    c, tables = result.settings, result.tables
    out = {}
    for label in LABELS.values():
        for N in c["seq_lens"]:
            found = tables["by_length"].where(model=label, seq_len=N)["value"]
            out[f"{label}_width_N{N}"] = float(found[0]) if len(found) else math.nan
    _, widths = tables["by_length"].where(model="attention").xy("seq_len", "value")
    out["attention_width_growth"] = widths[-1] / widths[0] if len(widths) >= 2 else math.nan
    for label, name in (("attention", "log"), ("fcn", "power")):
        (law,) = width_laws(result, label).values() or [None]
        params = ("a", "b") if LAWS[label] == "log2" else ("b", "c")
        for p in params:
            out[f"{label}_{name}_law_{p}"] = math.nan if law is None else law.params[p]
        out[f"{label}_{name}_law_r2"] = math.nan if law is None else law.r2
    for row in tables["by_q"]:
        q = row["param_n_selected"]
        out[f"attention_width_q{q}"] = row["value"]
        out[f"floor_width_q{q}"] = row["floor_width"]
    transfer = tables["transfer"]
    out["transfer_floor"] = transfer["floor"][0]
    for row in transfer:
        key = row["model"].replace(" ", "_").replace("on_", "").lower()
        out[f"transfer_{key}_relative_mse"] = row["relative_mse"]
        out[f"transfer_{key}_floor_ratio"] = row["relative_mse"] / row["floor"]
    N = c["length_task"][0]
    for row in tables["length"]:
        out[f"length_{row['model']}_r2_at_{row['eval_seq_len'] // N}N"] = row["score"]
    return out


def widths_text(table, x):
    """A search's minimal widths along ``x`` as text: ``median [min, max]`` over the seeds.

    ``(k of n none)`` where k seeds reached no width; ``>b`` where none did,
    above ``b`` (the largest width that failed); ``-`` where none was searched.

    Parameters
    ----------
    table : StudyTable
        One curve's rows of :func:`~stsq_learn.studies.minimal_width` (every seed).
    x : str
        The column along which the widths were searched.

    Returns
    -------
    str
    """
    out = []
    for (_,), rows in table.groups(x):
        values, bounds = rows.xy("seed", "value")[1], rows.xy("seed", "bound")[1]
        if len(values):
            missed = len(rows) - len(values)
            out.append(
                fmt_band(band(values)) + (f" ({missed} of {len(rows)} none)" if missed else "")
            )
        else:
            out.append(f">{max(bounds):g}" if len(bounds) else "-")
    return " / ".join(out) or "-"


def summary(result):
    """Summary rows: the widths and their laws, the widths against q, the transfer, the length."""
    c, bands, tables = result.settings, result.bands(), result.tables

    def b(key):
        return fmt_band(bands[key])

    rows = [
        f"| qSA widths (d={c['n_features']}, q={c['n_selected']}, R^2 >= {c['target_r2']}) "
        f"| N = {', '.join(map(str, c['seq_lens']))} | |"
    ]
    for label, name in (("attention", "attention"), ("fcn", "FCN")):
        text = widths_text(tables["by_length"].where(model=label), "seq_len")
        rows.append(f"| | minimal width, {name} | {text} |")
    rows.append(
        f"| | attention: minimal width, longest N over shortest | {b('attention_width_growth')} |"
    )
    if math.isfinite(bands["attention_log_law_b"]["median"]):
        rows.append(
            f"| | attention: w = a + b log2(N), per seed | a {b('attention_log_law_a')}, "
            f"b {b('attention_log_law_b')}, fit R^2 {b('attention_log_law_r2')} |"
        )
    if math.isfinite(bands["fcn_power_law_c"]["median"]):
        rows.append(
            f"| | FCN: w = b N^c, per seed | b {b('fcn_power_law_b')}, c {b('fcn_power_law_c')}, "
            f"fit R^2 {b('fcn_power_law_r2')} |"
        )
    qs = ", ".join(map(str, c["q_values"]))
    text = widths_text(tables["by_q"], "n_selected")
    rows.append(f"| | minimal width, attention at N={c['q_seq_len']}, q = {qs} | {text} |")
    floors = " / ".join(b(f"floor_width_q{q}") for q in c["q_values"])
    rows.append(f"| | width the isotropic floor allows, q = {qs} | {floors} |")
    N, d, q = c["transfer_task"]
    rows.append(
        f"| qSA transfer (N={N}, d={d}, q={q}, m={c['transfer_width']}) "
        f"| isotropic floor (relative MSE) | {b('transfer_floor')} |"
    )
    for model in TRANSFER:
        key = model.replace(" ", "_").replace("on_", "").lower()
        rows.append(
            f"| | relative MSE, {model} | {b(f'transfer_{key}_relative_mse')} "
            f"({b(f'transfer_{key}_floor_ratio')}x the floor) |"
        )
    N, _, q = c["length_task"]
    lens = ", ".join(str(f * N) for f in c["factors"])
    rows.append(
        f"| qSA length (trained at N={N}, q={q}, m={c['length_width']}) | R^2 at N' = {lens} | |"
    )
    for pe in ENCODINGS:
        text = " / ".join(b(f"length_{pe}_r2_at_{f}N") for f in c["factors"])
        rows.append(f"| | {pe} | {text} |")
    return rows


# -- the figure ------------------------------------------------------------------------------
def figure(result, axes=None):
    """The four panels over the seeds: widths against N and q, the transfer, the length.

    Minimal widths against N (both models, log-log, each law the median of
    the seeds' laws, drawn over the N it was fitted on) and against q
    (beside the widths the isotropic floor allows), medians with min-max
    error bars and the lower bounds of seeds that reached no width; the
    transfer's relative MSEs as median bars with min-max error bars beside
    the floor; the length part's R^2, medians with the min-max shaded.

    Parameters
    ----------
    result : ExperimentResult
        A run of :func:`sparse_averaging` (every seed).
    axes : sequence of 4 matplotlib Axes, default=None
        Where to draw; None makes a new figure (two rows of two).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, (ax_n, ax_q, ax_tr, ax_len) = new_axes(axes, 4, ncols=2)
    c, tables = result.settings, result.tables
    ylabel = f"smallest width reaching $R^2 \\geq {c['target_r2']}$"
    laws = {label: Law.median(width_laws(result, label)) for label in LAWS}
    BandDisplay.from_table(
        tables["by_length"],
        x="seq_len",
        y="value",
        laws={label: law for label, law in laws.items() if law is not None},
        law_variable="N",
        bound="bound",
        ax=ax_n,
        style="errorbar",
        logx=True,
        logy=True,
        labels={"attention": "attention (SPE)", "fcn": "FCN"},
        xlabel="positions N (log scale)",
        ylabel=ylabel,
        title=f"qSA: width against N (d={c['n_features']}, q={c['n_selected']})",
    )
    by_q = tables["by_q"]
    qs, floors = by_q.where(seed=result.seeds[0]).xy("n_selected", "floor_width")
    BandDisplay.from_table(
        by_q,
        x="n_selected",
        y="value",
        theory={"isotropic floor allows": (qs, floors)},
        bound="bound",
        ax=ax_q,
        style="errorbar",
        logx=True,
        logy=True,
        labels={"attention": "trained: smallest width reaching"},
        xlabel="subset size q (log scale)",
        ylabel=ylabel,
        title=f"qSA: width against q (N={c['q_seq_len']}, d={c['n_features']})",
    )
    _transfer_panel(tables["transfer"], ax_tr, c)
    N, _, q = c["length_task"]
    BandDisplay.from_table(
        tables["length"],
        x="eval_seq_len",
        y="score",
        ax=ax_len,
        logx=True,
        colors={"stochastic": "C0", "fixed": "C3"},
        labels={pe: f"{pe} encodings (trained at N={N})" for pe in ENCODINGS},
        xlabel="evaluation positions N' (log scale)",
        ylabel="$R^2$ over every position",
        title=f"qSA: length generalization (q={q}, m={c['length_width']})",
    )
    return fig


def _transfer_panel(table, ax, c):
    """Median relative MSE of each transfer model, min-max error bars, beside the floor."""
    bands = table.bands("model", "relative_mse", by=())
    med, lo, hi = (np.nan_to_num(np.asarray(bands[k], float)) for k in ("median", "min", "max"))
    several = len(table) > len(TRANSFER)
    bars = ax.bar(
        range(len(TRANSFER)),
        med,
        yerr=[med - lo, hi - med] if several else None,
        capsize=4,
        color=["C1", "C0", "C2"],
    )
    floor = float(np.median(table["floor"]))
    ax.axhline(floor, color="k", ls="--", lw=1, label=f"isotropic floor {floor:.3f}")
    for bar, top, value, model in zip(bars, hi, med, TRANSFER):
        rows = table.where(model=model)
        ratio = float(np.median(rows["relative_mse"] / rows["floor"]))
        x = bar.get_x() + bar.get_width() / 2
        text = f"{value:.3f}\n({ratio:.2f}x)"
        ax.annotate(text, (x, top), ha="center", va="bottom", fontsize="small")
    ax.set_xticks(range(len(TRANSFER)), [n.replace(" on ", "\non ") for n in TRANSFER])
    ax.set_ylim(0, 1.45 * max([*hi, floor]))
    ax.set_ylabel("relative MSE (1 - $R^2$)")
    N, d, q = c["transfer_task"]
    ax.set_title(
        f"Zero-shot transfer STS$_q$ -> qSA (N={N}, d={d}, q={q}, m={c['transfer_width']})"
    )
    ax.legend(fontsize="small", loc="upper center")


@document_experiment
def sparse_averaging(
    settings=None, *, seeds=3, device=None, progress=False, n_jobs=None, **changes
):
    """Widths against N and q, zero-shot transfer and length generalization on qSA.

    One attention layer of width O~(d + q log N) represents q-sparse
    averaging, where a fully-connected net needs Omega~(N d): the minimal
    widths against N of both, their laws fitted per seed, the widths against
    q beside the isotropic floor, a selector trained on sparse token
    selection answering qSA with no training, and the R^2 of stochastic and
    fixed encodings at longer lengths (see
    :mod:`stsq_learn.tasks.averaging.experiment`; the settings:
    :class:`SparseAveragingSettings`).

    Parameters
    ----------
    {parameters}

    Returns
    -------
    {returns}

    Examples
    --------
    >>> from stsq_learn.experiments import sparse_averaging
    >>> result = sparse_averaging("tiny", seeds=2)
    >>> sorted(result.tables), result.seeds
    (['by_length', 'by_q', 'length', 'transfer'], (0, 1))
    >>> result.bands()["attention_width_N4"]["values"]
    [4.0, 4.0]
    """
    return RECORD(settings, changes, seeds=seeds, device=device, progress=progress, n_jobs=n_jobs)


PROVENANCE = {
    "tokens": "paper: Gaussian tokens",
    "subsets": "paper: uniform q-subsets (one per position: Sanford, Hsu and Telgarsky, 2023)",
    "width_law": "paper: width O~(d + q log N) for attention against Omega~(N d) for the FCN; "
    "fitted here per seed (a + b log2 N, b N^c)",
    "batch_size": "ours: 256 queries a step (ceil(256 / N) rows of qSA); the transfer's "
    "selector trains on the paper's fresh batch of 256 rows per step",
    "transformer": "ours: Adam at 0.1, decayed by a cosine",
    "fcn": "ours: Adam at 0.01 (quick) or 0.003 with a cosine (full, gpu)",
    "estimator": "ours: the estimators' width-following SGD",
    "seq_lens, n_features, n_selected, fcn_max_seq_len, widths, n_steps": "ours: the search "
    "against N, chosen for these presets",
    "target_r2, n_val": "ours: R^2 >= 0.9 (tiny: 0.5) on the search's held-out rows",
    "stop_at_target": "ours: a fit ends once it meets the target on the search's validation rows",
    "q_values, q_seq_len, q_widths, q_steps": "ours: the search against q, each q starting at "
    "the width its isotropic floor allows",
    "transfer_task, transfer_width, transfer_steps": "ours: the transfer's sizes and budget",
    "length_task, length_width, length_steps, factors": "ours: the length part's sizes, budget "
    "and test lengths",
    "n_test": "ours: held-out queries of the transfer and the length part",
    "metric": "ours: R^2 = 1 - relative MSE, and the relative MSE",
    "seeds": "ours: 3 at tiny and quick, the fits of all seeds in one call of each study",
}
"""Setting -> ``"paper: ..."`` or ``"ours: ..."``: where each setting comes from."""

_ATTENTION_GRID = (4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 128)
_FCN_GRID = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
_Q_GRID = (4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
# N = 4 ... 256 (the FCN to 32), q = 1, 2, 4, 8 at N = 32, the transfer at N = 64, q = 4,
# width 256, the length part at N = 32.
_FULL = dict(
    seq_lens=(4, 8, 16, 32, 64, 128, 256),
    fcn=_FCN_LONG,
    widths={"transformer": _ATTENTION_GRID, "fcn": _FCN_GRID},
    n_steps={"transformer": 1000, "fcn": 2000},
    fcn_max_seq_len=32,
    n_val=1000,
    q_values=(1, 2, 4, 8),
    q_seq_len=32,
    q_widths=_Q_GRID,
    q_steps="auto",
    transfer_task=(64, 8, 4),
    transfer_width=256,
    transfer_steps="auto",
    length_task=(32, 8, 2),
    length_width=64,
    length_steps="auto",
    n_test=8000,
)

RECORD = Experiment(
    name="qsa",
    function=sparse_averaging,
    settings=SparseAveragingSettings,
    presets={
        "tiny": dict(
            seq_lens=(4, 8),
            widths={"transformer": (4, 8), "fcn": (4, 8)},
            n_steps={"transformer": 20, "fcn": 20},
            target_r2=0.5,
            n_val=100,
            q_values=(1, 2),
            q_seq_len=8,
            q_widths=(4, 8),
            q_steps=20,
            transfer_task=(8, 2, 2),
            transfer_width=8,
            transfer_steps=20,
            length_task=(8, 2, 2),
            length_width=8,
            length_steps=20,
            factors=(1, 2),
            n_test=400,
        ),
        "quick": {},  # about 25 s on one core: N to 32 (the FCN to 8), q to 3 at N = 16
        "full": _FULL,
        "gpu": {
            **_FULL,
            "seq_lens": (4, 8, 16, 32, 64, 128, 256, 512, 1024),
            "widths": {"transformer": _ATTENTION_GRID, "fcn": (*_FCN_GRID, 8192, 16384)},
            "n_steps": {"transformer": 2000, "fcn": 4000},
            "fcn_max_seq_len": 64,
            "n_val": 4000,
            "q_values": (1, 2, 4, 8, 16),
            "q_seq_len": 64,
            "q_widths": (*_Q_GRID, 1536, 2048),
            "transfer_width": 1024,
            "length_task": (64, 8, 2),
            "length_width": 128,
            "factors": (1, 2, 4, 8),
            "n_test": 64000,
        },
    },
    run=run,
    figure=figure,
    headline=headline,
    summary=summary,
    provenance=PROVENANCE,
    aliases=("averaging",),
    # Widths of grids whose neighbours are at most twice apart: one step either way.
    reference_rtol={
        "*width_N*": 0.5,
        "*width_q*": 0.5,
        "attention_width_growth": 0.5,
        "attention_log_law_*": 0.5,
        "fcn_power_law_*": 0.5,
    },
)
