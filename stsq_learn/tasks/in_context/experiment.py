"""In-context linear regression: the trained layer beside Zhang, Frei and Bartlett's theory.

One linear self-attention layer (:class:`~stsq_learn.LinearAttentionRegressor`)
trained online on prompts of N examples, measured four ways, each beside
its closed form (:mod:`.theory`):

1. convergence: the relative (Frobenius) error of ``preconditioner_`` to
   the global minimum ``Gamma^{-1}`` along the training, for an isotropic
   and an anisotropic ``Lambda`` (:func:`~stsq_learn.studies.training_curve`);
2. the risk at test prompts of M examples for the layer trained at N
   (Monte Carlo on held-out prompts moved to M by the task's shift, and
   exact at the fitted preconditioner), beside ``in_context_risk``, least
   squares (:class:`~stsq_learn.PromptRidge`) and the gradient step tuned
   to each M (:class:`~stsq_learn.PromptGradientStep`), which meets the
   layer at ``M = N`` (:func:`~stsq_learn.studies.length_curve` over the
   training lengths, :func:`~stsq_learn.studies.sweep` for the baselines);
3. covariate shift: every covariate scaled by ``c`` at test, the
   prediction's slope on the target ``<w, x_q>`` (``c^2 / g``) and the
   risk, beside least squares (slope 1);
4. the training length N whose layer has the least risk at each test
   length M (``N = M`` in theory), with a line fitted to it
   (:func:`~stsq_learn.studies.fit_law`).

The experiment is a composition of the public study tools: every number
is a column of a :class:`~stsq_learn.studies.StudyTable`, every panel a
:class:`~stsq_learn.studies.BandDisplay`. Seed ``s`` decides each fit's
``random_state`` and each held-out prompt (:mod:`stsq_learn.studies.seeds`),
so a run of several seeds gives, seed by seed, the results of one-seed runs.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from ..._validation import check_positive_int
from ...experiments._common import dataclass_dict, jsonable, new_axes
from ...experiments._settings import Settings
from ...studies import BandDisplay, StudyTable, fit_law, length_curve, sweep, training_curve
from ...studies.seeds import check_seeds
from .baselines import PromptGradientStep, PromptRidge
from .estimators import LinearAttentionRegressor
from .task import InContextRegressionTask
from .theory import (
    in_context_gd_step,
    in_context_least_squares_risk,
    in_context_preconditioner,
    in_context_risk,
    in_context_slope,
)

LAYER = "linear attention"
"""The model label of the trained layer in the tables."""
BASELINES = ("least squares", "one GD step (tuned)")
"""The model labels of the baselines: :class:`PromptRidge`, :class:`PromptGradientStep`."""
LAWS = ("isotropic", "anisotropic")
"""The two covariances of the convergence panel."""


class InContextSettings(Settings):
    """The settings of :func:`in_context_regression`: the law, the training and the grids.

    Attributes
    ----------
    n_features : int, default=5
        Dimension d of the covariates.
    n_train : int, default=20
        N, the examples of the training prompts of panels 1 and 3 and of
        panel 2's layer (one of ``train_lengths`` and of ``test_lengths``).
    anisotropic : tuple of float, default=(2.0, 1.5, 1.0, 0.5, 0.25)
        The variances of the anisotropic ``Lambda`` (d of them) of panel 1;
        the other panels train on ``Lambda = I``.
    n_steps : int, default=1000
        Online Adam steps of every fit.
    learning_rate : float, default=0.01
        Adam's step size (``learning_rate_init``).
    batch_size : int, default=256
        Fresh prompts per step.
    record_every : int, default=25
        Steps between two measurements of panel 1.
    train_lengths : tuple of int, default=(5, 10, 20, 40, 80)
        The training examples N of panel 4 (each at least d: the held-out
        prompts must determine their ``w`` to be lengthened).
    test_lengths : tuple of int, default=(5, 10, 20, 40, 80)
        The test examples M of panels 2 and 4 (at least 3).
    scales : tuple of float, default=(0.5, 1.0, 2.0, 3.0)
        The covariate scales c of panel 3, measured at ``M = N``.
    n_test : int, default=10000
        Held-out prompts per fit and seed.
    n_tune : int, default=4000
        Prompts the tuned gradient step is fitted on, at each M.

    Examples
    --------
    >>> from stsq_learn.experiments import InContextSettings
    >>> InContextSettings().replace(n_steps=200).n_steps
    200
    """

    n_features: int = 5
    n_train: int = 20
    anisotropic: tuple = (2.0, 1.5, 1.0, 0.5, 0.25)
    n_steps: int = 1000
    learning_rate: float = 0.01
    batch_size: int = 256
    record_every: int = 25
    train_lengths: tuple = (5, 10, 20, 40, 80)
    test_lengths: tuple = (5, 10, 20, 40, 80)
    scales: tuple = (0.5, 1.0, 2.0, 3.0)
    n_test: int = 10_000
    n_tune: int = 4000


# -- measures and scorers (module level: a study may run them in worker processes) -----------
def preconditioner_error(estimator):
    """Relative Frobenius error of ``preconditioner_`` to the global minimum of its training law.

    Parameters
    ----------
    estimator : LinearAttentionRegressor
        A fitted layer (or a view of one during training).

    Returns
    -------
    float
        ``||A - Gamma^{-1}||_F / ||Gamma^{-1}||_F``.
    """
    task = estimator.task_
    target = in_context_preconditioner(task.n_examples, task.covariance_matrix)
    return float(np.linalg.norm(estimator.preconditioner_ - target) / np.linalg.norm(target))


def prompt_risk(estimator, X, y):
    """Mean squared error of the prediction against the queries' clean labels (a scorer)."""
    return float(np.mean((estimator.predict(X) - y) ** 2))


def fitted_risk(estimator, X, y):
    """The exact risk of the fitted preconditioner at ``X``'s number of examples (a scorer).

    ``in_context_risk(M, ., Lambda, preconditioner=estimator.preconditioner_)``
    with ``Lambda`` the training law's: the population value the Monte Carlo
    :func:`prompt_risk` estimates. Only ``X``'s length is read.
    """
    task = estimator.task_
    return in_context_risk(
        X.shape[1] - 1, np.inf, task.covariance_matrix, preconditioner=estimator.preconditioner_
    )


class CovariateShift:
    """A scorer of the covariate shift ``x -> c x``, at the model's training length only.

    Scaling a noiseless prompt (every covariate and label) by ``c`` draws it
    from the law with covariance ``c^2 Lambda`` and target ``c <w, x_q>``:
    the held-out prompts themselves, scaled. Elsewhere than the training
    length it returns NaN (panel 3 is measured at ``M = N``).

    Parameters
    ----------
    scale : float
        ``c``.
    what : {"slope", "risk"}
        The prediction's regression slope on the target, or its mean
        squared error.
    """

    def __init__(self, scale, what):
        self.scale = scale
        self.what = what

    def __call__(self, estimator, X, y):
        """The slope or the risk of ``estimator`` on ``X`` scaled by ``c`` (NaN off length)."""
        if X.shape[1] != estimator.seq_len_:
            return math.nan
        target = self.scale * np.asarray(y, dtype=np.float64)
        pred = estimator.predict(self.scale * np.asarray(X))
        if self.what == "slope":
            return float(pred @ target / (target @ target))
        return float(np.mean((pred - target) ** 2))


def _column(what, c):
    return f"{what}_c{c:g}"


def _scale_scorers(scales):
    return {_column(w, c): CovariateShift(c, w) for c in scales for w in ("slope", "risk")}


# -- the result ------------------------------------------------------------------------------
@dataclass
class InContextResult:
    """One seed's run of :func:`in_context_regression`: its study tables and the theory.

    Attributes
    ----------
    config : dict
        The settings and the seed.
    convergence : StudyTable
        Panel 1: ``law`` (``"isotropic"``/``"anisotropic"``), ``step``,
        ``preconditioner_error`` and ``loss``, one row per measurement.
    lengths : StudyTable
        Panels 2 to 4, the layer: ``param_seq_len`` (training ``N + 1``),
        ``eval_seq_len`` (test ``M + 1``), ``risk`` (Monte Carlo),
        ``fitted_risk`` (exact at the fitted preconditioner) and, at ``M =
        N``, ``slope_c<c>`` and ``risk_c<c>``.
    baselines : StudyTable
        Least squares and the tuned gradient step at each test length
        (``param_seq_len = M + 1``): ``risk``, ``slope_c<c>``, ``risk_c<c>``.
    best : StudyTable
        Panel 4: ``n_test`` (M), ``best_n_train`` (the training length of
        least ``fitted_risk`` at M) and ``theory`` (M).
    theory : dict
        The closed forms: ``preconditioner`` (``Gamma^{-1}`` per law),
        ``risk``, ``gd_risk`` and ``least_squares_risk`` per M (the layer
        trained at ``n_train``), ``slope`` and ``shift_risk`` per c,
        ``g``.
    law : dict
        The line ``N = a + b M`` fitted to ``best`` (:meth:`Law.to_dict`).

    Examples
    --------
    >>> from stsq_learn.tasks.in_context.experiment import in_context_regression
    >>> res = in_context_regression(n_steps=100, train_lengths=(5, 10, 20),
    ...                             test_lengths=(5, 10, 20), n_test=500, n_tune=500,
    ...                             random_state=0, progress=False)
    >>> sorted(res.to_dict())[:3]
    ['baselines', 'best', 'config']
    """

    config: dict
    convergence: StudyTable
    lengths: StudyTable
    baselines: StudyTable
    best: StudyTable
    theory: dict
    law: dict

    @property
    def n_train(self):
        """N, the training examples of panels 1 to 3."""
        return self.config["n_train"]

    def at_train_length(self):
        """The rows of :attr:`lengths` of the layer trained at ``n_train``, with ``n_test`` (M).

        Returns
        -------
        StudyTable
            Those rows, with a column ``n_test`` (``eval_seq_len - 1``).
        """
        rows = self.lengths.where(seq_len=self.n_train + 1)
        return rows.with_columns(n_test=[int(v) - 1 for v in rows["eval_seq_len"]])

    def final_error(self, law):
        """The last recorded ``preconditioner_error`` of ``law`` (``"isotropic"`` or not).

        Parameters
        ----------
        law : str
            One of :data:`LAWS`.

        Returns
        -------
        float
            The relative error at the end of the training.
        """
        rows = self.convergence.where(law=law)
        return float(rows["preconditioner_error"][int(np.argmax(rows["step"]))])

    def measured(self, column, model=LAYER):
        """``{x: value}`` of a column: per M for ``risk``-like columns, per c for shifts.

        Parameters
        ----------
        column : str
            ``"risk"`` or ``"fitted_risk"`` (per test length M), or
            ``"slope"``/``"risk_shift"`` (per scale c, at ``M = N``).
        model : str, default=LAYER
            The layer or one of :data:`BASELINES`.

        Returns
        -------
        dict
            Its values by M or by c.
        """
        if model == LAYER:
            rows = self.at_train_length()
            at = {int(m): i for i, m in enumerate(rows["n_test"])}
        else:
            rows = self.baselines.where(model=model)
            at = {int(L) - 1: i for i, L in enumerate(rows["param_seq_len"])}
        if column in ("risk", "fitted_risk"):
            return {m: float(rows[column][i]) for m, i in at.items()}
        where = at.get(self.n_train)
        what = "slope" if column == "slope" else "risk"
        if where is None:
            return {}
        return {c: float(rows[_column(what, c)][where]) for c in self.config["scales"]}

    def to_dict(self):
        """JSON-ready dict of everything (the tables as :meth:`StudyTable.to_dict`)."""
        out = dataclass_dict(self, skip=("convergence", "lengths", "baselines", "best"))
        for name in ("convergence", "lengths", "baselines", "best"):
            out[name] = jsonable(getattr(self, name).to_dict())
        return out

    def plot(self, axes=None):
        """The five panels: convergence, risk against M, slope and risk against c, best N.

        Parameters
        ----------
        axes : sequence of 5 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure of the five panels.
        """
        fig, (ax1, ax2, ax3, ax4, ax5) = new_axes(axes, 5, figsize=(25, 4.5))
        th = self.theory
        BandDisplay.from_table(
            self.convergence,
            x="step",
            y="preconditioner_error",
            hue="law",
            ax=ax1,
            logy=True,
            ylabel="||A - Gamma^{-1}||_F / ||Gamma^{-1}||_F",
            title=f"1. Convergence to Gamma^{{-1}} (N = {self.n_train})",
        )
        ax1.axhline(0.05, color="0.6", ls=":", lw=1, label="5%")
        ax1.legend(fontsize="small")

        layer = self.at_train_length()
        tests = np.array(sorted(th["risk"]), dtype=float)
        both = StudyTable.concat(
            [
                layer.with_columns(model=[f"{LAYER} (N = {self.n_train})"] * len(layer)),
                self.baselines.with_columns(
                    n_test=[int(v) - 1 for v in self.baselines["param_seq_len"]]
                ),
            ]
        )
        d, N = self.config["n_features"], self.n_train
        grid = np.arange(int(tests.min()), int(tests.max()) + 1)
        layer_label = f"{LAYER} (N = {N})"
        BandDisplay.from_table(
            both,
            x="n_test",
            y="risk",
            hue="model",
            ax=ax2,
            logx=True,
            theory={
                layer_label: (grid, [in_context_risk(int(m), N, np.ones(d)) for m in grid]),
                BASELINES[1]: (tests, [th["gd_risk"][m] for m in sorted(th["gd_risk"])]),
            },
            xlabel="test examples M",
            ylabel="risk E(y_hat - <w, x_q>)^2",
            title="2. Risk against the test length",
        )
        ax2.axvline(N, color="0.6", ls=":", lw=1)

        shifted = StudyTable.concat([self._shift_rows(LAYER), self._shift_rows(BASELINES[0])])
        scales = np.array(self.config["scales"], dtype=float)
        BandDisplay.from_table(
            shifted,
            x="scale",
            y="slope",
            hue="model",
            ax=ax3,
            theory={"theory c^2 / g": (scales, [th["slope"][c] for c in self.config["scales"]])},
            xlabel="covariate scale c",
            ylabel="slope of y_hat on <w, x_q>",
            title=f"3. Covariate shift: slope (M = N = {N})",
        )
        BandDisplay.from_table(
            shifted.where(model=LAYER),
            x="scale",
            y="risk",
            hue="model",
            ax=ax4,
            logy=True,
            theory={LAYER: (scales, [th["shift_risk"][c] for c in self.config["scales"]])},
            xlabel="covariate scale c",
            ylabel="risk",
            title="4. Covariate shift: risk (least squares: 0)",
        )
        law = fit_law(*self.best.xy("n_test", "best_n_train"), law="linear")
        BandDisplay.from_table(
            self.best,
            x="n_test",
            y="best_n_train",
            hue=None,
            ax=ax5,
            logx=True,
            laws=law,
            theory={"theory N = M": (tests, tests)},
            xlabel="test examples M",
            ylabel="best training examples N",
            title="5. Best training length per test length",
        )
        ax5.set_yscale("log", base=2)
        return fig

    def _shift_rows(self, model):
        """Rows ``model, seed, scale, slope, risk`` of the covariate shift at ``M = N``."""
        N = self.n_train
        if model == LAYER:
            rows = self.lengths.where(seq_len=N + 1, eval_seq_len=N + 1)
        else:
            rows = self.baselines.where(model=model, seq_len=N + 1)
        out = {"model": [], "seed": [], "scale": [], "slope": [], "risk": []}
        for i in range(len(rows)):
            for c in self.config["scales"]:
                out["model"].append(model)
                out["seed"].append(int(rows["seed"][i]))
                out["scale"].append(float(c))
                out["slope"].append(float(rows[_column("slope", c)][i]))
                out["risk"].append(float(rows[_column("risk", c)][i]))
        return StudyTable(out)

    @staticmethod
    def plot_bands(results, axes=None):
        """The five panels of several seeds' results: medians with their min-max bands.

        Parameters
        ----------
        results : sequence of InContextResult
            One per seed, of one run's settings.
        axes : sequence of 5 matplotlib Axes, default=None
            Where to draw; ``None`` makes a new figure.

        Returns
        -------
        fig : matplotlib.figure.Figure
            The figure of the five panels.
        """
        first = results[0]
        tables = {
            name: StudyTable.concat([getattr(r, name) for r in results])
            for name in ("convergence", "lengths", "baselines", "best")
        }
        merged = InContextResult(config=first.config, theory=first.theory, law=first.law, **tables)
        return merged.plot(axes)


# -- checks ----------------------------------------------------------------------------------
def _lengths(value, name, at_least):
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be a sequence of ints, got {value!r}.")
    out = []
    for i, v in enumerate(value):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{name}[{i}] must be an int, got {v!r}.")
        if v < at_least[0]:
            raise ValueError(f"{name}[{i}] must be at least {at_least[1]}, got {v!r}.")
        out.append(int(v))
    if len(set(out)) != len(out):
        raise ValueError(f"{name} holds a value twice: {tuple(value)!r}.")
    return tuple(out)


def _positive_reals(value, name):
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be a sequence of positive numbers, got {value!r}.")
    out = []
    for i, v in enumerate(value):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            raise TypeError(f"{name}[{i}] must be a number, got {v!r}.")
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"{name}[{i}] must be a finite positive number, got {v!r}.")
        out.append(float(v))
    if not out:
        raise ValueError(f"{name} is empty.")
    return tuple(out)


def _check(cfg):
    """The settings, checked and normalised, before any work."""
    for name in ("n_features", "n_train", "n_steps", "batch_size", "record_every", "n_test"):
        check_positive_int(cfg[name], name)
    check_positive_int(cfg.n_tune, "n_tune")
    d = cfg.n_features
    lr = cfg.learning_rate
    if isinstance(lr, (bool, np.bool_)) or not isinstance(lr, numbers.Real):
        raise TypeError(f"learning_rate must be a number, got {lr!r}.")
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"learning_rate must be a finite positive number, got {lr!r}.")
    aniso = _positive_reals(cfg.anisotropic, "anisotropic")
    if len(aniso) != d:
        raise ValueError(
            f"anisotropic must hold n_features={d} variances, got {len(aniso)}: {aniso!r}."
        )
    train = _lengths(cfg.train_lengths, "train_lengths", (d, f"n_features={d}"))
    tests = _lengths(cfg.test_lengths, "test_lengths", (1, 1))
    if len(tests) < 3:
        raise ValueError(
            f"test_lengths must hold at least 3 lengths (a line is fitted to the best N per M), "
            f"got {tests!r}."
        )
    for name, lengths in (("train_lengths", train), ("test_lengths", tests)):
        if cfg.n_train not in lengths:
            raise ValueError(
                f"n_train={cfg.n_train} must be one of {name}={lengths} (panels 2 and 3 read "
                "the layer trained at N, the covariate shift at M = N)."
            )
    scales = _positive_reals(cfg.scales, "scales")
    return cfg.replace(anisotropic=aniso, train_lengths=train, test_lengths=tests, scales=scales)


# -- the experiment --------------------------------------------------------------------------
def in_context_regression(
    settings=None, *, device="cpu", random_state=0, seeds=None, progress=True, **changes
):
    """The trained linear self-attention layer beside the theory of in-context regression.

    Parameters
    ----------
    settings : InContextSettings, mapping or None, default=None
        The law, the training and the grids (None: the defaults).
    device : str, default="cpu"
        The layer's device (``"auto"``, ``"cpu"``, ``"cuda"``).
    random_state : int, default=0
        The seed of a one-seed run (unused when ``seeds`` is given).
    seeds : sequence of int or None, default=None
        Several seeds in one call: a list of results, one per seed, each
        equal to the one-seed run of that seed.
    progress : bool, default=True
        Progress bars over each study's fits.
    **changes
        Settings of :class:`InContextSettings` to change
        (``in_context_regression(n_steps=200)``).

    Returns
    -------
    InContextResult or list of InContextResult
        One result (``random_state``), or one per seed of ``seeds``, in order.

    Raises
    ------
    TypeError, ValueError
        For a setting or seed out of range (naming it), before any fit.
    """
    cfg = _check(InContextSettings.resolve(settings, changes))
    batch = seeds is not None
    seeds = check_seeds(list(seeds) if batch else [random_state])
    convergence, lengths, baselines = studies(cfg, seeds, device=device, progress=progress)
    theory = _theory(cfg)
    results = [
        _result(cfg, seed, convergence, lengths, baselines, theory, device) for seed in seeds
    ]
    return results if batch else results[0]


def _laws(cfg):
    return {"isotropic": np.ones(cfg.n_features), "anisotropic": np.asarray(cfg.anisotropic)}


def studies(cfg, seeds, *, device="cpu", progress=False):
    """The experiment's three studies, over every seed: its whole computation.

    Inside :func:`~stsq_learn.studies.planning` it records the work and
    returns empty tables (the record's plan).

    Parameters
    ----------
    cfg : InContextSettings
        Checked settings.
    seeds : tuple of int
        The seeds.
    device : str, default="cpu"
        The layer's device.
    progress : bool, default=False
        Progress bars.

    Returns
    -------
    convergence, lengths, baselines : StudyTable
        Panel 1's measurements (with the column ``law``), the layer at every
        training and test length, and the baselines at every test length.
    """
    d, N = cfg.n_features, cfg.n_train
    layer = LinearAttentionRegressor(
        learning_rate_init=cfg.learning_rate, batch_size=cfg.batch_size, device=device
    )
    common = dict(seeds=seeds, n_steps=cfg.n_steps, device=device, progress=progress)
    parts = []
    for name, variances in _laws(cfg).items():
        part = training_curve(
            {LAYER: layer},
            InContextRegressionTask(N + 1, d, covariance=tuple(variances)),
            {"preconditioner_error": preconditioner_error},
            every=cfg.record_every,
            **common,
        )
        parts.append(part.with_columns(law=[name] * len(part)))
    task = InContextRegressionTask(N + 1, d)
    lengths = length_curve(
        {LAYER: layer},
        task,
        [m + 1 for m in cfg.test_lengths],
        grid={"seq_len": [n + 1 for n in cfg.train_lengths]},
        n_test=cfg.n_test,
        scoring={"risk": prompt_risk, "fitted_risk": fitted_risk, **_scale_scorers(cfg.scales)},
        batch_seeds=True,
        **common,
    )
    baselines = sweep(
        {BASELINES[0]: PromptRidge(), BASELINES[1]: PromptGradientStep()},
        task,
        {"seq_len": [m + 1 for m in cfg.test_lengths]},
        seeds=seeds,
        n_train=cfg.n_tune,
        n_test=cfg.n_test,
        scoring={"risk": prompt_risk, **_scale_scorers(cfg.scales)},
        progress=progress,
    )
    return StudyTable.concat(parts), lengths, baselines


def _theory(cfg):
    d, N = cfg.n_features, cfg.n_train
    ones = np.ones(d)
    A = in_context_preconditioner(N, ones)
    gd = {m: in_context_gd_step(m, ones) for m in cfg.test_lengths}
    return {
        "preconditioner": {k: in_context_preconditioner(N, v) for k, v in _laws(cfg).items()},
        "g": 1 + (d + 1) / N,
        "risk": {m: in_context_risk(m, N, ones) for m in cfg.test_lengths},
        "gd_risk": {
            m: in_context_risk(m, m, ones, preconditioner=gd[m] * np.eye(d))
            for m in cfg.test_lengths
        },
        "gd_step": gd,
        "least_squares_risk": {m: in_context_least_squares_risk(m, ones) for m in cfg.test_lengths},
        "slope": {c: in_context_slope(N, c * c * ones, preconditioner=A) for c in cfg.scales},
        "shift_risk": {
            c: in_context_risk(N, N, c * c * ones, preconditioner=A) for c in cfg.scales
        },
    }


def _result(cfg, seed, convergence, lengths, baselines, theory, device):
    """One seed's result: its rows of every table, the best N per M and its line."""
    mine = {
        "convergence": convergence.where(seed=seed),
        "lengths": lengths.where(seed=seed),
        "baselines": baselines.where(seed=seed),
    }
    rows = mine["lengths"]
    best_n = []
    for m in cfg.test_lengths:
        at = rows.where(eval_seq_len=m + 1)
        n_train, risk = at.xy("param_seq_len", "fitted_risk")
        best_n.append(int(n_train[int(np.argmin(risk))]) - 1)
    best = StudyTable(
        {
            "seed": [seed] * len(best_n),
            "n_test": list(cfg.test_lengths),
            "best_n_train": best_n,
            "theory": list(cfg.test_lengths),
        }
    )
    law = fit_law(cfg.test_lengths, best_n, law="linear").to_dict()
    config = {**{k: jsonable(v) for k, v in dict(cfg).items()}, "seed": seed, "device": device}
    return InContextResult(config=config, theory=theory, best=best, law=law, **mine)
