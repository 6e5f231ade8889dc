"""The q-sparse token retrieval experiment as three studies: heads, widths against T, length."""

import json
import math

import figure_parts as fp
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from stsq_learn import FCNRetriever, FCNSelector, SparseTokenRetriever, SparseTokenSelector
from stsq_learn.experiments import PRESETS, SparseRetrievalResult, reproduce, sparse_retrieval
from stsq_learn.studies import StudyTable
from stsq_learn.tasks.retrieval import record

TINY = PRESETS["tiny"]["retrieval"]
SMALL = dict(seq_lens=(4,), widths={"transformer": (4,), "fcn": (8,)}, factors=(1,))


@pytest.fixture(scope="module")
def retrieval():
    return sparse_retrieval(TINY, device="cpu", random_state=0)


@pytest.fixture(scope="module")
def seeds():
    return sparse_retrieval(TINY, device="cpu", seeds=[0, 1, 2])


def test_heads_part_is_a_sweep_over_q_and_h(retrieval):
    hd = retrieval.heads
    assert isinstance(hd, StudyTable) and hd.meta["study"] == "sweep"
    assert hd["n_selected"].tolist() == [2, 2] and hd["n_heads"].tolist() == [1, 2]
    assert hd["n_iter"].tolist() == [20, 20] and hd["seed"].tolist() == [0, 0]
    # 20 SGD steps at width 8: barely below the error of predicting 0.
    np.testing.assert_allclose(hd["relative_mse"], [0.8688, 0.8120], atol=2e-3)
    assert retrieval.threshold == {"2": None}  # neither is below 1/(2q) = 0.25
    budget = retrieval.config["heads_budget"]
    assert budget == {"solver": "sgd", "learning_rate_init": "auto", "n_steps": 20}


def test_heads_part_skips_more_than_q_plus_one_heads():
    res = sparse_retrieval(TINY, **SMALL, q_values=(1,), n_heads=(3, 1, 2), random_state=0)
    assert res.heads["n_heads"].tolist() == [1, 2]
    expected = [h for h, e in zip([1, 2], res.heads["relative_mse"]) if e < 0.5]
    assert res.threshold == {"1": min(expected) if expected else None}


def test_threshold_is_the_fewest_heads_below_half_the_bound_of_q_minus_one(retrieval):
    # The heads part's table read by hand: q=2 reached, at H = 3 (past q).
    table = retrieval.heads.to_dict()
    table["columns"]["relative_mse"] = [0.52, 0.26]
    changed = SparseRetrievalResult.from_dict({**retrieval.to_dict(), "heads": table})
    assert record.headline(changed)["relative_mse.q=2.H=2"] == 0.26
    assert record.headline(changed)["threshold.q=2"] != 2  # 0.26 is not below 0.25


def test_width_search_is_minimal_width_per_model_at_q_heads(retrieval):
    wd = retrieval.widths
    assert wd.meta["study"] == "search_threshold" and wd.meta["param"] == "width"
    assert wd["model"].tolist() == ["transformer"] * 2 + ["fcn"] * 2
    assert wd["seq_len"].tolist() == [4, 8, 4, 8]
    # 20 steps reach R^2 0.5 at no width: the largest width tried is the lower bound,
    # and T = 8 after a miss is not searched (its bound carried over).
    assert np.isnan(wd["value"]).all() and not wd["reached"].any()
    assert wd["bound"].tolist() == [8, 8, 16, 16] and wd["skipped"].tolist() == [0, 1, 0, 1]
    assert retrieval.laws == {"transformer": {}, "fcn": {}}
    # The attention model of the search has q heads (the plan's models are the studies').
    search = [w for w in record.work(TINY) if w.label.startswith("search width: transformer")]
    assert [w.estimator.n_heads for w in search] == [2, 2]


def test_length_part_trains_q_heads_and_scores_longer_rows(retrieval):
    ln = retrieval.length
    assert ln.meta["study"] == "length_curve" and ln.meta["n_test"] == 200
    assert ln["model"].tolist() == ["stochastic"] * 2 + ["fixed"] * 2
    assert ln["eval_seq_len"].tolist() == [6, 12, 6, 12]
    assert (ln["score"] > -1).all() and (ln["score"] <= 1).all()
    np.testing.assert_allclose(ln["score"], [0.1836, 0.0772, 0.2215, 0.0957], atol=2e-3)
    work = [w for w in record.work(TINY) if w.label.startswith("length_curve")]
    assert [(w.estimator.n_heads, w.estimator.positional_encoding) for w in work] == [
        (2, "stochastic"),
        (2, "fixed"),
    ]


def test_one_seed_and_a_list_of_seeds_agree(retrieval, seeds):
    assert [r.config["random_state"] for r in seeds] == [0, 1, 2]
    assert record.headline(seeds[0]) == pytest.approx(record.headline(retrieval), nan_ok=True)
    np.testing.assert_allclose(seeds[0].length["score"], retrieval.length["score"], rtol=1e-5)
    one = sparse_retrieval(TINY, device="cpu", random_state=2)
    assert record.headline(seeds[2]) == pytest.approx(record.headline(one), nan_ok=True)
    assert seeds[1].heads["seed"].tolist() == [1, 1] and seeds[1].heads.meta["seeds"] == [1]
    assert record.headline(seeds[1]) != pytest.approx(record.headline(seeds[0]), nan_ok=True)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(target_r2=0.0), ValueError, "target_r2 must lie strictly between 0 and 1"),
        (dict(q_values=()), ValueError, "q_values must hold at least one value"),
        (dict(seq_len=4, q_values=(5,)), ValueError, "q_values name up to 5"),
        (dict(factors=()), ValueError, "factors must hold at least one value"),
        (dict(length_task=(8, 2)), ValueError, "length_task must be a tuple"),
        (dict(length_task=(4, 2, 5)), ValueError, "n_selected"),
        (dict(heads_steps="many"), TypeError, "heads_steps must be an integer"),
        (dict(heads_width=0), ValueError, "heads_width must be an integer >= 1"),
        (dict(widths={"fcn": (8, 0)}), ValueError, r"widths\['fcn'\]\[i\] must be an integer"),
        (dict(n_steps={"mlp": 3}), ValueError, "n_steps must be a dict with keys"),
        (dict(transformer=SparseTokenSelector()), TypeError, "transformer must be a SparseTokenRe"),
        (dict(fcn=FCNSelector()), TypeError, "fcn must be a FCNRetriever"),
        (dict(heads_estimator=SparseTokenSelector()), TypeError, "heads_estimator must be a Spa"),
        (dict(stop_at_target=1), TypeError, "stop_at_target must be True or False, got int: 1"),
        # Caught by the search's own check, before the heads part trains.
        (dict(fcn=FCNRetriever(learning_rate_init=-1.0)), ValueError, "learning_rate_init"),
        (dict(random_state=0, seeds=[0, 1]), ValueError, "random_state .* or seeds"),
        (dict(seeds=[0, 0]), ValueError, "seeds holds 0 twice"),
    ],
)
def test_bad_settings_are_refused_by_name_before_any_fit(kwargs, error, match, monkeypatch):
    fits = []
    for cls in (SparseTokenRetriever, FCNRetriever):
        monkeypatch.setattr(cls, "fit_online", lambda self, *a, **k: fits.append(self))
    with pytest.raises(error, match=match):
        sparse_retrieval(TINY, **kwargs)
    assert fits == []


def test_to_dict_round_trip(retrieval):
    payload = json.loads(json.dumps(retrieval.to_dict()))
    assert set(payload) == {"config", "heads", "threshold", "widths", "laws", "length", "seconds"}
    assert set(payload["seconds"]) == {"heads", "widths", "length"}
    back = SparseRetrievalResult.from_dict(payload)
    for name in ("heads", "widths", "length"):
        assert getattr(back, name) == getattr(retrieval, name)
    assert back.config == payload["config"] and back.threshold == retrieval.threshold
    assert record.headline(back) == pytest.approx(record.headline(retrieval), nan_ok=True)


def test_figure_has_three_banded_panels(retrieval, seeds):
    fig = retrieval.plot()
    ax_h, ax_w, ax_l = fig.axes
    assert fp.suptitle(fig) == "" and not fp.fills(ax_h)
    assert ax_h.get_xlabel() == "heads H"
    assert ax_h.get_title() == "Retrieval: error against heads (T=6, d=2, m=8, 20 SGD steps)"
    assert [t.get_text() for t in ax_h.get_legend().get_texts()] == [
        "q=2",
        "bound $1 - H/q$ (H <= q)",
        "threshold level $1/(2q)$ at H = q",
    ]
    np.testing.assert_allclose(fp.line(ax_h, "q=2").get_ydata(), retrieval.heads["relative_mse"])
    assert [t.get_text() for t in ax_h.texts] == [
        "no threshold at H = q for q=2 within this budget\n"
        "(relative MSE at H = q not below 1/(2q)): too few steps"
    ]
    assert ax_w.get_xlabel() == "sequence length T (log scale)"
    assert ax_w.get_title() == "Retrieval: width against T (d=2, q=H=2)"
    # No width reached: each model's lower bounds, no law.
    labels = [t.get_text() for t in ax_w.get_legend().get_texts()]
    assert "attention (SPE): not reached, > bound" in labels and "FCN (none reached)" in labels
    assert ax_l.get_xlabel() == "evaluation length T' (log scale)"
    fig.canvas.draw()
    assert [t.get_text() for t in ax_l.get_xticklabels(minor=True) if t.get_text()] == []
    plt.close(fig)
    bands = SparseRetrievalResult.plot_bands(seeds)
    ax_h, _, ax_l = bands.axes
    assert fp.suptitle(bands) == "q-sparse retrieval, median over 3 seeds, band: min-max"
    errors = np.array([r.heads["relative_mse"] for r in seeds])
    np.testing.assert_allclose(fp.line(ax_h, "q=2").get_ydata(), np.median(errors, axis=0))
    low, high = fp.band(fp.fills(ax_h)[0], [1, 2])
    np.testing.assert_allclose([low, high], [errors.min(axis=0), errors.max(axis=0)])
    assert ax_h.texts[0].get_text().startswith("no threshold at H = q for q=2 (3 of 3 seeds)")
    assert len(fp.fills(ax_l)) == 2  # one band per encoding
    plt.close(bands)


def test_laws_are_drawn_over_the_lengths_they_were_fitted_on(retrieval):
    data = retrieval.to_dict()
    columns = data["widths"]["columns"]
    n = 3
    columns.update(
        model=["transformer"] * n,
        seed=[0] * n,
        param_seq_len=[4, 8, 16],
        value=[10.0, 14.0, 18.0],
        bound=[None] * n,
        reached=[True] * n,
        skipped=[False] * n,
        n_fits=[2] * n,
        n_iter=[20] * n,
        seconds=[0.1] * n,
    )
    fig = SparseRetrievalResult.from_dict(data).plot()
    ax_w = fig.axes[1]
    (law,) = [ln for ln in ax_w.get_lines() if "log2(T)" in ln.get_label()]
    assert law.get_label() == "2 + 4 log2(T) (fit R^2 1.00)"
    assert (law.get_xdata().min(), law.get_xdata().max()) == pytest.approx((4, 16))
    plt.close(fig)


def test_plot_bands_refuses_bad_results(retrieval, seeds):
    fp.check_plot_bands_names_bad_results(SparseRetrievalResult, retrieval)
    other = sparse_retrieval(TINY, **SMALL, random_state=1)
    with pytest.raises(ValueError, match=r"results\[1\] differs from results\[0\] in seq_lens"):
        SparseRetrievalResult.plot_bands([seeds[0], other])


def test_record_headline_provenance_and_work(retrieval):
    numbers = record.headline(retrieval)
    errors = retrieval.heads["relative_mse"]
    assert set(numbers) == {"relative_mse.q=2.H=1", "relative_mse.q=2.H=2", "threshold.q=2"}
    assert numbers["relative_mse.q=2.H=1"] == errors[0] and math.isnan(numbers["threshold.q=2"])
    assert record.RECORD.seeds_batched and record.RECORD.headline is record.headline
    assert all(v.startswith(("paper: ", "ours: ")) for v in record.PROVENANCE.values())
    # The studies' plan of one seed: 2 heads fits, 3 + 2 fits a model's search, 2 length fits.
    work = record.work(TINY)
    assert [w.fits for w in work] == [1, 1, 3, 2, 3, 2, 1, 1]
    assert sum(w.fits * w.steps for w in work) == 280


def test_reproduce_retrieval_section(tmp_path, retrieval):
    results = reproduce(
        "tiny", out=tmp_path, only="retrieval", device="cpu", progress=False, n_threads=1
    )
    assert list(results) == ["retrieval"]
    assert (tmp_path / "retrieval.png").stat().st_size > 0
    payload = json.loads((tmp_path / "results.json").read_text())
    section = payload["retrieval"]
    assert section["heads"]["columns"]["relative_mse"] == pytest.approx(
        retrieval.heads["relative_mse"].tolist()
    )
    summary = (tmp_path / "summary.md").read_text()
    assert (
        "| Retrieval heads (T=6, d=2, m=8, 20 SGD steps) | relative MSE at H = 1, 2 | |" in summary
    )
    assert (
        "| | q=2: fewest H with relative MSE < 1/(2q) = 0.250 (theory: H = q) "
        "| not reached within this budget |" in summary
    )
    assert "| Retrieval widths (d=2, q=H=2, R^2 >= 0.5) | T = 4, 8 | |" in summary
    assert "| | minimal width, FCN | > 16 / > 16 |" in summary
    assert "| Retrieval length (trained at T=6, q=H=2, m=8) | R^2 at T' = 6, 12 | |" in summary


def test_settings_are_one_typed_object_presets_its_instances(retrieval):
    from stsq_learn.experiments import ConvergenceSettings, SparseRetrievalSettings

    assert record.RECORD.settings is SparseRetrievalSettings
    assert all(type(p) is SparseRetrievalSettings for p in record.PRESETS.values())
    quick = PRESETS["quick"]["retrieval"]
    params = quick["heads_estimator"].get_params()
    assert (params["solver"], params["learning_rate_init"]) == ("adam", 0.05)
    assert (quick["heads_width"], quick["heads_steps"]) == (32, 150)
    # A change reaches its part only: the heads part keeps the preset's numbers.
    res = sparse_retrieval(TINY, seq_lens=(4,), factors=(1,), random_state=0)
    assert res.widths.unique("seq_len") == [4] and res.length.unique("eval_seq_len") == [6]
    np.testing.assert_array_equal(res.heads["relative_mse"], retrieval.heads["relative_mse"])
    misspelt = r"\['n_head'\] are not settings of SparseRetrievalSettings"
    with pytest.raises(ValueError, match=misspelt):
        sparse_retrieval(TINY, n_head=(1,))
    with pytest.raises(TypeError, match="settings must be SparseRetrievalSettings"):
        sparse_retrieval(ConvergenceSettings())


def test_width_search_fits_stop_at_the_target_unless_told_not_to():
    small = dict(
        q_values=(2,),
        n_heads=(2,),
        seq_lens=(4,),
        fcn_max_seq_len=4,
        target_r2=0.6,
        widths={"transformer": (4, 8), "fcn": (8, 32)},
        n_steps={"transformer": 100, "fcn": 100},
        factors=(1,),
    )
    stopped = sparse_retrieval(TINY, **small, random_state=0)
    full = sparse_retrieval(TINY, **small, stop_at_target=False, random_state=0)
    assert stopped.widths.meta["stop_at_target"] and not full.widths.meta["stop_at_target"]
    assert full.widths["n_iter"].tolist() == [100 * n for n in full.widths["n_fits"]]
    reached = stopped.widths.where(reached=True)
    assert len(reached) and (reached["n_iter"] < 100 * reached["n_fits"]).all()
    np.testing.assert_array_equal(stopped.widths["value"], full.widths["value"])


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*worse than no model:UserWarning")  # 2-step searches
def test_quick_heads_part_shows_the_threshold_at_q():
    quick = PRESETS["quick"]["retrieval"]
    small = dict(SMALL, n_steps={"transformer": 2, "fcn": 2}, length_steps=2, n_test=1000)
    res = sparse_retrieval(quick, **small, q_values=(3,), device="cpu", random_state=0)
    errors = res.heads["relative_mse"]
    assert errors[2] < 1 / 6 < 0.3 < errors[1] < errors[0]
    assert res.threshold == {"3": 3}
