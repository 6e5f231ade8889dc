"""Experiment 5: q-sparse averaging (qSA), the task with one query per position.

A composition of the study tools (:mod:`stsq_learn.studies`): the smallest
width reaching a target R^2 against the number of positions N (the attention
model and the FCN, :func:`~stsq_learn.studies.minimal_width`, with the growth
laws of :func:`~stsq_learn.studies.fit_law`) and against the subset size q;
zero-shot transfer of a W fitted on sparse token selection
(:func:`~stsq_learn.studies.sweep`); length generalization of stochastic and
fixed encodings (:func:`~stsq_learn.studies.length_curve`). Every seed follows
the studies' one rule (:mod:`stsq_learn.studies.seeds`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sklearn.base import clone

from ..._validation import check_bool, check_positive_int
from ...encodings.floor import isotropic_floor
from ...engine.batch_reuse import reusing_batches
from ...experiments._settings import Settings
from ...studies import (
    StudyTable,
    check_seeds,
    fit_law,
    length_curve,
    minimal_width,
    stream_seed,
    sweep,
)
from ...studies.fits import test_rows
from .. import SparseAveragingTask, SparseTokenSelectionTask
from ..selection.estimators import SparseTokenSelector
from .estimators import FCNAverager, SparseTokenAverager
from .experiment_plots import plot_figure

_DEFAULT_MODELS = {
    # The q=2 search by N: Adam decayed by a cosine. The width-following SGD keeps
    # gamma's travel fixed, and q=2's best gamma is infinite: at N=256 it needs width 40
    # where this needs 24 (measured, 1000 steps).
    "transformer": SparseTokenAverager(
        solver="adam", learning_rate_init=0.1, learning_rate="cosine", batch_size="auto"
    ),
    "fcn": FCNAverager(solver="adam", learning_rate_init=0.01, batch_size=1024),
    # Everything else: the estimators' width-following SGD (their defaults, set here).
    "estimator": SparseTokenAverager(
        solver="sgd", learning_rate_init="auto", learning_rate="cooldown", batch_size="auto"
    ),
}
_DEFAULT_WIDTHS = {"transformer": (4, 8, 16, 32, 64), "fcn": (8, 32, 128, 512)}
_DEFAULT_STEPS = {"transformer": 300, "fcn": 500}
_LABELS = {"transformer": "attention", "fcn": "fcn"}
_FLOOR_SAMPLES = 20_000
"""Rows simulated per isotropic floor of the search against q (standard error about 0.001)."""
_TRANSFER = ("selector on STS_q", "selector on qSA", "averager on qSA")


class SparseAveragingSettings(Settings):
    """The settings of :func:`sparse_averaging`: the searches, the transfer and the length part.

    Attributes
    ----------
    seq_lens : tuple of int, default=(4, 8, 16, 32)
        The numbers of positions N of the width search.
    n_features, n_selected : int, default=2, 2
        Token dimension d and subset size q of the search against N. With
        q = 2 the floor is about 0 at a few dozen widths; keep d small so the
        FCN reaches the target within its grid.
    transformer : SparseTokenAverager or None, default=None
        The attention model of the search against N (cloned per width and
        seed). None is Adam at 0.1 decayed by a cosine,
        ``batch_size="auto"`` (256 queries a step).
    fcn : FCNAverager or None, default=None
        The FCN of the search against N. None is Adam at 0.01, 1024 rows a step.
    widths : dict or None, default=None
        Width grids ``{"transformer": (...), "fcn": (...)}`` of the search
        against N; a model left out keeps ``(4, 8, 16, 32, 64)`` /
        ``(8, 32, 128, 512)``.
    n_steps : dict or None, default=None
        Online steps per width and model of the search against N; default
        ``{"transformer": 300, "fcn": 500}``.
    fcn_max_seq_len : int, default=8
        Longest N the FCN is searched at.
    target_r2 : float, default=0.9
        The R^2 a width must reach.
    n_val : int, default=1000
        Held-out rows scoring each width (N queries each).
    estimator : SparseTokenAverager or None, default=None
        The attention model of the search against q, of the transfer (its
        hyperparameters give the selector's too) and of the length part.
        None is the estimators' width-following SGD (``solver="sgd"``,
        ``learning_rate_init="auto"``, ``learning_rate="cooldown"``,
        ``batch_size="auto"``).
    q_values : tuple of int, default=(1, 2, 3)
        Subset sizes q of the search against q.
    q_seq_len : int, default=16
        N of the search against q (``n_features`` tokens).
    q_widths : tuple of int, default=(4, 6, ..., 128)
        Its width grid.
    q_steps : int or "auto", default="auto"
        Its online steps per width; ``"auto"`` is the estimator's own plan,
        which grows with the width.
    transfer_task : tuple of 3 int, default=(32, 8, 4)
        (N, d, q) of the transfer.
    transfer_width : int, default=64
        Width of both transfer models.
    transfer_steps : int or "auto", default="auto"
        Online steps of each transfer model.
    length_task : tuple of 3 int, default=(16, 8, 2)
        (N, d, q) the length part trains at.
    length_width : int, default=32
        Width of the length part's models.
    length_steps : int or "auto", default="auto"
        Online steps of each.
    factors : tuple of int, default=(1, 2, 4)
        Evaluation lengths of the length part, as multiples of its N.
    n_test : int, default=4000
        Held-out queries of the transfer and length parts: ``n_test`` rows of
        sparse token selection, ``ceil(n_test / N)`` rows of qSA.
    stop_at_target : bool, default=True
        End each width's fit of the two searches (against N and against q)
        once it meets ``target_r2`` on the search's held-out rows, checked
        every 25 steps (:class:`~stsq_learn.studies.StopAtTarget`): the
        score at the stop is the width's score. False trains every width
        all its steps.

    Examples
    --------
    >>> from stsq_learn.experiments import SparseAveragingSettings
    >>> SparseAveragingSettings(seq_lens=(4, 8)).replace(q_values=(1, 2)).q_values
    (1, 2)
    """

    seq_lens: tuple = (4, 8, 16, 32)
    n_features: int = 2
    n_selected: int = 2
    transformer: SparseTokenAverager | None = None
    fcn: FCNAverager | None = None
    widths: dict | None = None
    n_steps: dict | None = None
    fcn_max_seq_len: int = 8
    target_r2: float = 0.9
    n_val: int = 1000
    estimator: SparseTokenAverager | None = None
    q_values: tuple = (1, 2, 3)
    q_seq_len: int = 16
    q_widths: tuple = (4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
    q_steps: int | str = "auto"
    transfer_task: tuple = (32, 8, 4)
    transfer_width: int = 64
    transfer_steps: int | str = "auto"
    length_task: tuple = (16, 8, 2)
    length_width: int = 32
    length_steps: int | str = "auto"
    factors: tuple = (1, 2, 4)
    n_test: int = 4000
    stop_at_target: bool = True


@dataclass
class SparseAveragingResult:
    """Widths, transfer and length generalization on q-sparse averaging, for one seed.

    Every part is a :class:`~stsq_learn.studies.StudyTable` of the seed's
    rows; the results of several seeds draw their bands together
    (:meth:`plot_bands`).

    Attributes
    ----------
    config : dict
        The experiment's settings and the seed (``random_state``).
    by_length : StudyTable
        :func:`~stsq_learn.studies.minimal_width` against N
        (``param_seq_len``) for ``model`` ``"attention"`` and ``"fcn"`` (the
        FCN up to ``fcn_max_seq_len``): ``value`` (the minimal width, NaN
        where none of the grid reached the target or the N was not
        searched), ``bound`` (the largest width that failed there).
    by_q : StudyTable
        The attention model's minimal width against q (``param_n_selected``)
        at ``q_seq_len``, and ``floor_width``: the smallest width of the grid
        whose isotropic floor (:func:`~stsq_learn.isotropic_floor`) is at
        most ``1 - target_r2`` (NaN if none is), where each search starts.
    transfer : StudyTable
        One row per ``model``: ``"selector on STS_q"`` (a
        :class:`~stsq_learn.SparseTokenSelector` trained on sparse token
        selection), ``"selector on qSA"`` (its W through
        :meth:`~stsq_learn.SparseTokenAverager.from_selector`, no training)
        and ``"averager on qSA"`` (trained on qSA): ``relative_mse``
        (1 - R^2 on the seed's held-out queries), ``floor`` (the isotropic
        floor at the same N, q and width) and ``floor_ratio``.
    length : StudyTable
        :func:`~stsq_learn.studies.length_curve` of averagers trained at
        ``length_task`` with ``model`` ``"stochastic"`` and ``"fixed"``
        encodings: ``score`` (R^2) at each ``eval_seq_len``.
    seconds : dict of str to float
        Wall-clock seconds of each part (for all the seeds run together).

    Examples
    --------
    >>> from stsq_learn.experiments import PRESETS, sparse_averaging
    >>> res = sparse_averaging(PRESETS["tiny"]["qsa"], random_state=0)
    >>> res.transfer.unique("model")
    ['selector on STS_q', 'selector on qSA', 'averager on qSA']
    """

    config: dict
    by_length: StudyTable
    by_q: StudyTable
    transfer: StudyTable
    length: StudyTable
    seconds: dict = field(default_factory=dict)

    def law(self, model="attention"):
        """The growth law of a model's minimal widths against N, where it describes them.

        ``a + b log2 N`` for the attention model, ``b N^c`` for the FCN,
        fitted to the minimal widths found at 3 or more N.

        Parameters
        ----------
        model : {"attention", "fcn"}, default="attention"
            The model.

        Returns
        -------
        Law or None
            None with minimal widths at fewer than 3 N.
        """
        return _growth_law(self.by_length, model)

    def width_growth(self, model="attention"):
        """A model's minimal width at the longest N found over that at the shortest.

        Parameters
        ----------
        model : {"attention", "fcn"}, default="attention"
            The model.

        Returns
        -------
        float or None
            None with fewer than two minimal widths.
        """
        _, widths = self.by_length.where(model=model).xy("seq_len", "value")
        return float(widths[-1] / widths[0]) if len(widths) >= 2 else None

    def to_dict(self):
        """JSON-ready dict: the settings, every part's table (``to_dict()``), laws and growth.

        Returns
        -------
        dict
            ``config``, ``by_length``, ``by_q``, ``transfer``, ``length``
            (each a :meth:`StudyTable.to_dict`), ``laws`` (model to
            :meth:`Law.to_dict` or None), ``width_growth`` and ``seconds``.
        """
        laws = {m: self.law(m) for m in ("attention", "fcn")}
        return {
            "config": self.config,
            "by_length": self.by_length.to_dict(),
            "by_q": self.by_q.to_dict(),
            "transfer": self.transfer.to_dict(),
            "length": self.length.to_dict(),
            "laws": {m: None if law is None else law.to_dict() for m, law in laws.items()},
            "width_growth": self.width_growth(),
            "seconds": dict(self.seconds),
        }

    def plot(self, axes=None):
        """Widths against N, widths against q, transfer, and length generalization.

        Parameters
        ----------
        axes : sequence of 4 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 4 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure holding the axes.
        """
        return SparseAveragingResult.plot_bands([self], axes)

    @staticmethod
    def plot_bands(results, axes=None):
        """The figure of :meth:`plot` over seeds: medians with their min-max bands.

        Parameters
        ----------
        results : sequence of SparseAveragingResult
            One per seed, of the same settings.
        axes : sequence of 4 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 4 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            Minimal widths against N (both models, their laws drawn over the
            N they were fitted on) and against q (beside the widths the
            isotropic floor allows) as medians with min-max error bars and
            the lower bounds of seeds that reached no width; the transfer's
            relative MSEs as median bars with min-max error bars beside the
            floor; the length part's R^2 as medians with the min-max shaded.
        """
        name = SparseAveragingResult.__name__
        if isinstance(results, SparseAveragingResult):
            raise TypeError(f"results must be a list of results, got one {name}: pass [result].")
        results = list(results)
        if not results:
            raise ValueError(f"results must hold at least one {name}, got none.")
        for i, r in enumerate(results):
            if not isinstance(r, SparseAveragingResult):
                raise TypeError(f"results[{i}] must be a {name}, got {type(r).__name__}.")
        settings = [{k: v for k, v in r.config.items() if k != "random_state"} for r in results]
        if any(s != settings[0] for s in settings[1:]):
            raise ValueError("results must come from the same settings (seeds apart).")
        table = StudyTable.concat([r.by_length for r in results])
        laws = {m: _growth_law(table, m) for m in ("attention", "fcn")}
        return plot_figure(results, {m: law for m, law in laws.items() if law is not None}, axes)


def _growth_law(table, model):
    """``a + b log2 N`` (attention) or ``b N^c`` (FCN) of the widths, where found at 3+ N."""
    x, y = table.where(model=model).xy("seq_len", "value")
    if len(set(x.tolist())) < 3:
        return None
    return fit_law(x, y, "log2" if model == "attention" else "power")


def _grid(values, name):
    """Sorted distinct positive ints, at least one."""
    out = sorted({check_positive_int(v, f"{name}[i]") for v in values})
    if not out:
        raise ValueError(f"{name} must hold at least one value, got an empty sequence.")
    return out


def _steps(value, name):
    """``"auto"`` or a positive int of online steps."""
    return value if isinstance(value, str) and value == "auto" else check_positive_int(value, name)


def _triple(value, name):
    """A tuple (N, d, q) of positive ints."""
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        raise ValueError(f"{name} must be a tuple (N, d, q), got {value!r}.")
    return tuple(check_positive_int(v, f"{name}[{i}]") for i, v in enumerate(value))


def _per_model(value, defaults, name, check):
    """``{"transformer": ..., "fcn": ...}``: ``value``'s entries over the defaults, checked."""
    value = {} if value is None else value
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a dict keyed by model or None, got {value!r}.")
    unknown = sorted(set(value) - set(defaults))
    if unknown:
        raise ValueError(f"{name} has models {unknown}; the models are {sorted(defaults)}.")
    return {m: check(value.get(m, defaults[m]), f"{name}[{m!r}]") for m in defaults}


def _model(given, name, cls):
    """The settings' estimator ``name`` (the default when None), of class ``cls``."""
    est = _DEFAULT_MODELS[name] if given is None else given
    if not isinstance(est, cls):
        raise TypeError(f"{name} must be a {cls.__name__}, got {type(est).__name__}: {est!r}.")
    return est


def checked_settings(cfg):
    """The settings, every value checked (before any fit): a dict of the values used."""
    if not 0 < cfg.target_r2 < 1:
        raise ValueError(f"target_r2 must lie strictly between 0 and 1, got {cfg.target_r2!r}.")
    c = {
        "seq_lens": _grid(cfg.seq_lens, "seq_lens"),
        "n_features": check_positive_int(cfg.n_features, "n_features"),
        "n_selected": check_positive_int(cfg.n_selected, "n_selected"),
        "transformer": _model(cfg.transformer, "transformer", SparseTokenAverager),
        "fcn": _model(cfg.fcn, "fcn", FCNAverager),
        "estimator": _model(cfg.estimator, "estimator", SparseTokenAverager),
        "widths": _per_model(cfg.widths, _DEFAULT_WIDTHS, "widths", _grid),
        "n_steps": _per_model(cfg.n_steps, _DEFAULT_STEPS, "n_steps", check_positive_int),
        "fcn_max_seq_len": check_positive_int(cfg.fcn_max_seq_len, "fcn_max_seq_len"),
        "target_r2": float(cfg.target_r2),
        "n_val": check_positive_int(cfg.n_val, "n_val"),
        "q_values": _grid(cfg.q_values, "q_values"),
        "q_seq_len": check_positive_int(cfg.q_seq_len, "q_seq_len"),
        "q_widths": _grid(cfg.q_widths, "q_widths"),
        "q_steps": _steps(cfg.q_steps, "q_steps"),
        "transfer_task": _triple(cfg.transfer_task, "transfer_task"),
        "transfer_width": check_positive_int(cfg.transfer_width, "transfer_width"),
        "transfer_steps": _steps(cfg.transfer_steps, "transfer_steps"),
        "length_task": _triple(cfg.length_task, "length_task"),
        "length_width": check_positive_int(cfg.length_width, "length_width"),
        "length_steps": _steps(cfg.length_steps, "length_steps"),
        "factors": _grid(cfg.factors, "factors"),
        "n_test": check_positive_int(cfg.n_test, "n_test"),
        "stop_at_target": check_bool(cfg.stop_at_target, "stop_at_target"),
    }
    # Every task is made once here: a bad (N, d, q) is refused by its task before any fit.
    SparseAveragingTask(c["seq_lens"][0], c["n_features"], c["n_selected"])
    SparseAveragingTask(c["q_seq_len"], c["n_features"], c["q_values"][-1])
    SparseTokenSelectionTask(*c["transfer_task"])
    SparseAveragingTask(*c["transfer_task"])
    SparseAveragingTask(*c["length_task"])
    return c


class _FloorWidths:
    """The smallest width of the grid whose isotropic floor allows the target, per q.

    The floor is a property of (N, q, width): simulated once, on fixed
    draws, it sets where every seed's search against q starts.
    """

    def __init__(self, seq_len, grid, target):
        self.seq_len, self.grid, self.target, self.found = seq_len, grid, target, {}

    def allows(self, q, width):
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


class _TransferredScore:
    """Scorer of a fitted selector: R^2 on qSA of its W, with no training (picklable)."""

    def __init__(self, task, n_rows):
        self.task, self.n_rows = task, n_rows

    def __call__(self, selector, X, y):
        X_qsa, y_qsa = test_rows(self.task, selector.random_state, self.n_rows)
        averager = SparseTokenAverager.from_selector(selector, n_selected=self.task.n_selected)
        return averager.score(X_qsa, y_qsa)


def _own_score(estimator, X, y):
    """The estimator's own score (R^2), as a scorer."""
    return estimator.score(X, y)


def run_studies(c, seeds, *, device=None, progress=False):
    """The studies of all the seeds at once: the tables (``by_length``, ``by_q``, ``selector``,
    ``averager``, ``length``; empty inside :func:`~stsq_learn.studies.planning`), the widths
    the floor allows against q, and each part's seconds. ``c``: :func:`checked_settings`."""
    # The seeds of a model at a point train as one batched model where they move in lockstep;
    # the searches' fits that stop at the target fit one after another (the studies decide).
    common = {"seeds": seeds, "device": device, "progress": progress, "batch_seeds": True}
    search = {"target": c["target_r2"], "stop_at_target": c["stop_at_target"], **common}
    tables, seconds = {}, {}

    start = time.perf_counter()
    task = SparseAveragingTask(c["seq_lens"][0], c["n_features"], c["n_selected"])
    parts = []
    for name in ("transformer", "fcn"):
        lens = [N for N in c["seq_lens"] if name == "transformer" or N <= c["fcn_max_seq_len"]]
        if lens:
            parts.append(
                minimal_width(
                    {_LABELS[name]: c[name]},
                    task,
                    c["widths"][name],
                    grid={"seq_len": lens},
                    n_steps=c["n_steps"][name],
                    n_test=c["n_val"],
                    **search,
                )
            )
    tables["by_length"] = StudyTable.concat(parts)
    seconds["by_length"] = round(time.perf_counter() - start, 1)

    start = time.perf_counter()
    floors = _FloorWidths(c["q_seq_len"], c["q_widths"], c["target_r2"])
    q_task = SparseAveragingTask(c["q_seq_len"], c["n_features"], c["q_values"][0])
    tables["by_q"] = minimal_width(
        {"attention": c["estimator"]},
        q_task,
        c["q_widths"],
        grid={"n_selected": c["q_values"]},
        start=floors.start,
        n_steps=c["q_steps"],
        n_test=c["n_val"],
        **search,
    )
    seconds["by_q"] = round(time.perf_counter() - start, 1)

    start = time.perf_counter()
    N, d, q = c["transfer_task"]
    averager = clone(c["estimator"]).set_params(width=c["transfer_width"])
    qsa, rows = SparseAveragingTask(N, d, q), -(-c["n_test"] // N)
    tables["selector"] = sweep(
        {"selector": SparseTokenSelector(**averager.get_params())},
        SparseTokenSelectionTask(N, d, q),
        scoring={"sts_q": _own_score, "qsa": _TransferredScore(qsa, rows)},
        n_steps=c["transfer_steps"],
        n_test=c["n_test"],
        **common,
    )
    tables["averager"] = sweep(
        {"averager": averager}, qsa, n_steps=c["transfer_steps"], n_test=rows, **common
    )
    seconds["transfer"] = round(time.perf_counter() - start, 1)

    start = time.perf_counter()
    N, d, q = c["length_task"]
    model = clone(c["estimator"]).set_params(width=c["length_width"])
    tables["length"] = length_curve(
        {pe: clone(model).set_params(positional_encoding=pe) for pe in ("stochastic", "fixed")},
        SparseAveragingTask(N, d, q),
        [f * N for f in c["factors"]],
        n_steps=c["length_steps"],
        n_test=-(-c["n_test"] // N),
        **common,
    )
    seconds["length"] = round(time.perf_counter() - start, 1)
    return tables, floors, seconds


def _transfer_table(c, selector, averager, seed):
    """The transfer's rows of one seed: relative MSEs, the floor and the ratios to it."""
    N, _, q = c["transfer_task"]
    floor = isotropic_floor(
        N, q, c["transfer_width"], random_state=stream_seed(seed, "floor")
    ).relative_mse
    scores = [selector["sts_q"][0], selector["qsa"][0], averager["score"][0]]
    rel = [1.0 - float(s) for s in scores]
    return StudyTable(
        {
            "model": list(_TRANSFER),
            "seed": [seed] * 3,
            "relative_mse": rel,
            "floor": [float(floor)] * 3,
            "floor_ratio": [r / floor if floor > 0 else None for r in rel],
        },
        meta={
            "study": "transfer",
            "seq_len": N,
            "n_features": c["transfer_task"][1],
            "n_selected": q,
            "width": c["transfer_width"],
            "n_steps": c["transfer_steps"],
        },
    )


@reusing_batches
def sparse_averaging(
    settings=None, *, device=None, random_state=None, seeds=None, progress=False, **changes
):
    """Widths, zero-shot transfer and length generalization on q-sparse averaging.

    q-sparse averaging (Sanford, Hsu and Telgarsky, 2023) asks every position
    for the mean of its own subset of q tokens: N sparse token selection
    queries over the same tokens. Three parts, each a study of
    :mod:`stsq_learn.studies`:

    1. *Widths.* The smallest width reaching ``target_r2`` against N at
       fixed q (``seq_lens``, ``n_selected``), for the attention model
       (:class:`~stsq_learn.SparseTokenAverager`, up to the longest N) and the
       fully-connected net (:class:`~stsq_learn.FCNAverager`, up to
       ``fcn_max_seq_len``), by :func:`~stsq_learn.studies.minimal_width`:
       every width trained from scratch online, each N's bracketed search
       starting from the previous N's minimal width, an N after one where no
       width reached the target not searched; the growth laws ``a + b log2 N``
       and ``b N^c`` (:func:`~stsq_learn.studies.fit_law`). And against q at
       N = ``q_seq_len`` for the attention model (``estimator``,
       ``q_widths``, ``q_steps``), each q's search starting at the larger of
       the previous q's minimal width and the smallest width whose isotropic
       floor allows the target (for q >= 3 the floor, not the training, sets
       the width).
    2. *Transfer.* A :class:`~stsq_learn.SparseTokenSelector` trained on
       sparse token selection at ``transfer_task`` = (N, d, q) and width
       ``transfer_width`` predicts qSA through
       :meth:`~stsq_learn.SparseTokenAverager.from_selector`, with no training;
       its relative MSE is compared with an averager trained on qSA and with
       the isotropic floor (:func:`~stsq_learn.studies.sweep`).
    3. *Length.* Averagers with stochastic and with fixed encodings trained
       at ``length_task`` = (N, d, q), width ``length_width``, scored on
       held-out rows lengthened to ``factors`` times N
       (:func:`~stsq_learn.studies.length_curve`).

    Seed ``s`` fits every model with ``random_state=s`` and draws its rows
    from :func:`~stsq_learn.studies.stream_seed` ``(s, ...)``; ``seeds``
    runs several seeds through the same studies at once.

    Parameters
    ----------
    settings : SparseAveragingSettings, mapping or None, default=None
        The three parts' settings (None: the defaults).
    device : str or None, default=None
        Training device; None keeps each estimator's.
    random_state : int or None, default=None
        The seed of a one-seed run (None: 0). Not with ``seeds``.
    seeds : sequence of int or None, default=None
        Run these seeds together and return one result per seed.
    progress : bool, default=False
        Show tqdm progress bars.
    **changes
        Settings of :class:`SparseAveragingSettings` to change
        (``sparse_averaging(q_values=(1, 2))``).

    Returns
    -------
    SparseAveragingResult or list of SparseAveragingResult
        The seed's result; with ``seeds``, one per seed in their order.

    Examples
    --------
    >>> from stsq_learn.experiments import PRESETS, sparse_averaging
    >>> one, two = sparse_averaging(PRESETS["tiny"]["qsa"], seeds=[0, 1])
    >>> one.config["random_state"], two.config["random_state"]
    (0, 1)
    """
    cfg = SparseAveragingSettings.resolve(settings, changes)
    if seeds is not None and random_state is not None:
        raise ValueError(
            f"give random_state (one seed) or seeds (several), not both: got "
            f"random_state={random_state!r} and seeds={seeds!r}."
        )
    one = [0 if random_state is None else random_state]
    run_seeds = check_seeds(one if seeds is None else seeds)
    c = checked_settings(cfg)
    tables, floors, seconds = run_studies(c, run_seeds, device=device, progress=progress)
    by_q = tables["by_q"]
    by_q = by_q.with_columns(
        floor_width=[floors(int(q)) for q in by_q["param_n_selected"]],
    )
    config = {k: repr(v) if k in ("transformer", "fcn", "estimator") else v for k, v in c.items()}
    results = []
    for s in run_seeds:
        results.append(
            SparseAveragingResult(
                config={**config, "random_state": s},
                by_length=tables["by_length"].where(seed=s),
                by_q=by_q.where(seed=s),
                transfer=_transfer_table(
                    c, tables["selector"].where(seed=s), tables["averager"].where(seed=s), s
                ),
                length=tables["length"].where(seed=s),
                seconds=seconds,
            )
        )
    return results[0] if seeds is None else results
