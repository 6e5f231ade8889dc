"""Copying: a transformer against an LSTM of as many parameters, beside the theory's bounds.

The settings, the studies (tables ``constructions`` and ``trained``: panel 1; ``curve``: the
accuracies along the training of panels 2 and 3), the numbers, the figure and the record.
"""

from __future__ import annotations

import functools
import math
import numbers

import numpy as np
from sklearn.metrics import make_scorer
from sklearn.utils._param_validation import Interval

from ...experiments import Experiment, Settings
from ...experiments._common import new_axes
from ...experiments._result import band_text, last_step
from ...experiments._settings import COUNT, COUNTS, POSITIVE, positive_ints
from ...metrics import string_accuracy
from ...studies import BandDisplay, StudyTable, stream_seed, sweep, training_curve
from .estimators import LSTMCopier, TransformerCopier
from .modules import CausalTransformer, RecurrentCopier
from .task import CopyingTask
from .theory import FixedStateCopier, NGramCopier, fixed_state_error_bound, ngram_error_bound

MODELS = ("transformer", "LSTM")
"""The labels of the trained models in the tables."""


class CopyingSettings(Settings):
    """The settings of :func:`copying`: the alphabet, the models, the training and the grids.

    Attributes
    ----------
    vocab_size, n, n_bits : int, default=10, 4, 16
        D, the n-gram copier's n and the fixed-state copier's b.
    theory_lengths : tuple of int, default=(4, 8, 16, 32, 64)
        The lengths L of panel 1's constructions.
    trained_lengths : tuple of int, default=(10,)
        The lengths L at which panel 1's models are trained and scored
        (none: panel 1 shows the constructions only).
    train_len, min_len : int, default=20, 5
        Panels 2 and 3 train on lengths ``min_len .. train_len``.
    factors : tuple of int, default=(1, 2, 4)
        Panel 2's test lengths, as multiples of ``train_len`` (1 first).
    width, n_heads : int, default=64, 8
        The transformer's (2 layers, Hard-ALiBi).
    hidden_size : int or None, default=None
        The LSTM's (2 layers); None: the size whose parameter count is
        closest to the transformer's.
    n_steps, batch_size, learning_rate : int, int, float, default=8000, 16, 0.005
        Online steps of every fit, fresh strings per step and Adam's step size
        (cosine schedule) of both models.
    target : float, default=0.9
        The string accuracy at ``train_len`` whose strings seen panel 3 reports.
    record_every, n_test : int, default=250, 500
        Steps between two measurements of panels 2 and 3, and held-out strings of each.
    n_theory : int, default=10000
        Monte Carlo strings of each construction at each length.
    """

    _parameter_constraints = {
        **dict.fromkeys(("n", "train_len", "min_len", "width", "n_heads", "n_steps"), COUNTS),
        **dict.fromkeys(("batch_size", "record_every", "n_test", "n_theory"), COUNTS),
        "vocab_size": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_bits": [Interval(numbers.Integral, 1, 62, closed="both")],
        "theory_lengths": [positive_ints(increasing=True)],
        "trained_lengths": [positive_ints(min_len=0, increasing=True)],
        "factors": [positive_ints(increasing=True)],
        "hidden_size": [COUNT, None],
        "learning_rate": [POSITIVE],
        "target": [Interval(numbers.Real, 0, 1, closed="right")],
    }

    vocab_size: int = 10
    n: int = 4
    n_bits: int = 16
    theory_lengths: tuple = (4, 8, 16, 32, 64)
    trained_lengths: tuple = (10,)
    train_len: int = 20
    min_len: int = 5
    factors: tuple = (1, 2, 4)
    width: int = 64
    n_heads: int = 8
    hidden_size: int | None = None
    n_steps: int = 8000
    batch_size: int = 16
    learning_rate: float = 0.005
    target: float = 0.9
    record_every: int = 250
    n_test: int = 500
    n_theory: int = 10_000

    def _validate(self):
        if self.min_len > self.train_len:
            raise ValueError(f"min_len={self.min_len} exceeds train_len={self.train_len}.")
        if self.factors[0] != 1:
            raise ValueError(f"factors must start at 1 (the training length), got {self.factors}.")
        if self.width % self.n_heads:
            raise ValueError(f"width={self.width} must be a multiple of n_heads={self.n_heads}.")


def _parameters(module):
    return sum(p.numel() for p in module.parameters())


def matched_hidden_size(width, n_heads, vocab_size):
    """The hidden size of the 2-layer LSTM whose parameter count is closest to the 2-layer
    transformer's of ``width`` and ``n_heads`` on D = ``vocab_size`` symbols (an int)."""
    goal = _parameters(CausalTransformer(vocab_size, width, n_heads, 2))
    sizes = range(4, 4 * width + 1)
    return min(sizes, key=lambda h: abs(_parameters(RecurrentCopier(vocab_size, h, 2)) - goal))


def trained_copiers(cfg):
    """``{label: estimator}`` of the two trained models, every training setting explicit."""
    training = dict(
        solver="adam",
        learning_rate_init=cfg.learning_rate,
        learning_rate="cosine",
        batch_size=cfg.batch_size,
    )
    hidden = cfg.hidden_size or matched_hidden_size(cfg.width, cfg.n_heads, cfg.vocab_size)
    return {
        MODELS[0]: TransformerCopier(cfg.width, cfg.n_heads, 2, "hard_alibi", **training),
        MODELS[1]: LSTMCopier(hidden, 2, **training),
    }


class StringAccuracyAt:
    """A measure: string accuracy on ``n_test`` held-out uniform strings of ``seq_len`` symbols,
    drawn from the estimator's seed (:func:`~stsq_learn.studies.stream_seed`): every
    measurement of a fit reads the same ones.

    Parameters
    ----------
    seq_len, vocab_size, n_test : int
        L, D and the strings.
    """

    def __init__(self, seq_len, vocab_size, n_test):
        self.seq_len, self.vocab_size, self.n_test = seq_len, vocab_size, n_test

    def __call__(self, estimator):
        """The string accuracy of ``estimator`` (a float in [0, 1])."""
        seed = stream_seed(estimator.random_state, f"test-L{self.seq_len}")
        X, y = CopyingTask(self.seq_len, self.vocab_size).sample(self.n_test, random_state=seed)
        return float(estimator.score(X, y))


def _column(L):
    return f"accuracy_L{L}"


_XY = ("param_seq_len", "string_accuracy")
_SCORING = {"string_accuracy": make_scorer(string_accuracy)}


# -- the studies -----------------------------------------------------------------------------
def run(cfg, seeds, *, device=None, progress=False, n_jobs=None):
    """The record's ``run``: ``constructions`` and ``trained`` (panel 1's
    ``string_accuracy`` per L) and ``curve`` (``accuracy_L<L>`` per test length)."""
    D = cfg.vocab_size
    common = dict(seeds=seeds, n_jobs=n_jobs, progress=progress)
    ngram, fixed = construction_labels(cfg)
    built = sweep(
        {ngram: NGramCopier(cfg.n), fixed: FixedStateCopier(cfg.n_bits)},
        CopyingTask(cfg.theory_lengths[0], D),
        {"seq_len": list(cfg.theory_lengths)},
        n_train=100,  # fit reads the alphabet from its rows: every symbol is in 100 strings
        n_test=cfg.n_theory,
        scoring=_SCORING,
        **common,
    )
    trained = StudyTable({c: [] for c in built.columns})  # panel 1 without models
    if cfg.trained_lengths:
        trained = sweep(
            trained_copiers(cfg),
            CopyingTask(cfg.trained_lengths[0], D),
            {"seq_len": list(cfg.trained_lengths)},
            n_steps=cfg.n_steps,
            n_test=cfg.n_test,
            scoring=_SCORING,
            device=device,
            **common,
        )
    lengths = [f * cfg.train_len for f in cfg.factors]
    curve = training_curve(
        trained_copiers(cfg),
        CopyingTask(cfg.train_len, D, min_len=cfg.min_len),
        {_column(L): StringAccuracyAt(L, D, cfg.n_test) for L in lengths},
        every=cfg.record_every,
        n_steps=cfg.n_steps,
        device=device,
        **common,
    )
    strings = [int(s) * cfg.batch_size for s in curve["step"]] if len(curve) else []
    curve = curve.with_columns(strings=strings)
    return {"constructions": built, "trained": trained, "curve": curve}


# -- what the tables give --------------------------------------------------------------------
def construction_labels(settings):
    """The labels of the n-gram and the fixed-state copiers in the tables, for these settings."""
    return f"n-gram copier (n={settings['n']})", f"fixed-state copier (b={settings['n_bits']})"


def accuracy_bounds(settings):
    """Each construction's label to ``(L, 1 - its error bound)`` at ``theory_lengths``:
    ``1 - L^2 D^-n`` and ``2^b / D^L``, in [0, 1] (``settings``: JSON or an instance)."""
    c = CopyingSettings.resolve(settings)
    Ls, D = list(c.theory_lengths), c.vocab_size
    ngram, fixed = construction_labels(c)
    return {
        ngram: (Ls, [1 - ngram_error_bound(L, D, c.n) for L in Ls]),
        fixed: (Ls, [1 - fixed_state_error_bound(L, D, c.n_bits) for L in Ls]),
    }


def strings_to_target(result, model, target=None):
    """The strings ``model`` (of :data:`MODELS`) saw in a one-seed view until its accuracy at
    ``train_len`` reached ``target`` (None: the settings'): ``step * batch_size`` of the first
    measurement at or above it; ``inf`` if none."""
    target = result.settings["target"] if target is None else target
    rows = result.tables["curve"].where(model=model)
    accuracy = np.asarray(rows[_column(result.settings["train_len"])], dtype=float)
    reached = np.flatnonzero(accuracy >= target)
    return float(rows["strings"][reached[0]]) if reached.size else math.inf


def final_accuracy(result, model, factor):
    """One seed's accuracy of ``model`` at ``factor * train_len`` after its last step."""
    last = last_step(result.tables["curve"].where(model=model))
    return float(last[_column(factor * result.settings["train_len"])][0])


def headline(result):
    """The numbers one seed's run is judged by, flat.

    Per model ``strings_to_target_<model>`` (``inf`` if never reached) and
    ``accuracy_<model>_x<f>`` (after the last step, at f times ``train_len``); per trained length
    ``accuracy_<model>_L<L>`` (panel 1); per theory length ``ngram_error_L<L>`` and
    ``ngram_bound_L<L>`` (Monte Carlo and bound), and ``fixed_state_error_L<L>`` minus its bound
    (``fixed_state_gap_L<L>``, 0 up to sampling error).
    """
    c = result.settings
    out = {}
    for model in MODELS:
        key = model.lower()
        out[f"strings_to_target_{key}"] = strings_to_target(result, model)
        for f in c["factors"]:
            out[f"accuracy_{key}_x{f}"] = final_accuracy(result, model, f)
        for L, acc in zip(*result.tables["trained"].where(model=model).xy(*_XY)):
            out[f"accuracy_{key}_L{int(L)}"] = float(acc)
    table, D = result.tables["constructions"], c["vocab_size"]
    ngram, fixed = construction_labels(c)
    for L, acc in zip(*table.where(model=ngram).xy(*_XY)):
        out[f"ngram_error_L{int(L)}"] = 1 - float(acc)
        out[f"ngram_bound_L{int(L)}"] = ngram_error_bound(int(L), D, c["n"])
    for L, acc in zip(*table.where(model=fixed).xy(*_XY)):
        bound = fixed_state_error_bound(int(L), D, c["n_bits"])
        out[f"fixed_state_gap_L{int(L)}"] = 1 - float(acc) - bound
    return out


def summary(result):
    """Summary rows: the strings to the target, the accuracies at 1x/2x/4x, the constructions."""
    c, bands = result.settings, result.bands()
    band = functools.partial(band_text, bands)

    def per_length(key, digits=3):  # L to "L=<L>: <band>", at each theory length with a number
        Ls = [L for L in c["theory_lengths"] if f"{key}_L{L}" in bands]
        return {L: f"L={L}: {band(f'{key}_L{L}', digits)}" for L in Ls}

    where = f"D={c['vocab_size']}, L={c['min_len']}-{c['train_len']}, {c['n_steps']} steps"
    rows = [
        f"| copying ({where}) | strings seen until {c['target']:g} string accuracy at "
        f"L={c['train_len']}, transformer / LSTM | {band('strings_to_target_transformer')} / "
        f"{band('strings_to_target_lstm')} |"
    ]
    for f in c["factors"]:
        rows.append(
            f"| | string accuracy at {f}x the training length, transformer / LSTM | "
            f"{band(f'accuracy_transformer_x{f}')} / {band(f'accuracy_lstm_x{f}')} |"
        )
    errors = per_length("ngram_error")
    bounds = {L: bands[f"ngram_bound_L{L}"]["median"] for L in errors}
    errors = ", ".join(f"{text} (bound {bounds[L]:.3g})" for L, text in errors.items())
    rows.append(f"| | n-gram copier's error, n={c['n']} (bound L^2 D^-n) | {errors} |")
    gaps = ", ".join(per_length("fixed_state_gap", 2).values())
    rows.append(f"| | fixed-state copier's error minus its bound, b={c['n_bits']} | {gaps} |")
    return rows


# -- the figure ------------------------------------------------------------------------------
def figure(result, axes=None):
    """The record's ``figure``: accuracy against L, against the test length, the training."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    fig, (ax1, ax2, ax3) = new_axes(axes, 3)
    c = result.settings
    both = StudyTable.concat([result.tables["constructions"], result.tables["trained"]])
    kw = dict(x="seq_len", y="string_accuracy", ax=ax1, logx=True, theory=accuracy_bounds(c))
    kw.update(xlabel="string length L", ylabel="string accuracy", line_kw={"marker": "o"})
    kw["title"] = f"1. Copying uniform strings (D = {c['vocab_size']})"
    BandDisplay.from_table(both, theory_kw={"ls": ":", "lw": 2}, **kw)
    ax1.set_ylim(-0.03, 1.03)
    ax1.legend(  # beside the curves: the middle of the panel is empty at every size
        loc="center left",
        bbox_to_anchor=(0.08, 0.42),
        title="dotted: bounds (theorems); points: measured\n(an LSTM's float32 state "
        "holds\nthousands of bits: its bound is vacuous)",
        title_fontproperties={"size": 9},
    )
    curve = result.tables["curve"]
    rows = {"model": [], "seed": [], "test_len": [], "string_accuracy": []}
    for _, part in curve.groups("model", "seed"):
        last = last_step(part)
        for f in c["factors"]:
            L = f * c["train_len"]
            rows["model"].append(last["model"][0])
            rows["seed"].append(int(last["seed"][0]))
            rows["test_len"].append(L)
            rows["string_accuracy"].append(float(last[_column(L)][0]))
    kw = dict(x="test_len", y="string_accuracy", ax=ax2, logx=True, style="errorbar")
    kw.update(xlabel="test string length", ylabel="string accuracy (measured)")
    kw["title"] = f"2. Trained on L = {c['min_len']}..{c['train_len']}, tested longer"
    BandDisplay.from_table(StudyTable(rows), line_kw={"marker": "o"}, **kw)
    ax2.axvline(c["train_len"], color="0.6", ls=":", lw=1)
    ax2.set_ylim(-0.03, 1.03)
    kw = dict(x="strings", y=_column(c["train_len"]), ax=ax3, xlabel="strings seen in training")
    kw["ylabel"] = f"string accuracy at L = {c['train_len']} (measured)"
    BandDisplay.from_table(curve, title="3. Sample efficiency", **kw)
    ax3.xaxis.set_major_locator(MaxNLocator(5, integer=True))  # thousands of strings: 5 ticks
    ax3.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:g}k" if v else "0"))
    ax3.axhline(c["target"], color="0.6", ls=":", lw=1)
    ax3.set_ylim(-0.03, 1.03)
    return fig


PROVENANCE = {
    "task": "paper: x uniform in D^L, read as BOS x SEP, written then EOS; the string error; "
    "lengths uniform on [min_len, max_len] in training",
    "bounds": "paper: 1 - 2^b / D^L for a b-bit state (Theorem 2.7), L^2 D^-n for the n-gram "
    "copier (Theorem 2.3, Lemma 2.4), as quoted by two readings of the paper",
    "constructions": "ours: the n-gram copier as an algorithm (the theorem's transformer "
    "computes it) and the b-bit copier that meets the bound",
    "models": "paper: a Hard-ALiBi transformer against an LSTM; ours: 2 layers, width 64, "
    "8 heads (windows 2 to 5 and four global heads), about 100k parameters, the LSTM's hidden "
    "size matched to its parameter count, its initialisation (orthogonal, forget bias 1)",
    "training": "ours: Adam with a cosine schedule, gradient norm clipped to 1, fresh strings "
    "each step; the paper's models are about 160M parameters",
    "vocab_size, train_len, min_len": "ours: D = 10, lengths 5-20 (the paper's L is up to 300)",
    "seeds": "ours: 3; the models of a seed are scored on the same strings",
}
"""Setting -> ``"paper: ..."`` or ``"ours: ..."``: where each setting comes from."""

_SMALL = dict(vocab_size=3, min_len=2, factors=(1, 2), n_heads=4, record_every=50, n_theory=4000)

RECORD = Experiment(
    name="copying",
    function_name="copying",
    doc="""A transformer against an LSTM of as many parameters on copying, beside the bounds.

    String accuracy against the length for both models and for the theory's
    two constructions beside their bounds, the models' accuracy past their
    training length, and the strings each sees until it copies (see
    :mod:`stsq_learn.tasks.copying.experiment`; the settings:
    :class:`CopyingSettings`).

    Examples
    --------
    >>> from stsq_learn.experiments import copying
    >>> result = copying("tiny", seeds=1)
    >>> sorted(result.tables)
    ['constructions', 'curve', 'trained']
    >>> result.bands()["fixed_state_gap_L4"]["median"]
    0.0
    """,
    settings=CopyingSettings,
    presets={
        "tiny": dict(
            _SMALL,
            theory_lengths=(4, 8, 16),
            trained_lengths=(4,),
            train_len=4,
            width=16,
            n_steps=150,
            n_test=100,
            n_theory=500,
        ),
        "quick": dict(
            _SMALL, trained_lengths=(), train_len=5, width=32, n_steps=300, target=0.5, n_test=200
        ),
        "full": {},
        "gpu": "full",  # small models: the same work on any device
    },
    provenance=PROVENANCE,
    # Accuracies of a few hundred strings move by a few hundredths; the strings seen move in
    # steps of record_every * batch_size; Monte Carlo errors by their sampling error.
    reference_atol={"accuracy_*": 0.1, "ngram_error_*": 0.02, "fixed_state_gap_*": 0.03},
    reference_rtol={"strings_to_target_*": 0.5},
)
copying = RECORD.function
