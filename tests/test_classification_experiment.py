"""The sparse-token classification experiment: laws, two-step alignment, error, its record."""

import json
import math

import matplotlib
import numpy as np
import pytest
import torch

from stsq_learn import SparseTokenClassifier, two_step_alignment
from stsq_learn.experiments import EXPERIMENTS, PRESETS, plan, reproduce, summary_table
from stsq_learn.experiments._record import SIZES
from stsq_learn.tasks.classification import record
from stsq_learn.tasks.classification.experiment import (
    CLASSIFIERS,
    SparseTokenClassificationResult,
    _bisect,
    fit_laws,
    sparse_token_classification,
)

matplotlib.use("Agg")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny():
    return sparse_token_classification(record.PRESETS["tiny"], progress=False)


# -- the laws' fits --------------------------------------------------------------------------
def test_fit_laws_recovers_exact_laws():
    Ls = [8, 16, 32, 64]
    log = fit_laws(Ls, [1.5 + 0.25 * math.log(L) for L in Ls])
    assert log["log_a"] == pytest.approx(1.5) and log["log_b"] == pytest.approx(0.25)
    assert log["log_r2"] == pytest.approx(1.0)
    assert log["sqrt_r2"] < 0.9  # a log law is not a square root through 0
    sqrt = fit_laws(Ls, [2.0 * math.sqrt(L) for L in Ls])
    assert sqrt["sqrt_c"] == pytest.approx(2.0) and sqrt["sqrt_r2"] == pytest.approx(1.0)
    assert sqrt["log_r2"] < 1.0
    assert sqrt["points"] == Ls


def test_fit_laws_skips_missing_thresholds_and_needs_three_points():
    out = fit_laws([8, 16, 32, 64], [2.0, None, 4.0, 5.0])
    assert out["points"] == [8, 32, 64] and math.isfinite(out["log_r2"])
    out = fit_laws([8, 16, 32], [2.0, None, float("nan")])
    assert out["points"] == [8]
    assert all(math.isnan(out[k]) for k in ("log_a", "log_b", "log_r2", "sqrt_c", "sqrt_r2"))


class _Step:
    """An error function: 0.5 below ``at``, 0 from it (records the thetas tried)."""

    def __init__(self, at):
        self.at, self.tried = at, []

    def __call__(self, model, theta):
        self.tried.append(theta)
        return (0.0 if theta >= self.at else 0.5), model


def test_bisection_brackets_the_threshold_geometrically():
    errors = _Step(5.0)
    found, (low, high) = _bisect(errors, SparseTokenClassifier(), 0.2, 2.0, 8.0, 4)
    assert low < 5.0 <= high and high / low == pytest.approx(4 ** (1 / 16))
    assert found == pytest.approx(math.sqrt(low * high))
    assert errors.tried[0] == pytest.approx(4.0) and len(errors.tried) == 4


def test_bisection_reports_none_when_the_bracket_top_fails():
    errors = _Step(100.0)
    found, bracket = _bisect(errors, SparseTokenClassifier(), 0.2, 2.0, 8.0, 3)
    assert found is None and bracket[1] == 8.0
    assert errors.tried[-1] == 8.0  # the top itself was tried once
    # Reached at the top only: the last halving's bracket, not None.
    found, _ = _bisect(_Step(7.9), SparseTokenClassifier(), 0.2, 2.0, 8.0, 3)
    assert found is not None and found > 7.0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"target_error": 0.5}, ValueError, r"target_error must be in \(0, 0.5\), got 0.5"),
        ({"signal_bounds": (4.0, 2.0)}, ValueError, r"0 < low < high, got \(4.0, 2.0\) for"),
        ({"signal_bounds": {"bogus": (1, 2)}}, ValueError, r"unknown classifiers \['bogus'\]"),
        ({"signal_bounds": {"flat": 3.0}}, ValueError, r"\(low, high\) pairs, got 3.0"),
        ({"attention": "adam"}, TypeError, "attention must be a SparseTokenClassifier, got str"),
        ({"n_bisect": 0}, ValueError, "n_bisect"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(kwargs, error, match):
    with pytest.raises(error, match=match):
        sparse_token_classification(progress=False, **kwargs)


# -- a tiny run ------------------------------------------------------------------------------
def test_tiny_run_has_every_part(tiny):
    assert isinstance(tiny, SparseTokenClassificationResult)
    law = tiny.law
    assert law["seq_lens"] == [4, 8, 16] and sorted(law["thresholds"]) == sorted(CLASSIFIERS)
    for name in CLASSIFIERS:
        assert len(law["thresholds"][name]) == 3
        for found, (low, high) in zip(law["thresholds"][name], law["brackets"][name]):
            assert found is None or low <= found <= high
    # 3 lengths x 3 classifiers x 2 halvings, plus one fit per failed bracket
    assert law["fits_done"] >= 18
    np.testing.assert_allclose(law["pooled_oracle"], 2 * 0.8416212 * np.sqrt([4, 8, 16]))
    al = tiny.alignment
    assert al["n_features"] == [8, 16] and al["ratios"] == [1.0, 4.0]
    rho1, rho2 = two_step_alignment(3.0, 8, np.array([1.0, 4.0]))
    np.testing.assert_allclose(al["theory"], rho2)
    np.testing.assert_allclose(al["theory_readout"], rho1)
    for d in ("8", "16"):
        assert all(len(c) == 1 and -1 <= c[0] <= 1 for c in al["cosine"][d])
    er = tiny.error
    assert er["signals"] == [2.0, 8.0] and er["seq_len"] == 8
    assert all(0 <= e <= 1 for name in CLASSIFIERS for e in er["test_error"][name])
    assert er["pooled_oracle"][0] == pytest.approx(0.3618368, abs=1e-6)  # Phi(-2/(2 sqrt 8))
    assert set(tiny.seconds) == {"law", "alignment", "error"}


def test_tiny_run_is_reproducible(tiny):
    again = sparse_token_classification(record.PRESETS["tiny"], progress=False)
    assert again.to_dict()["law"] == tiny.to_dict()["law"]
    assert again.alignment == tiny.alignment and again.error == tiny.error


def test_to_dict_is_json_and_plot_has_three_panels(tiny):
    payload = json.loads(json.dumps(tiny.to_dict()))
    assert set(payload) == {"config", "law", "alignment", "error", "seconds"}
    assert payload["config"]["attention"]["max_iter"] == 20
    fig = tiny.plot()
    assert len(fig.axes) == 3
    assert fig.axes[0].get_title().startswith("Signal needed: a + b log L")
    assert fig.axes[1].get_ylabel() == "cos(query, xi)"
    import matplotlib.pyplot as plt

    plt.close(fig)
    with pytest.raises(ValueError, match="axes must hold 3"):
        tiny.plot(axes=[None])


def test_summary_rows_and_headline(tiny):
    rows = []
    record.summary_rows(rows, tiny)
    text = "\n".join(rows)
    assert "| classification (d=4, 100 rows, test error 0.2) | minimal theta at L = 4, 8, 16 |" in (
        text
    )
    assert "| | attention: a + b log L, R^2 / c sqrt L, R^2 | b = " in text
    assert "| | theory (d, n -> inf) | " in text and "| | pooled oracle (exact) | 0.362 / " in text
    numbers = record.headline(tiny)
    expected = {f"{n}.{k}" for n in CLASSIFIERS for k in ("log_a", "log_b", "log_r2")}
    expected |= {f"{n}.{k}" for n in CLASSIFIERS for k in ("sqrt_c", "sqrt_r2")}
    expected |= {f"alignment.d={d}.ratio={r}" for d in (8, 16) for r in (1, 4)}
    expected |= {"alignment.theory.ratio=1", "alignment.theory.ratio=4"}
    assert set(numbers) == expected
    assert all(isinstance(v, float) for v in numbers.values())
    assert numbers["alignment.theory.ratio=4"] == pytest.approx(tiny.alignment["theory"][1])


def test_provenance_names_every_preset_setting():
    assert all(v.startswith(("paper: ", "ours: ")) for v in record.PROVENANCE.values())
    assert record.PROVENANCE["law"].startswith("paper: attention reaches vanishing test error")
    assert record.PROVENANCE["two_step"].startswith("paper: two gradient steps")
    assert record.PROVENANCE["target_error"].startswith("ours: ")
    named = {part.strip() for key in record.PROVENANCE for part in key.split(",")}
    for size in SIZES:
        assert set(record.PRESETS[size]) <= named, size


def test_presets_span_sixteen_fold_lengths():
    assert list(record.PRESETS) == list(SIZES)
    for size in ("quick", "full", "gpu"):
        Ls = record.PRESETS[size]["seq_lens"]
        assert max(Ls) / min(Ls) >= 16 and len(Ls) >= 5
        assert len(record.PRESETS[size]["alignment_features"]) == 2
    assert record.PRESETS["quick"]["seq_lens"] == (8, 16, 32, 64, 128)
    assert max(record.PRESETS["full"]["seq_lens"]) == 1024


def test_registered_with_the_task_and_planned():
    assert EXPERIMENTS[-1] == "classification"
    assert PRESETS["quick"]["classification"] is record.PRESETS["quick"]
    est = plan("tiny", only="sparse_token_classification", device="cpu")["classification"]
    # 3 lengths x 3 classifiers x 2 halvings; 2 d x 2 ratios x 1 seed; 2 thetas x 3.
    assert est["fits"] == 18 + 4 + 6
    assert est["seconds"] >= 0


def test_reproduce_tiny_only_classification():
    results = reproduce("tiny", only="classification", progress=False, n_threads=1)
    assert list(results) == ["classification"]
    assert isinstance(results["classification"], SparseTokenClassificationResult)
    assert "| classification two steps (L=8, theta=3) |" in summary_table(results)


def test_settings_are_one_typed_object_presets_its_instances():
    from stsq_learn.experiments import ConvergenceSettings, SparseTokenClassificationSettings

    assert record.RECORD.settings is SparseTokenClassificationSettings
    assert all(type(p) is SparseTokenClassificationSettings for p in record.PRESETS.values())
    assert SparseTokenClassificationSettings().n_bisect == 5  # the function's former default
    assert record.PRESETS["tiny"].attention.max_iter == 20
    # A preset and keyword changes on top of it: the change is what runs.
    res = sparse_token_classification(
        record.PRESETS["tiny"], seq_lens=(4,), n_train=40, n_test=40, n_bisect=1,
        alignment_features=(8,), alignment_ratios=(1.0,), error_signals=(2.0,), progress=False,
    )  # fmt: skip
    assert res.law["seq_lens"] == [4] and res.config["n_train"] == 40
    assert res.config["n_features"] == 4 and res.config["attention"]["max_iter"] == 20
    assert res.alignment["n_features"] == [8] and res.error["signals"] == [2.0]
    assert record.PRESETS["tiny"].seq_lens == (4, 8, 16)  # the preset is not changed
    misspelt = r"\['n_bisects'\] are not settings of SparseTokenClassificationSettings"
    with pytest.raises(ValueError, match=misspelt):
        sparse_token_classification(n_bisects=2)
    with pytest.raises(TypeError, match="settings must be SparseTokenClassificationSettings"):
        sparse_token_classification(ConvergenceSettings())
