"""plot_bands of the experiments' results: the median of every seed's curve, its min-max band."""

import matplotlib

matplotlib.use("Agg")

import figure_parts as fp
import matplotlib.pyplot as plt
import numpy as np
import pytest

from stsq_learn.experiments import LengthGeneralizationResult


def _length(seed, floor=(0.9, 0.7)):
    rng = np.random.default_rng(seed)
    models = ["stochastic", "fixed"]
    r2 = {
        name: {m: [float(v) for v in rng.uniform(-0.3, 1.0, 2)] for m in models}
        for name in ("val_128", "val_large")
    }
    config = {"seq_len": 4, "width": 8, "n_val_128": 128, "n_val_large": 200}
    return LengthGeneralizationResult(
        config={**config, "random_state": seed},
        eval_lengths=[4, 8],
        models=models,
        r2=r2,
        train_r2={"stochastic": 0.9, "fixed": 0.9},
        floor_r2=list(floor),
    )


@pytest.mark.parametrize("n_seeds", [2, 3])
def test_length_plot_bands_median_and_min_max_of_every_seed(n_seeds):
    results = [_length(seed) for seed in range(n_seeds)]
    one = results[0].plot()
    fig = LengthGeneralizationResult.plot_bands(results)
    assert len(fig.axes) == len(one.axes) == 2
    assert [ax.get_title() for ax in fig.axes] == [ax.get_title() for ax in one.axes]
    assert fig.legends[0].get_texts()[0].get_text().startswith("floor at T'")
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        t.get_text() for t in one.legends[0].get_texts()
    ]
    assert fp.suptitle(fig) == f"Length generalization, median over {n_seeds} seeds, band: min-max"
    for ax, name in zip(fig.axes, ("val_128", "val_large")):
        floor = next(ln for ln in ax.get_lines() if ln.get_label().startswith("floor"))
        assert list(floor.get_ydata()) == [0.9, 0.7]
        for i, model in enumerate(("stochastic", "fixed")):
            values = np.array([r.r2[name][model] for r in results])
            line = fp.line(ax, model)
            np.testing.assert_allclose(line.get_ydata(), np.median(values, axis=0))
            lo, hi = fp.band(fp.fills(ax)[i], [4, 8])
            np.testing.assert_allclose(lo, values.min(axis=0))
            np.testing.assert_allclose(hi, values.max(axis=0))
        assert ax.get_ylim()[0] == pytest.approx(
            min(-0.1, min(v for r in results for vs in r.r2[name].values() for v in vs) - 0.05)
        )
    plt.close(fig)
    plt.close(one)


def test_length_plot_bands_of_one_result_is_plot():
    res = _length(0)
    one, bands = res.plot(), res.plot_bands([res])
    for a, b in zip(one.axes, bands.axes):
        assert [ln.get_label() for ln in a.get_lines()] == [ln.get_label() for ln in b.get_lines()]
        for la, lb in zip(a.get_lines(), b.get_lines()):
            np.testing.assert_array_equal(la.get_ydata(), lb.get_ydata())
        assert a.get_ylim() == b.get_ylim() and not fp.fills(b)
    np.testing.assert_array_equal(
        fp.line(one.axes[1], "fixed").get_ydata(), res.r2["val_large"]["fixed"]
    )
    plt.close(one)
    plt.close(bands)


def test_plot_bands_names_bad_results():
    fp.check_plot_bands_names_bad_results(LengthGeneralizationResult, _length(0))


def test_plot_bands_refuses_seeds_of_different_experiments():
    other = _length(1)
    other.eval_lengths = [4, 16]
    with pytest.raises(ValueError, match=r"results\[1\]\.eval_lengths differs"):
        LengthGeneralizationResult.plot_bands([_length(0), other])
