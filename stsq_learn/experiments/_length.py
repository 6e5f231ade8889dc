"""Experiment 2: length generalization of stochastic vs fixed positional encodings."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from .._validation import check_positive_int
from ..estimators import SparseTokenSelector
from ..scoring import LengthShiftScorer
from ..tasks import SparseTokenSelectionTask
from ._common import (
    dataclass_dict,
    derived_seed,
    estimator_config,
    new_axes,
    prepared,
    progress_bar,
    train_online,
)


@dataclass
class LengthGeneralizationResult:
    """R^2 of models trained at length T, scored on validation sets moved to T'.

    Attributes
    ----------
    config : dict
        The experiment's settings.
    eval_lengths : list of int
        The lengths T' scored (T' = factor * T).
    models : list of str
        Curve names: ``"stochastic"`` (SPE, one encoding draw, the paper),
        ``"stochastic, K draws"`` (the same fitted model averaging its
        attention over K draws at predict time) and ``"fixed"``.
    r2 : dict of str to dict of str to list of float
        ``r2[validation_set][model]`` is the R^2 at each of ``eval_lengths``;
        the validation sets are ``"val_128"`` (128 rows, the paper's size)
        and ``"val_large"``.
    train_r2 : dict of str to float
        In-distribution R^2 of each trained model on the large validation set.

    Examples
    --------
    >>> from stsq_learn.experiments import length_generalization
    >>> from stsq_learn import SparseTokenSelector
    >>> res = length_generalization(seq_len=8, n_features=2, n_selected=2,
    ...                             estimator=SparseTokenSelector(16), n_steps=20,
    ...                             factors=(1, 2), n_val_large=200, random_state=0)
    >>> sorted(res.r2), res.eval_lengths
    (['val_128', 'val_large'], [8, 16])
    """

    config: dict
    eval_lengths: list
    models: list
    r2: dict
    train_r2: dict

    def at(self, model, factor, validation="val_large"):
        """R^2 of ``model`` at length ``factor * T`` on a validation set.

        Parameters
        ----------
        model : str
            One of ``models``.
        factor : float
            Relative length; ``factor * T`` must be one of ``eval_lengths``.
        validation : str, default="val_large"
            Name of the validation set, a key of ``r2``.

        Returns
        -------
        float
            The recorded R^2.
        """
        T = self.config["seq_len"]
        return self.r2[validation][model][self.eval_lengths.index(int(factor * T))]

    def to_dict(self):
        """JSON-ready dict of the fields."""
        return dataclass_dict(self)

    def plot(self, axes=None):
        """R^2 against T' for each model, one panel per validation set.

        Parameters
        ----------
        axes : sequence of matplotlib Axes, default=None
            One per validation set; ``None`` makes a new figure with one row.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure holding the axes.
        """
        sets = list(self.r2)
        fig, axes = new_axes(axes, len(sets), figsize=(6 * len(sets), 4))
        T = self.config["seq_len"]
        styles = {"fixed": dict(color="C3", marker="s", ls="--")}
        for ax, name in zip(axes, sets):
            for i, model in enumerate(self.models):
                style = styles.get(model, dict(color=f"C{i}", marker="o"))
                ax.plot(self.eval_lengths, self.r2[name][model], label=model, **style)
            ax.axvline(T, color="gray", ls=":", lw=1, label=f"training length T={T}")
            ax.axhline(0.0, color="k", lw=0.5)
            ax.set_xscale("log", base=2)
            ax.set_xticks(self.eval_lengths, [str(t) for t in self.eval_lengths])
            ax.set_xlabel("evaluation length T' (log scale)")
            ax.set_ylabel("$R^2$ (1 - relative MSE)")
            ax.set_ylim(min(-0.1, np.nanmin([min(v) for v in self.r2[name].values()]) - 0.05), 1.02)
            n_rows = self.config["n_val_128"] if name == "val_128" else self.config["n_val_large"]
            ax.set_title(f"Length shift, validation set of {n_rows} rows")
            ax.legend(loc="lower left", fontsize="small")
        return fig


def length_generalization(
    seq_len=16,
    n_features=8,
    n_selected=3,
    *,
    estimator=None,
    n_steps=1500,
    factors=(1, 2, 4, 8),
    n_pe_samples=16,
    n_val_large=1000,
    device=None,
    random_state=0,
    progress=False,
):
    """Train SPE and fixed encodings at length T; score at T' = factor * T.

    The paper's out-of-distribution claim: a transformer trained with
    stochastic positional encodings keeps its accuracy on longer sequences,
    one trained with fixed encodings does not. Two clones of ``estimator``,
    one with ``positional_encoding="stochastic"`` and one with ``"fixed"``,
    are trained online (fresh batches) at length ``seq_len``; two fixed
    validation sets drawn at that length (128 rows as in the paper, and
    ``n_val_large`` rows) are moved to each T' by
    :class:`~stsq_learn.LengthShiftScorer`, which inserts unselected tokens
    and keeps every target. The SPE model is also scored with its attention
    averaged over ``n_pe_samples`` encoding draws.

    Parameters
    ----------
    seq_len, n_features, n_selected : int, default=16, 8, 3
        The training task D_{T,q}.
    estimator : SparseTokenSelector, default=None
        The model to train (cloned; its ``positional_encoding``,
        ``random_state`` and, if given, ``device`` are replaced). None is
        ``SparseTokenSelector(width=64)``: Adam at 0.01, batches of 256.
    n_steps : int, default=1500
        Online training steps of each model (long enough for fixed encodings to
        fit their positions, which is what keeps them from extrapolating).
    factors : sequence of int, default=(1, 2, 4, 8)
        Evaluation lengths as multiples of ``seq_len``.
    n_pe_samples : int, default=16
        Encoding draws averaged by the third curve (1 skips that curve).
    n_val_large : int, default=1000
        Rows of the larger validation set.
    device : str or None, default=None
        Training device; None keeps the estimator's.
    random_state : int, default=0
        Seed of the run.
    progress : bool, default=False
        Show tqdm progress bars.

    Returns
    -------
    LengthGeneralizationResult
        R^2 of every model at every evaluation length, per validation set.
    """
    n_steps = check_positive_int(n_steps, "n_steps")
    n_pe_samples = check_positive_int(n_pe_samples, "n_pe_samples")
    n_val_large = check_positive_int(n_val_large, "n_val_large")
    factors = [check_positive_int(f, "factors[i]") for f in factors]
    if not factors:
        raise ValueError("factors must name at least one length multiple, got an empty sequence.")
    task = SparseTokenSelectionTask(seq_len, n_features, n_selected)
    T = task.seq_len
    eval_lengths = sorted({f * T for f in factors})
    val = {
        "val_128": task.sample(128, random_state=derived_seed(random_state, 2)),
        "val_large": task.sample(n_val_large, random_state=derived_seed(random_state, 3)),
    }
    base = prepared(
        estimator,
        SparseTokenSelector(64),
        SparseTokenSelector,
        "estimator",
        device=device,
        random_state=derived_seed(random_state, 4),
    )
    fitted = {}
    for pe in ("stochastic", "fixed"):
        fitted[pe] = train_online(
            clone(base).set_params(positional_encoding=pe),
            task,
            n_steps,
            desc=f"length: train {pe} encodings",
            progress=progress,
        )
    variants = [("stochastic", "stochastic", 1), ("fixed", "fixed", 1)]
    if n_pe_samples > 1:
        variants.insert(1, (f"stochastic, {n_pe_samples} draws", "stochastic", n_pe_samples))
    r2 = _score_variants(fitted, variants, val, eval_lengths, random_state, progress)
    X, y = val["val_large"]
    config = {
        "seq_len": T,
        "n_features": task.n_features,
        "n_selected": task.n_selected,
        "width": base.width,
        "n_steps": n_steps,
        "solver": base.solver,
        "learning_rate_init": base.learning_rate_init,
        "batch_size": base.batch_size,
        "estimator": estimator_config(base),
        "factors": factors,
        "n_pe_samples": n_pe_samples,
        "n_val_128": 128,
        "n_val_large": n_val_large,
        "device": str(fitted["stochastic"].device_),
        "random_state": random_state,
    }
    return LengthGeneralizationResult(
        config=config,
        eval_lengths=eval_lengths,
        models=[label for label, _, _ in variants],
        r2=r2,
        train_r2={pe: float(m.score(X, y)) for pe, m in fitted.items()},
    )


def _score_variants(fitted, variants, val, eval_lengths, random_state, progress):
    """``r2[validation set][label]``: R^2 of each (label, model, draws) at each length."""
    r2 = {name: {label: [] for label, _, _ in variants} for name in val}
    total = len(val) * len(variants) * len(eval_lengths)
    with progress_bar(total, "length: scoring at T'", enabled=progress, leave=False) as bar:
        for name, (X, y) in val.items():
            for label, pe, k in variants:
                model = fitted[pe].set_params(n_pe_samples=k)
                for T_eval in eval_lengths:
                    scorer = LengthShiftScorer(T_eval, random_state=derived_seed(random_state, 5))
                    r2[name][label].append(float(scorer(model, X, y)))
                    bar.update()
    for model in fitted.values():
        model.set_params(n_pe_samples=1)
    return r2
