"""The sparse-token classification experiment on the study tools: its numbers, seeds,
refusals, to_dict round trip, figure and record."""

import json

import figure_parts as fp
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from stsq_learn import two_step_alignment
from stsq_learn.experiments import EXPERIMENTS, PRESETS, plan, reproduce, summary_table
from stsq_learn.experiments._record import SIZES
from stsq_learn.studies import StudyTable, stream_seed
from stsq_learn.tasks.classification import record
from stsq_learn.tasks.classification.experiment import (
    CLASSIFIERS,
    SparseTokenClassificationResult,
    sparse_token_classification,
)
from stsq_learn.tasks.classification.theory import pooled_error

matplotlib.use("Agg")

# A run of a few seconds: two lengths would fit no law, so three; one d, one ratio.
SMALL = dict(
    seq_lens=(4, 8, 16),
    n_features=4,
    n_train=60,
    n_test=100,
    n_bisect=1,
    alignment_features=(8,),
    alignment_ratios=(2.0,),
    n_seeds=2,
    error_seq_len=8,
    error_signals=(2.0, 8.0),
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny():
    return sparse_token_classification(record.PRESETS["tiny"], progress=False)


@pytest.fixture(scope="module")
def two_seeds():
    return sparse_token_classification(
        record.PRESETS["tiny"], seeds=[4, 9], progress=False, **SMALL
    )


def _without_seconds(table):
    """A table's columns and meta as JSON (NaN as None), leaving out the fits' seconds."""
    data = table.to_dict()
    data["columns"].pop("seconds", None)
    return data


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"target_error": 0.5}, ValueError, r"target_error must be in \(0, 0.5\), got 0.5"),
        ({"signal_bounds": (4.0, 2.0)}, ValueError, r"0 < low < high, got \(4.0, 2.0\) for"),
        ({"signal_bounds": {"bogus": (1, 2)}}, ValueError, r"unknown classifiers \['bogus'\]"),
        ({"signal_bounds": {"flat": 3.0}}, ValueError, r"\(low, high\) pairs, got 3.0"),
        ({"attention": "adam"}, TypeError, "attention must be a SparseTokenClassifier, got str"),
        ({"n_bisect": 0}, ValueError, "n_bisect"),
        ({"n_seeds": -1}, ValueError, "n_seeds"),
        ({"random_state": -2}, ValueError, r"random_state must lie in"),
        ({"seeds": [3, 3]}, ValueError, "seeds holds 3 twice"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(kwargs, error, match, monkeypatch):
    from stsq_learn.tasks.classification import experiment

    def no_study(*args, **kw):
        raise AssertionError("a study ran before a bad setting was refused")

    monkeypatch.setattr(experiment, "search_threshold", no_study)
    monkeypatch.setattr(experiment, "sweep", no_study)
    with pytest.raises(error, match=match):
        sparse_token_classification(progress=False, **kwargs)


# -- a tiny run ------------------------------------------------------------------------------
def test_tiny_run_has_every_part(tiny):
    assert isinstance(tiny, SparseTokenClassificationResult)
    law = tiny.law
    assert isinstance(law, StudyTable) and len(law) == 9
    assert law.unique("model") == list(CLASSIFIERS) and law.unique("seq_len") == [4, 8, 16]
    for row in law:  # two halvings of each bracket (a third fit where its top is tried)
        low, high = tiny.config["signal_bounds"][row["model"]]
        assert (low <= row["value"] <= high) if row["reached"] else row["bound"] == high
        assert row["n_fits"] in (2, 3)
    # The seed-0 thresholds of the studies' seed rule: the brackets' geometric means.
    assert tiny.thresholds("attention") == pytest.approx([2.3784, 2.3784, 3.3636], abs=1e-4)
    assert tiny.thresholds("flat") == pytest.approx([3.0844, 7.3360, 7.3360], abs=1e-4)
    al = tiny.alignment
    assert len(al) == 4 and al.unique("n_features") == [8, 16] and al.unique("ratio") == [1, 4]
    assert al.unique("draw") == [stream_seed(0, "alignment 0")]
    assert all(-1 <= c <= 1 for c in al["cosine"])
    _, rho2 = two_step_alignment(3.0, 8, np.array([1.0, 4.0]))
    np.testing.assert_allclose(tiny.alignment_theory, rho2)
    assert tiny.alignment_means[16] == pytest.approx([0.3406, 0.8735], abs=1e-4)
    er = tiny.error
    assert er.unique("signal") == [2.0, 8.0] and len(er) == 6
    assert all(0 <= e <= 1 for e in er["test_error"])
    attention = er.where(model="attention")
    assert np.all(attention["query_along_xi"] > 0)
    assert np.isnan(er.where(model="flat")["query_along_xi"]).all()
    assert tiny.attention_threshold == pytest.approx(3.3275, abs=1e-4)
    assert set(tiny.seconds) == {"law", "alignment", "error"}


def test_a_list_of_seeds_is_the_seeds_one_by_one(two_seeds):
    assert [r.config["seed"] for r in two_seeds] == [4, 9]
    one = sparse_token_classification(
        record.PRESETS["tiny"], random_state=9, progress=False, **SMALL
    )
    for part in ("law", "alignment", "error"):
        a, b = getattr(one, part), getattr(two_seeds[1], part)
        assert _without_seconds(a) == _without_seconds(b), part
        assert getattr(two_seeds[0], part).unique("seed") == [4]
    assert record.headline(one) == pytest.approx(record.headline(two_seeds[1]), nan_ok=True)
    # n_seeds draws per seed, each its own stream of the seed.
    assert two_seeds[0].alignment.unique("draw") == [
        stream_seed(4, "alignment 0"),
        stream_seed(4, "alignment 1"),
    ]


def test_to_dict_round_trip(two_seeds):
    res = two_seeds[0]
    payload = json.loads(json.dumps(res.to_dict()))
    assert {"config", "law", "alignment", "error", "seconds", "laws"} <= set(payload)
    assert not {"seeds", "headline"} & set(payload)  # results.json's own keys
    assert payload["config"]["attention"]["max_iter"] == 20
    back = SparseTokenClassificationResult.from_dict(payload)
    for part in ("law", "alignment", "error"):
        assert getattr(back, part) == getattr(res, part)  # seconds and all
    assert back.to_dict() == payload
    assert record.headline(back) == pytest.approx(record.headline(res), nan_ok=True)


def test_the_figure_has_three_panels_with_bands(tiny, two_seeds):
    fig = tiny.plot()
    assert len(fig.axes) == 3
    assert fig.axes[0].get_title().startswith("Signal needed: a + b log L")
    assert fig.axes[1].get_ylabel() == "cos(query, xi)"
    assert fp.suptitle(fig).endswith("one seed)")
    # One seed: its thresholds as points (no line between them), the oracle's theory.
    line = fp.line(fig.axes[0], next(t.get_text() for t in fig.axes[0].get_legend().get_texts()))
    np.testing.assert_allclose(line.get_ydata(), tiny.thresholds("attention"))
    assert line.get_linestyle() == "None"
    assert fp.line(fig.axes[0], "pooled oracle (theory)")
    plt.close(fig)
    with pytest.raises(ValueError, match="axes must hold 3"):
        tiny.plot(axes=[None])
    fig = SparseTokenClassificationResult.plot_bands(two_seeds)
    assert fp.suptitle(fig).endswith("median over 2 seeds, bars and bands: min-max)")
    errors = np.array([r.error.where(model="pooled")["test_error"] for r in two_seeds])
    ax_e = fig.axes[2]
    np.testing.assert_allclose(
        fp.line(ax_e, "pooled logistic").get_ydata(), np.median(errors, axis=0)
    )
    lo, hi = fp.band(fp.fills(ax_e)[2], [2.0, 8.0])
    np.testing.assert_allclose([lo, hi], [errors.min(axis=0), errors.max(axis=0)])
    oracle = fp.line(ax_e, "pooled oracle (exact)")
    np.testing.assert_allclose(oracle.get_ydata(), pooled_error(oracle.get_xdata(), 8))
    cosines = np.concatenate([r.alignment["cosine"] for r in two_seeds])
    assert fp.line(fig.axes[1], "two steps, d=8").get_ydata() == pytest.approx([np.median(cosines)])
    plt.close(fig)


def test_the_figure_refuses_bad_results(two_seeds):
    fp.check_plot_bands_names_bad_results(SparseTokenClassificationResult, two_seeds[0])
    other = SparseTokenClassificationResult.from_dict(two_seeds[1].to_dict())
    other.config["seq_lens"] = [4, 8]
    with pytest.raises(ValueError, match=r"results\[1\]\.config\['seq_lens'\] differs"):
        SparseTokenClassificationResult.plot_bands([two_seeds[0], other])


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
    assert numbers["alignment.theory.ratio=4"] == pytest.approx(tiny.alignment_theory[1])
    # The laws through studies.fit_law on the seed's three thresholds.
    law = tiny.laws["attention"]["log"]
    assert numbers["attention.log_b"] == law.params["b"] and law.x_range == (4.0, 16.0)
    assert numbers["attention.log_b"] == pytest.approx(0.7107, abs=1e-4)
    sqrt = tiny.laws["attention"]["sqrt"]  # c sqrt(L) through 0, least squares
    assert numbers["attention.sqrt_c"] == sqrt.params["b"] and sqrt.params["a"] == 0.0
    Ls, found = np.array([4.0, 8.0, 16.0]), np.array(tiny.thresholds("attention"))
    assert sqrt.params["b"] == pytest.approx(np.sqrt(Ls) @ found / Ls.sum())


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
    assert "classification" in EXPERIMENTS
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
    assert res.law.unique("seq_len") == [4] and res.config["n_train"] == 40
    assert res.config["n_features"] == 4 and res.config["attention"]["max_iter"] == 20
    assert res.alignment.unique("n_features") == [8] and res.error.unique("signal") == [2.0]
    assert record.PRESETS["tiny"].seq_lens == (4, 8, 16)  # the preset is not changed
    misspelt = r"\['n_bisects'\] are not settings of SparseTokenClassificationSettings"
    with pytest.raises(ValueError, match=misspelt):
        sparse_token_classification(n_bisects=2)
    with pytest.raises(TypeError, match="settings must be SparseTokenClassificationSettings"):
        sparse_token_classification(ConvergenceSettings())
