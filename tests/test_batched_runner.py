"""reproduce's batched runs: an experiment whose record is ``seeds_batched`` trains its seeds
in one run, and its results read as those of separate runs (bands, figures, results.json)."""

import dataclasses
import json

import matplotlib
import pytest
import seed_experiments as se
from test_seeds import register  # noqa: F401  (the fixture)

from stsq_learn.experiments import reproduce

matplotlib.use("Agg")


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_batched_run_gives_the_bands_of_separate_runs(register, tmp_path, n_jobs):  # noqa: F811
    register(se.LEVEL, se.LEVEL_BATCHED)
    results = reproduce(
        "tiny",
        only=["test_level", "test_level_batched"],
        n_seeds=3,
        seed=4,
        n_jobs=n_jobs,
        out=tmp_path,
        progress=False,
    )
    assert results.seeds["test_level_batched"] == [4, 5, 6]
    one, batched = results.headline["test_level"], results.headline["test_level_batched"]
    assert batched == one  # the same noise per seed, run one by one or in one call
    assert [r.value for r in results.runs["test_level_batched"]] == [
        r.value for r in results.runs["test_level"]
    ]
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["test_level_batched"]["seeds"] == [4, 5, 6]
    assert written["test_level_batched"]["headline"]["value"]["values"] == one["value"]["values"]
    assert (tmp_path / "test_level_batched.png").stat().st_size > 0
    assert results.meta["seconds"]["test_level_batched"] >= 0


def test_a_batched_run_that_returns_one_result_is_named(register):  # noqa: F811
    register(se.WRONG_BATCHED)
    with pytest.raises(TypeError, match=r"test_wrong_batched.*list of 2 results.*LevelResult"):
        reproduce("tiny", only=["test_wrong_batched"], n_seeds=2, n_jobs=1, progress=False)


def test_a_record_cannot_run_its_seeds_inside_and_batched():
    with pytest.raises(ValueError, match="seeds_inside and seeds_batched"):
        dataclasses.replace(se.LEVEL_BATCHED, seeds_inside=True)


def test_a_users_study_runs_under_reproduce_with_its_seeds_together(register, tmp_path):  # noqa: F811
    from stsq_learn.experiments import plan

    register(se.WIDTH)
    results = reproduce("tiny", only=["test_width"], n_seeds=2, n_jobs=1, out=tmp_path)
    tables = [r.table for r in results.runs["test_width"]]
    assert [t.unique("seed") for t in tables] == [[0], [1]]
    direct = se.width_study(seeds=(0, 1))  # the same numbers called directly
    assert [list(r.table["value"]) for r in direct] == [list(t["value"]) for t in tables]
    bands = results.headline["test_width"]
    assert set(bands) == {"width_T4", "width_T8"}
    assert all(b["values"][0] in (2, 4, 8, 16) for b in bands.values())
    assert (tmp_path / "test_width.png").exists()
    planned = plan("tiny", only=["test_width"])
    assert planned["test_width"]["fits"] > 0
