"""Experiment 6: q-sparse token retrieval, the task that needs q heads, as three studies.

Three parts, each a study of :mod:`stsq_learn.studies` over the run's seeds:
the relative MSE against the number of heads H for several q
(:func:`~stsq_learn.studies.sweep`; the threshold at H = q, against the
bound ``1 - H/q`` of fewer heads); at H = q, the smallest width reaching a
target R^2 against the length T for the attention model and the
fully-connected net (:func:`~stsq_learn.studies.minimal_width`, their growth
laws by :func:`~stsq_learn.studies.compare_laws`); length generalization of
stochastic and fixed encodings (:func:`~stsq_learn.studies.length_curve`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sklearn.base import clone

from ..._validation import check_bool, check_positive_int
from ...engine.batch_reuse import reusing_batches
from ...experiments._settings import Settings
from ...scoring import relative_mse
from ...studies import (
    StudyTable,
    check_seeds,
    compare_laws,
    length_curve,
    minimal_width,
    planning,
    sweep,
)
from ...studies.plan import planned_steps
from .. import SparseRetrievalTask
from .estimators import FCNRetriever, SparseTokenRetriever
from .experiment_plots import plot_figure

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
class SparseRetrievalResult:
    """Heads, widths and length generalization on q-sparse token retrieval, for one seed.

    Attributes
    ----------
    config : dict
        The experiment's settings, the models' parameters and the seed
        (``random_state``).
    heads : StudyTable
        The heads part (:func:`~stsq_learn.studies.sweep`): one row per
        (q, H) tried, ``param_n_selected`` (q), ``param_n_heads`` (H),
        ``relative_mse`` on ``n_test`` held-out rows, ``n_iter`` (steps run).
        H > q + 1 is not tried (no more is learned past q).
    threshold : dict of str to int or None
        ``threshold[str(q)]``: the fewest heads whose relative MSE is below
        ``1 / (2q)``, half the bound ``1 - (q - 1)/q`` of q - 1 heads (the
        theory's threshold is q); None where no H tried got there.
    widths : StudyTable
        The width search (:func:`~stsq_learn.studies.minimal_width`): one row
        per model (``"transformer"``, the attention model at H = q, and
        ``"fcn"``) and T, ``value`` (the minimal width; NaN where none of the
        grid reached the target) and ``bound`` (then, the largest width
        that failed).
    laws : dict
        ``laws[model]``: the growth laws ``"log2"`` (``a + b log2 T``) and
        ``"power"`` (``b T^c``) fitted to the model's minimal widths, best
        first, each :meth:`~stsq_learn.studies.Law.to_dict`; empty where
        fewer than 3 widths at 2 lengths were found.
    length : StudyTable
        The length part (:func:`~stsq_learn.studies.length_curve`): one row
        per encoding (``model``: ``"stochastic"``, ``"fixed"``) and
        evaluation length ``eval_seq_len``, ``score`` (R^2 on held-out rows
        the task's shift lengthened).
    seconds : dict of str to float
        Wall-clock seconds of each part (all seeds of the run together).

    Examples
    --------
    >>> from stsq_learn.experiments import PRESETS, sparse_retrieval
    >>> res = sparse_retrieval(PRESETS["tiny"]["retrieval"], random_state=0)
    >>> res.heads.unique("n_heads"), res.threshold
    ([1, 2], {'2': None})
    """

    config: dict
    heads: StudyTable
    threshold: dict
    widths: StudyTable
    laws: dict
    length: StudyTable
    seconds: dict = field(default_factory=dict)

    def to_dict(self):
        """JSON-ready dict of the fields, each table as its ``to_dict()``.

        Returns
        -------
        dict
            ``config``, ``heads``, ``threshold``, ``widths``, ``laws``,
            ``length`` and ``seconds``.
        """
        out = {name: getattr(self, name) for name in _FIELDS}
        out.update({name: getattr(self, name).to_dict() for name in _TABLES})
        return out

    @classmethod
    def from_dict(cls, data):
        """The result :meth:`to_dict` described.

        Parameters
        ----------
        data : dict
            A :meth:`to_dict` (or its JSON read back).

        Returns
        -------
        SparseRetrievalResult
            The result, its tables rebuilt.
        """
        tables = {name: StudyTable.from_dict(data[name]) for name in _TABLES}
        return cls(**{name: data[name] for name in _FIELDS}, **tables)

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
        return self.plot_bands([self], axes)

    @staticmethod
    def plot_bands(results, axes=None):
        """The figure of :meth:`plot` over seeds: medians with their min-max bands.

        Parameters
        ----------
        results : sequence of SparseRetrievalResult
            One per seed of one experiment (the same settings).
        axes : sequence of 3 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure with one row of 3 axes.

        Returns
        -------
        fig : matplotlib.figure.Figure
            Each q's relative MSE against H (median, min-max shaded) beside
            its bound ``1 - H/q`` (dotted, H <= q) and its threshold level
            ``1 / (2q)`` at H = q, a note naming a q that missed its
            threshold in any seed; both models' minimal widths against T
            (log-log; median, min-max error bars, open triangles for lower
            bounds), each with its theory's law fitted to every seed's
            widths, drawn over the lengths it was fitted on; the length
            part's R^2 against the evaluation length (median, min-max
            shaded).
        """
        return plot_figure(_checked(results), axes)


_FIELDS = ("config", "threshold", "laws", "seconds")
_TABLES = ("heads", "widths", "length")


def _checked(results):
    """``results`` as a list of results of one experiment's seeds, or raise naming the fault."""
    name = SparseRetrievalResult.__name__
    if isinstance(results, SparseRetrievalResult):
        raise TypeError(f"results must be a list of {name}, got one {name}: pass [result].")
    results = list(results)
    if not results:
        raise ValueError(f"results must hold at least one {name}, got none.")
    for i, r in enumerate(results):
        if not isinstance(r, SparseRetrievalResult):
            raise TypeError(f"results[{i}] must be a {name}, got {type(r).__name__}.")
    first = {k: v for k, v in results[0].config.items() if k != "random_state"}
    for i, r in enumerate(results[1:], 1):
        differ = [k for k in first if k != "random_state" and r.config.get(k) != first[k]]
        if differ:
            raise ValueError(
                f"results[{i}] differs from results[0] in {', '.join(differ)}: the seeds of "
                "one experiment share their settings."
            )
    return results


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
        The attention model of the width search (its ``width``, ``n_heads``
        and ``random_state`` set). None is Adam at 0.05 decayed by a cosine.
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
        End each width's fit once it meets ``target_r2`` on the search's
        held-out rows, checked every 25 steps
        (:class:`~stsq_learn.studies.StopAtTarget`): the score at the stop
        is the width's score. A width that does not meet it trains all its
        steps. False trains every width all its steps.
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
def sparse_retrieval(
    settings=None, *, device=None, random_state=None, seeds=None, progress=False, **changes
):
    """Heads, widths and length generalization on q-sparse token retrieval.

    q-sparse token retrieval (Mousavi-Hosseini, Sanford, Wu and Erdogdu,
    2025) names q positions in order and asks for the named tokens side by
    side. One attention head averages tokens, so a readout of H heads
    retrieves at most H of q independent tokens: the theory's threshold is
    H = q. Three studies (:mod:`stsq_learn.studies`), each over the run's
    seeds, their fits trained as one batched model where the seeds move in
    lockstep (``batch_seeds=True``):

    1. *Heads* (:func:`~stsq_learn.studies.sweep`). For each q of
       ``q_values`` and each H of ``n_heads`` up to q + 1, a
       :class:`~stsq_learn.SparseTokenRetriever` (``heads_estimator``, width
       ``heads_width``) trained online on T = ``seq_len``, d =
       ``n_features``; its relative MSE on ``n_test`` held-out rows, beside
       the bound ``1 - H/q``. The threshold at q is the fewest heads whose
       relative MSE is below ``1 / (2q)``, half the least error of
       ``q - 1`` heads (None: no H tried got there within the budget).
    2. *Widths* (:func:`~stsq_learn.studies.minimal_width`). At H = q =
       ``n_selected``, the smallest width of each model's grid reaching
       ``target_r2`` against ``seq_lens``, for the attention model
       (``transformer``) and the fully-connected net (``fcn``, up to
       ``fcn_max_seq_len``): each T's search brackets from the previous
       T's minimal width, and a T after one that reached none is not
       searched (its lower bound carried over). The laws ``a + b log2 T``
       and ``b T^c`` are fitted to each model's widths
       (:func:`~stsq_learn.studies.compare_laws`).
    3. *Length* (:func:`~stsq_learn.studies.length_curve`). Retrievers with
       stochastic and fixed encodings trained at ``length_task`` = (T, d,
       q) with q heads, width ``length_width``, scored (R^2) on held-out
       rows lengthened to ``factors`` times T by the task's shift.

    Seeds follow the studies' one rule (:mod:`stsq_learn.studies.seeds`):
    every model of seed s is fitted with ``random_state=s``; its held-out
    rows and length shifts come from the streams of s.

    Parameters
    ----------
    settings : SparseRetrievalSettings, mapping or None, default=None
        The three parts' settings (None: the defaults).
    device : str or None, default=None
        Training device; None keeps each estimator's.
    random_state : int or None, default=None
        The seed of a one-seed run (None: 0). Not with ``seeds``.
    seeds : sequence of int or None, default=None
        Run these seeds together and return one result per seed.
    progress : bool, default=False
        Show the studies' progress bars.
    **changes
        Settings of :class:`SparseRetrievalSettings` to change
        (``sparse_retrieval(q_values=(2,))``).

    Returns
    -------
    SparseRetrievalResult or list of SparseRetrievalResult
        The seed's numbers; with ``seeds``, one result per seed, in order.

    Raises
    ------
    TypeError, ValueError
        For a bad setting (naming it), before any fit.
    """
    if seeds is not None and random_state is not None:
        raise ValueError("give random_state (one seed) or seeds (several), not both.")
    one = [0 if random_state is None else random_state]
    run_seeds = check_seeds(one if seeds is None else seeds)
    parts = _parts(SparseRetrievalSettings.resolve(settings, changes), device)
    with planning():  # every study checks its values before any fit
        _run(parts, run_seeds, progress=False)
    tables, seconds = _run(parts, run_seeds, progress=progress)
    results = [_result_of(parts, tables, seconds, s) for s in run_seeds]
    return results if seeds is not None else results[0]


def _relative_mse(estimator, X, y):
    """The scorer of the heads part: the relative MSE of ``estimator`` on ``(X, y)``."""
    return relative_mse(y, estimator.predict(X))


def _model(given, name, cls, setting=None):
    """``given`` (the default model ``name`` when None), checked to be a ``cls``, cloned."""
    model = _DEFAULT_MODELS[name] if given is None else given
    if not isinstance(model, cls):
        raise TypeError(
            f"{setting or name} must be a {cls.__name__}, got {type(model).__name__}: {model!r}."
        )
    return clone(model)


def _ints(values, name):
    """Distinct positive ints, sorted; at least one."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a sequence of positive ints, got {values!r}.")
    out = sorted({check_positive_int(v, f"{name}[i]") for v in values})
    if not out:
        raise ValueError(f"{name} must hold at least one value, got an empty sequence.")
    return out


def _steps(value, name):
    return value if isinstance(value, str) and value == "auto" else check_positive_int(value, name)


def _per_model(given, default, name, check):
    """``{"transformer": ..., "fcn": ...}``: ``given``'s values over ``default``'s, checked."""
    if given is not None and (not isinstance(given, dict) or set(given) - set(default)):
        raise ValueError(f'{name} must be a dict with keys "transformer", "fcn", got {given!r}.')
    return {m: check(v, f"{name}[{m!r}]") for m, v in {**default, **(given or {})}.items()}


def _plain(value):
    """A setting as JSON: an estimator as its class and non-default parameters."""
    if hasattr(value, "get_params"):
        defaults = type(value)().get_params(deep=False)
        return {
            "class": type(value).__name__,
            **{
                k: _plain(str(v) if k == "device" else v)
                for k, v in value.get_params(deep=False).items()
                if k not in ("callbacks", "random_state", "verbose") and v != defaults[k]
            },
        }
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _parts(cfg, device):
    """The three studies' models, tasks and grids, every setting checked (naming it)."""
    if isinstance(cfg.target_r2, bool) or not isinstance(cfg.target_r2, (int, float)):
        raise TypeError(f"target_r2 must be a number, got {cfg.target_r2!r}.")
    if not 0 < cfg.target_r2 < 1:
        raise ValueError(f"target_r2 must lie strictly between 0 and 1, got {cfg.target_r2!r}.")
    check_bool(cfg.stop_at_target, "stop_at_target")
    if not isinstance(cfg.length_task, (tuple, list)) or len(cfg.length_task) != 3:
        raise ValueError(f"length_task must be a tuple (T, d, q), got {cfg.length_task!r}.")
    T, d, q = (check_positive_int(v, f"length_task[{i}]") for i, v in enumerate(cfg.length_task))
    seq_len, n_features = (check_positive_int(cfg[k], k) for k in ("seq_len", "n_features"))
    q_values, n_heads = _ints(cfg.q_values, "q_values"), _ints(cfg.n_heads, "n_heads")
    if max(q_values) > seq_len:
        raise ValueError(f"q_values name up to {max(q_values)} positions of seq_len={seq_len}.")
    seq_lens, n_selected = _ints(cfg.seq_lens, "seq_lens"), cfg.n_selected
    fcn_max = check_positive_int(cfg.fcn_max_seq_len, "fcn_max_seq_len")
    estimator = _model(cfg.estimator, "estimator", SparseTokenRetriever)
    heads = estimator if cfg.heads_estimator is None else cfg.heads_estimator
    heads = _model(heads, "estimator", SparseTokenRetriever, "heads_estimator")
    heads.set_params(width=check_positive_int(cfg.heads_width, "heads_width"))
    length = clone(estimator).set_params(
        n_heads=q, width=check_positive_int(cfg.length_width, "length_width")
    )
    heads_steps = _steps(cfg.heads_steps, "heads_steps")
    params = heads.get_params()
    return {
        "config": {
            **_plain(dict(cfg)),
            "heads_budget": {
                "solver": params["solver"],
                "learning_rate_init": params["learning_rate_init"],
                "n_steps": planned_steps(heads, heads_steps),
            },
        },
        "q_values": q_values,
        "heads": (heads, SparseRetrievalTask(seq_len, n_features, q_values[0])),
        "heads_grid": [
            {"n_selected": [k], "n_heads": [h for h in n_heads if h <= k + 1]} for k in q_values
        ],
        "heads_steps": heads_steps,
        "models": {
            "transformer": _model(cfg.transformer, "transformer", SparseTokenRetriever).set_params(
                n_heads=check_positive_int(n_selected, "n_selected")
            ),
            "fcn": _model(cfg.fcn, "fcn", FCNRetriever),
        },
        "search_task": SparseRetrievalTask(seq_lens[0], n_features, n_selected),
        "widths": _per_model(cfg.widths, _DEFAULT_WIDTHS, "widths", _ints),
        "n_steps": _per_model(cfg.n_steps, _DEFAULT_STEPS, "n_steps", check_positive_int),
        "seq_lens": {"transformer": seq_lens, "fcn": [t for t in seq_lens if t <= fcn_max]},
        "search": {
            "target": cfg.target_r2,
            "stop_at_target": cfg.stop_at_target,
            "n_test": check_positive_int(cfg.n_val, "n_val"),
        },
        "length": (
            {pe: clone(length).set_params(positional_encoding=pe) for pe in _ENCODINGS},
            SparseRetrievalTask(T, d, q),
            [f * T for f in _ints(cfg.factors, "factors")],
        ),
        "length_steps": _steps(cfg.length_steps, "length_steps"),
        "n_test": check_positive_int(cfg.n_test, "n_test"),
        "device": device,
    }


_ENCODINGS = ("stochastic", "fixed")


def _run(parts, seeds, *, progress):
    """The three studies' tables over ``seeds``, and each study's seconds."""
    p = parts
    common = dict(seeds=seeds, device=p["device"], progress=progress, batch_seeds=True)
    tables, seconds = {}, {}
    start = time.perf_counter()
    model, task = p["heads"]
    tables["heads"] = sweep(
        model,
        task,
        p["heads_grid"],
        n_steps=p["heads_steps"],
        n_test=p["n_test"],
        scoring={"relative_mse": _relative_mse},
        **common,
    )
    seconds["heads"] = round(time.perf_counter() - start, 1)
    start = time.perf_counter()
    tables["widths"] = StudyTable.concat(
        [
            minimal_width(
                {name: model},
                p["search_task"],
                p["widths"][name],
                grid={"seq_len": p["seq_lens"][name]},
                n_steps=p["n_steps"][name],
                **p["search"],
                **common,
            )
            for name, model in p["models"].items()
            if p["seq_lens"][name]
        ]
    )
    seconds["widths"] = round(time.perf_counter() - start, 1)
    start = time.perf_counter()
    models, task, lengths = p["length"]
    tables["length"] = length_curve(
        models, task, lengths, n_steps=p["length_steps"], n_test=p["n_test"], **common
    )
    seconds["length"] = round(time.perf_counter() - start, 1)
    return tables, seconds


def _of_seed(table, seed):
    """The rows of ``seed``, its ``meta`` naming that seed alone."""
    data = table.where(seed=seed).to_dict()
    data["meta"]["seeds"] = [seed]
    return StudyTable.from_dict(data)


def _result_of(parts, tables, seconds, seed):
    """The result of one seed of the run."""
    own = {name: _of_seed(table, seed) for name, table in tables.items()}
    heads, laws = own["heads"], {}
    threshold = {}
    for q in parts["q_values"]:
        rows = heads.where(n_selected=q)
        below = [h for h, e in zip(rows["n_heads"], rows["relative_mse"]) if e < 1 / (2 * q)]
        threshold[str(q)] = int(min(below)) if below else None
    for name in parts["models"]:
        try:
            found = compare_laws(*own["widths"].where(model=name).xy("seq_len", "value"), _LAWS)
        except (KeyError, ValueError):  # fewer than 3 widths at 2 lengths: no law
            found = []
        laws[name] = {law.name: law.to_dict() for law in found}
    config = {**parts["config"], "random_state": seed}
    return SparseRetrievalResult(
        config=config, threshold=threshold, laws=laws, seconds=dict(seconds), **own
    )


_LAWS = ("log2", "power")
