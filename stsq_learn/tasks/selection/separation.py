"""The width separation: the smallest width reaching a target R^2 against T, for two models.

The paper's expressivity claim: a one-layer transformer selects ``q`` of
``T`` tokens with width ``O(d + q log T)``, a fully-connected net needs
``Omega(T d)``. :func:`width_separation` measures one curve of it as a
composition of the study tools: each model's minimal width at every length
(:func:`~stsq_learn.studies.minimal_width`, followed along ``seq_len``),
the transformer's search started at the isotropic floor's minimal width
(:func:`~stsq_learn.isotropic_floor`), and the growth laws
(:func:`~stsq_learn.studies.fit_law`): ``a + b log2 T`` for the transformer,
``a + b T`` (a multiple of ``T d``) for the FCN. :func:`width_separation_by_q`
runs several curves (q = 2 and q = 3 in the record) and fits ``a + b q log2 T``
to all of them. Any pair of estimators with a ``width`` (a user's models) and
any task with a ``seq_len`` get the same study.

Seeds follow the studies' one rule (:mod:`stsq_learn.studies.seeds`): seed
``s`` fits every model with ``random_state=s`` and scores it on the rows of
``stream_seed(s, "test")``. The floor is the theory's curve, one for every
seed (simulated with ``random_state=0``). Several seeds run as one study:
the seeds whose searches ask for the same width are fitted together.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..._validation import check_positive_int
from ...encodings.floor import isotropic_floor
from ...experiments._settings import Settings
from ...studies import BandDisplay, StudyTable, fit_law, minimal_width
from ...studies.laws import Law
from ...studies.seeds import check_seeds
from .estimators import FCNSelector, SparseTokenSelector
from .task import SparseTokenSelectionTask

__all__ = [
    "CurveSettings",
    "SeparationByQResult",
    "SeparationCurve",
    "SeparationResult",
    "SeparationSettings",
    "WidthSeparationSettings",
    "width_separation",
    "width_separation_by_q",
]

MODELS = ("transformer", "fcn")
DEFAULT_ESTIMATORS = {
    "transformer": SparseTokenSelector(
        solver="adam", learning_rate_init=0.1, batch_size=256, max_iter=30
    ),
    "fcn": FCNSelector(solver="adam", learning_rate_init=0.01, batch_size=1024, max_iter=30),
}
DEFAULT_WIDTHS = {"transformer": (2, 4, 8, 16, 32, 64), "fcn": (2, 4, 8, 16, 32, 64, 128, 256)}
DEFAULT_STEPS = {"transformer": 300, "fcn": 500}
# Each model's law against T: the transformer's a + b log2 T, the FCN's a + b T (b / d per T d).
LAW_OF = {"transformer": "log2", "fcn": "linear"}
GOOD_FIT = 0.8
"""The R^2 below which a law is not drawn: it does not describe its points."""
_LABELS = {"transformer": "transformer", "fcn": "FCN"}


def law_from_dict(data):
    """A :class:`~stsq_learn.studies.Law` from its ``to_dict()`` (None stays None)."""
    if data is None:
        return None
    return Law(
        name=data["name"],
        params=dict(data["params"]),
        r2=data["r2"],
        rms=data["rms"],
        residuals=tuple(data["residuals"]),
        x_range=tuple(data["x_range"]),
        n_points=data["n_points"],
    )


def law_or_none(x, y, name):
    """:func:`~stsq_learn.studies.fit_law`, or None where the points cannot carry the law."""
    try:
        return fit_law(x, y, name)
    except ValueError:  # fewer than 3 finite points, or 1 distinct x
        return None


class CurveSettings(Settings):
    """The settings of one curve of the width separation: the task, the models, their grids.

    Attributes
    ----------
    seq_lens : tuple of int, default=(4, 8, 16)
        The lengths T.
    n_features, n_selected : int or None, default=None
        Token dimension d and subset size q of the
        :class:`~stsq_learn.SparseTokenSelectionTask` (None: 2, or the
        given ``task``'s, which they must then match).
    task : Task or None, default=None
        A task with a ``seq_len`` field (set to each T): a user's task. None
        is the sparse token selection of ``n_features`` and ``n_selected``.
    transformer, fcn : estimator or None, default=None
        The two models, any estimators with a ``width`` parameter (and
        ``fit_online`` in the online regime). None: ``SparseTokenSelector(
        solver="adam", learning_rate_init=0.1, batch_size=256, max_iter=30)``
        and ``FCNSelector(solver="adam", learning_rate_init=0.01,
        batch_size=1024, max_iter=30)``.
    widths : dict or None, default=None
        Increasing width grid per model, ``{"transformer": (...), "fcn": (...)}``;
        a model left out keeps ``(2, 4, ..., 64)`` and ``(2, 4, ..., 256)``.
    n_steps : dict or None, default=None
        Online steps per width and model; defaults ``{"transformer": 300, "fcn": 500}``.
    max_seq_len : dict or None, default=None
        Longest T searched per model, e.g. ``{"fcn": 128}``; a model whose
        limit is below every T is not searched.
    floor_rows : int, default=4000
        Rows each :func:`~stsq_learn.isotropic_floor` simulates.
    """

    seq_lens: tuple = (4, 8, 16)
    n_features: int | None = None
    n_selected: int | None = None
    task: object = None
    transformer: object = None
    fcn: object = None
    widths: dict | None = None
    n_steps: dict | None = None
    max_seq_len: dict | None = None
    floor_rows: int = 4000


class WidthSeparationSettings(CurveSettings):
    """The settings of :func:`width_separation`: those of :class:`CurveSettings` and the search.

    Attributes
    ----------
    seq_lens, n_features, n_selected, task, transformer, fcn, widths, n_steps, \
max_seq_len, floor_rows
        The task, the models and their grids: see :class:`CurveSettings`.
    target_r2 : float, default=0.9
        The R^2 a width must reach.
    regime : {"online", "finite"}, default="online"
        ``"online"``: every width trained on fresh batches for its
        ``n_steps``; ``"finite"``: fitted on ``n_train`` rows (``fit``).
    n_train : int, default=20000
        Training rows per fit (``regime="finite"``).
    n_val : int, default=2000
        Held-out rows scoring each width.
    search : {"bracket", "bisect", "scan"}, default="bracket"
        How each length's widths are visited
        (:func:`~stsq_learn.studies.search_threshold`). ``"bracket"``: from
        the previous T's minimal width outwards, a length after a miss not
        searched. ``"bisect"``: the transformer from the floor's minimal
        width at T, the FCN from the previous T's minimal width times the
        ratio of the lengths (at the first T from ``2 T d``), then
        bisection until a passing width's neighbour below fails; the FCN
        skips the lengths after a miss. ``"scan"``: upwards from the
        smallest width.
    stop_fits : bool, default=False
        Stop each online fit once it reaches ``target_r2`` on its scoring
        rows (:class:`~stsq_learn.studies.StopAtTarget`).

    Examples
    --------
    >>> from stsq_learn.experiments import WidthSeparationSettings
    >>> settings = WidthSeparationSettings(seq_lens=(4, 8), target_r2=0.5)
    >>> settings.replace(search="bisect").search, settings.target_r2
    ('bisect', 0.5)
    """

    target_r2: float = 0.9
    regime: str = "online"
    n_train: int = 20000
    n_val: int = 2000
    search: str = "bracket"
    stop_fits: bool = False


@dataclass
class SeparationResult:
    """One seed's minimal widths against T for both models, the floor's, and the laws.

    Attributes
    ----------
    config : dict
        The settings (task sizes, grids, steps, target, search).
    seq_lens : list of int
        The lengths T.
    table : StudyTable
        :func:`~stsq_learn.studies.minimal_width`'s rows of both models
        (``model``, ``seed``, ``param_seq_len``, ``value``: the minimal
        width, NaN where not reached, ``bound``, ``n_fits``, ...).
    floor_width : list of int or None
        Per T, the smallest width of the transformer's grid whose isotropic
        floor allows ``target_r2`` (None where none does, or for a task other
        than the sparse token selection).
    laws : dict of str to Law or None
        Per model, its law fitted to its minimal widths (``a + b log2 T``,
        ``a + b T``); None with fewer than 3 widths.
    seconds : dict of str to float
        Seconds each model's searches took.

    Examples
    --------
    >>> from stsq_learn.experiments import width_separation
    >>> res = width_separation(seq_lens=(4, 8), widths={"transformer": (4, 8), "fcn": (4, 8)},
    ...                        n_steps={"transformer": 20, "fcn": 20}, n_val=200,
    ...                        target_r2=0.5, floor_rows=300)
    >>> sorted(res.minimal_width)
    ['fcn', 'transformer']
    """

    config: dict
    seq_lens: list
    table: StudyTable
    floor_width: list = field(default_factory=list)
    laws: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)

    def _column(self, model, name):
        rows = self.table.where(model=model)
        found = dict(zip(rows["param_seq_len"], rows[name]))
        return [_width(found.get(T)) for T in self.seq_lens]

    @property
    def minimal_width(self):
        """dict of str to list: per model and T the minimal width, None where not found."""
        return {m: self._column(m, "value") for m in MODELS}

    @property
    def lower_bound(self):
        """dict of str to list: per model and T the width known to fall short, or None."""
        return {m: self._column(m, "bound") for m in MODELS}

    def searched(self, model):
        """Whether ``model`` was searched at any length.

        Parameters
        ----------
        model : {"transformer", "fcn"}
            The model.

        Returns
        -------
        bool
            True where the table holds a row of ``model``.
        """
        return bool(len(self.table.where(model=model)))

    def width_ratio(self):
        """FCN minimal width over the transformer's, per T (None where either is missing)."""
        w = self.minimal_width
        return [f / t if t and f else None for t, f in zip(w["transformer"], w["fcn"])]

    def width_text(self, model):
        """Per T, the minimal width as text, ``"> b"`` for a lower bound, ``"-"`` if unknown.

        Parameters
        ----------
        model : {"transformer", "fcn"}
            The model.

        Returns
        -------
        list of str
            One entry per ``seq_lens``.
        """
        pairs = zip(self.minimal_width[model], self.lower_bound[model])
        return [str(w) if w else (f"> {b}" if b else "-") for w, b in pairs]

    def to_dict(self):
        """JSON-ready dict of the fields (the table's and laws' ``to_dict()``), and width ratios."""
        return {
            "config": self.config,
            "seq_lens": list(self.seq_lens),
            "table": self.table.to_dict(),
            "floor_width": list(self.floor_width),
            "laws": {m: None if law is None else law.to_dict() for m, law in self.laws.items()},
            "seconds": dict(self.seconds),
            "minimal_width": self.minimal_width,
            "lower_bound": self.lower_bound,
            "width_ratio": self.width_ratio(),
        }

    @classmethod
    def from_dict(cls, data):
        """The result that :meth:`to_dict` wrote.

        Parameters
        ----------
        data : dict
            A :meth:`to_dict` (read back from JSON).

        Returns
        -------
        SeparationResult
        """
        return cls(
            config=data["config"],
            seq_lens=list(data["seq_lens"]),
            table=StudyTable.from_dict(data["table"]),
            floor_width=list(data["floor_width"]),
            laws={m: law_from_dict(law) for m, law in data["laws"].items()},
            seconds=dict(data["seconds"]),
        )

    def plot(self, ax=None):
        """Both models' minimal widths against T (log-log), their bounds, laws and the floor.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Where to draw (None: a new figure).

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure holding the panel.
        """
        return plot_both_models([self], ax).figure_


def _width(value):
    """A table's width as an int, None for NaN or a missing one."""
    if value is None or not math.isfinite(float(value)):
        return None
    return int(value)


def plot_both_models(results, ax=None):
    """Both models' minimal widths over seeds with their min-max band, bounds and laws.

    Each law is fitted to every seed's widths and drawn over the lengths it
    was fitted on, where its R^2 is at least :data:`GOOD_FIT`; the floor's
    minimal widths (the first seed's) are the theory's curve.
    """
    first = results[0]
    table = StudyTable.concat([r.table for r in results])
    models = [m for m in MODELS if first.searched(m)]
    laws = {}
    for model in models:
        x, y = table.where(model=model).xy("seq_len", "value")
        law = law_or_none(x, y, LAW_OF[model])
        if law is not None and law.r2 >= GOOD_FIT:
            laws[model] = law
    theory = None
    floors = [(T, w) for T, w in zip(first.seq_lens, first.floor_width) if w is not None]
    if floors:
        theory = {"floor's minimal width (transformer)": tuple(zip(*floors))}
    cfg = first.config
    return BandDisplay.from_table(
        table,
        x="seq_len",
        y="value",
        hue="model",
        laws=laws,
        theory=theory,
        bound="bound",
        ax=ax,
        style="errorbar",
        logx=True,
        logy=True,
        labels=_LABELS,
        colors={"transformer": "C0", "fcn": "C1"},
        xlabel="T",
        ylabel=f"smallest width reaching R$^2$ >= {cfg['target_r2']}",
        title=f"Both models (d={cfg['n_features']}, q={cfg['n_selected']})",
    )


@functools.cache
def _floor_allows(seq_len, n_selected, width, n_samples, target):
    floor = isotropic_floor(seq_len, n_selected, width, n_samples=n_samples, random_state=0)
    return 1.0 - floor.relative_mse >= target


def floor_widths(seq_lens, n_selected, widths, target, *, n_samples):
    """Per T, the smallest of ``widths`` whose isotropic floor allows R^2 >= ``target``.

    Bisection over the increasing grid (the floor falls as the width
    grows); None where even the largest width's floor is too high. The floor
    is the theory's curve, the same for every seed of a study: its rows are
    simulated with ``random_state=0``.

    Parameters
    ----------
    seq_lens : sequence of int
        The lengths T.
    n_selected : int
        The subset size q.
    widths : sequence of int
        The increasing grid.
    target : float
        The R^2 the floor must allow.
    n_samples : int
        Rows each floor simulates.

    Returns
    -------
    list of int or None
        One per T.
    """
    out = []
    for T in seq_lens:
        lo, hi = -1, len(widths) - 1
        allows = functools.partial(_floor_allows, T, n_selected, n_samples=n_samples)
        if not allows(widths[hi], target=target):
            out.append(None)
            continue
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if allows(widths[mid], target=target) else (mid, hi)
        out.append(widths[hi])
    return out


# -- settings, checked before any fit ----------------------------------------------------------
def _per_model(value, default, name):
    """``{"transformer": ..., "fcn": ...}`` from a dict naming some of the models (or None)."""
    if value is None:
        return dict(default)
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a dict keyed by 'transformer'/'fcn', got {value!r}.")
    unknown = sorted(set(value) - set(MODELS))
    if unknown:
        raise ValueError(f"{name} has unknown models {unknown}; use 'transformer' and 'fcn'.")
    return {**default, **value}


def _checked_grid(grid, name):
    if isinstance(grid, (str, bytes)) or not hasattr(grid, "__iter__"):
        raise TypeError(f"{name} must be a sequence of widths, got {grid!r}.")
    grid = tuple(check_positive_int(w, f"{name}[i]") for w in grid)
    if not grid or list(grid) != sorted(set(grid)):
        raise ValueError(f"{name} must be increasing widths, each once, got {grid!r}.")
    return grid


def _checked_model(given, model):
    est = DEFAULT_ESTIMATORS[model] if given is None else given
    if not (hasattr(est, "get_params") and hasattr(est, "fit")):
        raise TypeError(f"{model} must be a scikit-learn estimator, got {est!r}.")
    if "width" not in est.get_params(deep=False):
        raise TypeError(f"{model} must have a 'width' parameter, got {type(est).__name__}.")
    return est


def _checked_task(cfg):
    task = cfg.task
    if task is None:
        d = 2 if cfg.n_features is None else cfg.n_features
        q = 2 if cfg.n_selected is None else cfg.n_selected
        return SparseTokenSelectionTask(min(cfg.seq_lens), d, q)
    if not any(f.name == "seq_len" for f in dataclasses.fields(task)):
        raise TypeError(f"task must be a task with a seq_len field, got {task!r}.")
    for name in ("n_features", "n_selected"):
        given, own = cfg[name], getattr(task, name, None)
        if given is not None and given != own:
            raise ValueError(f"{name}={given!r} differs from the task's {name}={own!r}.")
    return task


@dataclass(frozen=True)
class _Plan:
    """One curve's search, every setting checked."""

    task: object
    seq_lens: tuple
    models: dict
    widths: dict
    n_steps: dict
    lengths: dict
    target: float
    regime: str
    n_train: int
    n_val: int
    search: str
    stop_fits: bool
    floor_rows: int

    def config(self):
        """The settings a result records."""
        return {
            "task": type(self.task).__name__,
            "n_features": getattr(self.task, "n_features", None),
            "n_selected": getattr(self.task, "n_selected", None),
            "estimators": {m: repr(est) for m, est in self.models.items()},
            "target_r2": self.target,
            "regime": self.regime,
            "widths": {m: list(w) for m, w in self.widths.items()},
            "n_steps": dict(self.n_steps),
            "n_train": self.n_train if self.regime == "finite" else None,
            "n_val": self.n_val,
            "search": self.search,
            "stop_fits": self.stop_fits,
            "max_seq_len": {m: max(ts, default=0) for m, ts in self.lengths.items()},
        }


def _checked(cfg):
    """The :class:`_Plan` of checked :class:`WidthSeparationSettings`."""
    if cfg.search not in ("bracket", "bisect", "scan"):
        raise ValueError(f"search must be 'bracket', 'bisect' or 'scan', got {cfg.search!r}.")
    if cfg.regime not in ("online", "finite"):
        raise ValueError(f"regime must be 'online' or 'finite', got {cfg.regime!r}.")
    if cfg.stop_fits and cfg.regime != "online":
        raise ValueError("stop_fits stops online fits: it needs regime='online'.")
    target = cfg.target_r2
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target < 1:
        raise ValueError(f"target_r2 must lie strictly between 0 and 1, got {target!r}.")
    if isinstance(cfg.seq_lens, (str, bytes)) or not hasattr(cfg.seq_lens, "__iter__"):
        raise TypeError(f"seq_lens must be a sequence of lengths, got {cfg.seq_lens!r}.")
    seq_lens = tuple(sorted({check_positive_int(T, "seq_lens[i]") for T in cfg.seq_lens}))
    if not seq_lens:
        raise ValueError("seq_lens must hold at least one length, got an empty sequence.")
    widths = _per_model(cfg.widths, DEFAULT_WIDTHS, "widths")
    widths = {m: _checked_grid(g, f"widths[{m!r}]") for m, g in widths.items()}
    steps = _per_model(cfg.n_steps, DEFAULT_STEPS, "n_steps")
    steps = {m: check_positive_int(k, f"n_steps[{m!r}]") for m, k in steps.items()}
    limits = _per_model(cfg.max_seq_len, dict.fromkeys(MODELS, max(seq_lens)), "max_seq_len")
    limits = {m: check_positive_int(t, f"max_seq_len[{m!r}]") for m, t in limits.items()}
    models = {m: _checked_model(cfg[m], m) for m in MODELS}
    if cfg.regime == "online":
        for m, est in models.items():
            if not hasattr(est, "fit_online"):
                raise TypeError(f"{m} ({type(est).__name__}) has no fit_online: use 'finite'.")
    return _Plan(
        task=_checked_task(cfg.replace(seq_lens=seq_lens)),
        seq_lens=seq_lens,
        models=models,
        widths=widths,
        n_steps=steps,
        lengths={m: [T for T in seq_lens if T <= limits[m]] for m in MODELS},
        target=float(target),
        regime=cfg.regime,
        n_train=check_positive_int(cfg.n_train, "n_train", minimum=10),
        n_val=check_positive_int(cfg.n_val, "n_val"),
        search=cfg.search,
        stop_fits=bool(cfg.stop_fits),
        floor_rows=check_positive_int(cfg.floor_rows, "floor_rows"),
    )


def _seeds_of(random_state, seeds):
    """The seeds of a run, and whether one result (not a list) is returned."""
    if seeds is not None and random_state is not None:
        raise ValueError(
            f"give random_state (one seed) or seeds (a list), not both: got "
            f"random_state={random_state!r}, seeds={seeds!r}."
        )
    if seeds is None:
        return check_seeds([0 if random_state is None else random_state]), True
    if not isinstance(seeds, (list, tuple)):
        raise TypeError(f"seeds must be a list or tuple of ints, got {seeds!r}.")
    return check_seeds(seeds), False


# -- the study ---------------------------------------------------------------------------------
def _floors_of(plan):
    """The floor's minimal width per T (None for a task other than the selection)."""
    task = plan.task
    if not isinstance(task, SparseTokenSelectionTask):
        return [None] * len(plan.seq_lens)
    grid = plan.widths["transformer"]
    return floor_widths(
        plan.seq_lens, task.n_selected, grid, plan.target, n_samples=plan.floor_rows
    )


def _start(plan, model, floors):
    """The search's start policy of ``model`` (see :class:`WidthSeparationSettings`)."""
    if plan.search == "scan":
        return None
    if plan.search == "bracket":
        return "previous"
    if model == "transformer":
        top = plan.widths["transformer"][-1]
        at = dict(zip(plan.seq_lens, floors))
        return lambda params, previous: at.get(params["seq_len"]) or top
    d = getattr(plan.task, "n_features", 1)

    def scaled(params, previous):
        T = params["seq_len"]
        if previous is None or not previous["reached"]:
            return 2 * T * d
        return previous["value"] * T / previous["params"]["seq_len"]

    return scaled


def _search(plan, seeds, *, device, progress, scheduler):
    """Per seed, the :class:`SeparationResult` of one checked curve."""
    floors = _floors_of(plan)
    tables, seconds = [], {}
    for model in (m for m in MODELS if plan.lengths[m]):
        start = time.perf_counter()
        table = _with_backend(
            scheduler,
            minimal_width,
            {model: plan.models[model]},
            plan.task,
            plan.widths[model],
            target=plan.target,
            grid={"seq_len": plan.lengths[model]},
            method=plan.search,
            start=_start(plan, model, floors),
            skip_after_miss=plan.search != "bisect" or model == "fcn",
            stop_at_target=plan.stop_fits,
            seeds=list(seeds),
            batch_seeds=True,
            n_steps=plan.n_steps[model] if plan.regime == "online" else "auto",
            n_train=plan.n_train if plan.regime == "finite" else None,
            n_test=plan.n_val,
            device=device,
            progress=progress,
        )
        tables.append(table)
        seconds[model] = round((time.perf_counter() - start) / len(seeds), 1)
    searches = {t["model"][0]: {k: v for k, v in t.meta.items() if k != "seeds"} for t in tables}
    table = StudyTable.concat(tables)
    out = []
    for s in seeds:
        rows = table.where(seed=s)
        meta = {"study": "width_separation", "seeds": [s], "searches": searches}
        own = StudyTable({c: rows[c] for c in rows.columns}, meta=meta)
        laws = {
            m: law_or_none(*own.where(model=m).xy("seq_len", "value"), LAW_OF[m])
            for m in MODELS
            if plan.lengths[m]
        }
        out.append(
            SeparationResult(
                config=plan.config(),
                seq_lens=list(plan.seq_lens),
                table=own,
                floor_width=list(floors),
                laws=laws,
                seconds=dict(seconds),
            )
        )
    return out


def _with_backend(scheduler, function, *args, **kwargs):
    """``function(*args, **kwargs)``, its fits on the dask cluster ``scheduler`` when given."""
    if scheduler is None:
        return function(*args, **kwargs)
    from ...distributed import dask_backend

    with dask_backend(scheduler):
        return function(*args, n_jobs=-1, **kwargs)


def width_separation(
    settings=None,
    *,
    device=None,
    random_state=None,
    seeds=None,
    progress=False,
    scheduler=None,
    **changes,
):
    """Measure the smallest width that reaches ``target_r2``, for both models, as T grows.

    Each model's minimal width at every length is searched by
    :func:`~stsq_learn.studies.minimal_width` along ``seq_len`` (every
    width trained from scratch and scored on held-out rows); the laws
    ``a + b log2 T`` (transformer) and ``a + b T`` (FCN) are fitted to the
    widths found (:func:`~stsq_learn.studies.fit_law`). See
    :class:`WidthSeparationSettings` for the searches.

    Parameters
    ----------
    settings : WidthSeparationSettings, mapping or None, default=None
        The task, the models, their grids and the search (None: the defaults).
    device : str or None, default=None
        Training device; None keeps each estimator's.
    random_state : int or None, default=None
        The one seed of the run (None: 0); a result is returned.
    seeds : sequence of int or None, default=None
        Several seeds, run as one study; a list of results is returned,
        one per seed, each as ``random_state=seed`` returns it.
    progress : bool, default=False
        Show progress bars.
    scheduler : str or distributed.Client, default=None
        Run the searches on joblib's dask backend (``"local:N"`` or an
        address, see :func:`stsq_learn.distributed.dask_backend`): the fits
        a search has pending at once (seeds trying different widths) go to
        the workers, a single pending fit is trained here; the numbers are
        those of a run in this process.
    **changes
        Settings of :class:`WidthSeparationSettings` to change.

    Returns
    -------
    SeparationResult or list of SeparationResult
        The minimal widths of both models, the floor's and the laws.

    Examples
    --------
    >>> from stsq_learn.experiments import width_separation
    >>> res = width_separation(seq_lens=(4, 8), widths={"transformer": (4, 8), "fcn": (4, 8)},
    ...                        n_steps={"transformer": 20, "fcn": 20}, n_val=200,
    ...                        target_r2=0.5, floor_rows=300, search="bisect")
    >>> len(res.seq_lens), res.config["search"]
    (2, 'bisect')
    """
    cfg = WidthSeparationSettings.resolve(settings, changes)
    seeds, one = _seeds_of(random_state, seeds)
    plan = _checked(cfg)
    out = _search(plan, seeds, device=device, progress=progress, scheduler=scheduler)
    return out[0] if one else out


class SeparationCurve(CurveSettings):
    """One curve of :func:`width_separation_by_q`: its :class:`CurveSettings` and a label.

    Attributes
    ----------
    label : str
        How its transformer is trained, in words (required).
    seq_lens, n_features, n_selected, task, transformer, fcn, widths, n_steps, \
max_seq_len, floor_rows
        See :class:`CurveSettings`.
    """

    label: str


class SeparationSettings(Settings):
    """The settings of :func:`width_separation_by_q`: the curves and their target.

    Attributes
    ----------
    curves : tuple of SeparationCurve
        The curves, in order (a mapping is read as a :class:`SeparationCurve`
        when the settings are made). Required.
    target_r2 : float, default=0.9
        The R^2 a width must reach, on every curve.
    n_val : int, default=2000
        Held-out rows scoring each width (and stopping its fit).
    stop_fits : bool, default=True
        Stop each fit once it reaches ``target_r2`` on its scoring rows
        (checked every 25 steps). The stopping rule acts on one net: with it
        the seeds are fitted one after another; without it, each fit trains
        all its steps and the seeds that try the same width at the same T
        train together as one batched model.

    Examples
    --------
    >>> from stsq_learn.experiments import SeparationCurve, SeparationSettings
    >>> curve = SeparationCurve(label="Adam", seq_lens=(4, 8), n_selected=2)
    >>> settings = SeparationSettings(curves=(curve,), target_r2=0.5)
    >>> settings.curves[0].seq_lens, settings.n_val
    ((4, 8), 2000)
    """

    curves: tuple
    target_r2: float = 0.9
    n_val: int = 2000
    stop_fits: bool = True

    def __post_init__(self):
        object.__setattr__(self, "curves", _checked_curves(self.curves))


def _checked_curves(curves):
    """``curves`` as a tuple of :class:`SeparationCurve`, each read before any fit."""
    if isinstance(curves, Mapping) or not isinstance(curves, (tuple, list)) or not curves:
        raise ValueError(f"curves must be a non-empty sequence of SeparationCurve, got {curves!r}.")
    out = []
    for i, curve in enumerate(curves):
        try:
            curve = SeparationCurve.resolve(curve)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"curves[{i}]: {exc}") from None
        if not isinstance(curve.label, str):
            raise ValueError(f"curves[{i}] must have a str 'label', got {curve.label!r}.")
        out.append(curve)
    return tuple(out)


@dataclass
class SeparationByQResult:
    """One seed's width separation at several subset sizes q, with the joint law.

    Attributes
    ----------
    curves : list of SeparationResult
        One bisection search per curve (:func:`width_separation`).
    labels : list of str
        Per curve, how its transformer was trained, in words.
    law : Law or None
        ``w = a + b q log2 T`` fitted to the transformer's minimal widths of
        every curve (``fit_law`` of ``log2`` at ``x = T^q``; ``params["a"]``
        and ``params["b"]``); None with fewer than 3 widths.
    floor_law : Law or None
        The same law fitted to the floor's minimal widths.
    seconds : float
        Wall-clock seconds of the run (the seeds' share, where several ran together).
    """

    curves: list
    labels: list
    law: Law | None
    floor_law: Law | None
    seconds: float = 0.0

    def to_dict(self):
        """JSON-ready dict: every curve's ``to_dict()``, the labels and both laws."""
        return {
            "curves": [c.to_dict() for c in self.curves],
            "labels": list(self.labels),
            "law": None if self.law is None else self.law.to_dict(),
            "floor_law": None if self.floor_law is None else self.floor_law.to_dict(),
            "seconds": self.seconds,
        }

    @classmethod
    def from_dict(cls, data):
        """The result that :meth:`to_dict` wrote.

        Parameters
        ----------
        data : dict
            A :meth:`to_dict` (read back from JSON).

        Returns
        -------
        SeparationByQResult
        """
        return cls(
            curves=[SeparationResult.from_dict(c) for c in data["curves"]],
            labels=list(data["labels"]),
            law=law_from_dict(data["law"]),
            floor_law=law_from_dict(data["floor_law"]),
            seconds=data["seconds"],
        )

    def plot(self, axes=None):
        """The figure of :meth:`plot_bands` for this one seed.

        Parameters
        ----------
        axes : sequence of 2 matplotlib Axes, default=None
            Where to draw (None: a new figure).

        Returns
        -------
        fig : matplotlib.figure.Figure
            The two panels.
        """
        return self.plot_bands([self], axes)

    @staticmethod
    def plot_bands(results, axes=None):
        """Minimal widths against T over seeds: per q beside the floor, and both models.

        Parameters
        ----------
        results : sequence of SeparationByQResult
            One per seed, with the same curves.
        axes : sequence of 2 matplotlib Axes, default=None
            Where to draw (None: a new figure).

        Returns
        -------
        fig : matplotlib.figure.Figure
            Left: the transformer's minimal widths per q (median over the
            seeds, min-max error bars, lower bounds as open triangles), the
            floor's minimal widths dashed, and per q the law ``a + b log2 T``
            fitted to that q's widths, drawn over its lengths where its
            R^2 is at least 0.8. Right: both models of the first curve that
            searched the FCN, with their laws.
        """
        import matplotlib.pyplot as plt

        results = list(results)
        if not results or not all(isinstance(r, SeparationByQResult) for r in results):
            raise TypeError("results must be a non-empty sequence of SeparationByQResult.")
        first = results[0]
        for i, res in enumerate(results):
            if [c.seq_lens for c in res.curves] != [c.seq_lens for c in first.curves]:
                raise ValueError(
                    f"results[{i}] searched other lengths than results[0]: the seeds of one "
                    "experiment search the same lengths."
                )
        if axes is None:
            _, axes = plt.subplots(1, 2, figsize=(14, 5.2), layout="constrained")
        plot_by_q(results, axes[0])
        with_fcn = [i for i, c in enumerate(first.curves) if c.searched("fcn")]
        plot_both_models([r.curves[(with_fcn or [0])[0]] for r in results], axes[1])
        if len(results) > 1:
            axes[0].figure.suptitle(
                f"Width separation, median over {len(results)} seeds, error bars: min-max"
            )
        return axes[0].figure


def plot_by_q(results, ax):
    """The transformer's minimal widths per q over seeds, the floor's, and a law per q."""
    first = results[0]
    rows = []
    laws, theory, labels = {}, {}, {}
    for i, (curve, label) in enumerate(zip(first.curves, first.labels)):
        q, d = curve.config["n_selected"], curve.config["n_features"]
        key = f"q={q}, d={d}"
        part = StudyTable.concat([r.curves[i].table.where(model="transformer") for r in results])
        rows.append(part.with_columns(curve=[key] * len(part)))
        law = law_or_none(*part.xy("seq_len", "value"), "log2")
        if law is not None and law.r2 >= GOOD_FIT:
            laws[key] = law
        floors = [(T, w) for T, w in zip(curve.seq_lens, curve.floor_width) if w is not None]
        if floors:
            theory[f"{key}: the floor's minimal width"] = tuple(zip(*floors))
        labels[key] = f"{key}: {label}"
    target = first.curves[0].config["target_r2"]
    display = BandDisplay.from_table(
        StudyTable.concat(rows),
        x="seq_len",
        y="value",
        hue="curve",
        laws=laws,
        theory=theory,
        bound="bound",
        ax=ax,
        style="errorbar",
        logx=True,
        logy=True,
        labels=labels,
        xlabel="T",
        ylabel=f"smallest width reaching R$^2$ >= {target}",
        title="Transformer: measured minimal width beside the floor's, per q",
    )
    for key, line in display.theory_lines_.items():  # the floor in its curve's colour
        line.set_color(display.lines_[key.split(":")[0]].get_color())
    display.ax_.legend(fontsize="x-small", loc="upper left")
    return display


def width_separation_by_q(
    settings=None,
    *,
    device=None,
    random_state=None,
    seeds=None,
    progress=False,
    scheduler=None,
    **changes,
):
    """Minimal widths against T at several q, beside the floor's, with ``a + b q log2 T``.

    Every curve is :func:`width_separation` with ``search="bisect"``: the
    transformer's search starts at the floor's minimal width, the FCN's at
    the previous T's scaled by the lengths' ratio, and (``stop_fits``) each
    fit stops once it reaches ``target_r2``. Then
    ``w = a + b q log2 T`` is fitted to the transformer's minimal widths of
    all curves together, and to the floor's.

    Parameters
    ----------
    settings : SeparationSettings or mapping
        The curves, the target R^2 and the scoring rows.
    device : str or None, default=None
        Training device; None keeps each estimator's.
    random_state : int or None, default=None
        The one seed of the run (None: 0); a result is returned.
    seeds : sequence of int or None, default=None
        Several seeds, run as one study; a list of results, one per seed.
    progress : bool, default=False
        Show progress bars.
    scheduler : str or distributed.Client, default=None
        As for :func:`width_separation`.
    **changes
        Settings of :class:`SeparationSettings` to change.

    Returns
    -------
    SeparationByQResult or list of SeparationByQResult
        One :class:`SeparationResult` per curve and the laws (per seed).

    Examples
    --------
    >>> from stsq_learn.experiments import PRESETS, width_separation_by_q
    >>> res = width_separation_by_q(PRESETS["tiny"]["separation"], seeds=[0, 1])
    >>> len(res), len(res[0].curves)
    (2, 2)
    """
    cfg = SeparationSettings.resolve(settings, changes)
    seeds, one = _seeds_of(random_state, seeds)
    plans = _plans(cfg)  # every curve checked before the first trains
    start = time.perf_counter()
    curves = [
        _search(plan, seeds, device=device, progress=progress, scheduler=scheduler)
        for plan in plans
    ]
    seconds = round((time.perf_counter() - start) / len(seeds), 1)
    labels = [c.label for c in cfg.curves]
    out = []
    for k in range(len(seeds)):
        own = [c[k] for c in curves]
        out.append(
            SeparationByQResult(
                curves=own,
                labels=labels,
                law=joint_law(own, lambda c: c.minimal_width["transformer"]),
                floor_law=joint_law(own, lambda c: c.floor_width),
                seconds=seconds,
            )
        )
    return out[0] if one else out


def _plans(cfg):
    """The checked search of every curve of :class:`SeparationSettings`."""
    shared = CurveSettings.field_names()
    return [
        _checked(
            WidthSeparationSettings(
                **{name: curve[name] for name in shared},
                target_r2=cfg.target_r2,
                n_val=cfg.n_val,
                search="bisect",
                stop_fits=cfg.stop_fits,
            )
        )
        for curve in cfg.curves
    ]


def separation_plans(settings):
    """The checked search of every curve of :func:`width_separation_by_q`'s settings.

    Parameters
    ----------
    settings : SeparationSettings or mapping
        The settings.

    Returns
    -------
    list
        Per curve, its checked search (task, models, grids, steps, lengths).
    """
    return _plans(SeparationSettings.resolve(settings, {}))


def joint_law(curves, widths_of):
    """``w = a + b q log2 T`` fitted to the curves' widths: ``log2`` at ``x = T^q``.

    Parameters
    ----------
    curves : sequence of SeparationResult
        The curves (their ``n_selected`` is q).
    widths_of : callable
        ``widths_of(curve)``: its widths per T (None where not found).

    Returns
    -------
    Law or None
        None with fewer than 3 widths.
    """
    x, y = [], []
    for curve in curves:
        q = curve.config["n_selected"]
        for T, w in zip(curve.seq_lens, widths_of(curve)):
            if w is not None:
                x.append(float(T) ** q)
                y.append(float(w))
    return law_or_none(x, y, "log2")
