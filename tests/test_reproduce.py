"""``reproduce``: one call per experiment with every seed, results.json, figures, the check.

Throwaway experiments (``seed_experiments``) are registered for a test and the
registry restored afterwards, as in ``test_registry``.
"""

import dataclasses
import json
import math

import matplotlib
import numpy as np
import pytest
import seed_experiments as se
from user_tasks import PairMeanTask

import stsq_learn
from stsq_learn import registry
from stsq_learn.cli import main
from stsq_learn.experiments import (
    RESULTS_FORMAT,
    ReproduceResults,
    check_reference,
    load_reference,
    load_results,
    plan,
    plan_table,
    plot_results,
    reproduce,
    summary_table,
    write_reference,
)
from stsq_learn.experiments._check import shipped_references, tolerance
from stsq_learn.experiments._record import SIZES
from stsq_learn.experiments._registered import RECORDS
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


@pytest.fixture
def no_work(monkeypatch):
    """Any training or timing fails the test: what is checked before work is checked first."""
    import stsq_learn.experiments._reproduce as rep

    def work(*args, **kwargs):
        raise AssertionError("work started")

    monkeypatch.setattr(rep._runs, "run_all", work)
    monkeypatch.setattr(rep.StudyPlan, "estimate", work)


# --- options ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "fragment"),
    [
        ({"n_seeds": 0}, ValueError, "n_seeds must be an integer >= 1, got 0."),
        ({"n_seeds": 2.5}, TypeError, "n_seeds must be an integer, got 2.5"),
        ({"n_seeds": True}, TypeError, "n_seeds must be an integer, got True"),
        ({"n_jobs": 0}, ValueError, "n_jobs must be None, a positive int or a negative one"),
        ({"n_jobs": 1.0}, TypeError, "n_jobs must be None or an int, got float: 1.0."),
        ({"seed": "0"}, TypeError, "seed must be an int, got str: '0'."),
        ({"seed": -1}, ValueError, "must lie in [0, 2147483646] (2**31 - 2), got -1."),
        # the studies' one seed check: the last seed of the run is past the range
        ({"seed": 2**31 - 3, "n_seeds": 3}, ValueError, "run the seeds 2147483645 to 2147483647"),
    ],
)
def test_bad_seed_and_job_options_fail_before_any_work(no_work, tmp_path, options, error, fragment):
    with pytest.raises(error) as info:
        reproduce("tiny", out=tmp_path / "o", progress=False, **options)
    assert fragment in str(info.value)
    assert not (tmp_path / "o").exists()
    if "seed" not in options:
        with pytest.raises(error, match=r"n_seeds|n_jobs"):
            plan("tiny", **options)


def test_the_seed_check_is_the_studies_one():
    from stsq_learn.studies import check_seeds

    # The largest seed a study takes is the largest reproduce takes, with the same message.
    assert check_seeds([2**31 - 2]) == (2**31 - 2,)
    with pytest.raises(ValueError) as study:
        check_seeds([2**31 - 1])
    with pytest.raises(ValueError) as run:
        reproduce("tiny", seed=2**31 - 1, progress=False)
    assert str(study.value) in str(run.value)


# --- one call per experiment, every seed in its result -------------------------------------


def test_each_figure_is_drawn_once_its_experiment_is_done(register, tmp_path, monkeypatch):
    """The figures are drawn while the other runs go on, not all at the end."""
    from stsq_learn.experiments import _reproduce

    register(se.LEVEL, se.PLAIN)
    events = []
    save = _reproduce._save_figure

    def saving(fig, path):
        events.append(f"figure {path.name}")
        return save(fig, path)

    monkeypatch.setattr(_reproduce, "_save_figure", saving)
    reproduce(
        "tiny", only=["test_level", "test_plain"], n_seeds=2, n_jobs=1, out=tmp_path,
        progress=False, log=lambda line: events.append(line.split(":")[0]),
    )  # fmt: skip
    assert events == [
        "test_level",
        "figure test_level.png",
        "test_plain",
        "figure test_plain.png",
        "figure bands.png",
    ]


def test_seeds_give_bands_in_results_json_summary_and_figures(register, tmp_path):
    register(se.LEVEL, se.PLAIN)
    out = tmp_path / "run"
    results = reproduce(
        "tiny", only=["test_level", "test_plain"], seed=5, n_seeds=3, n_jobs=1,
        out=out, progress=False,
    )  # fmt: skip
    assert isinstance(results, ReproduceResults) and list(results) == ["test_level", "test_plain"]
    # Every experiment runs every seed, in one call: one result holds them all.
    assert results.seeds == {"test_level": [5, 6, 7], "test_plain": [5, 6, 7]}
    values = [1.0 + se.noise(s) for s in (5, 6, 7)]
    assert results["test_level"].tables["levels"]["value"].tolist() == values
    band = results.headline["test_level"]["value"]
    assert band == {"values": values, "min": min(values), "median": sorted(values)[1],
                    "max": max(values)}  # fmt: skip
    assert results.headline["test_level"]["twice"]["values"] == [2 * v for v in values]
    assert results.headline["test_plain"] is None

    saved = json.loads((out / "results.json").read_text())
    assert saved["format"] == RESULTS_FORMAT == "stsq-learn results 2"
    level = saved["experiments"]["test_level"]
    assert level["tables"]["levels"]["columns"]["seed"] == [5, 6, 7]  # every seed's rows
    assert level["headline"]["value"] == band and level["settings"] == {"level": 1.0}
    assert saved["experiments"]["test_plain"]["headline"] is None
    assert saved["meta"]["seeds"] == [5, 6, 7] and saved["meta"]["seed"] == 5
    assert saved["meta"]["provenance"] == {"test_level": se.LEVEL.provenance}

    summary = (out / "summary.md").read_text()
    assert summary == summary_table(results) + "\n"
    assert "| level | seeds | 3 |" in summary
    b = band
    row = f"| test_level | value | {b['median']:.3g} [{b['min']:.3g}, {b['max']:.3g}] | 3 |"
    assert row in summary
    assert "- test_level: level" in summary and "noise" not in summary.split("- test_level")[1]
    for name in ("test_level.png", "test_plain.png", "bands.png"):
        assert (out / name).stat().st_size > 1000


def test_default_seeds_follow_the_size(register):
    register(se.LEVEL)
    assert reproduce("tiny", only="test_level", n_jobs=1, progress=False).seeds == {
        "test_level": [0]
    }
    quick = reproduce("quick", only="test_level", n_jobs=1, progress=False)
    assert quick.seeds == {"test_level": [0, 1, 2]}


@pytest.mark.slow
def test_numbers_do_not_depend_on_n_jobs(register):
    """Trained models of every seed, in this process and on two worker processes."""
    register(se.FIT, se.LEVEL)
    kwargs = dict(only=["test_fit", "test_level"], n_seeds=3, progress=False)
    here = reproduce("tiny", n_jobs=1, **kwargs)
    spread = reproduce("tiny", n_jobs=2, **kwargs)
    assert spread.meta["n_jobs"] == 2 and here.meta["n_jobs"] == 1
    assert spread.headline == here.headline
    assert len(set(here.headline["test_fit"]["r2"]["values"])) == 3  # the seeds differ


def test_n_jobs_is_never_more_than_the_experiments(register):
    register(se.PLAIN)
    results = reproduce("tiny", only="test_plain", n_jobs=8, n_seeds=3, progress=False)
    assert results.meta["n_jobs"] == 1  # one experiment: this process


def test_a_users_study_runs_under_reproduce_with_its_seeds_together(register, tmp_path):
    register(se.WIDTH)
    results = reproduce("tiny", only="test_width", n_seeds=2, out=tmp_path, progress=False)
    widths = results["test_width"].tables["widths"]
    assert sorted(set(widths["seed"])) == [0, 1]
    assert set(results.headline["test_width"]) == {"width_T4", "width_T8"}
    one = se.width_study(seeds=[1])  # seed by seed, the numbers of a one-seed run
    assert one.bands() == {k: {**b, "values": b["values"][1:], "min": b["values"][1],
                               "median": b["values"][1], "max": b["values"][1]}
                           for k, b in results["test_width"].bands().items()}  # fmt: skip


# --- results.json: every result whole, redrawn without training -----------------------------


def test_results_json_round_trips_and_plot_redraws_every_png_pixel_for_pixel(register, tmp_path):
    register(se.LEVEL, se.FIT)
    out = tmp_path / "run"
    results = reproduce("tiny", only=["test_level", "test_fit"], n_seeds=2, out=out,
                        n_jobs=1, progress=False)  # fmt: skip
    loaded = load_results(out)
    assert loaded.preset == "tiny" and list(loaded) == list(results)
    for name in results:
        assert loaded[name] == results[name]
    assert loaded.headline == results.headline
    assert summary_table(loaded) == summary_table(results)
    assert main(["plot", str(out / "results.json"), "--out", str(tmp_path / "again")]) == 0
    drawn = sorted(p.name for p in (tmp_path / "again").iterdir())
    assert drawn == ["bands.png", "test_fit.png", "test_level.png"]
    for name in drawn:
        first = matplotlib.image.imread(out / name)
        again = matplotlib.image.imread(tmp_path / "again" / name)
        assert first.shape == again.shape and np.array_equal(first, again), name
    assert [p.name for p in plot_results(out, tmp_path / "third")] == [
        "test_level.png", "test_fit.png", "bands.png"
    ]  # fmt: skip


def test_a_07_results_json_is_refused_naming_its_format(tmp_path, capsys):
    old = {"meta": {"stsq_learn": "0.6.0", "preset": "tiny"}, "convergence": {"seeds": [0]}}
    (tmp_path / "results.json").write_text(json.dumps(old))
    with pytest.raises(ValueError, match=r"results.json of stsq-learn 0.6.0, written without a "
                       r"format \(0.7 and earlier: one seed's tables"):  # fmt: skip
        load_results(tmp_path)
    with pytest.raises(SystemExit):
        main(["plot", str(tmp_path), "--out", str(tmp_path / "png")])
    assert "written without a format" in capsys.readouterr().err
    (tmp_path / "results.json").write_text(json.dumps({"format": "stsq-learn results 9"}))
    with pytest.raises(ValueError, match=r"format: 'stsq-learn results 9'"):
        load_results(tmp_path / "results.json")
    (tmp_path / "results.json").write_text("{")
    with pytest.raises(ValueError, match="is not JSON"):
        load_results(tmp_path)
    with pytest.raises(ValueError, match=r"no results\.json there"):
        load_results(tmp_path / "nowhere")


# --- plan ----------------------------------------------------------------------------------


def test_plan_counts_every_seed_and_places_the_runs_on_processes(register):
    register(se.LEVEL, se.PLAIN)
    est = plan("tiny", only=["test_level", "test_plain"], device="cpu", n_seeds=3, n_jobs=2)
    level, plain = est["test_level"], est["test_plain"]
    assert (level["seeds"], level["fits"], level["steps"]) == (3, 1, 10)
    assert (plain["seeds"], plain["fits"], plain["steps"]) == (3, 1, 10)
    assert est.n_jobs == 2
    assert est.wall_seconds == pytest.approx(
        wall_time([level["seconds"], plain["seconds"]], 2), abs=0.11
    )
    table = plan_table(est)
    assert "| test_level | 1 | 10 |" in table and "Estimated wall time on 2 processes:" in table


def test_wall_time_places_the_longest_runs_first():
    assert wall_time([10, 10, 10], 1) == 30
    assert wall_time([10, 10, 10], 3, cores=3) == 10 + 5  # + the start of the processes
    assert wall_time([8, 5, 4, 3], 2, cores=2) == 11 + 5  # {8, 3} and {5, 4}
    assert wall_time([10, 10, 10], 3, cores=1) == 30 + 5  # three processes share one core


@pytest.mark.parametrize("size", SIZES)
def test_every_registered_preset_plans_without_training(size):
    for name, record in RECORDS.items():
        work = record.planned_work(size)
        assert work and all(w.fits >= 0 and w.steps >= 0 for w in work), name


# --- the reference check -----------------------------------------------------------------


def test_check_passes_on_a_fresh_run_and_fails_naming_a_changed_setting(register, tmp_path):
    register(se.LEVEL, se.PLAIN)
    first = reproduce("tiny", only=["test_level", "test_plain"], n_seeds=3, n_jobs=1,
                      progress=False)  # fmt: skip
    ref = write_reference(first, tmp_path / "ref.json", command="the test")
    entry = ref["experiments"]["test_level"]["value"]
    spread = entry["max"] - entry["min"]
    assert entry["tolerance"] == max(3 * spread, 0.05 * abs(entry["median"]), 1e-3)
    assert list(ref["experiments"]) == ["test_level"]  # no headline: nothing to refer to
    assert ref["made"]["command"] == "the test"
    assert ref["made"]["seeds"] == {"test_level": [0, 1, 2]}
    assert {"system", "processor", "cores"} <= set(ref["made"]["machine"])
    assert load_reference(tmp_path / "ref.json") == ref

    fresh = reproduce("tiny", only="test_level", n_seeds=3, n_jobs=1, progress=False)
    outcome = check_reference(fresh, tmp_path / "ref.json")
    assert outcome.ok and outcome.mismatches == []
    assert [(r["number"], r["ok"]) for r in outcome.rows] == [("value", True), ("twice", True)]

    _change_level(1.3)  # a setting changed: the level of the preset, 1.0 -> 1.3
    moved = reproduce("tiny", only="test_level", n_seeds=3, n_jobs=1, progress=False)
    outcome = check_reference(moved, tmp_path / "ref.json")
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
    # The check reads the tables, not the bands written beside them: a doctored table moves it.
    data = json.loads((tmp_path / "run" / "results.json").read_text())
    data["experiments"]["test_level"]["tables"]["levels"]["columns"]["value"][0] += 0.5
    (tmp_path / "run" / "results.json").write_text(json.dumps(data))
    outcome = check_reference(tmp_path / "run", tmp_path / "ref.json")
    assert outcome.mismatches == ["test_level.value", "test_level.twice"]
    measured = run.headline["test_level"]["twice"]["median"] + 1.0
    assert outcome.rows[1]["measured"] == pytest.approx(measured)


def test_check_names_missing_numbers_and_experiments_not_run(register):
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
    assert "Made otherwise than the reference: the run trained on cpu" in outcome.table()


def test_non_finite_numbers_match_only_themselves(register, monkeypatch):
    register(se.LEVEL)
    run = reproduce("tiny", only="test_level", n_jobs=1, progress=False)
    inf = {"values": [math.inf], "min": math.inf, "median": math.inf, "max": math.inf}
    monkeypatch.setattr(ReproduceResults, "headline", {"test_level": {"value": inf}})
    ref = write_reference(run)
    assert ref["experiments"]["test_level"]["value"]["tolerance"] == 1e-3
    assert check_reference(run, ref).ok
    ref["experiments"]["test_level"]["value"]["median"] = 64.0
    assert check_reference(run, ref).mismatches == ["test_level.value"]


def test_numbers_that_move_in_steps_get_their_records_tolerances(register, tmp_path):
    stepped = dataclasses.replace(
        se.LEVEL, name="test_stepped", reference_rtol={"tw*": 0.5}, reference_atol={"v*": 0.3}
    )
    register(stepped)
    run = reproduce("tiny", only="test_stepped", n_seeds=2, n_jobs=1, progress=False)
    path = tmp_path / "new" / "deeper" / "ref.json"  # the directory is made
    ref = write_reference(run, path)["experiments"]["test_stepped"]
    assert json.loads(path.read_text())["experiments"]["test_stepped"] == ref
    assert ref["twice"]["tolerance"] == pytest.approx(0.5 * abs(ref["twice"]["median"]))
    assert ref["value"]["tolerance"] == 0.3  # not the spread (about 0.03) nor 5% of the median


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


# --- the command line --------------------------------------------------------------------


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
    assert "every one of the 2 reference numbers of 'tiny' matched." in capsys.readouterr().out
    _change_level(1.3)  # a setting changed
    assert main([*base, "--out", str(tmp_path / "c"), "--reference", str(ref)]) == 1
    captured = capsys.readouterr()
    assert "| NO |" in captured.out
    assert "stsq-learn reproduce --check: " in captured.err and "test_level.value" in captured.err


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--gpu", "--check"], "no reference numbers are shipped for preset 'gpu'"),
        (["--tiny", "--seeds", "0"], "--seeds must be an integer >= 1, got 0."),
        (["--tiny", "--jobs", "0"], "n_jobs must be None, a positive int or a negative one"),
        (["--tiny", "--seed", "2147483646", "--seeds", "2"], "run the seeds 2147483646 to"),
        (["--tiny", "--write-reference", "/dev/null/ref.json"], "'/dev/null' is a file"),
    ],
)
def test_cli_refuses_bad_options_before_any_work(no_work, capsys, argv, fragment):
    with pytest.raises(SystemExit) as info:
        main(["reproduce", *argv, "--no-progress"])
    assert info.value.code == 2
    assert fragment in capsys.readouterr().err


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
    # The shipped references are CPU numbers of seeds 0, 1, 2 (a CUDA run rounds otherwise).
    run = reproduce("tiny", only=names, device="cpu", n_seeds=3, n_jobs=2, progress=False)
    outcome = check_reference(run)
    assert outcome.ok, outcome.message()
    assert not outcome.not_run and not outcome.not_referenced


def test_the_tiny_check_fails_naming_the_numbers_a_changed_setting_moves(monkeypatch):
    # In-context regression trained a tenth of its steps: the preconditioner is far off.
    record = RECORDS["in_context_regression"]
    original = record.presets
    short = {**original, "tiny": original["tiny"].replace(n_steps=20)}
    object.__setattr__(record, "presets", short)  # a frozen record: the test's change, undone
    try:
        run = reproduce("tiny", only="in_context_regression", device="cpu", n_jobs=1,
                        n_seeds=3, progress=False)  # fmt: skip
    finally:
        object.__setattr__(record, "presets", original)
    outcome = check_reference(run)
    assert "in_context_regression.precond_error_isotropic" in outcome.mismatches
    assert all(name.startswith("in_context_regression.") for name in outcome.mismatches)


def test_a_run_hands_the_memory_it_freed_back_to_the_system():
    """What loky read as a leak (its warning "A worker stopped ..."): freed heap kept by glibc.

    400 MB of 100 kB blocks come from the heap; freed, glibc keeps them and the
    resident size stays up; ``release_memory`` (after every run) gives them back.
    """
    psutil = pytest.importorskip("psutil")
    torch = pytest.importorskip("torch")
    from stsq_learn.experiments import _runs

    if _runs._malloc_trim() is None:
        pytest.skip("the C library has no malloc_trim (not glibc)")
    process = psutil.Process()
    blocks = [torch.ones(25_000) for _ in range(4000)]  # 100 kB each, under mmap's threshold
    held = process.memory_info().rss
    del blocks
    _runs.release_memory()
    assert process.memory_info().rss < held - 300e6
