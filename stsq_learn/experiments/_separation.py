"""Experiment 3: the width separation between the transformer and the FCN, measured."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from .._validation import check_positive_int
from ..engine.batch_reuse import reusing_batches
from ..tasks import SparseTokenSelectionTask
from ..tasks.selection.estimators import FCNSelector, SparseTokenSelector
from ._common import (
    dataclass_dict,
    derived_seed,
    estimator_config,
    new_axes,
    prepared,
    progress_bar,
    seed_results,
)
from ._separation_plots import plot_both_models, plot_residuals, plot_transformer_laws
from ._settings import Settings
from ._width_search import (
    MODELS,
    backend,
    checked_grids,
    floor_widths,
    growth_laws,
    joint_law,
    per_model,
    search_bisect,
    search_bracket,
    search_grid,
    search_online,
)


def width_texts(widths, bounds):
    """Minimal widths as text: ``"> b"`` where only a lower bound b is known, ``"-"`` if neither."""
    return [
        str(w) if w is not None else (f"> {b}" if b is not None else "-")
        for w, b in zip(widths, bounds)
    ]


@dataclass
class SeparationResult:
    """Smallest width reaching a target R^2, per sequence length, for both models.

    Attributes
    ----------
    config : dict
        The experiment's settings (task, grids, training regime, target).
    seq_lens : list of int
        The sequence lengths T searched.
    scores : dict of str to dict of str to dict of str to float
        ``scores[model][str(T)][str(width)]``: validation R^2 of each width
        tried (``model`` is ``"transformer"`` or ``"fcn"``); empty where the
        search at T was skipped (see ``lower_bound``).
    minimal_width : dict of str to list of int or None
        ``minimal_width[model][i]``: smallest width of the grid reaching
        ``target_r2`` at ``seq_lens[i]``, or None if no width did.
    growth_laws : dict
        Least-squares fits of each model's minimal widths against T:
        ``growth_laws[model][law]`` for ``law`` in ``"log_T"``
        (``w = a + b log2 T``), ``"power"`` (``w = a + b T^c``),
        ``"power_0"`` (``w = b T^c``) and ``"T_d"`` (``w = b T d``); each a
        dict of ``intercept`` (a), ``slope`` (b), ``exponent`` (c, power
        laws), ``r2``, ``rms_residual`` and ``residuals``, or None with too
        few points.
    lower_bound : dict of str to list of int or None
        ``lower_bound[model][i]``: where no width reached the target at
        ``seq_lens[i]``, the largest width known to fall short (the minimal
        width is larger); inherited from the previous T where the search
        was skipped. None where a minimal width was found.
    seconds : dict of str to float
        Wall-clock seconds each model's searches took.
    floor_width : list of int or None
        With ``search="bisect"``: per T, the smallest width of the
        transformer's grid whose isotropic floor
        (:func:`~stsq_learn.isotropic_floor`) allows ``target_r2`` (None
        where no width of the grid does): the theory's minimal width, where
        the search starts. Empty otherwise.
    steps_run : dict of str to dict of str to dict of str to int
        With ``search="bisect"``: ``steps_run[model][str(T)][str(width)]``,
        the online steps each width trained (fewer than planned where the
        fit stopped at the target, ``stop_fits``). Empty otherwise.

    Examples
    --------
    >>> from stsq_learn.experiments import width_separation
    >>> res = width_separation(seq_lens=(4, 8), n_features=2, n_selected=2,
    ...                        widths={"transformer": (4, 8), "fcn": (4, 8)},
    ...                        n_steps={"transformer": 20, "fcn": 20}, n_val=200,
    ...                        target_r2=0.5, random_state=0)
    >>> sorted(res.minimal_width)
    ['fcn', 'transformer']
    """

    config: dict
    seq_lens: list
    scores: dict
    minimal_width: dict
    growth_laws: dict
    lower_bound: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    floor_width: list = field(default_factory=list)
    steps_run: dict = field(default_factory=dict)

    def width_ratio(self):
        """FCN minimal width over the transformer's, per T (None where either is missing)."""
        out = []
        for wt, wf in zip(self.minimal_width["transformer"], self.minimal_width["fcn"]):
            out.append(wf / wt if wt and wf else None)
        return out

    def width_text(self, model):
        """Per T, the minimal width as text, ``"> w"`` for a lower bound, ``"-"`` if unknown.

        Parameters
        ----------
        model : {"transformer", "fcn"}
            The model.

        Returns
        -------
        list of str
            One entry per ``seq_lens``.
        """
        bounds = self.lower_bound.get(model) or [None] * len(self.seq_lens)
        return width_texts(self.minimal_width[model], bounds)

    def to_dict(self):
        """JSON-ready dict of the fields, plus the FCN/transformer width ratio per T."""
        out = dataclass_dict(self)
        out["width_ratio"] = self.width_ratio()
        return out

    def plot(self, axes=None):
        """The transformer's widths with both laws, both models on log-log, and residuals.

        Parameters
        ----------
        axes : sequence of 3 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 3 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure holding the axes.
        """
        fig, axes = new_axes(axes, 3, figsize=(17, 4.6))
        plot_transformer_laws(self, axes[0])
        plot_both_models(self, axes[1])
        plot_residuals(self, axes[2])
        return fig


_DEFAULT_ESTIMATORS = {
    "transformer": SparseTokenSelector(
        solver="adam", learning_rate_init=0.1, batch_size=256, max_iter=30
    ),
    "fcn": FCNSelector(solver="adam", learning_rate_init=0.01, batch_size=1024, max_iter=30),
}
_DEFAULT_WIDTHS = {
    "transformer": (2, 4, 8, 16, 32, 64),
    "fcn": (2, 4, 8, 16, 32, 64, 128, 256),
}
_DEFAULT_STEPS = {"transformer": 300, "fcn": 500}


class CurveSettings(Settings):
    """The settings of one curve of the width separation: the task, the models, their grids.

    The settings :func:`width_separation` and every curve of
    :func:`width_separation_by_q` (:class:`SeparationCurve`) share; the
    first adds how the widths are searched (:class:`WidthSeparationSettings`),
    the second a label.

    Attributes
    ----------
    seq_lens : tuple of int, default=(4, 8, 16)
        The lengths T.
    n_features, n_selected : int, default=2, 2
        Token dimension d and subset size q. With q = 2 the two selected
        scores tie exactly, so the transformer's error floor is about 0 and
        the target is reachable at small width; keep d small so the FCN
        reaches it within its grid.
    transformer : SparseTokenSelector or None, default=None
        The transformer to search over. None is
        ``SparseTokenSelector(solver="adam", learning_rate_init=0.1, batch_size=256,
        max_iter=30)``.
    fcn : FCNSelector or None, default=None
        The fully-connected baseline. None is
        ``FCNSelector(solver="adam", learning_rate_init=0.01, batch_size=1024, max_iter=30)``.
    widths : dict or None, default=None
        Width grid per model, ``{"transformer": (...), "fcn": (...)}`` (searched
        in increasing order); a model left out keeps its default grid,
        ``(2, 4, ..., 64)`` and ``(2, 4, ..., 256)``.
    n_steps : dict or None, default=None
        Online steps per width and model (``regime="online"``); defaults
        ``{"transformer": 300, "fcn": 500}``.
    max_seq_len : dict or None, default=None
        Longest T searched per model, e.g. ``{"fcn": 128}``: longer lengths
        are not searched for that model (minimal width and bound None); a
        model left out is searched at every length.
    floor_rows : int, default=4000
        Rows each :func:`~stsq_learn.isotropic_floor` of ``floor_width``
        simulates (``search="bisect"``).
    """

    seq_lens: tuple = (4, 8, 16)
    n_features: int = 2
    n_selected: int = 2
    transformer: SparseTokenSelector | None = None
    fcn: FCNSelector | None = None
    widths: dict | None = None
    n_steps: dict | None = None
    max_seq_len: dict | None = None
    floor_rows: int = 4000


class WidthSeparationSettings(CurveSettings):
    """The settings of :func:`width_separation`: those of :class:`CurveSettings` and the search.

    Attributes
    ----------
    seq_lens, n_features, n_selected, transformer, fcn, widths, n_steps, \
max_seq_len, floor_rows
        The task, the models and their grids: see :class:`CurveSettings`.
    target_r2 : float, default=0.9
        The R^2 a width must reach.
    regime : {"online", "gridsearch"}, default="online"
        Training regime, see :func:`width_separation`.
    n_train : int, default=20000
        Rows of the finite training set (``regime="gridsearch"``).
    n_val : int, default=2000
        Held-out rows scoring each width (``regime="online"``).
    stop_at_target : bool, default=True
        Stop the search at a T once a width reaches the target (``"online"``).
    monotone_search : bool, default=True
        Bracket the search at each T around the previous T's minimal width
        (``"online"`` with ``stop_at_target``).
    search : {"bracket", "bisect"}, default="bracket"
        The online search at each T (``regime="online"``). ``"bracket"``: as
        ``stop_at_target`` and ``monotone_search`` say. ``"bisect"``
        (:func:`~stsq_learn.experiments._width_search.search_bisect`):
        the transformer starts at the floor's minimal width at that T
        (``floor_width``), the FCN at the previous T's minimal width scaled
        by the ratio of the lengths (at the first T, the first width
        >= ``2 T d``); from there the grid is bracketed and bisected until
        the minimal width passes and its neighbour below is trained and
        fails. A length after one where the FCN reached no width is not
        searched (it keeps the lower bound).
    stop_fits : bool, default=False
        Stop each fit of an online search (bisected or scanned) once it
        reaches ``target_r2`` on the ``n_val`` rows that score it (checked
        every 25 steps). A width that does not reach it trains all its steps.

    Examples
    --------
    >>> from stsq_learn.experiments import WidthSeparationSettings
    >>> settings = WidthSeparationSettings(seq_lens=(4, 8), target_r2=0.5)
    >>> settings.replace(search="bisect").search, settings.n_features
    ('bisect', 2)
    """

    target_r2: float = 0.9
    regime: str = "online"
    n_train: int = 20000
    n_val: int = 2000
    stop_at_target: bool = True
    monotone_search: bool = True
    search: str = "bracket"
    stop_fits: bool = False


@reusing_batches
def width_separation(
    settings=None,
    *,
    device=None,
    random_state=0,
    progress=False,
    scheduler=None,
    **changes,
):
    """Measure the smallest width that reaches ``target_r2``, for both models, as T grows.

    The paper's expressivity claim: the one-layer transformer needs width
    O(d + q log T), a fully-connected net Omega(T d). For each T, every
    width of each grid is trained and scored on held-out rows; the smallest
    width with R^2 >= ``target_r2`` is reported (or a lower bound where none
    is), and growth laws (``a + b log2 T``, ``a + b T^c``, ``b T^c`` and
    ``b T d``) are fitted by least squares.

    Two training regimes:

    Each model is an estimator, cloned for every width (its ``width`` set,
    its ``random_state`` replaced by one derived from the run's, and its
    ``device`` replaced when ``device`` is given); its other
    hyperparameters (step size, batch size, solver, ``max_iter``) are used
    as they are. Two training regimes:

    - ``"online"`` (default; a fresh batch at every step, as in the paper):
      each width is trained by ``fit_online`` on fresh batches
      (``n_steps[model]`` steps of the estimator's ``batch_size`` rows) and
      scored on ``n_val`` rows.
      Training never reuses a row, so the FCN cannot overfit and its
      minimal width reflects what it can represent and learn in that
      budget, not its sample efficiency. With ``stop_at_target`` the widths
      are tried in increasing order and the search at that T stops at the
      first that reaches the target. With ``monotone_search`` the search
      reuses what the shorter lengths found: at each next T it starts at
      the previous T's minimal width and brackets, trying smaller widths
      while they reach the target and larger ones until one does (about two
      fits per T); where the previous T reached no width of the grid, the
      next is not searched and keeps its lower bound (the width needed is
      assumed not to shrink as T grows).
    - ``"gridsearch"``: :class:`~sklearn.model_selection.GridSearchCV`
      over ``width`` on ``n_train`` finite rows (``fit``, up to the
      estimator's ``max_iter`` epochs), validated on one 20% hold-out
      split. Closer to everyday use; the FCN then also pays for
      overfitting, so its widths come out larger (or unreached) at the
      same target.

    Parameters
    ----------
    settings : WidthSeparationSettings, mapping or None, default=None
        The task, the models, their grids and the search (None: the
        defaults).
    device : str or None, default=None
        Training device; None keeps each estimator's.
    random_state : int, default=0
        Seed of the run.
    progress : bool, default=False
        Show tqdm progress bars.
    scheduler : str or distributed.Client, default=None
        Run the fits on a dask cluster (needs the ``distributed`` extra):
        ``"local:N"`` starts a LocalCluster of N worker processes, an address
        such as ``"tcp://host:8786"`` connects to a running scheduler (see
        :func:`stsq_learn.distributed.dask_backend`). ``"gridsearch"`` sends
        every GridSearchCV fit to the workers; ``"online"`` trains the next
        widths of a search side by side, as many as there are worker threads,
        and keeps only those up to the first that reaches the target, so the
        result is the sequential one. None (default) runs in this process.
    **changes
        Settings of :class:`WidthSeparationSettings` to change
        (``width_separation(seq_lens=(4, 8), target_r2=0.5)``).

    Returns
    -------
    SeparationResult
        Scores of every width tried, the minimal widths and their growth laws.
    """
    cfg = WidthSeparationSettings.resolve(settings, changes)
    checked = _checked_search(cfg, device=device, random_state=random_state)
    return _run_search(*checked, progress=progress, scheduler=scheduler)


def _checked_search(cfg, *, device, random_state):
    """The lengths, tasks, estimators, plan and floor rows of one :func:`width_separation`.

    Every setting of ``cfg`` is checked here, before any fit.
    """
    search, regime, target_r2 = cfg.search, cfg.regime, cfg.target_r2
    if search not in ("bracket", "bisect"):
        raise ValueError(f"search must be 'bracket' or 'bisect', got {search!r}.")
    if search == "bisect" and regime != "online":
        raise ValueError(f"search='bisect' needs regime='online', got regime={regime!r}.")
    floor_rows = check_positive_int(cfg.floor_rows, "floor_rows")
    if regime not in ("online", "gridsearch"):
        raise ValueError(f"regime must be 'online' or 'gridsearch', got {regime!r}.")
    if not 0 < target_r2 < 1:
        raise ValueError(f"target_r2 must lie strictly between 0 and 1, got {target_r2!r}.")
    seq_lens = sorted({check_positive_int(T, "seq_lens[i]") for T in cfg.seq_lens})
    if not seq_lens:
        raise ValueError("seq_lens must hold at least one length, got an empty sequence.")
    grids, steps = checked_grids(cfg.widths, cfg.n_steps, _DEFAULT_WIDTHS, _DEFAULT_STEPS)
    n_train = check_positive_int(cfg.n_train, "n_train", minimum=10)
    n_val = check_positive_int(cfg.n_val, "n_val")
    tasks = [SparseTokenSelectionTask(T, cfg.n_features, cfg.n_selected) for T in seq_lens]
    base = {
        model: prepared(
            given,
            _DEFAULT_ESTIMATORS[model],
            cls,
            model,
            device=device,
            random_state=derived_seed(random_state, seed),
        )
        for model, given, cls, seed in (
            ("transformer", cfg.transformer, SparseTokenSelector, 6),
            ("fcn", cfg.fcn, FCNSelector, 7),
        )
    }
    plan = _SearchPlan(
        regime=regime,
        target_r2=target_r2,
        widths=grids,
        n_steps=steps,
        n_train=n_train,
        n_val=n_val,
        stop_at_target=bool(cfg.stop_at_target),
        monotone_search=bool(cfg.stop_at_target and cfg.monotone_search),
        random_state=random_state,
        max_seq_len=_checked_max_seq_len(cfg.max_seq_len, seq_lens),
        bisect=search == "bisect",
        stop_fits=bool(cfg.stop_fits),
    )
    return seq_lens, tasks, base, plan, floor_rows


def _run_search(seq_lens, tasks, base, plan, floor_rows, *, progress, scheduler):
    """The :class:`SeparationResult` of a checked search (:func:`_checked_search`)."""
    d = tasks[0].n_features
    floors = []
    if plan.bisect:
        floors = floor_widths(
            seq_lens,
            tasks[0].n_selected,
            plan.widths["transformer"],
            plan.target_r2,
            n_samples=floor_rows,
            random_state=derived_seed(plan.random_state, 8),
        )
    steps_run = {}
    scores, minimal, bound, seconds = _search_all(
        tasks,
        base,
        plan,
        progress=progress,
        scheduler=scheduler,
        floors=floors,
        steps_run=steps_run,
    )
    config = {
        "n_features": d,
        "n_selected": tasks[0].n_selected,
        "estimators": {model: estimator_config(est) for model, est in base.items()},
        **plan.config(),
    }
    return SeparationResult(
        config=config,
        seq_lens=seq_lens,
        scores=scores,
        minimal_width=minimal,
        growth_laws=growth_laws(seq_lens, minimal, d),
        lower_bound=bound,
        seconds=seconds,
        floor_width=floors,
        steps_run=steps_run,
    )


@dataclass(frozen=True)
class _SearchPlan:
    """What every (T, model) search of :func:`width_separation` does."""

    regime: str
    target_r2: float
    widths: dict
    n_steps: dict
    n_train: int
    n_val: int
    stop_at_target: bool
    monotone_search: bool
    random_state: int
    max_seq_len: dict
    bisect: bool = False
    stop_fits: bool = False

    def config(self):
        """The settings a result records (those of its regime)."""
        out = {"target_r2": self.target_r2, "regime": self.regime, "widths": self.widths}
        out["random_state"] = self.random_state
        out["max_seq_len"] = self.max_seq_len
        if self.regime == "online" and self.bisect:
            out.update(n_steps=self.n_steps, n_val=self.n_val)
            out.update(search="bisect", stop_fits=self.stop_fits)
        elif self.regime == "online":
            out.update(n_steps=self.n_steps, n_val=self.n_val)
            out.update(stop_at_target=self.stop_at_target, monotone_search=self.monotone_search)
            out.update(stop_fits=self.stop_fits)
        else:
            out.update(n_train=self.n_train, validation="one 20% hold-out split")
        return out


def _search_all(tasks, base, plan, *, progress, scheduler, floors=(), steps_run=None):
    """Every (T, model) search of :func:`width_separation`: scores, minimal widths, bounds.

    With ``plan.bisect``, ``floors`` are the transformer's floor widths per
    task and ``steps_run`` (a dict, filled) gets the steps of every fit.
    """
    scores = {model: {} for model in MODELS}
    minimal = {model: [] for model in MODELS}
    bound = {model: [] for model in MODELS}
    seconds = dict.fromkeys(MODELS, 0.0)
    items = [(task, model) for task in tasks for model in MODELS]
    bar = progress_bar(len(items), "separation: (T, model) searches", enabled=progress)
    with backend(scheduler), bar as outer:
        for task, model in items:
            T = task.seq_len
            outer.set_postfix_str(f"T={T} {model}")
            start = time.perf_counter()
            if T > plan.max_seq_len[model]:
                found = {}
            elif plan.bisect:
                floor = floors[tasks.index(task)] if model == "transformer" else None
                found, ran = _search_bisect(
                    task,
                    model,
                    base[model],
                    plan,
                    minimal[model],
                    floor,
                    progress,
                    scheduler is not None,
                    [t.seq_len for t in tasks],
                )
                steps_run.setdefault(model, {})[str(T)] = {str(w): k for w, k in ran.items()}
            elif plan.regime == "online":
                parallel = scheduler is not None
                found = _search_online(
                    task, model, base[model], plan, minimal[model], progress, parallel
                )
            else:
                seed = derived_seed(plan.random_state, 200 + T)
                found = search_grid(base[model], task, plan.widths[model], plan.n_train, seed)
            seconds[model] += time.perf_counter() - start
            scores[model][str(T)] = {str(w): s for w, s in found.items()}
            reached = [w for w, s in sorted(found.items()) if s >= plan.target_r2]
            minimal[model].append(reached[0] if reached else None)
            failed = [w for w, s in found.items() if s < plan.target_r2]
            skipped = not found and bound[model] and T <= plan.max_seq_len[model]
            inherited = bound[model][-1] if skipped else None
            bound[model].append(None if reached else max(failed, default=inherited))
            outer.update()
    return scores, minimal, bound, {m: round(t, 1) for m, t in seconds.items()}


def _search_online(task, model, estimator, plan, minimal, progress, parallel):
    """One online search; with ``monotone_search``, from the previous T's minimal width.

    ``minimal``: the model's minimal widths at the shorter lengths. When the
    previous length reached no width of the grid, this one is not searched
    (``{}``): the width needed is assumed not to shrink as T grows, so the
    previous lower bound holds.
    """
    T = task.seq_len
    grid = plan.widths[model]
    seed = derived_seed(plan.random_state, 100 + T)
    desc = f"T={T} {model}"
    args = (plan.n_steps[model], plan.n_val, plan.target_r2)
    if plan.monotone_search and minimal:
        if minimal[-1] is None:
            return {}
        start = grid.index(minimal[-1])
        return search_bracket(
            estimator,
            task,
            grid,
            start,
            *args,
            seed,
            progress,
            desc,
            parallel=parallel,
            stop_fits=plan.stop_fits,
        )
    return search_online(
        estimator,
        task,
        grid,
        *args,
        plan.stop_at_target,
        seed,
        progress,
        desc,
        parallel=parallel,
        stop_fits=plan.stop_fits,
    )


def _search_bisect(task, model, estimator, plan, minimal, floor, progress, parallel, seq_lens):
    """One bisection search (``search="bisect"``): ``({width: R^2}, {width: steps})``.

    The transformer starts at its floor's minimal width ``floor`` (the
    grid's top where None); the FCN at the previous length's minimal width
    times the ratio of the lengths, or at the first T at the first width
    >= ``2 T d``. After a length where the FCN reached no width, it is not
    searched (``{}``).
    """
    T = task.seq_len
    grid = plan.widths[model]
    if minimal and minimal[-1] is None and model == "fcn":
        return {}, {}
    if model == "transformer":
        guess = grid[-1] if floor is None else floor
    elif minimal:
        guess = minimal[-1] * T / seq_lens[len(minimal) - 1]
    else:
        guess = 2 * T * task.n_features
    start = next((i for i, w in enumerate(grid) if w >= guess), len(grid) - 1)
    seed = derived_seed(plan.random_state, 100 + T)
    return search_bisect(
        estimator,
        task,
        grid,
        start,
        plan.n_steps[model],
        plan.n_val,
        plan.target_r2,
        seed,
        progress,
        f"T={T} {model}",
        stop_fits=plan.stop_fits,
        parallel=parallel,
    )


def _checked_max_seq_len(max_seq_len, seq_lens):
    """The longest T searched per model (every T for a model left out), validated."""
    limits = per_model(max_seq_len, dict.fromkeys(MODELS, max(seq_lens)), "max_seq_len")
    return {m: check_positive_int(t, f"max_seq_len[{m!r}]") for m, t in limits.items()}


@dataclass
class SeparationByQResult:
    """The width separation at several subset sizes q, beside the floor's minimal widths.

    Attributes
    ----------
    curves : list of SeparationResult
        One search per (q, d) (:func:`width_separation` with
        ``search="bisect"``): the measured minimal widths, the floor's
        (``floor_width``) and, where searched, the FCN's with its lower bounds.
    labels : list of str
        Per curve, how its transformer was trained, in words (the solver,
        and whether that is the paper's algorithm or ours).
    law : dict or None
        Least squares ``w = a + b q log2 T`` over the transformer's measured
        minimal widths of every curve (:func:`fit_growth_law`: ``intercept``,
        ``slope``, ``r2``, ``rms_residual``, ``residuals``); None with too
        few points.
    floor_law : dict or None
        The same law fitted to the floor's minimal widths.
    seconds : float
        Wall-clock seconds of the whole run.
    """

    curves: list
    labels: list
    law: dict | None
    floor_law: dict | None
    seconds: float = 0.0

    def to_dict(self):
        """JSON-ready dict: every curve's ``to_dict()``, the labels and both laws."""
        return {
            "curves": [c.to_dict() for c in self.curves],
            "labels": list(self.labels),
            "law": self.law,
            "floor_law": self.floor_law,
            "seconds": self.seconds,
        }

    def plot(self, axes=None):
        """Measured and floor widths against T per q, with the law; both models per curve.

        Parameters
        ----------
        axes : sequence of 2 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 2 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The minimal widths against T per q beside the floor's, and the FCN's.
        """
        return _plot_by_q([self], axes)

    @staticmethod
    def plot_bands(results, axes=None):
        """The figure of :meth:`plot` over seeds: median widths with min-max error bars.

        Parameters
        ----------
        results : sequence of SeparationByQResult
            One per seed, with the same curves (the experiment at several
            ``random_state``).
        axes : sequence of 2 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 2 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The panels of :meth:`plot`. The first: each curve's measured
            and floor minimal widths as their median over the seeds that
            found one at that T, with min-max error bars, every seed's
            lower bounds, and the law fitted to every seed's measured
            widths. The second: both models of the first seed. One result
            draws :meth:`plot`'s figure.
        """
        results = seed_results(results, SeparationByQResult, ("labels",))
        for i, res in enumerate(results):
            lens = [c.seq_lens for c in res.curves]
            if lens != [c.seq_lens for c in results[0].curves]:
                raise ValueError(
                    f"results[{i}] searched the lengths {lens}, results[0] "
                    f"{[c.seq_lens for c in results[0].curves]}: the seeds of one experiment "
                    "search the same lengths."
                )
        return _plot_by_q(results, axes)


def _plot_by_q(results, axes):
    """The figure of :meth:`SeparationByQResult.plot` over one result or several seeds'."""
    from ._separation_plots import plot_by_q, plot_fcn_curves

    fig, axes = new_axes(axes, 2, figsize=(15, 5.2))
    plot_by_q(results, axes[0])
    plot_fcn_curves(results[0], axes[1])
    if len(results) > 1:
        axes[1].set_title(f"{axes[1].get_title()}, the first seed")
        fig.suptitle(
            f"Width separation by q, median over {len(results)} seeds, error bars: min-max"
        )
    return fig


class SeparationCurve(CurveSettings):
    """One curve of :func:`width_separation_by_q`: its :class:`CurveSettings` and a label.

    Attributes
    ----------
    label : str
        How its transformer is trained, in words, for the summary and the
        figure (required).
    seq_lens, n_features, n_selected, transformer, fcn, widths, n_steps, \
max_seq_len, floor_rows
        The task, the models and their grids: see :class:`CurveSettings`.
        How the widths are searched is :func:`width_separation_by_q`'s
        (bisection from the floor's minimal width, each fit stopped at the
        target), the same for every curve.
    """

    label: str


class SeparationSettings(Settings):
    """The settings of :func:`width_separation_by_q`: the curves and their target.

    Attributes
    ----------
    curves : tuple of SeparationCurve
        The curves, in order (a mapping of a curve's settings, ``label``
        among them, is read as a :class:`SeparationCurve` when the settings
        are made, so a misspelt one fails there). Required.
    target_r2 : float, default=0.9
        The R^2 a width must reach, on every curve.
    n_val : int, default=2000
        Held-out rows scoring each width (and stopping its fit), on every curve.

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

    def __post_init__(self):
        # Each curve read as a SeparationCurve here: a misspelt setting fails where written.
        object.__setattr__(self, "curves", _checked_curves(self.curves))


def _checked_curves(curves):
    """``curves`` as a tuple of :class:`SeparationCurve`, each read and named before any fit."""
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


@reusing_batches
def width_separation_by_q(
    settings=None, *, device=None, random_state=0, progress=False, scheduler=None, **changes
):
    """Minimal widths against T at several q, each beside the isotropic floor's.

    For every curve, :func:`width_separation` runs with ``search="bisect"``
    and ``stop_fits=True``: the transformer's search starts at the floor's
    minimal width (:func:`~stsq_learn.isotropic_floor`) and bisects the
    grid until the minimal width passes and its neighbour below fails;
    each fit stops once it reaches ``target_r2`` on its ``n_val`` scoring
    rows. Then ``w = a + b q log2 T`` is fitted to the measured minimal
    widths of all curves together, and to the floor's.

    Parameters
    ----------
    settings : SeparationSettings or mapping
        The curves (:class:`SeparationCurve`: each one's task, models,
        grids and label), the target R^2 and the scoring rows.
    device : str or None, default=None
        Training device; None keeps each estimator's.
    random_state : int, default=0
        Seed of the run (each curve's is derived from it).
    progress : bool, default=False
        Show tqdm progress bars.
    scheduler : str or distributed.Client, default=None
        As for :func:`width_separation`: every fit runs on the dask cluster.
    **changes
        Settings of :class:`SeparationSettings` to change
        (``width_separation_by_q(preset, n_val=500)``).

    Returns
    -------
    SeparationByQResult
        One :class:`SeparationResult` per curve, the floor's widths beside
        the measured ones, and the law ``w = a + b q log2 T`` fitted to both.
    """
    cfg = SeparationSettings.resolve(settings, changes)
    curves = cfg.curves  # SeparationCurve instances, checked when cfg was made
    shared = CurveSettings.field_names()
    start = time.perf_counter()
    # Every curve's settings checked before the first curve trains.
    checked = [
        _checked_search(
            WidthSeparationSettings(
                **{name: curve[name] for name in shared},
                target_r2=cfg.target_r2,
                n_val=cfg.n_val,
                search="bisect",
                stop_fits=True,
            ),
            device=device,
            random_state=derived_seed(random_state, 300 + i),
        )
        for i, curve in enumerate(curves)
    ]
    results = [_run_search(*c, progress=progress, scheduler=scheduler) for c in checked]
    labels = [curve.label for curve in curves]
    return SeparationByQResult(
        curves=results,
        labels=labels,
        law=joint_law(results, lambda c: c.minimal_width["transformer"]),
        floor_law=joint_law(results, lambda c: c.floor_width),
        seconds=round(time.perf_counter() - start, 1),
    )
