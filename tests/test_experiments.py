import json

import matplotlib
import numpy as np
import pytest
import torch
from sklearn.base import clone

from stsq_learn import (
    FCNSelector,
    SparseTokenSelectionTask,
    SparseTokenSelector,
    isotropic_floor,
)
from stsq_learn.experiments import (
    EXPERIMENTS,
    PRESETS,
    ConvergenceResult,
    CurveSettings,
    EncodingsResult,
    EncodingsSettings,
    LengthGeneralizationResult,
    LengthGeneralizationSettings,
    SeparationResult,
    WidthSeparationSettings,
    encoding_families,
    length_generalization,
    reproduce,
    summary_table,
    training_dynamics,
    width_separation,
    width_separation_by_q,
)
from stsq_learn.experiments._common import StepProgress
from stsq_learn.experiments._reproduce import resolve_experiments
from stsq_learn.experiments._width_search import fit_growth_law, fit_power_law

matplotlib.use("Agg")

TINY = PRESETS["tiny"]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # The experiments' models are tiny: one thread avoids oversubscribing a busy CPU.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def convergence():
    return training_dynamics(**TINY["convergence"], device="cpu", random_state=0)


@pytest.fixture(scope="module")
def length():
    return length_generalization(**TINY["length_generalization"], device="cpu", random_state=0)


# One width_separation curve at the tiny size (the record runs two: width_separation_by_q).
SEPARATION_CURVE = dict(
    seq_lens=(4, 8),
    n_features=2,
    n_selected=2,
    target_r2=0.5,
    transformer=SparseTokenSelector(
        solver="adam", learning_rate_init=0.1, learning_rate="constant", batch_size=256
    ),
    fcn=FCNSelector(
        solver="adam", learning_rate_init=0.01, learning_rate="constant", batch_size=1024
    ),
    widths={"transformer": (4, 8), "fcn": (4, 8)},
    n_steps={"transformer": 20, "fcn": 20},
    n_val=200,
)


@pytest.fixture(scope="module")
def separation():
    return width_separation(**SEPARATION_CURVE, device="cpu", random_state=0)


@pytest.fixture(scope="module")
def separation_by_q():
    return width_separation_by_q(**TINY["separation"], device="cpu", random_state=0)


@pytest.fixture(scope="module")
def encodings():
    return encoding_families(**TINY["encodings"], device="cpu", random_state=0)


def _axis_labels(fig):
    return [(ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes if ax.get_label() != "<colorbar>"]


def test_training_dynamics_records_every_step(convergence):
    res = convergence
    n = TINY["convergence"]["n_steps"]
    assert isinstance(res, ConvergenceResult)
    assert res.steps == list(range(n + 1))
    assert len(res.loss) == len(res.cos) == len(res.gamma) == len(res.token_norm) == n + 1
    # W starts at 0: no alignment, no scale.
    assert res.cos[0] == 0.0 and res.gamma[0] == 0.0 and res.token_norm[0] == 0.0
    # Plain gradient descent aligns W_pp with the identity, with a growing scale.
    assert res.cos[-1] > 0.9
    assert res.gamma[-1] > res.gamma[n // 2] > 0
    assert res.loss[-1] < res.loss[0]
    m = TINY["convergence"]["estimator"].width
    assert res.positional_block.shape == (m, m)
    assert res.token_block.shape == (TINY["convergence"]["n_features"], m)
    assert -1 <= res.test_r2 <= 1
    assert res.config["solver"] == "sgd"
    assert res.config["token_block_rates"] == [1.0, "auto"]


def test_training_dynamics_runs_the_papers_algorithm_beside_the_preconditioned(convergence):
    res = convergence
    m = TINY["convergence"]["estimator"].width
    assert list(res.runs) == ["same_step", "preconditioned"]
    same, pre = res.runs["same_step"], res.runs["preconditioned"]
    assert (same.token_block_rate, same.token_block_rate_) == (1.0, 1.0)
    assert (pre.token_block_rate, pre.token_block_rate_) == ("auto", 1.0 / m)
    assert same.label == "every block at the same step (the paper's algorithm)"
    assert pre.label == f"token rows at 1/{m} of the step (preconditioned, ours)"
    # The headline (top-level curves) is the paper's algorithm.
    assert res.cos is same.cos and res.token_norm is same.token_norm
    assert res.final == {"step": TINY["convergence"]["n_steps"], **same.final}
    # One seed for both: the same first batch from W = 0, then different token rows.
    assert same.loss[0] == pre.loss[0]
    assert same.token_norm[-1] > 2 * pre.token_norm[-1] > 0


def test_training_dynamics_one_run_with_the_estimators_own_rate():
    est = SparseTokenSelector(4, solver="sgd", learning_rate_init=1.0, token_block_rate=0.5)
    res = training_dynamics(
        seq_len=6, n_features=2, n_selected=2, estimator=est, n_steps=3, token_block_rates=None
    )
    assert list(res.runs) == ["token_rate_0.5"]
    assert res.runs["token_rate_0.5"].label == "token rows at 0.5 times the step"
    assert res.config["token_block_rates"] == [0.5]


@pytest.mark.parametrize(
    ("rates", "error", "match"),
    [
        (1.0, TypeError, "token_block_rates must be a sequence .* got 1.0"),
        ("auto", TypeError, "token_block_rates must be a sequence .* got 'auto'"),
        ((), ValueError, "at least one rate, got an empty sequence"),
        ((1.0, 0.0), ValueError, r"token_block_rates\[1\] must be a positive finite .* got 0.0"),
        ((-1,), ValueError, r"token_block_rates\[0\] .* got -1"),
        ((float("nan"),), ValueError, r"token_block_rates\[0\] .* got nan"),
        ((True,), ValueError, r"token_block_rates\[0\] .* got True"),
        (("fast",), ValueError, r"token_block_rates\[0\] .* got 'fast'"),
        ((1.0, 1), ValueError, r"must not repeat a rate, got \(1.0, 1\)"),
    ],
)
def test_training_dynamics_rejects_bad_token_block_rates(rates, error, match):
    with pytest.raises(error, match=match):
        training_dynamics(n_steps=1, token_block_rates=rates)


@pytest.mark.slow
def test_training_dynamics_token_norm_under_the_papers_algorithm():
    # The case: T=16, d=8, q=3, width 64, 300 steps at step 1. Every block at
    # the same step ends with a token block 8x larger than the preconditioned run's.
    est = SparseTokenSelector(
        64, solver="sgd", learning_rate_init=1.0, learning_rate="constant", batch_size=256
    )
    res = training_dynamics(
        seq_len=16,
        n_features=8,
        n_selected=3,
        estimator=est,
        n_steps=300,
        n_test=200,
        device="cpu",
        random_state=0,
    )
    same, pre = res.runs["same_step"].final, res.runs["preconditioned"].final
    assert same["token_norm"] == pytest.approx(0.535, abs=0.01)
    assert pre["token_norm"] == pytest.approx(0.067, abs=0.005)
    for f in (same, pre):
        assert f["cos"] > 0.998 and f["gamma"] == pytest.approx(2.63, abs=0.02)


def test_training_dynamics_record_every():
    res = training_dynamics(
        seq_len=6,
        n_features=2,
        n_selected=2,
        estimator=SparseTokenSelector(4, solver="sgd", learning_rate_init=1.0),
        n_steps=10,
        record_every=4,
        n_test=50,
    )
    assert res.steps == [0, 4, 8, 10]


def test_convergence_to_dict_and_plot(convergence):
    d = json.loads(json.dumps(convergence.to_dict()))
    assert {"config", "steps", "loss", "cos", "gamma", "final"} <= set(d)
    assert "positional_block" not in d
    assert d["final"]["cos"] == pytest.approx(convergence.cos[-1])
    assert list(d["runs"]) == ["same_step", "preconditioned"]
    assert d["runs"]["same_step"]["cos"] == d["cos"]
    pre = d["runs"]["preconditioned"]
    assert pre["token_block_rate"] == "auto" and pre["final"]["token_norm"] == pre["token_norm"][-1]
    fig = convergence.plot()
    assert len(_axis_labels(fig)) == 4
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert labels == [run.label for run in convergence.runs.values()]
    labels = fig.axes[1].get_legend_handles_labels()[1]
    assert labels == ["same step (paper's)", "preconditioned (ours)", "identity direction"]
    assert all(x and y for x, y in _axis_labels(fig))
    assert fig.axes[0].get_yscale() == "log"
    matplotlib.pyplot.close(fig)


def test_convergence_record_headline_provenance_and_summary(convergence):
    from stsq_learn.experiments._records import convergence as record

    numbers = record.headline(convergence)
    assert list(numbers) == [
        f"{run}.{key}"
        for run in ("same_step", "preconditioned")
        for key in ("cos", "gamma", "token_norm")
    ]
    assert numbers["same_step.token_norm"] == convergence.runs["same_step"].token_norm[-1]
    assert numbers["preconditioned.gamma"] == convergence.runs["preconditioned"].gamma[-1]
    assert all(type(v) is float for v in numbers.values())
    assert all(v.startswith(("paper: ", "ours: ")) for v in record.PROVENANCE.values())
    assert record.PROVENANCE["batch"].startswith("paper: a fresh batch of n = 256")
    for setting in ("learning_rate_init", "width", "n_steps", "token_block_rate"):
        assert record.PROVENANCE[setting].startswith("ours: ")
    rows = []
    record.summary_rows(rows, convergence)
    assert len(rows) == 8
    assert rows[0].startswith("| convergence (T=8, d=2, q=2, m=8; every block at the same step")
    assert "token rows at 1/8 of the step (preconditioned, ours)" in rows[4]


def test_length_generalization_structure(length):
    res = length
    assert isinstance(res, LengthGeneralizationResult)
    assert res.eval_lengths == [8, 16]
    assert res.models == [
        "stochastic",
        "stochastic, 4 draws",
        "stochastic, log scale",
        "stochastic, floor scale",
        "fixed",
        "fixed, floor scale",
        "stochastic, trained on 4..8, log scale",
    ]
    assert set(res.r2) == {"val_128", "val_large"}
    for curves in res.r2.values():
        assert set(curves) == set(res.models)
        assert all(len(v) == 2 and all(np.isfinite(v)) for v in curves.values())
    assert res.at("fixed", 2) == res.r2["val_large"]["fixed"][1]
    assert set(res.train_r2) == {"stochastic", "fixed", "stochastic, trained on 4..8, log scale"}
    assert res.floor_r2 is None  # the tiny preset skips the floor
    d = json.loads(json.dumps(res.to_dict()))
    assert d["eval_lengths"] == [8, 16]
    fig = res.plot()
    assert len(fig.axes) == 2 and len(fig.legends) == 1  # one legend, below both panels
    assert all(ax.get_xscale() == "log" for ax in fig.axes)
    matplotlib.pyplot.close(fig)


def test_length_generalization_is_reproducible():
    kwargs = {**TINY["length_generalization"], "n_steps": 5, "n_val_large": 100}
    first = length_generalization(**kwargs, device="cpu", random_state=3)
    again = length_generalization(**kwargs, device="cpu", random_state=3)
    assert again.r2 == first.r2


def test_length_generalization_takes_its_settings_and_changes_to_them():
    preset = TINY["length_generalization"]
    assert type(preset) is LengthGeneralizationSettings
    res = length_generalization(preset, n_steps=2, n_val_large=50, device="cpu")
    assert res.config["n_steps"] == 2 and res.config["n_val_large"] == 50
    # The rest is the preset's, which the change leaves as it was.
    assert res.config["seq_len"] == 8 and res.config["factors"] == [1, 2]
    assert res.config["train_range"] == [4, 8] and res.config["width"] == 8
    assert preset.n_steps == 30 and preset.n_val_large == 200
    with pytest.raises(
        ValueError, match=r"\['n_step'\] are not settings of LengthGeneralizationSettings"
    ):
        length_generalization(preset, n_step=2)
    with pytest.raises(ValueError, match=r"\['factor'\] are not settings"):
        length_generalization(factor=(1, 2))
    with pytest.raises(TypeError, match="got int: 16"):  # the old positional seq_len
        length_generalization(16)


def test_width_separation_structure(separation):
    res = separation
    assert isinstance(res, SeparationResult)
    assert res.seq_lens == [4, 8]
    for model in ("transformer", "fcn"):
        assert set(res.scores[model]) == {"4", "8"}
        assert len(res.minimal_width[model]) == 2
        for T, w in zip(res.seq_lens, res.minimal_width[model]):
            scores = res.scores[model][str(T)]
            if w is None:
                assert max(scores.values(), default=-1.0) < res.config["target_r2"]
            else:
                # The smallest width tried that reaches the target.
                assert scores[str(w)] >= res.config["target_r2"]
                assert all(s < res.config["target_r2"] for k, s in scores.items() if int(k) < w)
        assert set(res.growth_laws[model]) == {"log_T", "power", "power_0", "T_d"}
        assert len(res.lower_bound[model]) == 2
    d = json.loads(json.dumps(res.to_dict()))
    assert len(d["width_ratio"]) == 2 and set(d["seconds"]) == {"transformer", "fcn"}
    fig = res.plot()
    # The transformer on a log-T axis with a linear width axis (log T is a straight
    # line), both models on log-log axes.
    assert [(ax.get_xscale(), ax.get_yscale()) for ax in fig.axes[:2]] == [
        ("log", "linear"),
        ("log", "log"),
    ]
    assert all(ax.get_legend() is not None for ax in fig.axes[:2])
    matplotlib.pyplot.close(fig)


def test_width_separation_gridsearch_regime():
    res = width_separation(
        seq_lens=(4,),
        n_features=2,
        n_selected=2,
        target_r2=0.5,
        transformer=SparseTokenSelector(max_iter=3),
        fcn=FCNSelector(max_iter=3),
        widths={"transformer": (2, 8), "fcn": (4, 16)},
        regime="gridsearch",
        n_train=300,
        device="cpu",
        random_state=0,
    )
    # GridSearchCV scores every width of the grid.
    assert set(res.scores["transformer"]["4"]) == {"2", "8"}
    assert set(res.scores["fcn"]["4"]) == {"4", "16"}
    assert res.config["regime"] == "gridsearch"
    assert res.growth_laws["fcn"]["log_T"] is None  # one length: no law


def test_monotone_search_starts_from_previous_minimum():
    res = width_separation(
        seq_lens=(4, 8),
        n_features=2,
        n_selected=2,
        target_r2=0.01,
        widths={"transformer": (4, 8), "fcn": (4, 8)},
        n_steps={"transformer": 5, "fcn": 5},
        n_val=100,
        device="cpu",
    )
    for model in ("transformer", "fcn"):
        first = res.minimal_width[model][0]
        if first is not None:
            assert str(first) in res.scores[model]["8"]  # the bracket starts there


def test_bracket_search_goes_down_while_the_target_is_reached():
    from stsq_learn.experiments._width_search import search_bracket

    task = SparseTokenSelectionTask(4, 2, 2)
    est = SparseTokenSelector(
        solver="adam", learning_rate_init=0.1, batch_size=64, device="cpu", random_state=0
    )
    # Target 0.0 is reached by every width: from index 2 down to the grid's start.
    found = search_bracket(est, task, [2, 3, 4, 6], 2, 3, 100, -10.0, 0, False, "t")
    assert list(found) == [4, 3, 2]
    # An unreachable target: from index 1 up to the grid's end.
    found = search_bracket(est, task, [2, 3, 4, 6], 1, 3, 100, 0.9999, 0, False, "t")
    assert list(found) == [3, 4, 6]


def test_lower_bounds_where_no_width_reaches_and_skipped_lengths():
    res = width_separation(
        seq_lens=(4, 8, 16),
        target_r2=0.999,
        widths={"transformer": (2, 3), "fcn": (2, 3)},
        n_steps={"transformer": 3, "fcn": 3},
        n_val=100,
        max_seq_len={"transformer": 8},
        device="cpu",
    )
    for model in ("transformer", "fcn"):
        assert res.minimal_width[model] == [None, None, None]
        assert set(res.scores[model]["4"]) == {"2", "3"}
        assert res.scores[model]["8"] == {}  # the previous T reached no width: skipped
    assert res.lower_bound["fcn"] == [3, 3, 3]
    assert res.width_text("fcn") == ["> 3", "> 3", "> 3"]
    # Past max_seq_len a model is not searched and has no bound.
    assert res.lower_bound["transformer"] == [3, 3, None]
    assert res.width_text("transformer") == ["> 3", "> 3", "-"]
    with pytest.raises(ValueError, match=r"max_seq_len\['fcn'\]"):
        width_separation(max_seq_len={"fcn": 0})


def test_fit_growth_law_recovers_exact_laws():
    law = fit_growth_law(np.log2([4, 8, 16, 32]), [7.0, 10.0, 13.0, 16.0])
    assert law["intercept"] == pytest.approx(1.0) and law["slope"] == pytest.approx(3.0)
    assert law["r2"] == pytest.approx(1.0)
    assert law["residuals"] == pytest.approx([0, 0, 0, 0], abs=1e-9)
    law = fit_growth_law([8, 16, 32], [16.0, 32.0, 64.0], intercept=False)
    assert law["intercept"] == 0.0 and law["slope"] == pytest.approx(2.0)
    assert law["r2"] == pytest.approx(1.0) and law["rms_residual"] == pytest.approx(0, abs=1e-9)
    assert fit_growth_law([3.0], [5.0]) is None
    # A fit needs more points than parameters: two points say nothing of a law.
    assert fit_growth_law([3.0, 4.0], [5.0, 6.0]) is None
    assert fit_growth_law([3.0], [5.0], intercept=False) is None


def test_fit_power_law_recovers_the_exponent():
    Ts = np.array([4, 16, 64, 256, 1024, 4096], float)
    law = fit_power_law(Ts, 3.0 + 2.0 * Ts**0.5)
    assert law["exponent"] == pytest.approx(0.5, abs=0.01)
    assert law["intercept"] == pytest.approx(3.0, abs=0.5) and law["r2"] > 0.9999
    law = fit_power_law(Ts, 5.0 * Ts**1.2, offset=False)
    assert law["exponent"] == pytest.approx(1.2) and law["slope"] == pytest.approx(5.0)
    # A logarithm needs a small exponent, and fits worse than the log law itself.
    widths = 4.0 + 3.0 * np.log2(Ts)
    power, log = fit_power_law(Ts, widths), fit_growth_law(np.log2(Ts), widths)
    assert power["exponent"] < 0.2 and log["rms_residual"] <= power["rms_residual"] + 1e-9
    assert fit_power_law(Ts[:3], widths[:3]) is None  # three parameters need four points
    assert fit_power_law(Ts[:2], widths[:2], offset=False) is None  # two need three


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"regime": "bogus"}, "regime"),
        ({"target_r2": 1.5}, "target_r2"),
        ({"seq_lens": ()}, "seq_lens"),
        ({"widths": {"fcn": ()}}, r"widths\['fcn'\] must hold at least one width"),
        ({"widths": {"transformer": (0, 4)}}, r"widths\['transformer'\]\[i\]"),
        ({"widths": {"mlp": (4,)}}, "keys among"),
        ({"n_steps": {"transformer": 0}}, r"n_steps\['transformer'\]"),
    ],
)
def test_width_separation_rejects_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        width_separation(**kwargs)


def test_width_separation_takes_its_settings_and_changes_to_them():
    settings = WidthSeparationSettings(**SEPARATION_CURVE)
    assert isinstance(settings, CurveSettings) and settings.target_r2 == 0.5
    res = width_separation(
        settings,
        seq_lens=(4,),
        widths={"transformer": (4,), "fcn": (4,)},
        n_steps={"transformer": 3, "fcn": 3},
        n_val=50,
        device="cpu",
    )
    assert res.seq_lens == [4] and res.config["n_val"] == 50
    assert res.config["n_steps"] == {"transformer": 3, "fcn": 3}
    assert res.config["target_r2"] == 0.5 and res.config["n_features"] == 2  # the settings'
    assert settings.seq_lens == (4, 8) and settings.n_val == 200  # not changed
    with pytest.raises(
        ValueError, match=r"\['seq_len'\] are not settings of WidthSeparationSettings"
    ):
        width_separation(settings, seq_len=(4,))
    # A curve of width_separation_by_q is not the whole search: its label is no setting.
    with pytest.raises(TypeError, match="settings must be WidthSeparationSettings"):
        width_separation(TINY["separation"].curves[0])
    with pytest.raises(TypeError, match=r"got tuple: \(4, 8\)"):  # the old positional seq_lens
        width_separation((4, 8))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: width_separation(transformer=FCNSelector()), "transformer must be a Sparse"),
        (lambda: width_separation(fcn=SparseTokenSelector()), "fcn must be a FCNSelector"),
        (lambda: training_dynamics(estimator=FCNSelector()), "estimator must be a Sparse"),
        (lambda: length_generalization(estimator="model"), "estimator must be a Sparse"),
    ],
)
def test_experiments_refuse_the_wrong_estimator(call, match):
    with pytest.raises(TypeError, match=match):
        call()


def test_experiments_clone_the_estimators_they_are_given():
    given = SparseTokenSelector(6, solver="sgd", learning_rate_init=1.0, random_state=123)
    before = given.get_params()
    res = training_dynamics(seq_len=6, n_features=2, n_selected=2, estimator=given, n_steps=4)
    assert given.get_params() == before and not hasattr(given, "net_")
    assert res.config["width"] == 6 and res.config["estimator"]["learning_rate_init"] == 1.0
    sep = width_separation(
        seq_lens=(4,),
        transformer=SparseTokenSelector(batch_size=32),
        fcn=FCNSelector(batch_size=32),
        widths={"transformer": (2,), "fcn": (2,)},
        n_steps={"transformer": 3, "fcn": 3},
        n_val=50,
        device="cpu",
    )
    assert sep.config["estimators"]["fcn"]["batch_size"] == 32


def test_experiments_reject_bad_sizes():
    with pytest.raises(ValueError, match="n_steps"):
        training_dynamics(n_steps=0)
    with pytest.raises(ValueError, match="factors"):
        length_generalization(factors=())
    with pytest.raises(ValueError, match="n_selected"):
        length_generalization(seq_len=2, n_selected=3)


def test_encoding_families_structure(encodings):
    res = encodings
    n_seeds = TINY["encodings"]["n_seeds"]
    assert isinstance(res, EncodingsResult)
    assert res.families == ["stochastic", "fixed", "randomized", "sinusoidal"]
    assert res.eval_lengths == [8, 16] and res.codebook_sizes == [8, 16, 32]
    assert res.sweep_length == 16 and res.config["max_positions"] == 16  # max(factors) * T
    for family in res.families:
        per_seed = np.array(res.r2[family])
        assert per_seed.shape == (n_seeds, 2) and np.isfinite(per_seed).all()
        assert np.all((per_seed > -1) & (per_seed <= 1))
        np.testing.assert_allclose(res.r2_mean[family], per_seed.mean(axis=0))
        np.testing.assert_allclose(res.r2_min[family], per_seed.min(axis=0))
        np.testing.assert_allclose(res.r2_max[family], per_seed.max(axis=0))
    assert res.at("fixed", 2) == res.r2_mean["fixed"][1]
    # The randomized family is the sweep's codebook of the same size, not a second fit.
    assert res.sweep_r2["16"] == res.r2["randomized"]
    assert res.sweep_mean[1] == res.r2_mean["randomized"][1]
    # Codebook of L = T positions: every row takes all of them in order, i.e. fixed
    # encodings; same seed, same batches, hence the same model up to rounding.
    np.testing.assert_allclose(
        [seed[0] for seed in res.sweep_r2["8"]], [seed[0] for seed in res.r2["fixed"]], atol=1e-5
    )
    assert res.codebook_at(8, 1) == pytest.approx(res.at("fixed", 1), abs=1e-5)


def test_encoding_families_lengths_beyond_a_codebook_are_nan(encodings):
    res = encodings
    # L = 8 < T' = 16: not scorable, recorded as NaN, and None in JSON.
    assert all(np.isnan(seed[1]) for seed in res.sweep_r2["8"])
    assert np.isnan(res.sweep_mean[0]) and np.isnan(res.codebook_at(8, 2))
    assert np.isnan(res.sweep_min[0]) and np.isnan(res.sweep_max[0])
    assert all(np.isfinite(res.sweep_mean[1:]))
    text = json.dumps(res.to_dict(), allow_nan=False)  # strict JSON: no NaN token
    d = json.loads(text)
    assert d["sweep_r2"]["8"] == [[pytest.approx(s[0]), None] for s in res.sweep_r2["8"]]
    assert d["sweep_mean"][0] is None
    assert d["r2"]["fixed"] == [pytest.approx(s) for s in res.r2["fixed"]]
    assert d["config"]["codebook_factors"] == [1, 2, 4] and d["sweep_length"] == 16


def test_encoding_families_randomized_family_short_codebook():
    # A randomized family whose codebook is shorter than the longest evaluation length.
    res = encoding_families(
        seq_len=4,
        n_features=2,
        n_selected=2,
        estimator=SparseTokenSelector(4),
        n_steps=3,
        factors=(1, 2, 4),
        max_positions=8,
        codebook_factors=(1,),
        sweep_factor=4,
        n_seeds=1,
        n_val=50,
        device="cpu",
    )
    assert res.eval_lengths == [4, 8, 16]
    assert np.isfinite(res.r2_mean["randomized"][:2]).all()
    assert np.isnan(res.r2_mean["randomized"][2]) and np.isnan(res.r2_min["randomized"][2])
    assert np.isfinite(res.r2_mean["stochastic"]).all()
    # Every codebook of the sweep is below the sweep length: nothing to draw but references.
    assert np.isnan(res.sweep_mean).all()
    assert "| | randomized, L=8 |" in summary_table({"encodings": res})
    assert "/ n/a |" in summary_table({"encodings": res})
    fig = res.plot()
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert "randomized (L=8), n/a where T' > L" in labels
    assert any("n/a at T'=16" in t.get_text() for t in fig.axes[1].texts)
    matplotlib.pyplot.close(fig)


def test_encoding_families_plot(encodings):
    fig = encodings.plot()
    assert len(fig.axes) == 2
    ax, ax_sweep = fig.axes
    assert ax.get_xscale() == "log" and ax_sweep.get_xscale() == "log"
    assert all(a.get_legend() is not None for a in fig.axes)
    assert all(x and y for x, y in _axis_labels(fig))
    labels = ax.get_legend_handles_labels()[1]
    assert labels[:4] == ["stochastic", "fixed", "randomized (L=16)", "sinusoidal"]
    assert len(ax.collections) == 4  # one seed band per family
    sweep_labels = ax_sweep.get_legend_handles_labels()[1]
    assert "stochastic at T'=16 (L -> infinity)" in sweep_labels
    assert "fixed at T'=16" in sweep_labels
    # The references sit at the families' mean R^2 at the sweep length.
    refs = {line.get_label(): line.get_ydata()[0] for line in ax_sweep.lines}
    assert refs["fixed at T'=16"] == pytest.approx(encodings.r2_mean["fixed"][1])
    assert any("n/a at T'=16" in t.get_text() and "L = 8" in t.get_text() for t in ax_sweep.texts)
    matplotlib.pyplot.close(fig)
    fig, axes = matplotlib.pyplot.subplots(1, 2)
    assert encodings.plot(axes=axes) is fig
    with pytest.raises(ValueError, match="2 matplotlib Axes"):
        encodings.plot(axes=axes[:1])
    matplotlib.pyplot.close(fig)


def test_encoding_families_is_reproducible():
    kwargs = {**TINY["encodings"], "n_steps": 5, "n_val": 100, "codebook_factors": (1,)}
    first = encoding_families(**kwargs, device="cpu", random_state=3).to_dict()
    again = encoding_families(**kwargs, device="cpu", random_state=3).to_dict()
    other = encoding_families(**kwargs, device="cpu", random_state=4).to_dict()
    assert again == first
    assert other["r2"] != first["r2"]
    # The seeds differ from each other within a run.
    assert first["r2"]["stochastic"][0] != first["r2"]["stochastic"][1]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"factors": ()}, "factors must name at least one"),
        ({"factors": (1, 0)}, r"factors\[i\] must be an integer >= 1, got 0"),
        ({"codebook_factors": ()}, "codebook_factors must name at least one"),
        ({"codebook_factors": (-2,)}, r"codebook_factors\[i\] must be an integer >= 1, got -2"),
        ({"sweep_factor": 3}, r"sweep_factor=3 must be one of factors=\[1, 2, 4, 8\]"),
        ({"max_positions": 8}, "max_positions=8 must be at least seq_len=16"),
        ({"n_seeds": 0}, "n_seeds must be an integer >= 1, got 0"),
        ({"n_val": 0}, "n_val"),
        ({"n_steps": 0}, "n_steps"),
        ({"seq_len": 2, "n_selected": 3}, "n_selected"),
    ],
)
def test_encoding_families_rejects_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        encoding_families(**kwargs)


def test_encoding_families_refuses_the_wrong_estimator():
    with pytest.raises(TypeError, match="estimator must be a SparseTokenSelector"):
        encoding_families(estimator=FCNSelector())


def test_encoding_families_takes_its_settings_and_changes_to_them():
    preset = TINY["encodings"]
    assert type(preset) is EncodingsSettings
    res = encoding_families(
        preset, n_steps=2, n_seeds=1, n_val=50, codebook_factors=(1,), device="cpu"
    )
    assert res.config["n_steps"] == 2 and res.config["n_seeds"] == 1
    assert res.config["n_val"] == 50 and res.codebook_sizes == [8]
    # The rest is the preset's, which the change leaves as it was.
    assert res.config["seq_len"] == 8 and res.eval_lengths == [8, 16]
    assert res.config["max_positions"] == 16 and res.config["width"] == 8
    assert preset.n_steps == 30 and preset.n_seeds == 2 and preset.codebook_factors == (1, 2, 4)
    with pytest.raises(ValueError, match=r"\['n_seed'\] are not settings of EncodingsSettings"):
        encoding_families(preset, n_seed=1)
    with pytest.raises(ValueError, match=r"\['codebook_factor'\] are not settings"):
        encoding_families(codebook_factor=(1,))
    with pytest.raises(TypeError, match="settings must be EncodingsSettings"):
        encoding_families(TINY["length_generalization"])
    with pytest.raises(TypeError, match="got int: 16"):  # the old positional seq_len
        encoding_families(16)


def test_reproduce_encodings_section(tmp_path, encodings):
    results = reproduce(
        "tiny", out=tmp_path, only="encodings", device="cpu", progress=False, n_threads=1
    )
    assert list(results) == ["encodings"]
    assert (tmp_path / "encodings.png").stat().st_size > 0
    payload = json.loads((tmp_path / "results.json").read_text())
    assert set(payload) == {"meta", "encodings"}
    # Same seed, same numbers as calling the function directly.
    assert payload["encodings"]["r2"]["stochastic"] == [
        pytest.approx(s) for s in encodings.r2["stochastic"]
    ]
    summary = (tmp_path / "summary.md").read_text()
    assert "R^2 at 1T, 2T: mean [min, max]" in summary
    assert "| | randomized at 2T, L = 8, 16, 32 (n/a: L < 16) | n/a / " in summary


def test_step_progress_counts_training_steps_and_leaves_a_picklable_model():
    import pickle

    bar = StepProgress(7, "test", enabled=True)
    model = SparseTokenSelector(4, batch_size=8, callbacks=[bar], random_state=0)
    model.fit_online(SparseTokenSelectionTask(6, 2, 2), n_steps=7)
    assert bar.steps_ == 7 and bar.bar_ is None  # closed at the end of training
    copy = pickle.loads(pickle.dumps(model))
    assert copy.n_iter_ == 7
    counted = StepProgress(5, "test", enabled=False)
    clone(model).set_params(callbacks=[counted]).fit_online(SparseTokenSelectionTask(6, 2, 2), 5)
    assert counted.steps_ == 5


def test_resolve_experiments():
    assert resolve_experiments(None) == list(EXPERIMENTS)
    assert resolve_experiments("length") == ["length_generalization"]
    assert resolve_experiments(["separation", "convergence", "separation"]) == [
        "separation",
        "convergence",
    ]
    with pytest.raises(ValueError, match="bogus"):
        resolve_experiments("bogus")


def test_reproduce_writes_results(tmp_path, convergence, length, separation_by_q, encodings):
    results = reproduce(
        "tiny", out=tmp_path, only="convergence", device="cpu", progress=False, n_threads=1
    )
    assert list(results) == ["convergence"]
    assert (tmp_path / "convergence.png").stat().st_size > 0
    payload = json.loads((tmp_path / "results.json").read_text())
    assert set(payload) == {"meta", "convergence"}
    assert payload["meta"]["preset"] == "tiny"
    # Same seed, same numbers as calling the function directly.
    assert payload["convergence"]["cos"] == pytest.approx(convergence.cos)
    table = summary_table(
        {
            "convergence": convergence,
            "length_generalization": length,
            "separation": separation_by_q,
            "encodings": encodings,
        }
    )
    assert table.startswith("| experiment |")
    assert "cos(W_pp, I)" in table and "minimal width, fcn" in table and "fixed" in table
    assert "the floor's minimal width" in table
    assert "| | sinusoidal |" in table


def test_reproduce_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="preset"):
        reproduce("huge", progress=False)
    with pytest.raises(ValueError, match="bogus"):
        reproduce("tiny", only="bogus", progress=False)
    with pytest.raises(ValueError, match="seed"):
        reproduce("tiny", seed=-1, progress=False)
    with pytest.raises(ValueError, match="n_threads"):
        reproduce("tiny", n_threads=0, progress=False)
    assert not any(tmp_path.iterdir())


def test_floor_width_is_the_smallest_width_the_floor_allows():
    # The averaging searches' start (the separation's floor_widths, one length).
    from stsq_learn.experiments._width_search import floor_widths

    grid = [4, 8, 16, 32, 64]
    (got,) = floor_widths([32], 2, grid, 0.9, n_samples=4000)
    direct = [
        w
        for w in grid
        if isotropic_floor(32, 2, w, n_samples=4000, random_state=0).relative_mse <= 0.1
    ]
    assert got == direct[0] == 16  # the floor at N=32, q=2: 0.08 at width 16, 0.46 at 8
    assert floor_widths([32], 8, grid, 0.9, n_samples=4000) == [None]  # q=8 needs ~1000
