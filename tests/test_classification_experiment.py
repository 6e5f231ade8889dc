"""The sparse-token classification experiment: its numbers, seeds, refusals, round trip,
figure and record."""

import json

import figure_parts as fp
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from stsq_learn import two_step_alignment
from stsq_learn.experiments import (
    EXPERIMENTS,
    PRESETS,
    ExperimentResult,
    InContextSettings,
    SparseTokenClassificationSettings,
    plan,
    reproduce,
    sparse_token_classification,
    summary_table,
)
from stsq_learn.experiments._record import SIZES
from stsq_learn.studies import stream_seed
from stsq_learn.tasks.classification import experiment
from stsq_learn.tasks.classification.experiment import (
    CLASSIFIERS,
    PROVENANCE,
    RECORD,
    alignment_theory,
    attention_thresholds,
    headline,
    signal_bounds,
    threshold_laws,
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
    return sparse_token_classification("tiny", seeds=1)


@pytest.fixture(scope="module")
def two_seeds():
    return sparse_token_classification("tiny", seeds=[4, 9], **SMALL)


def _without_seconds(table):
    """A table's columns and meta as JSON (NaN as None), leaving out the fits' seconds."""
    data = table.to_dict()
    data["columns"].pop("seconds", None)
    return data


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"target_error": 0.5}, ValueError, "'target_error' parameter"),
        ({"signal_bounds": (4.0, 2.0)}, ValueError, "'signal_bounds' parameter"),
        ({"signal_bounds": {"bogus": (1, 2)}}, ValueError, "'signal_bounds' parameter"),
        ({"signal_bounds": {"flat": 3.0}}, ValueError, "'signal_bounds' parameter"),
        ({"signal_bounds": (1.0, 2.0, 3.0)}, ValueError, r"signal_bounds must give \(low, high"),
        ({"attention": "adam"}, TypeError, "'attention' parameter"),
        ({"n_bisect": 0}, ValueError, "'n_bisect' parameter"),
        ({"n_seeds": -1}, ValueError, "'n_seeds' parameter"),
        ({"seq_lens": (8, 4)}, ValueError, "'seq_lens' parameter"),
        ({"alignment_ratios": ()}, ValueError, "'alignment_ratios' parameter"),
        ({"error_signals": (1.0, -2.0)}, ValueError, "'error_signals' parameter"),
        ({"n_bisects": 2}, ValueError, r"\['n_bisects'\] are not settings"),
        ({"seeds": [3, 3]}, ValueError, "seeds holds 3 twice"),
        ({"seeds": [-2]}, ValueError, "seeds"),
        ({"n_jobs": 0}, ValueError, "n_jobs"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(kwargs, error, match, monkeypatch):
    def no_study(*args, **kw):
        raise AssertionError("a study ran before a bad setting was refused")

    monkeypatch.setattr(experiment, "search_threshold", no_study)
    monkeypatch.setattr(experiment, "sweep", no_study)
    with pytest.raises(error, match=match):
        sparse_token_classification(**kwargs)


# -- a tiny run ------------------------------------------------------------------------------
def test_tiny_run_has_every_part(tiny):
    assert isinstance(tiny, ExperimentResult) and tiny.seeds == (0,)
    law = tiny.tables["law"]
    assert len(law) == 9
    assert law.unique("model") == list(CLASSIFIERS) and law.unique("seq_len") == [4, 8, 16]
    bounds = signal_bounds(tiny.settings)
    for row in law:  # two halvings of each bracket (a third fit where its top is tried)
        low, high = bounds[row["model"]]
        assert (low <= row["value"] <= high) if row["reached"] else row["bound"] == high
        assert row["n_fits"] in (2, 3)
    # The seed-0 thresholds of the studies' seed rule: the brackets' geometric means.
    found = {name: law.where(model=name)["value"] for name in CLASSIFIERS}
    assert found["attention"] == pytest.approx([2.3784, 2.3784, 3.3636], abs=1e-4)
    assert found["flat"] == pytest.approx([3.0844, 7.3360, 7.3360], abs=1e-4)
    al = tiny.tables["alignment"]
    assert len(al) == 4 and al.unique("n_features") == [8, 16] and al.unique("ratio") == [1, 4]
    assert al.unique("draw") == [stream_seed(0, "alignment 0")]
    assert all(-1 <= c <= 1 for c in al["cosine"])
    _, rho2 = two_step_alignment(3.0, 8, np.array([1.0, 4.0]))
    np.testing.assert_allclose(alignment_theory(tiny.settings), rho2)
    numbers = headline(tiny)
    assert [numbers[f"alignment.d=16.ratio={r}"] for r in (1, 4)] == pytest.approx(
        [0.3406, 0.8735], abs=1e-4
    )
    er = tiny.tables["error"]
    assert er.unique("signal") == [2.0, 8.0] and len(er) == 6
    assert all(0 <= e <= 1 for e in er["test_error"])
    assert np.all(er.where(model="attention")["query_along_xi"] > 0)
    assert np.isnan(er.where(model="flat")["query_along_xi"]).all()
    assert attention_thresholds(tiny) == {0: pytest.approx(3.3275, abs=1e-4)}


def test_a_seed_view_is_a_one_seed_run(two_seeds):
    assert two_seeds.seeds == (4, 9)
    one = sparse_token_classification("tiny", seeds=[9], **SMALL)
    view = two_seeds.seed(9)
    for part in ("law", "error"):  # the studies' meta names the seeds of the run
        a, b = one.tables[part], view.tables[part]
        assert _without_seconds(a)["columns"] == _without_seconds(b)["columns"], part
    assert _without_seconds(one.tables["alignment"]) == _without_seconds(view.tables["alignment"])
    assert headline(one) == pytest.approx(headline(view), nan_ok=True)
    assert two_seeds.bands()["attention.log_b"]["values"] == pytest.approx(
        [headline(two_seeds.seed(s))["attention.log_b"] for s in (4, 9)], nan_ok=True
    )
    # n_seeds draws per seed, each its own stream of the seed.
    assert two_seeds.seed(4).tables["alignment"].unique("draw") == [
        stream_seed(4, "alignment 0"),
        stream_seed(4, "alignment 1"),
    ]


def _drawn(fig):
    """Each panel's title and its lines' labels and data."""
    return [
        (ax.get_title(), [(ln.get_label(), ln.get_xydata().tolist()) for ln in ax.get_lines()])
        for ax in fig.axes
        if ax.get_visible()
    ]


def test_round_trip_through_json_draws_the_same_figure(two_seeds):
    payload = json.loads(json.dumps(two_seeds.to_dict()))
    back = ExperimentResult.from_dict(payload)
    assert back == two_seeds
    assert back.settings["attention"].startswith("SparseTokenClassifier(")
    assert json.dumps(back.bands()) == json.dumps(two_seeds.bands())  # NaN and all
    first, second = two_seeds.plot(), back.plot()
    assert _drawn(first) == _drawn(second)
    plt.close(first)
    plt.close(second)


def test_the_figure_has_four_panels_with_bands(tiny, two_seeds):
    fig = tiny.plot()
    ax_log, ax_sqrt, ax_al, ax_err = [ax for ax in fig.axes if ax.get_visible()]
    assert ax_log.get_title() == "Signal needed: a + b ln L"
    assert ax_sqrt.get_title() == "Signal needed: c sqrt L"
    assert ax_al.get_ylabel() == "cos(query, xi)"
    assert fp.suptitle(fig).endswith("one seed)")
    # Thresholds as points (no line between them), each law over the lengths it was fitted.
    line = fp.line(ax_log, "attention")
    np.testing.assert_allclose(line.get_ydata(), [2.3784, 2.3784, 3.3636], atol=1e-4)
    assert line.get_linestyle() == "None"
    (law,) = threshold_laws(tiny, "attention", "sqrt").values()
    drawn = fp.line(ax_sqrt, law.label("L"))
    assert drawn.get_xdata()[[0, -1]].tolist() == [4, 16] and law.label("L").endswith(
        "sqrt(L) (fit R^2 0.36)"
    )
    assert fp.line(ax_log, "pooled oracle (theory)") and fp.line(ax_sqrt, "pooled oracle (theory)")
    share = fp.line(ax_err, "informative share 1/2 (theory, fitted query)")
    assert share.get_xdata()[0] == pytest.approx(3.3275, abs=1e-4)
    plt.close(fig)
    fig = two_seeds.plot()
    assert fp.suptitle(fig).endswith("median over 2 seeds, bars and bands: min-max)")
    ax_log, _, ax_al, ax_err = [ax for ax in fig.axes if ax.get_visible()]
    laws = [ln.get_label() for ln in ax_log.get_lines() if "ln(L)" in ln.get_label()]
    assert laws and all("median of 2 fits" in label for label in laws)
    errors = np.array(
        [two_seeds.seed(s).tables["error"].where(model="pooled")["test_error"] for s in (4, 9)]
    )
    np.testing.assert_allclose(
        fp.line(ax_err, "pooled logistic").get_ydata(), np.median(errors, axis=0)
    )
    lo, hi = fp.band(fp.fills(ax_err)[2], [2.0, 8.0])
    np.testing.assert_allclose([lo, hi], [errors.min(axis=0), errors.max(axis=0)])
    oracle = fp.line(ax_err, "pooled oracle (exact)")
    np.testing.assert_allclose(oracle.get_ydata(), pooled_error(oracle.get_xdata(), 8))
    cosines = two_seeds.tables["alignment"]["cosine"]
    assert fp.line(ax_al, "two steps, d=8").get_ydata() == pytest.approx([np.median(cosines)])
    plt.close(fig)
    with pytest.raises(ValueError, match="axes must hold 4"):
        tiny.plot(axes=[None])


def test_summary_rows_and_headline(tiny):
    text = "\n".join(tiny.summary())
    assert (
        "| classification (d=4, 100 rows, test error 0.2, 1 seed) | minimal theta at L = 4, 8, 16"
        in text
    )
    assert "| | attention | 2.38 / 2.38 / 3.36 |" in text
    assert "| | attention: a + b ln L, R^2 / c sqrt L, R^2 | b = 0.711, 0.75 / c = " in text
    assert "| | theory (d, n -> inf) | 0.55 / 0.89 |" in text
    assert "| | pooled oracle (exact) | 0.362 / " in text
    numbers = headline(tiny)
    expected = {f"{n}.{k}" for n in CLASSIFIERS for k in ("log_a", "log_b", "log_r2")}
    expected |= {f"{n}.{k}" for n in CLASSIFIERS for k in ("sqrt_c", "sqrt_r2")}
    expected |= {f"alignment.d={d}.ratio={r}" for d in (8, 16) for r in (1, 4)}
    expected |= {"alignment.theory.ratio=1", "alignment.theory.ratio=4"}
    assert set(numbers) == expected
    assert all(isinstance(v, float) for v in numbers.values())
    assert numbers["alignment.theory.ratio=4"] == pytest.approx(alignment_theory(tiny.settings)[1])
    # The laws through studies.fit_laws on the seed's three thresholds.
    (law,) = threshold_laws(tiny, "attention", "log").values()
    assert numbers["attention.log_b"] == law.params["b"] and law.x_range == (4.0, 16.0)
    assert numbers["attention.log_b"] == pytest.approx(0.7107, abs=1e-4)
    (sqrt,) = threshold_laws(tiny, "attention", "sqrt").values()  # c sqrt(L) through 0
    assert numbers["attention.sqrt_c"] == sqrt.params["b"] and sqrt.params["a"] == 0.0
    Ls = np.array([4.0, 8.0, 16.0])
    found = tiny.tables["law"].where(model="attention")["value"]
    assert sqrt.params["b"] == pytest.approx(np.sqrt(Ls) @ found / Ls.sum())
    # Equal thresholds: the flat line meets them (R^2 1), c sqrt(L) does not (R^2 0).
    law = tiny.tables["law"]
    flat = law.with_columns(value=np.where(law["model"] == "attention", 3.0, law["value"]))
    equal = ExperimentResult("classification", tiny.settings, {**tiny.tables, "law": flat})
    assert headline(equal)["attention.log_r2"] == 1.0
    assert headline(equal)["attention.sqrt_r2"] == 0.0


def test_provenance_names_every_preset_setting():
    assert all(v.startswith(("paper: ", "ours: ")) for v in PROVENANCE.values())
    assert PROVENANCE["law"].startswith("paper: attention reaches vanishing test error")
    assert PROVENANCE["two_step"].startswith("paper: two gradient steps")
    assert PROVENANCE["target_error"].startswith("ours: ")
    named = {part.strip() for key in PROVENANCE for part in key.split(",")}
    assert set(SparseTokenClassificationSettings.field_names()) <= named


def test_presets_span_sixteen_fold_lengths():
    assert list(RECORD.presets) == list(SIZES)
    assert RECORD.presets["quick"] == SparseTokenClassificationSettings()
    assert RECORD.presets["gpu"] == RECORD.presets["full"]
    for size in ("quick", "full", "gpu"):
        Ls = RECORD.presets[size].seq_lens
        assert max(Ls) / min(Ls) >= 16 and len(Ls) >= 5
        assert len(RECORD.presets[size].alignment_features) == 2
    assert RECORD.presets["quick"].seq_lens == (8, 16, 32, 64, 128)
    assert max(RECORD.presets["full"].seq_lens) == 1024
    assert signal_bounds(RECORD.presets["full"])["flat"] == (2.0, 256.0)
    assert signal_bounds({"signal_bounds": {"flat": (1.0, 4.0)}})["attention"] == (2.0, 8.0)


def test_registered_with_the_task_and_planned():
    assert "classification" in EXPERIMENTS
    assert PRESETS["quick"]["classification"] is RECORD.presets["quick"]
    assert RECORD.aliases == ("sparse_token_classification",)
    est = plan("tiny", only="sparse_token_classification", device="cpu")["classification"]
    # 3 lengths x 3 classifiers x 2 halvings; 2 d x 2 ratios x 1 seed; 2 thetas x 3.
    assert est["fits"] == 18 + 4 + 6
    assert est["seconds"] >= 0


def test_reproduce_tiny_only_classification():
    results = reproduce("tiny", only="classification", progress=False, n_threads=1)
    assert list(results) == ["classification"]
    assert isinstance(results["classification"], ExperimentResult)
    assert "| classification two steps (L=8, theta=3) |" in summary_table(results)


def test_settings_are_one_typed_object_presets_its_instances():
    assert RECORD.settings is SparseTokenClassificationSettings
    assert all(type(p) is SparseTokenClassificationSettings for p in RECORD.presets.values())
    assert SparseTokenClassificationSettings().n_bisect == 6  # the quick preset's
    tiny = RECORD.presets["tiny"]
    assert tiny.attention.max_iter == 20
    # A preset and keyword changes on top of it: the change is what runs.
    res = sparse_token_classification(
        tiny, seeds=1, seq_lens=(4,), n_train=40, n_test=40, n_bisect=1,
        alignment_features=(8,), alignment_ratios=(1.0,), error_signals=(2.0,),
    )  # fmt: skip
    assert res.tables["law"].unique("seq_len") == [4] and res.settings["n_train"] == 40
    assert res.settings["n_features"] == 4 and "max_iter=20" in res.settings["attention"]
    assert res.tables["alignment"].unique("n_features") == [8]
    assert res.tables["error"].unique("signal") == [2.0]
    assert np.isnan(headline(res)["attention.log_b"])  # one length: no law
    assert tiny.seq_lens == (4, 8, 16)  # the preset is not changed
    with pytest.raises(TypeError, match="settings must be SparseTokenClassificationSettings"):
        sparse_token_classification(InContextSettings())
