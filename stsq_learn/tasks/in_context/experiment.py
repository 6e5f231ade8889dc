"""The in-context regression experiment: a trained linear attention layer beside the closed
forms of Zhang, Frei and Bartlett (JMLR 2024) (:mod:`.theory`, :func:`in_context_regression`)."""

import functools
import math

import numpy as np

from ...experiments import Experiment, Settings
from ...experiments._common import new_axes
from ...experiments._result import band_text, last_step
from ...experiments._settings import COUNTS, POSITIVE, SequenceOf, positive_ints
from ...studies import BandDisplay, Law, StudyTable, fit_laws, length_curve, sweep, training_curve
from .baselines import PromptGradientStep, PromptRidge
from .estimators import LinearAttentionRegressor
from .task import InContextRegressionTask
from .theory import in_context_gd_step, in_context_preconditioner, in_context_risk, in_context_slope

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
    n_features, n_train : int, default=5, 20
        d, and N of panels 1 to 4 (one of ``train_lengths`` and ``test_lengths``).
    anisotropic : tuple of float, default=(2.0, 1.5, 1.0, 0.5, 0.25)
        The d variances of panel 1's anisotropic ``Lambda`` (elsewhere ``I``).
    n_steps, learning_rate, batch_size : int, float, int, default=1000, 0.01, 256
        The online Adam steps of every fit, their size and their fresh prompts.
    record_every : int, default=25
        Steps between two measurements of panel 1.
    train_lengths, test_lengths : tuple of int, default=(5, 10, 20, 40, 80)
        The N of panel 5 (each at least d, to lengthen a prompt) and the M of
        panels 2 and 5 (at least 3), increasing.
    scales : tuple of float, default=(0.5, 1.0, 2.0, 3.0)
        The covariate scales c of panels 3 and 4, at ``M = N``.
    n_test, n_tune : int, default=10000, 4000
        Held-out prompts per fit and seed; the tuned step's prompts at each M.

    Examples
    --------
    >>> from stsq_learn.experiments import InContextSettings
    >>> InContextSettings().replace(n_steps=200).n_steps
    200
    """

    _parameter_constraints = {
        **dict.fromkeys(("n_features", "n_train", "n_steps", "batch_size"), COUNTS),
        **dict.fromkeys(("record_every", "n_test", "n_tune"), COUNTS),
        **{key: [SequenceOf(POSITIVE)] for key in ("anisotropic", "scales")},
        "learning_rate": [POSITIVE],
        "train_lengths": [positive_ints(increasing=True)],
        "test_lengths": [positive_ints(min_len=3, increasing=True)],
    }

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

    def _validate(self):
        d = self.n_features
        if len(self.anisotropic) != d:
            raise ValueError(
                f"anisotropic must hold n_features={d} variances, got {self.anisotropic!r}."
            )
        if self.train_lengths[0] < d:
            raise ValueError(
                f"train_lengths must be at least n_features={d} (a held-out prompt must "
                f"determine its w to be lengthened), got {self.train_lengths!r}."
            )
        for name in ("train_lengths", "test_lengths"):
            if self.n_train not in self[name]:
                raise ValueError(
                    f"n_train={self.n_train} must be one of {name}={self[name]} (panels 2 and 3 "
                    "read the layer trained at N, the covariate shift at M = N)."
                )


# The measures and scorers are module-level: a study may run them in worker processes.
def preconditioner_error(estimator):
    """``||A - Gamma^{-1}||_F / ||Gamma^{-1}||_F`` of a fitted layer's ``preconditioner_`` A."""
    task = estimator.task_
    target = in_context_preconditioner(task.n_examples, task.covariance_matrix)
    return float(np.linalg.norm(estimator.preconditioner_ - target) / np.linalg.norm(target))


def prompt_risk(estimator, X, y):
    """Mean squared error of the prediction against the queries' clean labels (a scorer)."""
    return float(np.mean((estimator.predict(X) - y) ** 2))


def fitted_risk(estimator, X, y):
    """The exact risk of the fitted preconditioner at ``X``'s length (a scorer)."""
    A, L = estimator.preconditioner_, estimator.task_.covariance_matrix
    return in_context_risk(X.shape[1] - 1, np.inf, L, preconditioner=A)


class CovariateShift:
    """A scorer of the covariate shift ``x -> c x``: a noiseless prompt's every covariate and
    label scaled (the law of covariance ``c^2 Lambda``); NaN off the model's training length.

    Parameters
    ----------
    scale : float
        ``c``.
    what : {"slope", "risk"}
        The prediction's regression slope on the target, or its mean squared error.
    """

    def __init__(self, scale, what):
        self.scale, self.what = scale, what

    def __call__(self, estimator, X, y):
        if X.shape[1] != estimator.seq_len_:
            return math.nan
        target = self.scale * np.asarray(y, dtype=np.float64)
        pred = estimator.predict(self.scale * np.asarray(X))
        if self.what == "slope":
            return float(pred @ target / (target @ target))
        return float(np.mean((pred - target) ** 2))


def run(cfg, seeds, *, device=None, progress=False, n_jobs=None):
    """The three studies over every seed: ``convergence`` (per ``law``), ``lengths`` (the layer
    at every training and test length, its seeds one batched model), ``baselines``."""
    d, N = cfg.n_features, cfg.n_train
    layer = LinearAttentionRegressor(
        learning_rate_init=cfg.learning_rate, batch_size=cfg.batch_size
    )
    if device is not None:
        layer.set_params(device=device)
    shift = {f"{w}_c{c:g}": CovariateShift(c, w) for c in cfg.scales for w in ("slope", "risk")}
    common = dict(seeds=seeds, n_jobs=n_jobs, progress=progress)
    fits = dict(n_steps=cfg.n_steps, **common)
    measures, parts = {"preconditioner_error": preconditioner_error}, []
    for law, variances in zip(LAWS, (np.ones(d), cfg.anisotropic)):
        task = InContextRegressionTask(N + 1, d, covariance=tuple(variances))
        curve = dict(every=cfg.record_every, batch_seeds=True)
        part = training_curve({LAYER: layer}, task, measures, **curve, **fits)
        parts.append(part.with_columns(law=[law] * len(part)))
    task, tests = InContextRegressionTask(N + 1, d), [m + 1 for m in cfg.test_lengths]
    scoring = {"risk": prompt_risk, "fitted_risk": fitted_risk, **shift}
    grid = {"seq_len": [n + 1 for n in cfg.train_lengths]}
    kw = dict(grid=grid, n_test=cfg.n_test, scoring=scoring, batch_seeds=True)
    lengths = length_curve({LAYER: layer}, task, tests, **kw, **fits)
    baselines = {BASELINES[0]: PromptRidge(), BASELINES[1]: PromptGradientStep()}
    kw = dict(n_train=cfg.n_tune, n_test=cfg.n_test, scoring={"risk": prompt_risk, **shift})
    baselines = sweep(baselines, task, {"seq_len": tests}, **kw, **common)
    return {"convergence": StudyTable.concat(parts), "lengths": lengths, "baselines": baselines}


def closed_forms(settings):
    """The theory of some settings: per test length M ``risk`` (the layer trained at N) and
    ``gd_risk`` (the step tuned to M); per scale c at M = N ``slope`` (c^2 / g), ``shift_risk``."""
    cfg = InContextSettings.resolve(settings)
    d, N, tests, scales = cfg.n_features, cfg.n_train, cfg.test_lengths, cfg.scales
    ones, A = np.ones(d), in_context_preconditioner(N, np.ones(d))
    gd = {m: in_context_gd_step(m, ones) * np.eye(d) for m in tests}
    return {
        "risk": {m: in_context_risk(m, N, ones) for m in tests},
        "gd_risk": {m: in_context_risk(m, m, ones, preconditioner=gd[m]) for m in tests},
        "slope": {c: in_context_slope(N, c * c * ones, preconditioner=A) for c in scales},
        "shift_risk": {c: in_context_risk(N, N, c * c * ones, preconditioner=A) for c in scales},
    }


def final_error(result, law):
    """The last ``preconditioner_error`` of ``law`` (one seed's view; the median over seeds)."""
    last = last_step(result.tables["convergence"].where(law=law))
    return float(np.median(last["preconditioner_error"]))


def at_train_length(result):
    """The ``lengths`` rows of the layer trained at ``n_train``, with ``n_test`` (M)."""
    rows = result.tables["lengths"].where(seq_len=result.settings["n_train"] + 1)
    return rows.with_columns(n_test=[int(v) - 1 for v in rows["eval_seq_len"]])


def values_of(result, column, model=LAYER):
    """``{x: value}`` of ``model`` in one seed's view: ``"risk"`` or ``"fitted_risk"`` per test
    length M, the covariate shift's ``"slope"`` or ``"risk_shift"`` per scale c (at M = N)."""
    if column in ("slope", "risk_shift"):
        rows = _shift_rows(result, model)
        return dict(zip(rows["scale"].tolist(), rows[column.split("_")[0]].tolist()))
    if model == LAYER:
        rows = at_train_length(result)
        return dict(zip(rows["n_test"].tolist(), rows[column].tolist()))
    rows = result.tables["baselines"].where(model=model)
    return {int(L) - 1: float(v) for L, v in zip(rows["param_seq_len"], rows[column])}


def _shift_rows(result, model):
    """Rows ``model, seed, scale, slope, risk`` of the covariate shift at ``M = N``."""
    N = result.settings["n_train"]
    if model == LAYER:
        rows = result.tables["lengths"].where(seq_len=N + 1, eval_seq_len=N + 1)
    else:
        rows = result.tables["baselines"].where(model=model, seq_len=N + 1)
    at = [(i, float(c)) for i in range(len(rows)) for c in result.settings["scales"]]
    columns = {"model": [model] * len(at), "seed": [int(rows["seed"][i]) for i, _ in at]}
    columns["scale"] = [c for _, c in at]
    for what in ("slope", "risk"):
        columns[what] = [float(rows[f"{what}_c{c:g}"][i]) for i, c in at]
    return StudyTable(columns)


def best_lengths(result):
    """A table of ``seed``, ``n_test`` (M) and ``best_n_train``: the training length N of least
    exact risk at each M (theory N = M)."""
    rows = []
    for (seed, m), part in result.tables["lengths"].groups("seed", "eval_seq_len"):
        n_train, risk = part.xy("param_seq_len", "fitted_risk")
        rows.append((seed, int(m) - 1, int(n_train[int(np.argmin(risk))]) - 1))
    return StudyTable(dict(zip(("seed", "n_test", "best_n_train"), zip(*rows))))


def best_length_laws(result):
    """Per seed, the line ``N = a + b M`` fitted to :func:`best_lengths` (theory ``b = 1``)."""
    return fit_laws(best_lengths(result), "n_test", "best_n_train", "linear")


def headline(result):
    """One seed's numbers: ``precond_error_<law>``, per M ``risk_ratio_M<M>`` (over the formula)
    and ``best_n_M<M>``, ``best_n_slope``, ``gd_over_layer_at_N``, per c ``slope_c<c>``, and at
    the largest c ``slope_ratio`` (over ``c^2 / g``) and ``least_squares_slope_c<c>``."""
    th, N = closed_forms(result.settings), result.settings["n_train"]
    out = {f"precond_error_{law}": final_error(result, law) for law in LAWS}
    risk = values_of(result, "risk")
    out |= {f"risk_ratio_M{m}": value / th["risk"][m] for m, value in sorted(risk.items())}
    best = best_lengths(result)
    out |= {f"best_n_M{int(m)}": float(n) for m, n in zip(best["n_test"], best["best_n_train"])}
    (law,) = best_length_laws(result).values()
    out["best_n_slope"] = math.nan if law is None else law.params["b"]
    out["gd_over_layer_at_N"] = values_of(result, "risk", BASELINES[1])[N] / risk[N]
    slope = values_of(result, "slope")
    out |= {f"slope_c{c:g}": value for c, value in slope.items()}
    out["slope_ratio"] = slope[max(slope)] / th["slope"][max(slope)]
    ls = values_of(result, "slope", BASELINES[0])
    out[f"least_squares_slope_c{max(ls):g}"] = ls[max(ls)]
    return out


def summary(result):
    """Summary rows: the convergence, the risk against the formula, the slopes, the best N."""
    c, th = result.settings, closed_forms(result.settings)
    band = functools.partial(band_text, result.bands())
    slopes = ", ".join(
        f"c={s:g}: {band(f'slope_c{s:g}')} ({th['slope'][s]:.3f})" for s in c["scales"]
    )
    best = ", ".join(f"M={m}: {band(f'best_n_M{m}', 2)}" for m in c["test_lengths"])
    return [
        f"| in_context_regression (d={c['n_features']}, N={c['n_train']}, {c['n_steps']} steps) "
        f"| preconditioner's error to Gamma^-1, isotropic / anisotropic | "
        f"{band('precond_error_isotropic')} / {band('precond_error_anisotropic')} |",
        *(
            f"| | risk at M={m} over the formula's {th['risk'][m]:.4f} | "
            f"{band(f'risk_ratio_M{m}')} |"
            for m in c["test_lengths"]
        ),
        f"| | slope under covariate scale c, measured (theory c^2/g) | {slopes} |",
        f"| | best training N per test M (theory N = M) | {best} |",
        f"| | slope of the line N = a + b M (theory 1) | {band('best_n_slope')} |",
    ]


def figure(result, axes=None):
    """The five panels of ``result.plot(axes)`` (None: a new figure, two panels a row)."""
    fig, (ax1, ax2, ax3, ax4, ax5) = new_axes(axes, 5)
    c, th = result.settings, closed_forms(result.settings)
    d, N = c["n_features"], c["n_train"]
    tests, scales = (np.array(c[k], dtype=float) for k in ("test_lengths", "scales"))
    per_m = dict(x="n_test", logx=True, xlabel="test examples M")
    per_c = dict(x="scale", xlabel="covariate scale c")
    title = f"1. Convergence to Gamma^-1 (N = {N})"
    kw = dict(x="step", y="preconditioner_error", hue="law", logy=True, title=title)
    kw["ylabel"] = "||A - Gamma^-1||_F / ||Gamma^-1||_F"
    BandDisplay.from_table(result.tables["convergence"], ax=ax1, **kw)
    ax1.axhline(0.05, color="0.6", ls=":", lw=1, label="5%")
    ax1.legend(fontsize="small")
    label, layer = f"{LAYER} (N = {N})", at_train_length(result)
    baselines = result.tables["baselines"]
    baselines = baselines.with_columns(n_test=[int(v) - 1 for v in baselines["param_seq_len"]])
    rows = StudyTable.concat([layer.with_columns(model=[label] * len(layer)), baselines])
    grid = np.arange(int(tests.min()), int(tests.max()) + 1)
    theory = {label: (grid, [in_context_risk(int(m), N, np.ones(d)) for m in grid])}
    theory[BASELINES[1]] = (tests, [th["gd_risk"][m] for m in c["test_lengths"]])
    kw = dict(ylabel="risk E(y_hat - <w, x_q>)^2", title="2. Risk against the test length")
    BandDisplay.from_table(rows, y="risk", theory=theory, ax=ax2, **kw, **per_m)
    ax2.axvline(N, color="0.6", ls=":", lw=1)
    shifted = StudyTable.concat([_shift_rows(result, LAYER), _shift_rows(result, BASELINES[0])])
    theory = {"theory c^2 / g": (scales, [th["slope"][s] for s in c["scales"]])}
    kw = dict(ylabel="slope of y_hat on <w, x_q>", title=f"3. Covariate shift: slope (M = N = {N})")
    BandDisplay.from_table(shifted, y="slope", theory=theory, ax=ax3, **kw, **per_c)
    kw = dict(logy=True, ylabel="risk", title="4. Covariate shift: risk (least squares: 0)")
    kw["theory"] = {LAYER: (scales, [th["shift_risk"][s] for s in c["scales"]])}
    BandDisplay.from_table(shifted.where(model=LAYER), y="risk", ax=ax4, **kw, **per_c)
    kw = dict(laws=Law.median(best_length_laws(result)), law_variable="M", logy=True)
    kw.update(ylabel="best training examples N", title="5. Best training length per test length")
    kw["theory"] = {"theory N = M": (tests, tests)}
    BandDisplay.from_table(best_lengths(result), y="best_n_train", ax=ax5, **kw, **per_m)
    return fig


PROVENANCE = {
    "task": "paper: w ~ N(0, I_d) per prompt, x_i and x_q ~ N(0, Lambda), y_i = <w, x_i>, "
    "no label noise; the error against <w, x_q>",
    "model": "paper: one linear self-attention layer f(E) = E + W^PV E (E^T W^KQ E) / M, "
    "its initialisation W^PV = s [0 0; 0 1], W^KQ = s [T T^T 0; 0 0] and the condition "
    "s^2 ||Gamma||_op sqrt(d) < 2",
    "theory (Gamma^{-1}, the risk formula)": "paper: the global minimum u U = Gamma^{-1}, "
    "Gamma = (1 + 1/N) Lambda + (tr Lambda / N) I (their Theorem 4.1), and the prediction's "
    "risk at M examples; the risk of any preconditioner, the tuned gradient step's and least "
    "squares' risks in closed form are ours (the same computation)",
    "covariate shift": "paper: covariates scaled by c at test are not tolerated, the slope "
    "c^2 / g; measured at M = N, and the scaling of the held-out prompts, are ours",
    "training": "ours: Adam (lr 0.02 at tiny, 0.01 above; 256 fresh prompts a step at tiny "
    "and quick, 2000 at full) on the reduced parametrisation (u and U), init_scale 'auto' "
    "(half the bound); the paper proves gradient flow on the population loss",
    "n_features, n_train": "ours: d = 5, N = 20 (the setting of the reference values we "
    "checked by Monte Carlo)",
    "anisotropic": "ours: Lambda = diag(2, 1.5, 1, 0.5, 0.25)",
    "n_steps": "ours: 200 / 1000 / 3000 (tiny / quick / full)",
    "train_lengths, test_lengths": "ours: N and M in 5, 10, 20, 40, 80 (tiny: 5, 10, 20)",
    "scales": "ours: c = 0.5, 1, 2, 3",
    "baselines": "ours: per-prompt least squares (PromptRidge) and one gradient step from 0 "
    "with its step fitted at each M (PromptGradientStep, on n_tune prompts)",
    "best training length": "ours: the N of least exact risk of the fitted preconditioner "
    "at each M, and the line fitted to them",
    "seeds": "ours: 3 at tiny and quick, the fits of all seeds in one call of each study",
}
"""Setting -> ``"paper: ..."`` or ``"ours: ..."``: where each setting comes from."""

RECORD = Experiment(
    name="in_context_regression",
    function_name="in_context_regression",
    doc="""The trained linear self-attention layer beside the theory of in-context regression.

    One :class:`~stsq_learn.LinearAttentionRegressor` trained online on prompts of N examples,
    beside the closed forms: its convergence to ``Gamma^{-1}``; its risk at M test examples
    beside least squares and the step tuned to each M (meeting the layer at ``M = N``); its
    slope ``c^2 / g`` and risk with every covariate scaled by ``c``; the N of least risk at each
    M (theory ``N = M``). Settings: :class:`InContextSettings`.

    Examples
    --------
    >>> from stsq_learn.experiments import in_context_regression
    >>> result = in_context_regression("tiny", seeds=2, n_steps=40, n_test=300,
    ...                                n_tune=300)
    >>> sorted(result.tables), result.seeds
    (['baselines', 'convergence', 'lengths'], (0, 1))
    >>> sorted(result.bands())[:3]
    ['best_n_M10', 'best_n_M20', 'best_n_M5']
    >>> len(result.bands()["precond_error_isotropic"]["values"])
    2
    """,
    settings=InContextSettings,
    provenance=PROVENANCE,
    presets={
        "tiny": dict(n_steps=200, learning_rate=0.02, record_every=20, n_test=2000, n_tune=2000)
        | dict.fromkeys(("train_lengths", "test_lengths"), (5, 10, 20)),
        "quick": {},
        "full": dict(n_steps=3000, batch_size=2000, record_every=50, n_test=30_000, n_tune=20_000),
        "gpu": "full",  # the layer is small: the same work on any device
    },
    # A relative error of a few percent moves by about 0.01 with the rounding of another
    # machine; a broken layer stays near 1. The best N moves in steps of a factor 2.
    reference_atol={"precond_error_*": 0.02, "best_n_slope": 0.5},
    reference_rtol={"best_n_M*": 1.0},
)
in_context_regression = RECORD.function
