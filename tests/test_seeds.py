"""Seeds, bands, provenance and the reference check of ``reproduce`` (issue 33).

Throwaway experiments (``seed_experiments``) are registered for a test and the
registry restored afterwards, as in ``test_registry``.
"""

import dataclasses
import json
import math

import matplotlib
import pytest
import seed_experiments as se
from sklearn.base import clone
from user_tasks import PairMeanTask

import stsq_learn
from stsq_learn import registry
from stsq_learn.cli import main
from stsq_learn.experiments import (
    ReproduceResults,
    check_reference,
    load_reference,
    plan,
    plan_table,
    reproduce,
    summary_table,
    write_reference,
)
from stsq_learn.experiments._check import shipped_references, tolerance
from stsq_learn.experiments._record import SIZES, Experiment
from stsq_learn.experiments._records import RECORDS
from stsq_learn.experiments._reproduce import wall_time

matplotlib.use("Agg")


@pytest.fixture
def register():
    """``register(*records)``: the throwaway records for one test; the registry restored."""
    from stsq_learn.tasks import TASKS

    saved = (dict(registry._REGISTRATIONS), dict(TASKS), list(stsq_learn.__all__))
    regs = []

    def _register(*records):
        regs.append(registry.register(PairMeanTask, experiments=records))

    yield _register
    registry._REGISTRATIONS.clear()
    registry._REGISTRATIONS.update(saved[0])
    TASKS.clear()
    TASKS.update(saved[1])
    stsq_learn.__all__[:] = saved[2]
    for reg in regs:
        for name in reg.public():
            if hasattr(stsq_learn, name):
                delattr(stsq_learn, name)


def _change_level(level):
    """Re-register the level experiment with another level in every preset (a changed setting)."""
    changed = dataclasses.replace(se.LEVEL, presets={size: {"level": level} for size in SIZES})
    reg = registry._REGISTRATIONS["test_pair_mean"]
    others = tuple(r for r in reg.experiments if r.name != "test_level")
    registry._REGISTRATIONS["test_pair_mean"] = dataclasses.replace(
        reg, experiments=(changed, *others)
    )


def _noise(seed):
    import numpy as np

    return 1.0 + 0.01 * np.random.RandomState(seed).standard_normal()


# --- options ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"n_seeds": 0}, "n_seeds must be a positive integer or None, got 0."),
        ({"n_seeds": -2}, "got -2."),
        ({"n_seeds": 2.5}, "got 2.5."),
        ({"n_seeds": True}, "got True."),
        ({"n_seeds": "3"}, "got '3'."),
        (
            {"n_jobs": 0},
            "n_jobs must be a positive integer, -1 (every usable core) or None, got 0.",
        ),
        ({"n_jobs": -2}, "got -2."),
        ({"n_jobs": 1.0}, "got 1.0."),
        ({"seed": 2**32 - 2, "n_seeds": 3}, "runs seeds up to 4294967296"),
    ],
)
def test_bad_seed_and_job_options_fail_before_any_work(monkeypatch, tmp_path, options, fragment):
    import stsq_learn.experiments._reproduce as rep

    def work(*args, **kwargs):
        raise AssertionError("work started")

    monkeypatch.setattr(rep, "_run", work)
    monkeypatch.setattr(rep, "estimate", work)
    with pytest.raises(ValueError) as info:
        reproduce("tiny", out=tmp_path / "o", progress=False, **options)
    assert fragment in str(info.value)
    assert not (tmp_path / "o").exists()
    plan_options = {k: v for k, v in options.items() if k != "seed"}
    if "seed" not in options:
        with pytest.raises(ValueError, match=r"n_seeds|n_jobs"):
            plan("tiny", **plan_options)


def test_record_provenance_and_headline_are_checked():
    with pytest.raises(ValueError, match=r"the provenance of 'lr' must start with 'paper:' or"):
        dataclasses.replace(se.LEVEL, provenance={"lr": "the paper's"})
    with pytest.raises(TypeError, match="provenance must be a dict"):
        dataclasses.replace(se.LEVEL, provenance=["ours: x"])
    with pytest.raises(TypeError, match="headline must be a callable or None, got 3"):
        dataclasses.replace(se.LEVEL, headline=3)
    # every record as shipped stays valid (the fields are optional)
    assert all(isinstance(r, Experiment) for r in RECORDS.values())


# --- seeds and bands --------------------------------------------------------------------


def test_each_figure_is_drawn_once_its_experiment_is_done(register, tmp_path, monkeypatch):
    """The figures are drawn while the other runs go on, not all at the end."""
    from stsq_learn.experiments import _reproduce

    register(se.LEVEL, se.PLAIN)
    events = []
    save = _reproduce._save_figure

    def saving(fig, path):
        events.append(f"figure {path.name}")
        save(fig, path)

    monkeypatch.setattr(_reproduce, "_save_figure", saving)
    reproduce(
        "tiny", only=["test_level", "test_plain"], n_seeds=2, n_jobs=1, out=tmp_path,
        progress=False, log=lambda line: events.append(line.split(":")[0]),
    )  # fmt: skip
    assert events == [
        "test_level (seed 0)",
        "test_level (seed 1)",
        "figure test_level.png",
        "test_plain (seed 0)",
        "figure test_plain.png",
        "figure bands.png",
    ]
    assert {p.name for p in tmp_path.iterdir()} >= {"test_level.png", "test_plain.png"}


def test_seeds_give_bands_in_results_json_summary_and_figures(register, tmp_path):
    register(se.LEVEL, se.PLAIN)
    out = tmp_path / "run"
    results = reproduce(
        "tiny", only=["test_level", "test_plain"], seed=5, n_seeds=3, n_jobs=1,
        out=out, progress=False,
    )  # fmt: skip
    assert isinstance(results, ReproduceResults) and list(results) == ["test_level", "test_plain"]
    assert results.seeds == {"test_level": [5, 6, 7], "test_plain": [5]}
    assert results["test_level"].value == _noise(5)  # the first seed's result, as before
    values = [_noise(s) for s in (5, 6, 7)]
    band = results.headline["test_level"]["value"]
    assert band == {
        "values": values,
        "min": min(values),
        "median": sorted(values)[1],
        "max": max(values),
    }
    assert results.headline["test_level"]["twice"]["values"] == [2 * v for v in values]
    assert results.headline["test_plain"] is None
    assert [r.value for r in results.runs["test_level"]] == values

    saved = json.loads((out / "results.json").read_text())
    assert saved["test_level"]["value"] == values[0] and saved["test_level"]["level"] == 1.0
    assert saved["test_level"]["seeds"] == [5, 6, 7]
    assert saved["test_level"]["headline"]["value"] == band
    assert saved["test_plain"]["seeds"] == [5] and saved["test_plain"]["headline"] is None
    assert saved["meta"]["n_seeds"] == 3 and saved["meta"]["seed"] == 5
    assert saved["meta"]["provenance"] == {"test_level": se.LEVEL.provenance}

    summary = (out / "summary.md").read_text()
    assert summary == summary_table(results) + "\n"
    b = band
    assert f"| test_level | value | {b['median']:.3g} [{b['min']:.3g}, {b['max']:.3g}] | 3 |" in (
        summary
    )
    assert "One seed (5), no headline numbers to band: test_plain." in summary
    assert "- test_level: level" in summary and "noise" not in summary.split("- test_level")[1]
    for name in ("test_level.png", "test_plain.png", "bands.png"):
        assert (out / name).stat().st_size > 1000


def test_default_seeds_follow_the_size(register, monkeypatch):
    register(se.LEVEL)
    assert reproduce("tiny", only="test_level", n_jobs=1, progress=False).seeds == {
        "test_level": [0]
    }
    quick = reproduce("quick", only="test_level", n_jobs=1, progress=False)
    assert quick.seeds == {"test_level": [0, 1, 2]}


def test_an_experiment_with_seeds_inside_runs_once_and_is_named(register):
    inside = dataclasses.replace(se.LEVEL, name="test_inside", seeds_inside=True)
    register(inside)
    got = reproduce("quick", only="test_inside", n_jobs=1, progress=False)
    assert got.seeds == {"test_inside": [0]}
    assert got.headline["test_inside"]["value"]["values"] == [got["test_inside"].value]
    assert "Run once over seeds of their own" in summary_table(got)
    assert "test_inside" in summary_table(got).split("Run once over seeds of their own")[1]


def test_plot_bands_hook_draws_the_experiment_figure_from_every_seed(register, tmp_path):
    register(se.FIT)
    seen = []
    original = se.FitResult.plot_bands

    def spy(results):
        seen.append(len(results))
        return original(results)

    se.FitResult.plot_bands = staticmethod(spy)
    try:
        reproduce("tiny", only="test_fit", n_seeds=2, n_jobs=1, out=tmp_path, progress=False)
    finally:
        se.FitResult.plot_bands = staticmethod(original)
    assert seen == [2] and (tmp_path / "test_fit.png").exists()


@pytest.mark.slow
def test_numbers_do_not_depend_on_n_jobs(register):
    """Three trained models per seed set, in this process and on two worker processes."""
    register(se.FIT, se.LEVEL)
    kwargs = dict(only=["test_fit", "test_level"], n_seeds=3, progress=False)
    here = reproduce("tiny", n_jobs=1, **kwargs)
    spread = reproduce("tiny", n_jobs=2, **kwargs)
    assert spread.meta["n_jobs"] == 2 and here.meta["n_jobs"] == 1
    assert spread.headline == here.headline
    assert len(set(here.headline["test_fit"]["r2"]["values"])) == 3  # the seeds differ


def test_n_jobs_is_never_more_than_the_runs(register):
    register(se.PLAIN)
    results = reproduce("tiny", only="test_plain", n_jobs=8, n_seeds=3, progress=False)
    assert results.meta["n_jobs"] == 1  # one run (no headline): this process


def test_summary_of_a_plain_dict_is_unchanged():
    assert summary_table({}) == "| experiment | measure | value |\n|---|---|---|"


# --- plan --------------------------------------------------------------------------------


def test_plan_counts_every_seed_and_places_the_runs_on_processes(register):
    register(se.LEVEL, se.PLAIN)
    est = plan("tiny", only=["test_level", "test_plain"], device="cpu", n_seeds=3, n_jobs=2)
    level, plain = est["test_level"], est["test_plain"]
    assert (level["seeds"], level["fits"], level["steps"]) == (3, 3, 30)
    assert (plain["seeds"], plain["fits"], plain["steps"]) == (1, 1, 10)
    assert level["seconds"] == pytest.approx(3 * level["seconds_per_seed"], abs=0.11)
    assert est.n_jobs == 2
    runs = [level["seconds_per_seed"]] * 3 + [plain["seconds_per_seed"]]
    assert est.wall_seconds == pytest.approx(wall_time(runs, 2), abs=0.11)
    table = plan_table(est)
    assert "| test_level | 3 | 30 |" in table and "| test_plain | 1 | 10 |" in table
    assert "Estimated wall time on 2 processes:" in table


def test_wall_time_places_the_longest_runs_first():
    assert wall_time([10, 10, 10], 1) == 30
    assert wall_time([10, 10, 10], 3, cores=3) == 10 + 5  # + the start of the processes
    assert wall_time([8, 5, 4, 3], 2, cores=2) == 11 + 5  # {8, 3} and {5, 4}
    assert wall_time([10, 10, 10], 3, cores=1) == 30 + 5  # three processes share one core


# --- the reference check -----------------------------------------------------------------


def test_check_passes_on_a_fresh_run_and_fails_naming_a_changed_setting(register, tmp_path):
    register(se.LEVEL, se.PLAIN)
    first = reproduce(
        "tiny", only=["test_level", "test_plain"], n_seeds=3, n_jobs=1, progress=False
    )
    ref = write_reference(first, tmp_path / "ref.json", command="the test")
    entry = ref["experiments"]["test_level"]["value"]
    spread = entry["max"] - entry["min"]
    assert entry["tolerance"] == max(3 * spread, 0.05 * abs(entry["median"]), 1e-3)
    assert list(ref["experiments"]) == ["test_level"]  # no headline: nothing to refer to
    assert ref["made"]["command"] == "the test" and ref["made"]["seeds"] == {
        "test_level": [0, 1, 2]
    }
    assert {"system", "processor", "cores"} <= set(ref["made"]["machine"])
    assert load_reference(tmp_path / "ref.json") == ref

    fresh = reproduce("tiny", only="test_level", n_seeds=3, n_jobs=1, progress=False)
    outcome = check_reference(fresh, tmp_path / "ref.json")
    assert outcome.ok and outcome.mismatches == []
    assert [(r["number"], r["ok"]) for r in outcome.rows] == [("value", True), ("twice", True)]
    assert "| test_level.value |" in outcome.table()

    # a setting changed: the level of the preset, 1.0 -> 1.3
    _change_level(1.3)
    moved = reproduce("tiny", only="test_level", n_seeds=3, n_jobs=1, progress=False)
    outcome = check_reference(moved, tmp_path / "ref.json")
    assert not outcome.ok
    assert outcome.mismatches == ["test_level.value", "test_level.twice"]
    assert outcome.message().startswith(
        "2 of 2 numbers outside the reference of 'tiny': test_level.value (measured 1.316, "
        "reference 1.016 +- 0.06542), test_level.twice (measured 2.632"
    )
    assert "| NO |" in outcome.table()


def test_check_reads_a_run_directory_and_catches_a_doctored_number(register, tmp_path):
    register(se.LEVEL)
    run = reproduce("tiny", only="test_level", out=tmp_path / "run", n_jobs=1, progress=False)
    write_reference(tmp_path / "run", tmp_path / "ref.json")
    assert check_reference(tmp_path / "run", tmp_path / "ref.json").ok
    assert check_reference(tmp_path / "run" / "results.json", tmp_path / "ref.json").ok
    data = json.loads((tmp_path / "run" / "results.json").read_text())
    data["test_level"]["headline"]["twice"]["median"] += 0.5
    (tmp_path / "run" / "results.json").write_text(json.dumps(data))
    outcome = check_reference(tmp_path / "run", tmp_path / "ref.json")
    assert outcome.mismatches == ["test_level.twice"]
    assert run.headline["test_level"]["twice"]["median"] + 0.5 == pytest.approx(
        outcome.rows[1]["measured"]
    )


def test_check_names_missing_numbers_and_experiments_not_run(register, tmp_path):
    register(se.LEVEL, se.FIT)
    run = reproduce("tiny", only="test_level", n_jobs=1, progress=False)
    ref = write_reference(run)
    ref["experiments"]["test_level"]["gone"] = {"median": 1.0, "tolerance": 0.1}
    ref["experiments"]["test_fit"] = {"r2": {"median": 0.5, "tolerance": 0.1}}
    outcome = check_reference(run, ref)
    assert outcome.mismatches == ["test_level.gone"] and outcome.not_run == ["test_fit"]
    assert "| test_level.gone | 1 | 0.1 | missing | NO |" in outcome.table()
    assert "Not run, not compared: test_fit." in outcome.table()
    nothing = check_reference(
        run, {**ref, "experiments": {"test_fit": ref["experiments"]["test_fit"]}}
    )
    assert not nothing.ok and "no number compared" in nothing.message()


def test_check_says_where_the_run_was_made_otherwise_than_the_reference(register):
    register(se.LEVEL)
    run = reproduce("tiny", only="test_level", n_seeds=2, n_jobs=1, progress=False)
    ref = write_reference(run)
    same = check_reference(run, ref)
    assert same.ok and same.differences == [] and "otherwise" not in same.table()
    ref["made"]["device"] = "cuda:0"
    ref["made"]["seeds"] = {"test_level": [3, 4]}
    ref["experiments"]["test_level"]["value"]["median"] += 1.0
    outcome = check_reference(run, ref)
    assert outcome.differences == [
        "the run trained on cpu, the reference on cuda:0 (float arithmetic differs between "
        "devices, and so may a number near its tolerance)",
        "other seeds: test_level [0, 1] (reference [3, 4])",
    ]
    assert outcome.message().endswith(
        "The run was made otherwise than the reference: other seeds: test_level [0, 1] "
        "(reference [3, 4])."
    )
    assert "Made otherwise than the reference: the run trained on cpu" in outcome.table()
    assert outcome.to_dict()["differences"] == outcome.differences
    ref["made"]["device"] = "cpu"  # only the kind of device counts: cuda:0 and cuda:1 are alike
    ref["made"].pop("seeds")  # a reference without seeds: none compared
    assert check_reference(run, ref).differences == []


def test_non_finite_numbers_match_only_themselves(register, tmp_path):
    register(se.LEVEL)
    run = reproduce("tiny", only="test_level", n_jobs=1, progress=False)
    run.headline["test_level"]["value"] = {"values": [math.inf], "min": math.inf,
                                           "median": math.inf, "max": math.inf}  # fmt: skip
    ref = write_reference(run)
    assert ref["experiments"]["test_level"]["value"]["tolerance"] == 1e-3
    assert check_reference(run, ref).ok
    ref["experiments"]["test_level"]["value"]["median"] = 64.0
    assert check_reference(run, ref).mismatches == ["test_level.value"]


def test_write_reference_makes_its_directory(register, tmp_path):
    register(se.LEVEL)
    results = reproduce("tiny", only="test_level", n_seeds=2, n_jobs=1, progress=False)
    path = tmp_path / "new" / "deeper" / "ref.json"
    written = write_reference(results, path)
    assert json.loads(path.read_text()) == written
    assert check_reference(results, reference=path).ok


def test_numbers_that_move_in_steps_get_their_records_relative_tolerance(register):
    stepped = dataclasses.replace(
        se.LEVEL, name="test_stepped", reference_rtol={"tw*": 0.5}, reference_atol={"v*": 0.3}
    )
    register(stepped)
    run = reproduce("tiny", only="test_stepped", n_seeds=2, n_jobs=1, progress=False)
    ref = write_reference(run)["experiments"]["test_stepped"]
    assert ref["twice"]["tolerance"] == pytest.approx(0.5 * abs(ref["twice"]["median"]))
    assert ref["value"]["tolerance"] == 0.3  # not the spread (about 0.03) nor 5% of the median
    with pytest.raises(ValueError, match="reference_rtol maps number patterns"):
        dataclasses.replace(se.LEVEL, reference_rtol={"x": -1.0})
    with pytest.raises(ValueError, match="reference_atol maps number patterns"):
        dataclasses.replace(se.LEVEL, reference_atol={"x": True})


def test_seeds_run_inside_give_their_own_spread():
    from stsq_learn.experiments._check import _inner_spread

    def band(m):
        return {"median": m, "min": m, "max": m, "values": [m]}

    numbers = {"r2": band(0.5), "r2_min": band(0.4), "r2_max": band(0.7), "other": band(1.0)}
    assert _inner_spread(numbers, "r2") == pytest.approx(0.3)
    assert _inner_spread(numbers, "r2_max") == pytest.approx(0.3)
    assert _inner_spread(numbers, "other") == 0.0


def test_tolerance_is_three_times_the_spread_or_a_floor():
    assert tolerance({"min": 1.0, "median": 1.1, "max": 1.5}) == 1.5
    assert tolerance({"min": 16.0, "median": 16.0, "max": 16.0}) == 0.8
    assert tolerance({"min": 0.0, "median": 0.0, "max": 0.0}) == 1e-3


def test_reference_errors_name_the_problem(register, tmp_path):
    register(se.LEVEL, se.PLAIN)
    with pytest.raises(ValueError, match="no reference numbers are shipped for preset 'gpu'"):
        load_reference("gpu")
    run = reproduce("tiny", only="test_level", n_jobs=1, progress=False)
    other = write_reference(run)
    other["preset"] = "quick"
    with pytest.raises(ValueError, match="the reference is of preset 'quick' and the run of"):
        check_reference(run, other)
    with pytest.raises(ValueError, match="is not a reference of format"):
        load_reference({"preset": "tiny"})
    with pytest.raises(ValueError, match="is neither a preset"):
        load_reference(tmp_path / "nothing.json")
    with pytest.raises(TypeError, match="got a plain dict"):
        check_reference(dict(run))
    plain = reproduce("tiny", only="test_plain", n_jobs=1, progress=False)
    with pytest.raises(ValueError, match="the run has no headline numbers"):
        write_reference(plain)
    with pytest.raises(ValueError, match=r"floors names no headline number of the run: x\.y"):
        write_reference(run, floors={"x.y": 1.0})
    gpu = reproduce("gpu", only="test_level", n_seeds=1, n_jobs=1, progress=False)
    with pytest.raises(ValueError, match="no reference numbers are shipped for preset 'gpu'"):
        check_reference(gpu)


# --- the command line --------------------------------------------------------------------


def test_a_reference_names_the_command_main_ran(register, tmp_path, monkeypatch):
    """Not the caller's sys.argv: main(argv) from pytest, or under xdist (sys.argv ["-c"])."""
    from stsq_learn.experiments._check import command_line

    register(se.LEVEL)
    monkeypatch.setattr("sys.argv", ["-c"])
    assert command_line() == "stsq-learn"
    assert command_line(["reproduce", "--tiny"]) == "stsq-learn reproduce --tiny"
    ref = tmp_path / "ref.json"
    argv = ["reproduce", "--tiny", "--only", "test_level", "--no-progress", "--jobs", "1"]
    argv += ["--out", str(tmp_path / "o"), "--write-reference", str(ref)]
    assert main(argv) == 0
    assert json.loads(ref.read_text())["made"]["command"] == "stsq-learn " + " ".join(argv)
    monkeypatch.setattr("sys.argv", ["stsq-learn", *argv])  # the console script's own
    assert main() == 0
    assert json.loads(ref.read_text())["made"]["command"] == "stsq-learn " + " ".join(argv)
    monkeypatch.setattr("sys.argv", [])
    assert command_line() is None


def test_cli_check_passes_then_fails_naming_the_number(register, tmp_path, capsys):
    register(se.LEVEL)
    ref = tmp_path / "ref.json"
    base = ["reproduce", "--tiny", "--only", "test_level", "--no-progress", "--jobs", "1"]
    argv = [*base, "--seeds", "3", "--out", str(tmp_path / "a"), "--write-reference", str(ref)]
    assert main(argv) == 0
    assert "Wrote the reference numbers of --tiny to" in capsys.readouterr().out
    made = json.loads(ref.read_text())["made"]
    # The command main ran, not the test runner's sys.argv (under xdist: "stsq-learn" alone).
    assert made["command"] == "stsq-learn " + " ".join(argv)
    assert made["seeds"] == {"test_level": [0, 1, 2]}
    assert main([*base, "--seeds", "3", "--out", str(tmp_path / "b"), "--reference", str(ref)]) == 0
    printed = capsys.readouterr().out
    assert "| number | reference | tolerance | measured | ok |" in printed
    assert "every one of the 2 reference numbers of 'tiny' matched." in printed
    _change_level(1.3)  # a setting changed
    argv = [*base, "--out", str(tmp_path / "c"), "--reference", str(ref)]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "| NO |" in captured.out
    assert "stsq-learn reproduce --check: " in captured.err and "test_level.value" in captured.err


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--gpu", "--check"], "no reference numbers are shipped for preset 'gpu'"),
        (["--tiny", "--seeds", "0"], "--seeds must be a positive integer or None, got 0."),
        (["--tiny", "--jobs", "-3"], "--jobs must be a positive integer, -1"),
        (["--tiny", "--seed", "4294967295", "--seeds", "2"], "--seeds=2 from --seed=4294967295"),
        (["--tiny", "--write-reference", "/dev/null/ref.json"], "'/dev/null' is a file"),
    ],
)
def test_cli_refuses_bad_check_options_before_any_work(monkeypatch, capsys, argv, fragment):
    import stsq_learn.experiments._reproduce as rep

    def work(*args, **kwargs):
        raise AssertionError("work started")

    monkeypatch.setattr(rep, "_run", work)
    monkeypatch.setattr(rep, "estimate", work)
    with pytest.raises(SystemExit) as info:
        main(["reproduce", *argv, "--no-progress"])
    assert info.value.code == 2
    assert fragment in capsys.readouterr().err


def test_cli_reference_of_another_size_is_refused(register, tmp_path, capsys):
    register(se.LEVEL)
    run = reproduce("tiny", only="test_level", n_jobs=1, progress=False)
    ref = write_reference(run)
    ref["preset"] = "quick"
    (tmp_path / "q.json").write_text(json.dumps(ref))
    with pytest.raises(SystemExit):
        main(
            ["reproduce", "--tiny", "--only", "test_level", "--reference", str(tmp_path / "q.json")]
        )
    assert "is the reference of --quick, and this run is --tiny" in capsys.readouterr().err


# --- the shipped references ---------------------------------------------------------------


def test_shipped_references_are_valid_and_name_registered_numbers():
    assert "tiny" in shipped_references()
    for preset in shipped_references():
        ref = load_reference(preset)
        assert ref["preset"] == preset
        assert {"stsq_learn", "date", "command", "machine"} <= set(ref["made"])
        for name, numbers in ref["experiments"].items():
            assert name in RECORDS, name
            for entry in numbers.values():
                assert entry["tolerance"] > 0
                if math.isfinite(entry["median"]):  # a width not reached is NaN, seed by seed
                    assert entry["min"] <= entry["median"] <= entry["max"]


@pytest.mark.slow
def test_a_fresh_tiny_run_matches_the_shipped_reference():
    ref = load_reference("tiny")
    names = list(ref["experiments"])
    assert names == [n for n in RECORDS if RECORDS[n].headline is not None]
    # The shipped references are CPU numbers (a CUDA run rounds otherwise).
    run = reproduce("tiny", only=names, device="cpu", n_jobs=2, progress=False)
    outcome = check_reference(run)
    assert outcome.ok, outcome.message()
    assert not outcome.not_run and not outcome.not_referenced


def test_the_tiny_check_fails_naming_the_numbers_a_changed_setting_moves(monkeypatch):
    # The convergence preset at half its step: gamma (the diagonal's scale) moves.
    preset = dict(RECORDS["convergence"].presets["tiny"])
    preset["estimator"] = clone(preset["estimator"]).set_params(learning_rate_init=0.5)
    monkeypatch.setitem(RECORDS["convergence"].presets, "tiny", preset)
    run = reproduce("tiny", only="convergence", device="cpu", n_jobs=1, progress=False)
    outcome = check_reference(run)
    assert not outcome.ok
    assert "convergence.same_step.gamma" in outcome.mismatches
    assert all(name.startswith("convergence.") for name in outcome.mismatches)
    assert "convergence.same_step.gamma" in outcome.message()


def test_a_run_hands_the_memory_it_freed_back_to_the_system():
    """What loky read as a leak (its warning "A worker stopped ..."): freed heap kept by glibc.

    400 MB of 100 kB blocks come from the heap; freed, glibc keeps them and the
    resident size stays up; ``release_memory`` (after every run) gives them back.
    """
    psutil = pytest.importorskip("psutil")
    torch = pytest.importorskip("torch")
    from stsq_learn.experiments import _seeds

    if _seeds._malloc_trim() is None:
        pytest.skip("the C library has no malloc_trim (not glibc)")
    process = psutil.Process()
    blocks = [torch.ones(25_000) for _ in range(4000)]  # 100 kB each, under mmap's threshold
    held = process.memory_info().rss
    del blocks
    _seeds.release_memory()
    assert process.memory_info().rss < held - 300e6
