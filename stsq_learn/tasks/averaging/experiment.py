"""Experiment 5: q-sparse averaging (qSA), the task with one query per position.

Three parts: the smallest width reaching a target R^2 against the number of
positions N (the attention model and the FCN, with the separation's search
and growth laws) and against the subset size q; zero-shot transfer of a W
fitted on sparse token selection; length generalization of stochastic and
fixed encodings.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..._validation import check_bool, check_positive_int
from ...engine.batch_reuse import reusing_batches
from ...experiments._bands import bars_title, check_same
from ...experiments._common import (
    derived_seed,
    estimator_config,
    new_axes,
    prepared,
    seed_results,
)
from ...experiments._separation import SeparationResult
from ...experiments._settings import Settings
from ...experiments._task_parts import (
    WidthSearchResult,
    checked_steps,
    checked_triple,
    length_part,
    search_by_length,
)
from ...experiments._width_search import checked_grids
from .. import SparseAveragingTask
from .estimators import FCNAverager, SparseTokenAverager
from .experiment_parts import search_q
from .experiment_parts import transfer as transfer_part
from .experiment_plots import plot_lengths, plot_q, plot_transfer, plot_widths

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


@dataclass
class SparseAveragingResult(WidthSearchResult):
    """Widths, transfer and length generalization on q-sparse averaging.

    Attributes
    ----------
    config : dict
        The experiment's settings.
    by_length : SeparationResult
        The width search against N at fixed q, for the attention model
        (``"transformer"``) and the FCN (``"fcn"``): scores of every width
        tried, minimal widths, lower bounds and growth laws (``"log_T"`` is
        ``a + b log2 N``, ``"power_0"`` is ``b N^c``), as
        :func:`~stsq_learn.experiments.width_separation` reports them.
    by_q : dict
        The attention model's width search against q at ``seq_len`` N:
        ``q_values``, ``scores`` (``scores[str(q)][str(width)]``: R^2),
        ``minimal_width`` and ``lower_bound`` per q (None where not
        applicable), and ``floor_width``: the smallest width of the grid whose
        isotropic floor (:func:`~stsq_learn.isotropic_floor`) is at most
        ``1 - target_r2`` (None if none is), where each search starts.
    transfer : dict
        ``relative_mse`` (1 - R^2) on ``n_test`` held-out queries of
        ``"selector on STS_q"`` (a :class:`~stsq_learn.SparseTokenSelector`
        trained on sparse token selection), ``"selector on qSA"`` (the same W
        through :meth:`~stsq_learn.SparseTokenAverager.from_selector`, no
        training) and ``"averager on qSA"`` (trained on qSA); ``floor``, the
        isotropic floor at the same N, q and width; ``floor_ratio``, each
        relative MSE over the floor.
    length : dict
        ``eval_lengths`` and ``r2[encoding]`` (``"stochastic"``, ``"fixed"``):
        R^2 of averagers trained at ``seq_len``, on held-out rows lengthened
        to each of ``eval_lengths`` (:func:`~stsq_learn.shift_averaging`).
    seconds : dict of str to float
        Wall-clock seconds of each part.

    Examples
    --------
    >>> from stsq_learn.experiments import PRESETS, sparse_averaging
    >>> res = sparse_averaging(PRESETS["tiny"]["qsa"], random_state=0)
    >>> sorted(res.transfer["relative_mse"])
    ['averager on qSA', 'selector on STS_q', 'selector on qSA']
    """

    config: dict
    by_length: SeparationResult
    by_q: dict
    transfer: dict
    length: dict
    seconds: dict = field(default_factory=dict)

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
        return _plot([self], axes)

    @staticmethod
    def plot_bands(results, axes=None):
        """The figure of :meth:`plot` over seeds: medians with min-max bands and error bars.

        Parameters
        ----------
        results : sequence of SparseAveragingResult
            One per seed, with the same lengths, q, transfer models and
            evaluation lengths (the experiment at several ``random_state``).
        axes : sequence of 4 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 4 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The panels and labels of :meth:`plot`. Minimal widths (against
            N, against q, and the floor's against q) are their median over
            the seeds that found one, with min-max error bars, beside every
            seed's lower bounds; the laws against N are fitted to every
            seed's widths (named so in the legend). The transfer's bars are
            medians with min-max error bars, the floor line the median
            floor; the length part's R^2 curves are medians with the
            min-max shaded. One result draws :meth:`plot`'s figure.
        """
        results = seed_results(results, SparseAveragingResult, ())
        check_same(
            results,
            {
                "by_length.seq_lens": lambda r: r.by_length.seq_lens,
                "by_q['q_values']": lambda r: r.by_q["q_values"],
                "list(transfer['relative_mse'])": lambda r: list(r.transfer["relative_mse"]),
                "length['eval_lengths']": lambda r: r.length["eval_lengths"],
                "list(length['r2'])": lambda r: list(r.length["r2"]),
            },
        )
        return _plot(results, axes)


def _plot(results, axes):
    """The figure of :meth:`SparseAveragingResult.plot` over one result or several seeds'."""
    fig, axes = new_axes(axes, 4, figsize=(22, 4.8))
    plot_widths(results, axes[0])
    plot_q(results, axes[1])
    plot_transfer(results, axes[2])
    plot_lengths(results, axes[3])
    if len(results) > 1:
        fig.suptitle(bars_title("q-sparse averaging", len(results)))
    return fig


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
        The attention model of the search against N (cloned per width, its
        ``width`` and ``random_state`` set). None is Adam at 0.1 decayed by a
        cosine, ``batch_size="auto"`` (256 queries a step).
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
        once it meets ``target_r2`` on the search's validation rows, checked
        every 25 steps (the separation's
        :class:`~stsq_learn.experiments._width_search.StopAtTarget`): the
        score at the stop is the width's score. A width that does not meet
        it trains all its steps. False trains every width all its steps.

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


@reusing_batches
def sparse_averaging(settings=None, *, device=None, random_state=0, progress=False, **changes):
    """Widths, zero-shot transfer and length generalization on q-sparse averaging.

    q-sparse averaging (Sanford, Hsu and Telgarsky, 2023) asks every position
    for the mean of its own subset of q tokens: N sparse token selection
    queries over the same tokens. Three parts:

    1. *Widths.* The smallest width reaching ``target_r2`` against N at
       fixed q (``seq_lens``, ``n_selected``), for the attention model
       (:class:`~stsq_learn.SparseTokenAverager`, up to the longest N) and the
       fully-connected net (:class:`~stsq_learn.FCNAverager`, up to
       ``fcn_max_seq_len``), by the separation's online search: every width
       trained from scratch by ``fit_online``, each N starting from the
       previous N's minimal width, an N after one where no width of the grid
       reached the target not searched (see
       :func:`~stsq_learn.experiments.width_separation`); then the growth laws
       ``a + b log2 N`` and ``b N^c``. And against q at N = ``q_seq_len``
       for the attention model (``estimator``, ``q_widths``,
       ``q_steps``), each q's search starting at the larger of the previous
       q's minimal width and the smallest width whose isotropic floor allows
       the target (for q >= 3 the floor, not the training, sets the width).
    2. *Transfer.* A :class:`~stsq_learn.SparseTokenSelector` trained on
       sparse token selection at ``transfer_task`` = (N, d, q) and width
       ``transfer_width`` predicts qSA through
       :meth:`~stsq_learn.SparseTokenAverager.from_selector`, with no training;
       its relative MSE is compared with an averager trained on qSA and with
       the isotropic floor.
    3. *Length.* Averagers with stochastic and with fixed encodings trained
       at ``length_task`` = (N, d, q), width ``length_width``, scored on
       held-out rows lengthened to ``factors`` times N
       (:class:`~stsq_learn.LengthShiftScorer`).

    Parameters
    ----------
    settings : SparseAveragingSettings, mapping or None, default=None
        The three parts' settings (None: the defaults).
    device : str or None, default=None
        Training device; None keeps each estimator's.
    random_state : int, default=0
        Seed of the run.
    progress : bool, default=False
        Show tqdm progress bars.
    **changes
        Settings of :class:`SparseAveragingSettings` to change
        (``sparse_averaging(q_values=(1, 2))``).

    Returns
    -------
    SparseAveragingResult
        The three parts' numbers.
    """
    cfg = SparseAveragingSettings.resolve(settings, changes)
    target_r2, stop_at_target = cfg.target_r2, cfg.stop_at_target
    if not 0 < target_r2 < 1:
        raise ValueError(f"target_r2 must lie strictly between 0 and 1, got {target_r2!r}.")
    check_bool(stop_at_target, "stop_at_target")
    seq_lens = sorted({check_positive_int(N, "seq_lens[i]") for N in cfg.seq_lens})
    if not seq_lens:
        raise ValueError("seq_lens must hold at least one length, got an empty sequence.")
    grids, steps = checked_grids(cfg.widths, cfg.n_steps, _DEFAULT_WIDTHS, _DEFAULT_STEPS)
    fcn_max_seq_len = check_positive_int(cfg.fcn_max_seq_len, "fcn_max_seq_len")
    n_val = check_positive_int(cfg.n_val, "n_val")
    n_test = check_positive_int(cfg.n_test, "n_test")
    q_values = sorted({check_positive_int(q, "q_values[i]") for q in cfg.q_values})
    q_grid = sorted({check_positive_int(w, "q_widths[i]") for w in cfg.q_widths})
    if not q_values or not q_grid:
        raise ValueError("q_values and q_widths must each hold at least one value.")
    q_steps, transfer_steps, length_steps = (
        checked_steps(s, name)
        for s, name in (
            (cfg.q_steps, "q_steps"),
            (cfg.transfer_steps, "transfer_steps"),
            (cfg.length_steps, "length_steps"),
        )
    )
    transfer_width = check_positive_int(cfg.transfer_width, "transfer_width")
    length_width = check_positive_int(cfg.length_width, "length_width")
    factors = sorted({check_positive_int(f, "factors[i]") for f in cfg.factors})
    if not factors:
        raise ValueError("factors must name at least one length multiple, got an empty sequence.")
    tasks = [SparseAveragingTask(N, cfg.n_features, cfg.n_selected) for N in seq_lens]
    q_tasks = [SparseAveragingTask(cfg.q_seq_len, cfg.n_features, q) for q in q_values]
    transfer_task = SparseAveragingTask(*checked_triple(cfg.transfer_task, "transfer_task"))
    length_task = SparseAveragingTask(*checked_triple(cfg.length_task, "length_task"))
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
            ("transformer", cfg.transformer, SparseTokenAverager, 16),
            ("fcn", cfg.fcn, FCNAverager, 17),
            ("estimator", cfg.estimator, SparseTokenAverager, 18),
        )
    }
    seconds = {}

    start = time.perf_counter()
    # A width's fit ends once it meets the target on the search's held-out rows.
    search = {m: base[m] for m in ("transformer", "fcn")}
    first = tasks[0]
    head = {"n_features": first.n_features, "n_selected": first.n_selected}
    head["task"] = "q-sparse averaging"
    by_length = search_by_length(
        tasks,
        search,
        grids=grids,
        steps=steps,
        n_val=n_val,
        target_r2=target_r2,
        random_state=random_state,
        fcn_max_seq_len=fcn_max_seq_len,
        config=head,
        progress=progress,
        stop_fits=stop_at_target,
    )
    seconds["by_length"] = round(time.perf_counter() - start, 1)

    start = time.perf_counter()
    by_q = search_q(
        q_tasks,
        base["estimator"],
        q_grid,
        q_steps,
        n_val,
        target_r2,
        random_state,
        progress,
        stop_fits=stop_at_target,
    )
    seconds["by_q"] = round(time.perf_counter() - start, 1)

    start = time.perf_counter()
    transfer = transfer_part(
        transfer_task,
        base["estimator"],
        transfer_width,
        transfer_steps,
        n_test,
        random_state,
        progress,
    )
    seconds["transfer"] = round(time.perf_counter() - start, 1)

    start = time.perf_counter()
    length = length_part(
        length_task,
        base["estimator"],
        length_width,
        length_steps,
        factors,
        n_test,
        random_state,
        progress,
        label="qsa",
        seeds=(24, 25),
    )
    seconds["length"] = round(time.perf_counter() - start, 1)

    config = {
        "target_r2": target_r2,
        "stop_at_target": stop_at_target,
        "n_val": n_val,
        "n_test": n_test,
        "estimator": estimator_config(base["estimator"]),
        "q_steps": q_steps,
        "transfer_steps": transfer_steps,
        "length_steps": length_steps,
        "random_state": random_state,
    }
    return SparseAveragingResult(
        config=config,
        by_length=by_length,
        by_q=by_q,
        transfer=transfer,
        length=length,
        seconds=seconds,
    )
