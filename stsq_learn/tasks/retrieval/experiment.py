"""Experiment 6: q-sparse token retrieval, the task that needs q heads.

Three parts: the relative MSE against the number of heads H for several q
(the threshold at H = q, against the bound ``1 - H/q`` of fewer heads); at
H = q, the smallest width reaching a target R^2 against the length T for the
attention model and the fully-connected net (the separation's search and
growth laws); length generalization of stochastic and fixed encodings.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sklearn.base import clone

from ..._validation import check_bool, check_positive_int
from ...engine.batch_reuse import reusing_batches
from ...experiments._bands import bars_title, check_same
from ...experiments._common import (
    derived_seed,
    estimator_config,
    new_axes,
    planned_steps,
    prepared,
    progress_bar,
    seed_results,
    train_online,
)
from ...experiments._separation import SeparationResult
from ...experiments._settings import Settings
from ...experiments._task_parts import (
    WidthSearchResult,
    checked_steps,
    checked_triple,
    length_part,
    search_by_length,
    test_rows,
)
from ...experiments._width_search import checked_grids
from ...scoring import relative_mse
from .. import SparseRetrievalTask
from .estimators import FCNRetriever, SparseTokenRetriever
from .experiment_plots import plot_heads, plot_lengths, plot_widths

_DEFAULT_MODELS = {
    # The width search: Adam decayed by a cosine (over a fixed number of steps the
    # width-following SGD's scores are too noisy to bracket a width).
    "transformer": SparseTokenRetriever(
        solver="adam", learning_rate_init=0.05, learning_rate="cosine"
    ),
    "fcn": FCNRetriever(solver="adam", learning_rate_init=0.01, batch_size=1024),
    # The heads and length parts: the estimators' width-following SGD (their defaults).
    "estimator": SparseTokenRetriever(
        solver="sgd", learning_rate_init="auto", learning_rate="cooldown", batch_size="auto"
    ),
}
_DEFAULT_WIDTHS = {"transformer": (4, 8, 16, 32, 64), "fcn": (8, 32, 128, 512)}
_DEFAULT_STEPS = {"transformer": 300, "fcn": 500}


@dataclass
class SparseRetrievalResult(WidthSearchResult):
    """Heads, widths and length generalization on q-sparse token retrieval.

    Attributes
    ----------
    config : dict
        The experiment's settings.
    heads : dict
        The error against the number of heads at ``seq_len`` T, ``n_features``
        d and ``width``: ``q_values``, ``n_heads`` (the H tried),
        ``relative_mse`` (``relative_mse[str(q)][i]``: test relative MSE of
        ``n_heads[i]`` heads, None where H was not tried), ``bound``
        (``max(0, 1 - H/q)``: the least relative MSE any readout of H
        averages can reach when the target is q independent tokens),
        ``threshold`` (``threshold[str(q)]``: the fewest heads whose
        relative MSE is below ``threshold_level[str(q)]`` = ``1 / (2q)``,
        half the bound of q - 1 heads; the theory's is q; None where no H
        tried got there within the budget), and the budget: ``width``,
        ``n_steps``, ``solver``, ``learning_rate_init``.
    by_length : SeparationResult
        The width search against T at H = q = ``n_selected``, for the
        attention model (``"transformer"``) and the FCN (``"fcn"``), as
        :func:`~stsq_learn.experiments.width_separation` reports it
        (``"log_T"`` is ``a + b log2 T``, ``"power_0"`` is ``b T^c``).
    length : dict
        ``eval_lengths`` and ``r2[encoding]`` (``"stochastic"``, ``"fixed"``):
        R^2 of retrievers trained at ``seq_len``, on held-out rows lengthened
        to each of ``eval_lengths`` (the task's shift inserts unnamed tokens).
    seconds : dict of str to float
        Wall-clock seconds of each part.

    Examples
    --------
    >>> from stsq_learn.experiments import PRESETS, sparse_retrieval
    >>> res = sparse_retrieval(PRESETS["tiny"]["retrieval"], random_state=0)
    >>> res.heads["n_heads"]
    [1, 2]
    """

    config: dict
    heads: dict
    by_length: SeparationResult
    length: dict
    seconds: dict = field(default_factory=dict)

    def plot(self, axes=None):
        """Error against heads, widths against T, and length generalization.

        Parameters
        ----------
        axes : sequence of 3 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 3 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure holding the axes.
        """
        return _plot([self], axes)

    @staticmethod
    def plot_bands(results, axes=None):
        """The figure of :meth:`plot` over seeds: medians with min-max bands and error bars.

        Parameters
        ----------
        results : sequence of SparseRetrievalResult
            One per seed, with the same q, head counts, lengths and
            evaluation lengths (the experiment at several ``random_state``).
        axes : sequence of 3 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 3 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The panels and labels of :meth:`plot`. Each q's relative MSE
            against H is its median over the seeds with the min-max shaded
            (the bound ``1 - H/q`` and the threshold levels as before; the
            note names a q that missed its threshold in any seed, and in
            how many); the minimal widths against T are their median over
            the seeds that found one, with min-max error bars, beside every
            seed's lower bounds, the laws fitted to every seed's widths
            (named so in the legend); the length part's R^2 curves are
            medians with the min-max shaded. One result draws
            :meth:`plot`'s figure.
        """
        results = seed_results(results, SparseRetrievalResult, ())
        check_same(
            results,
            {
                "heads['q_values']": lambda r: r.heads["q_values"],
                "heads['n_heads']": lambda r: r.heads["n_heads"],
                "by_length.seq_lens": lambda r: r.by_length.seq_lens,
                "length['eval_lengths']": lambda r: r.length["eval_lengths"],
                "list(length['r2'])": lambda r: list(r.length["r2"]),
            },
        )
        return _plot(results, axes)


def _plot(results, axes):
    """The figure of :meth:`SparseRetrievalResult.plot` over one result or several seeds'."""
    fig, axes = new_axes(axes, 3, figsize=(17, 4.8))
    plot_heads(results, axes[0])
    plot_widths(results, axes[1])
    plot_lengths(results, axes[2])
    if len(results) > 1:
        fig.suptitle(bars_title("q-sparse retrieval", len(results)))
    return fig


class SparseRetrievalSettings(Settings):
    """The settings of :func:`sparse_retrieval`: the heads, widths and length parts.

    Attributes
    ----------
    seq_len, n_features : int, default=16, 4
        T and d of the heads part.
    q_values : tuple of int, default=(1, 2, 3, 4)
        The numbers of named positions q of the heads part.
    n_heads : tuple of int, default=(1, 2, 3, 4)
        The head counts H tried at each q (those up to q + 1).
    heads_width : int, default=64
        Width of the heads part's models.
    heads_steps : int or "auto", default="auto"
        Online steps of each (``"auto"``: the estimator's plan).
    seq_lens : tuple of int, default=(8, 16, 32, 64)
        The lengths T of the width search.
    n_selected : int, default=2
        q (and H) of the width search; its tokens have ``n_features`` d.
    transformer : SparseTokenRetriever or None, default=None
        The attention model of the width search (cloned per width, its
        ``width``, ``n_heads`` and ``random_state`` set). None is Adam at
        0.05 decayed by a cosine.
    fcn : FCNRetriever or None, default=None
        The FCN of the width search. None is Adam at 0.01, 1024 rows a step.
    widths : dict or None, default=None
        Width grids ``{"transformer": (...), "fcn": (...)}``; a model left
        out keeps ``(4, 8, 16, 32, 64)`` / ``(8, 32, 128, 512)``.
    n_steps : dict or None, default=None
        Online steps per width and model; default
        ``{"transformer": 300, "fcn": 500}``.
    fcn_max_seq_len : int, default=16
        Longest T the FCN is searched at.
    target_r2 : float, default=0.9
        The R^2 a width must reach.
    n_val : int, default=1000
        Held-out rows scoring each width.
    stop_at_target : bool, default=True
        End each width's fit of the width search once it meets
        ``target_r2`` on the search's validation rows, checked every 25
        steps (:class:`~stsq_learn.experiments._width_search.StopAtTarget`,
        as the q-sparse averaging's searches): the score at the stop is the
        width's score. A width that does not meet it trains all its steps.
        False trains every width all its steps. At the quick preset's sizes,
        seeds 0-5 found the same minimal widths either way.
    estimator : SparseTokenRetriever or None, default=None
        The attention model of the heads and length parts (its ``n_heads``
        and ``width`` are set per model). None is the estimators'
        width-following SGD (``solver="sgd"``, ``learning_rate_init="auto"``,
        ``learning_rate="cooldown"``, ``batch_size="auto"``).
    heads_estimator : SparseTokenRetriever or None, default=None
        The attention model of the heads part alone (its ``n_heads`` and
        ``width`` set per model); None is ``estimator``. Over a short
        budget the width-following SGD does not reach the threshold at
        q = 3 (relative MSE 0.88 / 0.62 / 0.51 at H = 1 / 2 / 3, T=16,
        d=4, width 32, 200 steps), Adam at 0.05 decayed by a cosine does
        (0.69 / 0.36 / 0.05 in 150 steps): the quick preset gives it here.
    length_task : tuple of 3 int, default=(16, 4, 2)
        (T, d, q) the length part trains at, with q heads.
    length_width : int, default=64
        Width of the length part's models.
    length_steps : int or "auto", default="auto"
        Online steps of each.
    factors : tuple of int, default=(1, 2, 4)
        Evaluation lengths of the length part, as multiples of its T.
    n_test : int, default=4000
        Held-out rows of the heads and length parts (a row is one query, of
        q slots).

    Examples
    --------
    >>> from stsq_learn.experiments import SparseRetrievalSettings
    >>> SparseRetrievalSettings(q_values=(2,)).replace(n_heads=(1, 2)).n_heads
    (1, 2)
    """

    seq_len: int = 16
    n_features: int = 4
    q_values: tuple = (1, 2, 3, 4)
    n_heads: tuple = (1, 2, 3, 4)
    heads_width: int = 64
    heads_steps: int | str = "auto"
    seq_lens: tuple = (8, 16, 32, 64)
    n_selected: int = 2
    transformer: SparseTokenRetriever | None = None
    fcn: FCNRetriever | None = None
    widths: dict | None = None
    n_steps: dict | None = None
    fcn_max_seq_len: int = 16
    target_r2: float = 0.9
    n_val: int = 1000
    stop_at_target: bool = True
    estimator: SparseTokenRetriever | None = None
    heads_estimator: SparseTokenRetriever | None = None
    length_task: tuple = (16, 4, 2)
    length_width: int = 64
    length_steps: int | str = "auto"
    factors: tuple = (1, 2, 4)
    n_test: int = 4000


@reusing_batches
def sparse_retrieval(settings=None, *, device=None, random_state=0, progress=False, **changes):
    """Heads, widths and length generalization on q-sparse token retrieval.

    q-sparse token retrieval (Mousavi-Hosseini, Sanford, Wu and Erdogdu,
    2025) names q positions in order and asks for the named tokens side by
    side. One attention head averages tokens, so a readout of H heads
    retrieves at most H of q independent tokens: the theory's threshold is
    H = q. Three parts:

    1. *Heads.* For each q of ``q_values`` and each H of ``n_heads``, a
       :class:`~stsq_learn.SparseTokenRetriever` (``heads_estimator``, width
       ``heads_width``) trained online on T = ``seq_len``, d =
       ``n_features``; its relative MSE on ``n_test`` held-out rows,
       beside the bound ``1 - H/q``. H > q + 1 is not tried (no more is
       learned past q). The threshold at q is the fewest heads whose
       relative MSE is below ``1 / (2q)``, half the least error of
       ``q - 1`` heads: the theory's threshold is H = q, and None says
       that no H tried got there within the budget.
    2. *Widths.* At H = q = ``n_selected``, the smallest width reaching
       ``target_r2`` against ``seq_lens`` for the attention model
       (``transformer``) and the fully-connected net (``fcn``, up to
       ``fcn_max_seq_len``), by the separation's online search (each T
       starting from the previous T's minimal width; see
       :func:`~stsq_learn.experiments.width_separation`), and their growth
       laws.
    3. *Length.* Retrievers with stochastic and fixed encodings trained at
       ``length_task`` = (T, d, q) with q heads, width ``length_width``,
       scored on held-out rows lengthened to ``factors`` times T.

    Parameters
    ----------
    settings : SparseRetrievalSettings, mapping or None, default=None
        The three parts' settings (None: the defaults).
    device : str or None, default=None
        Training device; None keeps each estimator's.
    random_state : int, default=0
        Seed of the run.
    progress : bool, default=False
        Show tqdm progress bars.
    **changes
        Settings of :class:`SparseRetrievalSettings` to change
        (``sparse_retrieval(q_values=(2,))``).

    Returns
    -------
    SparseRetrievalResult
        The three parts' numbers.
    """
    cfg = SparseRetrievalSettings.resolve(settings, changes)
    target_r2 = cfg.target_r2
    stop_at_target = check_bool(cfg.stop_at_target, "stop_at_target")
    if not 0 < target_r2 < 1:
        raise ValueError(f"target_r2 must lie strictly between 0 and 1, got {target_r2!r}.")
    seq_len = check_positive_int(cfg.seq_len, "seq_len")
    n_features = check_positive_int(cfg.n_features, "n_features")
    q_values = sorted({check_positive_int(q, "q_values[i]") for q in cfg.q_values})
    heads = sorted({check_positive_int(h, "n_heads[i]") for h in cfg.n_heads})
    seq_lens = sorted({check_positive_int(T, "seq_lens[i]") for T in cfg.seq_lens})
    if not q_values or not heads or not seq_lens:
        raise ValueError("q_values, n_heads and seq_lens must each hold at least one value.")
    if max(q_values) > seq_len:
        raise ValueError(f"q_values name up to {max(q_values)} positions of seq_len={seq_len}.")
    n_selected = check_positive_int(cfg.n_selected, "n_selected")
    grids, steps = checked_grids(cfg.widths, cfg.n_steps, _DEFAULT_WIDTHS, _DEFAULT_STEPS)
    fcn_max_seq_len = check_positive_int(cfg.fcn_max_seq_len, "fcn_max_seq_len")
    n_val = check_positive_int(cfg.n_val, "n_val")
    n_test = check_positive_int(cfg.n_test, "n_test")
    heads_width = check_positive_int(cfg.heads_width, "heads_width")
    length_width = check_positive_int(cfg.length_width, "length_width")
    heads_steps = checked_steps(cfg.heads_steps, "heads_steps")
    length_steps = checked_steps(cfg.length_steps, "length_steps")
    factors = sorted({check_positive_int(f, "factors[i]") for f in cfg.factors})
    if not factors:
        raise ValueError("factors must name at least one length multiple, got an empty sequence.")
    length_task = SparseRetrievalTask(*checked_triple(cfg.length_task, "length_task"))
    base = {
        name: prepared(
            given,
            _DEFAULT_MODELS[name],
            cls,
            name,
            device=device,
            random_state=derived_seed(random_state, seed),
        )
        for name, given, cls, seed in (
            ("transformer", cfg.transformer, SparseTokenRetriever, 40),
            ("fcn", cfg.fcn, FCNRetriever, 41),
            ("estimator", cfg.estimator, SparseTokenRetriever, 42),
        )
    }
    # The heads part's model: the same seed as ``estimator``'s (None: that model).
    base["heads"] = prepared(
        base["estimator"] if cfg.heads_estimator is None else cfg.heads_estimator,
        _DEFAULT_MODELS["estimator"],
        SparseTokenRetriever,
        "heads_estimator",
        device=device,
        random_state=derived_seed(random_state, 42),
    )
    base["transformer"].set_params(n_heads=n_selected)
    seconds = {}

    start = time.perf_counter()
    tasks = [SparseRetrievalTask(seq_len, n_features, q) for q in q_values]
    heads_part = _heads(
        tasks, heads, base["heads"], heads_width, heads_steps, n_test, random_state, progress
    )
    seconds["heads"] = round(time.perf_counter() - start, 1)

    start = time.perf_counter()
    search = {m: base[m] for m in ("transformer", "fcn")}
    search_tasks = [SparseRetrievalTask(T, n_features, n_selected) for T in seq_lens]
    head = {"n_features": n_features, "n_selected": n_selected, "n_heads": n_selected}
    by_length = search_by_length(
        search_tasks,
        search,
        grids=grids,
        steps=steps,
        n_val=n_val,
        target_r2=target_r2,
        random_state=random_state,
        fcn_max_seq_len=fcn_max_seq_len,
        config={**head, "task": "q-sparse token retrieval"},
        progress=progress,
        stop_fits=stop_at_target,
    )
    seconds["by_length"] = round(time.perf_counter() - start, 1)

    start = time.perf_counter()
    length_estimator = clone(base["estimator"]).set_params(n_heads=length_task.n_selected)
    length = length_part(
        length_task,
        length_estimator,
        length_width,
        length_steps,
        factors,
        n_test,
        random_state,
        progress,
        label="retrieval",
        seeds=(43, 44),
    )
    length["n_heads"] = length_task.n_selected
    seconds["length"] = round(time.perf_counter() - start, 1)

    config = {
        "target_r2": target_r2,
        "stop_at_target": stop_at_target,
        "n_val": n_val,
        "n_test": n_test,
        "estimator": estimator_config(base["estimator"]),
        "heads_estimator": estimator_config(base["heads"]),
        "heads_steps": heads_steps,
        "length_steps": length_steps,
        "random_state": random_state,
    }
    return SparseRetrievalResult(
        config=config, heads=heads_part, by_length=by_length, length=length, seconds=seconds
    )


def threshold_heads(n_heads, errors, q):
    """The fewest heads whose relative MSE is below ``1 / (2q)``, or None.

    ``1 / (2q)`` is half the least relative MSE of ``q - 1`` heads (the bound
    ``1 - (q - 1)/q``): the theory's threshold is H = q. ``errors[i]`` is the
    error of ``n_heads[i]`` heads (None where not tried).
    """
    level = 1.0 / (2 * q)
    below = [h for h, e in zip(n_heads, errors) if e is not None and e < level]
    return min(below) if below else None


def _heads(tasks, heads, estimator, width, n_steps, n_test, random_state, progress):
    """Relative MSE of every (q, H) with H <= q + 1, the bound 1 - H/q and the threshold."""
    first = tasks[0]
    params = estimator.get_params()
    out = {
        "seq_len": first.seq_len,
        "n_features": first.n_features,
        "width": width,
        "n_steps": planned_steps(clone(estimator).set_params(width=width), n_steps),
        "solver": params["solver"],
        "learning_rate_init": params["learning_rate_init"],
        "q_values": [t.n_selected for t in tasks],
        "n_heads": list(heads),
        "relative_mse": {},
        "bound": {},
        "threshold": {},
        "threshold_level": {},
    }
    pairs = [(t, h) for t in tasks for h in heads if h <= t.n_selected + 1]
    with progress_bar(len(pairs), "retrieval: (q, heads) fits", enabled=progress) as bar:
        for task in tasks:
            q = task.n_selected
            X, y = test_rows(task, n_test, derived_seed(random_state, 500 + q))
            errors = []
            for h in heads:
                if h > q + 1:
                    errors.append(None)
                    continue
                model = clone(estimator).set_params(width=width, n_heads=h)
                train_online(model, task, n_steps, desc=f"retrieval: q={q} H={h}", progress=False)
                errors.append(float(relative_mse(y, model.predict(X))))
                bar.update()
            out["relative_mse"][str(q)] = errors
            out["bound"][str(q)] = [max(0.0, 1 - h / q) for h in heads]
            out["threshold"][str(q)] = threshold_heads(heads, errors, q)
            out["threshold_level"][str(q)] = 1.0 / (2 * q)
    return out
