"""The width separation: per q, the smallest width reaching a target R^2 against T.

Each curve (:class:`SeparationCurve`) searches each model along T, beside the widths the
isotropic floor allows (:func:`floor_widths`); the laws are fitted per seed.
"""

from __future__ import annotations

import functools
import math
import numbers
import textwrap
from dataclasses import field

import numpy as np
from sklearn.base import clone
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions

from ...encodings.floor import isotropic_floor
from ...experiments import Experiment, Settings, _widths, document_experiment
from ...experiments._common import new_axes
from ...experiments._result import band, fmt_band
from ...experiments._settings import COUNT, COUNTS, MappingOf, SequenceOf, positive_ints
from ...studies import BandDisplay, Law, StudyTable, fit_law, fit_laws, minimal_width
from ...studies.plan import active_plan
from ..task import Task
from .estimators import FCNSelector, SparseTokenSelector
from .task import SparseTokenSelectionTask

MODELS = ("transformer", "fcn")
"""The two models of a curve, in the order they are searched."""
LAW_OF = {"transformer": ("log2", False), "fcn": ("linear", True)}
"""Each model's law against T (and whether through the origin): ``a + b log2 T``, ``b T``."""
GOOD_FIT = 0.8
"""The R^2 below which a curve's law is not drawn: it does not describe its points."""

# Ours: SGD with the estimator's width-scaled step (the identity direction paced on its own,
# the token rows at lr / width), constant, 256 fresh rows a step. At q = 3 and widths
# 128-512, plain GD with every block at one step stays below the floor within our budgets
# (R^2 0.79 at T=64, width 256, 600 steps, floor 0.93), and Adam too (0.73 at step 0.03).
# This one leaves uniform attention late at long lengths (T=256, width 256: R^2 0.15 at
# step 1000, 0.88 at 1500, 0.899 from 2000 on, floor 0.904): the full preset stops at
# T=256 with 3000 steps; T=1024 is in the gpu preset only, with 8000.
_PACED_SGD = SparseTokenSelector(solver="sgd", learning_rate="constant", batch_size=256)
_PACED_LABEL = (
    "SGD, ours: width-scaled paced step (plain GD and Adam stay below the floor in budget)"
)
_PLAIN_GD = clone(_PACED_SGD).set_params(learning_rate_init=3.0, token_block_rate=1.0)
_PLAIN_GD_LABEL = "plain GD, the paper's algorithm (every block at one step; step 3 ours)"
_FCN = FCNSelector(**_widths.FCN_ADAM)
_FCN_LONG = FCNSelector(**_widths.FCN_COSINE)
_Q2_GRID = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
_Q3_GRID = (32, 64, 128, 256, 512, 1024, 2048)
_FCN_GRID = (4, 8, 16, 32, 64, 128, 256, 512, 1024)


class SeparationCurve(Settings):
    """One curve of the width separation: its task, its two models and their grids.

    The defaults are the quick preset's q = 2 curve.

    Attributes
    ----------
    label : str, default="plain GD, the paper's algorithm (...)"
        How the transformer is trained, in words (say it when you change it).
    seq_lens : tuple of int, default=(4, 8, 16, 32)
        The lengths T, increasing.
    n_features, n_selected : int or None, default=None
        d and q of the sparse token selection (None: 2, or the ``task``'s).
    task : Task or None, default=None
        A task of one's own (its ``seq_len`` set to each T; no floor drawn).
    transformer, fcn : estimator, default=plain GD and Adam
        The two models: any estimators with a ``width`` (and ``fit_online``).
    widths : dict, default={"transformer": (2, 3, 4, ..., 128), "fcn": (4, 8, ..., 1024)}
        Model to its increasing grid of widths (a model left out: not searched).
    n_steps, max_seq_len : dict, default={"transformer": 400, "fcn": 500}, {}
        Model to its online steps per width (at most: fits stop at the
        target), and to the longest T it is searched at (``{"fcn": 64}``).
    floor_rows : int, default=4000
        Rows each :func:`~stsq_learn.isotropic_floor` simulates.

    Examples
    --------
    >>> from stsq_learn.experiments import SeparationCurve
    >>> curve = SeparationCurve(seq_lens=(4, 8), n_selected=3,
    ...                         widths={"transformer": (8, 16)},
    ...                         n_steps={"transformer": 20})
    >>> curve.sizes(), curve.searched()
    ((2, 3), ('transformer',))
    """

    _parameter_constraints = {
        "label": [str],
        "seq_lens": [positive_ints(increasing=True)],
        **{key: [COUNT, None] for key in ("n_features", "n_selected")},
        "task": [Task, None],
        **{key: [HasMethods(["fit", "get_params"])] for key in ("transformer", "fcn")},
        "widths": [MappingOf(MODELS, positive_ints(increasing=True))],
        **{key: [MappingOf(MODELS, COUNT)] for key in ("n_steps", "max_seq_len")},
        "floor_rows": COUNTS,
    }

    label: str = _PLAIN_GD_LABEL
    seq_lens: tuple = (4, 8, 16, 32)
    n_features: int | None = None
    n_selected: int | None = None
    task: object = None
    transformer: object = _PLAIN_GD
    fcn: object = _FCN
    widths: dict = field(default_factory=lambda: {"transformer": _Q2_GRID, "fcn": _FCN_GRID})
    n_steps: dict = field(default_factory=lambda: {"transformer": 400, "fcn": 500})
    max_seq_len: dict = field(default_factory=dict)
    floor_rows: int = 4000

    def _validate(self):
        if not self.widths:
            raise ValueError("widths must give the grid of at least one model, got {}.")
        for model in self.widths:
            if model not in self.n_steps:
                raise ValueError(
                    f"n_steps must give the steps of every model of widths: {model!r} is "
                    f"searched, n_steps={self.n_steps!r}."
                )
            if "width" not in self[model].get_params(deep=False):
                raise TypeError(
                    f"{model} must have a 'width' parameter, got {type(self[model]).__name__}."
                )
        for name in ("n_features", "n_selected"):
            own = getattr(self.task, name, None)
            if self.task is not None and self[name] is not None and self[name] != own:
                raise ValueError(f"{name}={self[name]!r} differs from the task's {name}={own!r}.")

    def sizes(self):
        """``(d, q)``: the task's token dimension and subset size (None where it has none)."""
        if self.task is not None:
            return getattr(self.task, "n_features", None), getattr(self.task, "n_selected", None)
        return self.n_features or 2, self.n_selected or 2

    def searched(self):
        """The models searched on this curve (in ``widths``, at one T or more), in order."""
        return tuple(m for m in MODELS if m in self.widths and self.lengths(m))

    def lengths(self, model):
        """The lengths T at which ``model`` is searched: those up to its ``max_seq_len``.

        Parameters
        ----------
        model : {"transformer", "fcn"}
            The model.

        Returns
        -------
        list of int
            Increasing.
        """
        return [T for T in self.seq_lens if T <= self.max_seq_len.get(model, T)]

    def to_json(self):
        """The settings as JSON, ``n_features`` and ``n_selected`` as the task's (:meth:`sizes`).

        Returns
        -------
        dict
            Setting name to its JSON value.
        """
        out = super().to_json()
        out["n_features"], out["n_selected"] = self.sizes()
        return out


_Q2_CURVE = SeparationCurve()
_Q3_CURVE = SeparationCurve(
    label=_PACED_LABEL,
    seq_lens=(16, 32, 64),
    n_features=4,
    n_selected=3,
    transformer=_PACED_SGD,
    widths={"transformer": _Q3_GRID},
    n_steps={"transformer": 300},
)


class SeparationSettings(Settings):
    """The settings of :func:`width_separation_by_q`: the curves, the target, the search.

    The defaults are the quick preset's.

    Attributes
    ----------
    curves : tuple of SeparationCurve, default=(q = 2, q = 3)
        The curves (mappings are read as curves): q = 2, d = 2 at T = 4 ... 32, both models, plain
        GD; q = 3, d = 4 at T = 16, 32, 64, the transformer alone, our paced SGD.
    target_r2, n_val : float, int, default=0.9, 1000
        The R^2 a width must reach; held-out rows scoring each width (and stopping its fit).
    stop_fits : bool, default=True
        Stop each online fit at ``target_r2`` (checked every 25 steps; the
        seeds are then fitted one after another, else batched).
    search : {"bisect", "bracket", "scan"}, default="bisect"
        How each length's widths are visited (:func:`~stsq_learn.studies.search_threshold`):
        bisecting from a prediction (the transformer's: the floor's width; the FCN's: the previous
        T's width times the ratio of the lengths, ``2 T d`` at the first, skipping the lengths
        after a miss), from the previous T's width outwards (no length after a miss), or upwards
        from the smallest.
    regime, n_train : {"online", "finite"}, int, default="online", 20000
        Fresh batches for ``n_steps``, or ``fit`` on ``n_train`` rows per fit.

    Examples
    --------
    >>> from stsq_learn.experiments import SeparationSettings
    >>> settings = SeparationSettings(target_r2=0.5)
    >>> [c.sizes() for c in settings.curves]
    [(2, 2), (4, 3)]
    >>> settings.replace(search="scan").search
    'scan'
    """

    _parameter_constraints = {
        "curves": [SequenceOf(SeparationCurve)],
        "target_r2": [Interval(numbers.Real, 0, 1, closed="neither")],
        "n_val": COUNTS,
        "stop_fits": ["boolean"],
        "search": [StrOptions({"bisect", "bracket", "scan"})],
        "regime": [StrOptions({"online", "finite"})],
        "n_train": [Interval(numbers.Integral, 10, None, closed="left")],
    }

    curves: tuple = (_Q2_CURVE, _Q3_CURVE)
    target_r2: float = 0.9
    n_val: int = 1000
    stop_fits: bool = True
    search: str = "bisect"
    regime: str = "online"
    n_train: int = 20_000

    def __post_init__(self):
        if isinstance(self.curves, (list, tuple)):  # mappings read as curves, each named
            curves = []
            for i, curve in enumerate(self.curves):
                try:
                    curves.append(SeparationCurve.resolve(curve))
                except (TypeError, ValueError) as exc:
                    raise type(exc)(f"curves[{i}]: {exc}") from None
            object.__setattr__(self, "curves", tuple(curves))
        super().__post_init__()

    def _validate(self):
        if self.stop_fits and self.regime != "online":
            raise ValueError("stop_fits stops online fits: it needs regime='online'.")
        for i, curve in enumerate(self.curves):
            for model in curve.searched():
                if self.regime == "online" and not hasattr(curve[model], "fit_online"):
                    raise TypeError(
                        f"curves[{i}].{model} ({type(curve[model]).__name__}) has no "
                        "fit_online: use regime='finite'."
                    )


PROVENANCE = {
    "batch_size": "paper: a fresh batch of 256 rows at every step",
    "tokens": "paper: Gaussian tokens",
    "subsets": "paper: a uniform q-subset of the positions",
    "transformer_width_law": "paper: width O~(d + q log T) for the transformer",
    "fcn_width_law": "paper: width Omega~(T d) for fully-connected nets",
    "transformer_solver_q2": "ours: plain gradient descent, the algorithm the paper's theory "
    "analyses, every block at one constant step (3.0, ours)",
    "transformer_solver_q3": "ours: SGD with the width-scaled, identity-paced step (plain GD "
    "and Adam did not reach the floor within our budgets)",
    "fcn_solver": "ours: Adam (step 0.01 constant; 0.003 cosine in full and gpu)",
    "seq_lens": "ours: the lengths T of every curve",
    "n_features": "ours: d = 2 at q = 2, d = 4 (8 in gpu) at q = 3",
    "n_selected": "ours: q = 2 and q = 3",
    "width_grids": "ours: the width grids searched",
    "n_steps": "ours: the steps per width (an upper bound: fits stop at the target)",
    "target_r2": "ours: the R^2 a width must reach (0.9)",
    "n_val": "ours: the held-out rows scoring each width and stopping its fit",
    "search": "ours: bisection from the floor's minimal width (the FCN's: from T d scaling)",
    "floor": "ours: isotropic_floor's smallest width allowing the target, as the theory's curve",
    "pe_sampling": "ours: marginal encoding draws (the same law as full draws)",
}
"""Setting -> ``"paper: ..."`` or ``"ours: ..."``: where each setting comes from."""


# -- the theory's curve and the studies --------------------------------------------------------
@functools.cache
def _floor_allows(seq_len, n_selected, width, n_samples, target):
    floor = isotropic_floor(seq_len, n_selected, width, n_samples=n_samples, random_state=0)
    return 1.0 - floor.relative_mse >= target


def floor_widths(seq_lens, n_selected, widths, target, *, n_samples):
    """Per T, the smallest of ``widths`` whose isotropic floor allows R^2 >= ``target``.

    A bisection over the increasing grid (the floor falls as the width grows), each floor on
    ``n_samples`` rows with ``random_state=0``; None where no width's floor allows it.
    """
    out = []
    for T in seq_lens:
        allows = functools.partial(_floor_allows, T, n_selected, n_samples=n_samples)
        lo, hi, top = -1, len(widths) - 1, allows(widths[-1], target=target)
        while top and hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if allows(widths[mid], target=target) else (mid, hi)
        out.append(widths[hi] if top else None)
    return out


def _start(cfg, curve, model, floors):
    """Where each length's search of ``model`` starts (see :class:`SeparationSettings`)."""
    if cfg.search != "bisect":
        return "previous" if cfg.search == "bracket" else None
    if model == "transformer":
        top = curve.widths["transformer"][-1]
        return lambda params, previous: floors.get(params["seq_len"]) or top
    d = curve.sizes()[0] or 1
    return lambda params, previous: (
        previous["value"] * params["seq_len"] / previous["params"]["seq_len"]
        if previous is not None and previous["reached"]
        else 2 * params["seq_len"] * d
    )


def run(cfg, seeds, **kw):
    """The record's ``run``: every curve's searches over every seed, and the floor's widths.

    Returns ``widths`` (:func:`~stsq_learn.studies.minimal_width`'s rows and ``curve``) and
    ``floor`` (``curve``, ``param_seq_len``, ``floor_width``; no seed).
    """
    widths, floor = [], {"curve": [], "param_seq_len": [], "floor_width": []}
    online = cfg.regime == "online"
    common = dict(target=cfg.target_r2, method=cfg.search, seeds=seeds, n_test=cfg.n_val, **kw)
    common.update(stop_at_target=cfg.stop_fits, batch_seeds=True)
    common["n_train"] = None if online else cfg.n_train
    for i, curve in enumerate(cfg.curves):
        d, q = curve.sizes()
        task = (
            SparseTokenSelectionTask(curve.seq_lens[0], d, q) if curve.task is None else curve.task
        )
        floors = {}
        if "transformer" in curve.widths and isinstance(task, SparseTokenSelectionTask):
            if active_plan() is None:  # the theory's curve: no fit, no part of a plan
                grid, n = curve.widths["transformer"], curve.floor_rows
                found = floor_widths(curve.seq_lens, q, grid, cfg.target_r2, n_samples=n)
                floors = dict(zip(curve.seq_lens, found))
                floor["curve"] += [i] * len(found)
                floor["param_seq_len"] += list(curve.seq_lens)
                floor["floor_width"] += [np.nan if w is None else float(w) for w in found]
        for model in curve.searched():
            part = minimal_width(
                {model: curve[model]},
                task,
                curve.widths[model],
                grid={"seq_len": curve.lengths(model)},
                start=_start(cfg, curve, model, floors),
                skip_after_miss=cfg.search != "bisect" or model == "fcn",
                n_steps=curve.n_steps[model] if online else "auto",
                **common,
            )
            widths.append(part.with_columns(curve=[i] * len(part)))
    meta = {"study": "minimal_width", "target": cfg.target_r2, "method": cfg.search}
    return {
        "widths": StudyTable.concat(widths, meta=meta),
        "floor": StudyTable(floor, meta={"study": "isotropic_floor", "random_state": 0}),
    }


# -- what the tables give ----------------------------------------------------------------------
def _prefix(curve, i):
    """A curve's headline prefix: ``q<q>`` (``curve<i>`` for a task without a q)."""
    return f"curve{i}" if curve["n_selected"] is None else f"q{curve['n_selected']}"


def _joint_points(result, table, column):
    """Rows ``x = T^q`` and ``column`` of ``table``, every curve with a q (and ``seed``)."""
    parts = []
    for i, curve in enumerate(result.settings["curves"]):
        rows, q = table.where(curve=i), curve["n_selected"]
        if q is not None and len(rows):
            parts.append(rows.with_columns(x=[float(T) ** q for T in rows["param_seq_len"]]))
    return StudyTable.concat(parts) if parts else StudyTable({"seed": [], "x": [], column: []})


def joint_laws(result):
    """Per seed, ``w = a + b q log2 T`` through the transformer's widths of every curve.

    The law ``a + b log2 x`` at ``x = T^q`` (the headline's ``law.*``): seed
    to its :class:`~stsq_learn.studies.Law`, None with fewer than 3 widths.
    """
    rows = result.tables["widths"].where(model="transformer")
    return fit_laws(_joint_points(result, rows, "value"), "x", "value", "log2")


def floor_law(result):
    """``w = a + b q log2 T`` through the floor's widths (None with fewer than 3)."""
    points = _joint_points(result, result.tables["floor"], "floor_width")
    try:
        return fit_law(*points.xy("x", "floor_width"), "log2")
    except ValueError:  # fewer than 3 widths, or one x
        return None


def seed_laws(result, i, model):
    """Per seed, ``model``'s law against T on curve ``i`` (:data:`LAW_OF`; None: too few points).

    ``a + b log2 T`` for the transformer, ``b T`` for the FCN (``b / d``
    per ``T d``, the paper's ``Omega(T d)``).
    """
    rows = result.tables["widths"].where(curve=i, model=model)
    law, origin = LAW_OF[model]
    return fit_laws(rows, "seq_len", "value", law, origin=origin)


def curve_laws(result, i):
    """Per model searched on curve ``i``, the median of its seeds' laws (:func:`seed_laws`)."""
    laws = {model: Law.median(seed_laws(result, i, model)) for model in MODELS}
    return {model: law for model, law in laws.items() if law is not None}


def headline(result):
    """The numbers one seed's run is judged by, flat.

    Per curve and T (the prefix ``q<q>.T<T>``): ``transformer_width`` and ``floor_width`` (``inf``
    where none of the grid reached the target, or allows it); where the FCN was searched,
    ``fcn_width`` (its lower bound where no width reached the target) and ``fcn_width_is_bound``
    (1.0 for a bound, else 0.0). Then ``law.intercept``, ``law.slope`` and ``law.r2`` of
    ``w = a + b q log2 T`` (:func:`joint_laws`) and ``floor_law.*`` (:func:`floor_law`); NaN with
    too few widths.
    """
    widths, floor = result.tables["widths"], result.tables["floor"]
    out = {}
    for i, curve in enumerate(result.settings["curves"]):
        for T in curve["seq_lens"]:
            key, at = f"{_prefix(curve, i)}.T{T}", widths.where(curve=i, seq_len=T)
            found = {
                "transformer_width": at.where(model="transformer")["value"],
                "floor_width": floor.where(curve=i, seq_len=T)["floor_width"],
            }
            for name, values in found.items():
                if len(values):  # inf: no width of the grid reached the target (or allows it)
                    out[f"{key}.{name}"] = float(values[0]) if np.isfinite(values[0]) else math.inf
            fcn = at.where(model="fcn")
            if len(fcn):
                bound = not math.isfinite(fcn["value"][0])
                out[f"{key}.fcn_width"] = float(fcn["bound" if bound else "value"][0])
                out[f"{key}.fcn_width_is_bound"] = float(bound)
    for name, law in (("law", Law.median(joint_laws(result))), ("floor_law", floor_law(result))):
        out[f"{name}.intercept"] = math.nan if law is None else law.params["a"]
        out[f"{name}.slope"] = math.nan if law is None else law.params["b"]
        out[f"{name}.r2"] = math.nan if law is None else law.r2
    return out


def _width_text(bands, key, n, steps):
    """One width's band as text; an FCN's bound ``> w``, with the seeds it holds for."""
    if key not in bands:
        return "-"
    text = fmt_band(bands[key])
    bound = int(sum(bands.get(f"{key}_is_bound", {"values": [0]})["values"]))
    if bound == n:
        return f"> {text} (not reached within {steps} steps)"
    return f"{text} ({bound} of {n} seeds: > bound)" if bound else text


def summary(result):
    """Summary rows: per curve the widths (the FCN's bounds marked), the floor's, the laws."""
    cfg, bands, n = result.settings, result.bands(), len(result.seeds)
    widths = result.tables["widths"]
    rows = []
    for i, curve in enumerate(cfg["curves"]):
        d, at = curve["n_features"], [f"{_prefix(curve, i)}.T{T}." for T in curve["seq_lens"]]
        steps = curve["n_steps"].get("fcn")
        texts = {
            m: " / ".join(_width_text(bands, f"{k}{m}_width", n, steps) for k in at)
            for m in ("transformer", "floor", "fcn")
        }
        rows += [
            f"| width separation (d={d}, q={curve['n_selected']}, R^2 >= {cfg['target_r2']}, "
            f"transformer: {curve['label']}) | T = {', '.join(map(str, curve['seq_lens']))} | |",
            f"| | minimal width, transformer | {texts['transformer']} |",
            f"| | the floor's minimal width | {texts['floor']} |",
        ]
        if not len(widths.where(curve=i, model="fcn")):
            continue
        ratios = []  # the FCN's median width over the transformer's, where both reached it
        for k in at:
            fcn, transformer = bands.get(f"{k}fcn_width"), bands.get(f"{k}transformer_width")
            if fcn is None or transformer is None or bands[f"{k}fcn_width_is_bound"]["max"]:
                ratios.append("n/a")
            else:
                ratios.append(f"{fcn['median'] / transformer['median']:.1f}")
        rows += [
            f"| | minimal width, fcn | {texts['fcn']} |",
            f"| | FCN / transformer width (medians) | {' / '.join(ratios)} |",
        ]
        laws = [law for law in seed_laws(result, i, "fcn").values() if law is not None]
        if laws:
            b = fmt_band(band([law.params["b"] / (d or 1) for law in laws]))
            r2 = fmt_band(band([law.r2 for law in laws]))
            rows.append(f"| | FCN: w = b T d, per seed | b={b} (fit R^2 {r2}) |")
    spent = [
        f"{m} {np.sum(widths.where(model=m)['seconds']) / n:.0f} s"
        for m in MODELS
        if len(widths.where(model=m))
    ]
    rows.append(f"| | search time per seed | {', '.join(spent)} |")
    for name, what in (("law", "measured"), ("floor_law", "floor's")):
        if math.isfinite(bands[f"{name}.slope"]["median"]):
            a, b, r2 = (fmt_band(bands[f"{name}.{k}"]) for k in ("intercept", "slope", "r2"))
            rows.append(f"| | transformer, {what}: w = a + b q log2 T | a={a}, b={b} (R^2 {r2}) |")
    return rows


# -- the figure --------------------------------------------------------------------------------
_SQUARES = {"marker": "s", "mfc": "none"}  # the floor's widths: open squares
# Both panels: widths against T, log-log, lower bounds as open triangles.
_AXES = dict(x="seq_len", y="value", bound="bound", style="errorbar", logx=True, logy=True)
_AXES |= dict(law_variable="T", xlabel="T", legend=False)


def _drawn(laws):
    """The laws that describe their points (R^2 at least :data:`GOOD_FIT`)."""
    return {key: law for key, law in laws.items() if law.r2 >= GOOD_FIT}


def figure(result, axes=None):
    """The record's ``figure``: the transformer's minimal widths against T per q beside the
    floor's (laws of R^2 below :data:`GOOD_FIT` not drawn); both models of the first curve with
    the FCN."""
    fig, axes = new_axes(axes, 2)
    cfg, widths, floor = result.settings, result.tables["widths"], result.tables["floor"]
    by_q = dict(laws={}, theory={}, theory_kw={}, labels={}, colors={})
    for i, curve in enumerate(cfg["curves"]):
        name = f"q={curve['n_selected']}, d={curve['n_features']}"
        by_q["labels"][i] = textwrap.fill(f"{name}: {curve['label']}", 60)
        by_q["colors"][i] = f"C{i}"
        law = _drawn(curve_laws(result, i)).get("transformer")
        if law is not None:
            by_q["laws"][i] = law
        xs, ys = floor.where(curve=i).xy("seq_len", "floor_width")
        if len(xs):
            by_q["theory"][f"{name}: the floor's minimal width"] = (xs, ys)
            by_q["theory_kw"][f"{name}: the floor's minimal width"] = {"color": f"C{i}", **_SQUARES}
    with_fcn = [i for i in range(len(cfg["curves"])) if len(widths.where(curve=i, model="fcn"))]
    i = (with_fcn or [0])[0]
    curve, xs, ys = cfg["curves"][i], *floor.where(curve=i).xy("seq_len", "floor_width")
    floor_label = "floor's minimal width (transformer)"
    panels = [
        dict(
            table=widths.where(model="transformer"),
            hue="curve",
            title="Transformer per q, beside the floor's widths",
            **by_q,
        ),
        dict(
            table=widths.where(curve=i),
            laws=_drawn(curve_laws(result, i)),
            theory={floor_label: (xs, ys)} if len(xs) else {},
            theory_kw={floor_label: {"color": "C0", **_SQUARES}},
            labels={"transformer": "transformer", "fcn": "FCN"},
            colors={"transformer": "C0", "fcn": "C1"},
            title=f"Both models (d={curve['n_features']}, q={curve['n_selected']})",
        ),
    ]
    ylabel = f"smallest width reaching R$^2$ >= {cfg['target_r2']:g}"
    for ax, panel in zip(axes, panels):
        BandDisplay.from_table(**panel, **_AXES, ax=ax, ylabel=ylabel)
        ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.2))
    if len(result.seeds) > 1:
        fig.suptitle(
            f"Width separation, median over {len(result.seeds)} seeds, error bars: min-max"
        )
    return fig


@document_experiment
def width_separation(
    settings=None, *, seeds=3, device=None, progress=False, n_jobs=None, **changes
):
    """One curve of the width separation: both models' minimal widths against T.

    :func:`width_separation_by_q` on the first curve of ``settings`` alone (or on ``settings``
    itself, a :class:`SeparationCurve`, with the default search), the changes naming a setting of
    the curve applied to it (``width_separation(transformer=my_model, seq_lens=(8, 16, 32))``): any
    two estimators with a ``width``, any task with a ``seq_len``.

    See Also
    --------
    width_separation_by_q : Several curves, beside the floor, with the joint law.

    Examples
    --------
    >>> from stsq_learn.experiments import width_separation
    >>> result = width_separation("tiny", seeds=1, search="scan")
    >>> len(result.settings["curves"]), result.tables["widths"].unique("model")
    (1, ['transformer', 'fcn'])
    """
    curve = settings if isinstance(settings, SeparationCurve) else None
    own = {name: changes.pop(name) for name in SeparationCurve.field_names() if name in changes}
    cfg = RECORD.resolve(None if curve is not None else settings, changes)
    cfg = cfg.replace(curves=((cfg.curves[0] if curve is None else curve).replace(**own),))
    return RECORD(cfg, seeds=seeds, device=device, progress=progress, n_jobs=n_jobs)


_TINY = dict(seq_lens=(4, 8), floor_rows=500)

RECORD = Experiment(
    name="separation",
    function_name="width_separation_by_q",
    settings=SeparationSettings,
    doc="""Minimal widths against T at several q, beside the floor's, with ``a + b q log2 T``.

    Each model's minimal width at every T of each curve, the floor's, and the
    laws (:mod:`stsq_learn.tasks.selection.separation`; the settings:
    :class:`SeparationSettings`).

    See Also
    --------
    width_separation : One curve of it.
    stsq_learn.studies.minimal_width : The search of each model and length.

    Examples
    --------
    >>> from stsq_learn.experiments import width_separation_by_q
    >>> result = width_separation_by_q("tiny", seeds=2)
    >>> sorted(result.tables), result.seeds
    (['floor', 'widths'], (0, 1))
    >>> result.bands()["q2.T8.transformer_width"]["values"]
    [8.0, 8.0]
    """,
    presets={
        "tiny": dict(
            curves=(
                _Q2_CURVE.replace(
                    widths={"transformer": (4, 8), "fcn": (4, 8)},
                    n_steps={"transformer": 20, "fcn": 20},
                    **_TINY,
                ),
                _Q3_CURVE.replace(
                    widths={"transformer": (8, 16)}, n_steps={"transformer": 20}, **_TINY
                ),
            ),
            target_r2=0.5,
            n_val=200,
        ),
        "quick": {},
        "full": dict(
            curves=(
                _Q2_CURVE.replace(
                    seq_lens=tuple(4 * 2**k for k in range(7)),
                    widths={"transformer": _Q2_GRID, "fcn": (*_FCN_GRID, 2048, 4096)},
                    n_steps={"transformer": 2000, "fcn": 2000},
                    fcn=_FCN_LONG,
                    max_seq_len={"fcn": 64},
                ),
                _Q3_CURVE.replace(seq_lens=(16, 32, 64, 128, 256), n_steps={"transformer": 3000}),
            ),
        ),
        "gpu": dict(
            curves=(
                _Q2_CURVE.replace(
                    seq_lens=tuple(4 * 2**k for k in range(9)),
                    widths={"transformer": _Q2_GRID, "fcn": (*_FCN_GRID, 2048, 4096, 8192)},
                    n_steps={"transformer": 4000, "fcn": 4000},
                    fcn=_FCN_LONG,
                    max_seq_len={"fcn": 128},
                ),
                _Q3_CURVE.replace(
                    seq_lens=(16, 64, 256, 1024), n_features=8, n_steps={"transformer": 8000}
                ),
            ),
            n_val=4000,
        ),
    },
    provenance=PROVENANCE,
    aliases=("width",),
    exports=(width_separation, SeparationCurve),
    # Widths of grids whose neighbours are at most twice apart: one step either way; the
    # laws fitted to them move with them.
    reference_rtol={"*_width": 0.5, "law.*": 0.5},
)
width_separation_by_q = RECORD.function
