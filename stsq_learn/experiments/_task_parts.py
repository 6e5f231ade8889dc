"""Parts of the task experiments (q-sparse averaging, retrieval) that read any task.

Argument checks shared by their functions, held-out rows sized in queries,
the width search against the length (the separation's online search, its
growth ratio, its summary rows, and the result methods that read it), and
the length part:
stochastic against fixed encodings, trained at one length and scored on rows
the task's own shift lengthens, and its panel.
"""

from __future__ import annotations

from sklearn.base import clone

from .._validation import check_positive_int
from ..scoring import LengthShiftScorer
from ._common import dataclass_dict, derived_seed, estimator_config, planned_steps, train_online
from ._separation import SeparationResult, _search_all, _SearchPlan
from ._width_search import growth_laws


def checked_steps(value, name):
    """``"auto"`` or a positive int of online steps."""
    if isinstance(value, str) and value == "auto":
        return value
    return check_positive_int(value, name)


def checked_triple(value, name):
    """A tuple (N, d, q) of positive ints."""
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        raise ValueError(f"{name} must be a tuple (N, d, q), got {value!r}.")
    return tuple(check_positive_int(v, f"{name}[{i}]") for i, v in enumerate(value))


def test_rows(task, n_test, seed):
    """About ``n_test`` queries: ``ceil(n_test / k)`` rows of a task asking k per row."""
    rows = -(-n_test // task.queries_per_row(task.seq_len))
    return task.sample(rows, random_state=seed)


test_rows.__test__ = False  # not a pytest test


def search_by_length(
    tasks,
    search,
    *,
    grids,
    steps,
    n_val,
    target_r2,
    random_state,
    fcn_max_seq_len,
    config,
    progress,
    stop_fits=False,
):
    """The separation's online search of both models' minimal widths against the length.

    Every width trained from scratch online, each length bracketed around
    the previous length's minimal width, the FCN searched up to
    ``fcn_max_seq_len``; ``search`` maps ``"transformer"`` and ``"fcn"`` to
    their estimators and ``config`` heads the result's settings. With
    ``stop_fits``, each fit stops once it reaches ``target_r2`` on the
    search's held-out rows (:class:`~stsq_learn.experiments._width_search.StopAtTarget`).

    Returns
    -------
    SeparationResult
        Scores, minimal widths, lower bounds and growth laws.
    """
    seq_lens = [task.seq_len for task in tasks]
    plan = _SearchPlan(
        regime="online",
        target_r2=target_r2,
        widths=grids,
        n_steps=steps,
        n_train=10,
        n_val=n_val,
        stop_at_target=True,
        monotone_search=True,
        stop_fits=bool(stop_fits),
        random_state=random_state,
        max_seq_len={"transformer": max(seq_lens), "fcn": fcn_max_seq_len},
    )
    scores, minimal, bound, spent = _search_all(
        tasks, search, plan, progress=progress, scheduler=None
    )
    return SeparationResult(
        config={
            **config,
            "estimators": {m: estimator_config(e) for m, e in search.items()},
            **plan.config(),
        },
        seq_lens=seq_lens,
        scores=scores,
        minimal_width=minimal,
        growth_laws=growth_laws(seq_lens, minimal, tasks[0].n_features),
        lower_bound=bound,
        seconds=spent,
    )


class WidthSearchResult:
    """Methods of a result whose ``by_length`` is a :class:`SeparationResult`."""

    def width_growth(self, model="transformer", shortest=1):
        """Minimal width at the longest length over that at the shortest >= ``shortest`` found.

        Parameters
        ----------
        model : {"transformer", "fcn"}, default="transformer"
            The model.
        shortest : int, default=1
            The smallest length the ratio may start from.

        Returns
        -------
        ratio : float or None
            None with fewer than two minimal widths.
        """
        return width_growth(self.by_length, model, shortest)

    def to_dict(self):
        """JSON-ready dict of the fields (``by_length`` as its own ``to_dict()``)."""
        out = dataclass_dict(self, skip=("by_length",))
        out["by_length"] = self.by_length.to_dict()
        out["width_growth"] = self.width_growth()
        return out


def width_growth(sep, model="transformer", shortest=1):
    """Minimal width at the longest length over that at the shortest length >= ``shortest``.

    ``sep`` is a :class:`~stsq_learn.experiments.SeparationResult`; None with
    fewer than two minimal widths.
    """
    found = [
        w for T, w in zip(sep.seq_lens, sep.minimal_width[model]) if w is not None and T >= shortest
    ]
    return found[-1] / found[0] if len(found) >= 2 else None


def width_search_rows(rows, sep, *, title, symbol):
    """Summary rows of a width search against the length (``symbol``: ``"N"``, ``"T"``).

    The minimal widths of both models, the attention model's growth from the
    shortest length and from 16 (the theory's regime) where searched, and the
    laws ``a + b log2 T`` (attention) and ``b T^c`` (FCN).
    """
    cfg = sep.config
    lens = ", ".join(map(str, sep.seq_lens))
    rows.append(f"| {title}, R^2 >= {cfg['target_r2']}) | {symbol} = {lens} | |")
    for model, label in (("transformer", "attention"), ("fcn", "FCN")):
        rows.append(f"| | minimal width, {label} | {' / '.join(sep.width_text(model))} |")
    found = [T for T, w in zip(sep.seq_lens, sep.minimal_width["transformer"]) if w]
    for shortest in sorted({found[0], 16} & set(found)) if found else ():
        growth = width_growth(sep, shortest=shortest)
        if growth is not None:
            rows.append(
                f"| | attention: minimal width at {symbol}={found[-1]} over "
                f"{symbol}={shortest} | {growth:.2f} |"
            )
    law = sep.growth_laws["transformer"].get("log_T")
    if law is not None:
        rows.append(
            f"| | attention: w = a + b log2 {symbol} | a={law['intercept']:.1f}, "
            f"b={law['slope']:.2f} (fit R^2 {law['r2']:.3f}, rms residual "
            f"{law['rms_residual']:.2f}) |"
        )
    law = sep.growth_laws["fcn"].get("power_0")
    if law is not None:
        rows.append(
            f"| | FCN: w = b {symbol}^c | b={law['slope']:.2f}, c={law['exponent']:.2f} "
            f"(fit R^2 {law['r2']:.3f}) |"
        )


def length_part(
    task, estimator, width, n_steps, factors, n_test, random_state, progress, *, label, seeds
):
    """Stochastic and fixed encodings trained at N, scored on rows lengthened to f N.

    ``seeds`` are the offsets (test rows, shift) of the run's seed; ``label``
    prefixes the progress bars.
    """
    N = task.seq_len
    X, y = test_rows(task, n_test, derived_seed(random_state, seeds[0]))
    eval_lengths = [f * N for f in factors]
    r2 = {}
    for pe in ("stochastic", "fixed"):
        model = clone(estimator).set_params(width=width, positional_encoding=pe)
        train_online(model, task, n_steps, desc=f"{label}: length, {pe}", progress=progress)
        r2[pe] = [
            float(
                LengthShiftScorer(factor=f, random_state=derived_seed(random_state, seeds[1]))(
                    model, X, y
                )
            )
            for f in factors
        ]
    return {
        "seq_len": N,
        "n_features": task.n_features,
        "n_selected": task.n_selected,
        "width": width,
        "n_steps": planned_steps(clone(estimator).set_params(width=width), n_steps),
        "factors": factors,
        "eval_lengths": eval_lengths,
        "n_test_rows": len(X),
        "r2": r2,
    }


def plot_length_part(ln, ax, *, symbol, xlabel, ylabel, title):
    """R^2 of stochastic and fixed encodings (``ln``: a length part) at the evaluation lengths.

    ``symbol`` names the training length in the legend (``"N"``, ``"T"``).
    """
    plot_length_parts([ln], ax, symbol=symbol, xlabel=xlabel, ylabel=ylabel, title=title)


def plot_length_parts(lns, ax, *, symbol, xlabel, ylabel, title):
    """:func:`plot_length_part` over seeds (``lns``: one length part per seed).

    One draws each encoding's R^2; several draw its median over the seeds
    with the min-max shaded (a value that is no finite number is left out).
    """
    import numpy as np
    from matplotlib.ticker import NullFormatter

    from ._bands import band, nan_extreme

    ln = lns[0]
    styles = {
        "stochastic": dict(color="C0", marker="o"),
        "fixed": dict(color="C3", marker="s", ls="--"),
    }
    for pe, values in ln["r2"].items():
        if len(lns) == 1:
            ax.plot(ln["eval_lengths"], values, label=pe, **styles.get(pe, {}))
        else:
            columns = [one["r2"][pe] for one in lns]
            band(ax, ln["eval_lengths"], columns, label=pe, **styles.get(pe, {}))
    label = f"training {symbol}={ln['seq_len']}"
    ax.axvline(ln["seq_len"], color="gray", ls=":", lw=1, label=label)
    ax.axhline(0.0, color="k", lw=0.5)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ln["eval_lengths"], [str(t) for t in ln["eval_lengths"]])
    ax.xaxis.set_minor_formatter(NullFormatter())  # only the lengths are labelled
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if len(lns) == 1:
        low = min(min(v) for v in ln["r2"].values())
    else:
        low = nan_extreme([r for one in lns for v in one["r2"].values() for r in v], np.min)
        low = 0.0 if np.isnan(low) else low
    ax.set_ylim(min(-0.1, low - 0.05), 1.02)
    ax.set_title(title)
    ax.legend(fontsize="small", loc="lower left")
