"""The 0.6 width search and its result, kept for q-sparse averaging and retrieval only.

The width separation itself is :mod:`stsq_learn.tasks.selection.separation`
(a composition of the study tools). What is left here is what
:mod:`._task_parts` and the averaging and retrieval experiments still
import; it goes when their rewrites on the study tools stop importing it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ._common import (
    dataclass_dict,
    derived_seed,
    new_axes,
    progress_bar,
)
from ._separation_plots import plot_both_models, plot_residuals, plot_transformer_laws
from ._width_search import (
    MODELS,
    backend,
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
