import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from children import child_env

from stsq_learn import __version__
from stsq_learn.cli import main
from stsq_learn.experiments import EXPERIMENTS


def test_version(capsys):
    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert __version__ in capsys.readouterr().out


def test_help_without_command(capsys):
    assert main([]) == 0
    assert "stsq-learn" in capsys.readouterr().out


def test_module_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "stsq_learn", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0 and __version__ in out.stdout


def _exit_code(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code, capsys.readouterr().err


@pytest.mark.slow
def test_reproduce_tiny_writes_figures_and_json_and_no_warning(tmp_path):
    """The console script on two worker processes (loky): its files, and a stderr of no warning."""
    out = tmp_path / "rq"
    argv = ["reproduce", "--tiny", "--out", str(out), "--no-progress", "--seed", "1", "--jobs", "2"]
    run = subprocess.run(
        [sys.executable, "-m", "stsq_learn", *argv],
        capture_output=True,
        text=True,
        env=child_env(OMP_NUM_THREADS="1"),
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "warning" not in run.stderr.lower(), run.stderr
    assert "single_location: done in" in run.stderr
    printed = run.stdout
    assert "| experiment |" in printed and "minimal width, transformer" in printed
    assert sorted(p.name for p in out.glob("*.png")) == [
        "bands.png",
        "classification.png",
        "convergence.png",
        "copying.png",
        "encodings.png",
        "in_context_regression.png",
        "length_generalization.png",
        "qsa.png",
        "retrieval.png",
        "separation.png",
        "single_location.png",
    ]
    payload = json.loads((out / "results.json").read_text())
    assert list(payload["experiments"]) == list(EXPERIMENTS)
    assert payload["meta"]["seed"] == 1 and payload["meta"]["torch_threads"] == 1
    assert payload["meta"]["seeds"] == [1]
    assert (out / "summary.md").read_text().startswith("| experiment |")


def test_reproduce_only_one_experiment_and_plot_it_again(tmp_path, capsys):
    out = tmp_path / "icl"
    argv = ["reproduce", "--tiny", "--only", "in_context_regression", "--out", str(out)]
    assert main([*argv, "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "| in_context_regression (d=5, N=20, 200 steps) |" in printed
    assert "| in_context_regression | precond_error_isotropic |" in printed
    assert sorted(p.name for p in out.iterdir()) == [
        "bands.png",
        "in_context_regression.png",
        "results.json",
        "summary.md",
    ]
    payload = json.loads((out / "results.json").read_text())
    assert list(payload["experiments"]) == ["in_context_regression"]
    section = payload["experiments"]["in_context_regression"]
    assert set(section["tables"]) == {"convergence", "lengths", "baselines"}
    assert (
        section["settings"]["n_steps"] == 200
        and "in_context_regression" in payload["meta"]["seconds"]
    )
    assert main(["plot", str(out), "--out", str(tmp_path / "again")]) == 0
    assert "Wrote in_context_regression.png, bands.png to" in capsys.readouterr().out


def test_reproduce_only_encodings(tmp_path, capsys):
    out = tmp_path / "enc"
    argv = ["reproduce", "--tiny", "--only", "encodings", "--out", str(out)]
    assert main([*argv, "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "| encodings (T=8, m=8, 30 steps, 200 rows) |" in printed
    assert "| | randomized, L=16 |" in printed and "(n/a: L < 16) | n/a / " in printed
    assert sorted(p.name for p in out.iterdir()) == [
        "bands.png",
        "encodings.png",
        "results.json",
        "summary.md",
    ]
    payload = json.loads((out / "results.json").read_text())
    assert set(payload["experiments"]) == {"encodings"}
    section = payload["experiments"]["encodings"]
    assert section["settings"]["codebook_factors"] == [1, 2, 4]
    table = section["tables"]["lengths"]["columns"]
    assert table["model"][:4] == ["stochastic"] * 2 + ["fixed"] * 2
    assert set(table["model"]) == {"stochastic", "fixed", "randomized", "sinusoidal", "L=8", "L=32"}
    # A codebook of 8 positions cannot score at T' = 16: not scored, its number NaN.
    assert math.isnan(section["headline"]["codebook_L8_r2_at_2T"]["median"])
    assert not math.isnan(section["headline"]["codebook_L16_r2_at_2T"]["median"])
    assert "encodings" in payload["meta"]["seconds"]


class _Work(Exception):
    """Raised where a command would start its work (a plan's timed steps, a run, a training)."""


@pytest.fixture
def no_work(monkeypatch):
    """Every piece of work of the CLI raises ``_Work``: a test sees whether validation ended."""
    import types

    import stsq_learn.cli as cli
    import stsq_learn.experiments._reproduce as rep

    def work(*args, **kwargs):
        raise _Work

    monkeypatch.setattr(rep._runs, "run_all", work)  # reproduce(), after its checks
    monkeypatch.setattr(rep.StudyPlan, "estimate", work)  # plan()'s timed steps
    monkeypatch.setattr(cli, "time", types.SimpleNamespace(perf_counter=work))  # fit, plan, run


# (argv, fragments the one-line error must hold: the option and the offending value).
_REPRODUCE_BAD = [
    # Issue 32 item 8: --plan skipped the scheduler (and without --plan, the plan's
    # timed steps ran before reproduce() refused it).
    (["--scheduler", "local:0"], ["scheduler='local:0'", "at least one worker"]),
    (["--scheduler", ""], ["scheduler=''", "is neither"]),
    (["--scheduler", "local:x"], ["scheduler='local:x'", "positive integer"]),
    (["--scheduler", "a b"], ["scheduler='a b'"]),
    (["--seed", "-1"], ["seed=-1", "must lie in [0, 2147483646] (2**31 - 2), got -1"]),
    (["--seed", "2147483647"], ["seed=2147483647", "got 2147483647"]),
    (["--seed", "x"], ["--seed", "'x'"]),
    (["--out", ""], ["out=''", "names no directory"]),
    (["--out", "/proc/no/such"], ["out='/proc/no/such'", "cannot be"]),
    (["--threads", "0"], ["--threads", "got 0"]),
    (["--threads", "-2"], ["--threads", "got -2"]),
    (["--device", "tpu"], ["device='tpu'", "is not a device"]),
    (["--device", ""], ["device=''"]),
    (["--only", "bogus"], ["only=['bogus']", "Unknown experiment 'bogus'"]),
    (["--only", ""], ["--only", "at least one value, got ''"]),
    (["--only", ","], ["--only", "got ','"]),
    (["--only", "convergence,,width"], ["--only", "empty item", "'convergence,,width'"]),
    (["--only", "width,width"], ["--only", "width given twice"]),
    (["--only", "length,length_generalization"], ["--only length,length_generalization"]),
]
_FIT_BAD = [
    # Issue 32 item 8: an empty list trained, printed an empty table and exited 0.
    (["--eval-lengths", ""], ["--eval-lengths", "at least one value, got ''"]),
    (["--eval-lengths", " , "], ["--eval-lengths", "got ' , '"]),
    (["--eval-lengths", "16,,32"], ["--eval-lengths", "empty item", "'16,,32'"]),
    (["--eval-lengths", "16,16"], ["--eval-lengths", "16 given twice"]),
    (["--eval-lengths", "16,016"], ["--eval-lengths", "twice in '16,016'"]),
    (["--eval-lengths", "16,x"], ["--eval-lengths", "list of integers, got '16,x'"]),
    (["--eval-lengths", "16,-4"], ["--eval-lengths 16,-4", "seq_len must be an integer >= 1"]),
    (["--eval-lengths", "0"], ["--eval-lengths 0", "got 0"]),
    (["--seq-len", "8", "--eval-lengths", "2"], ["--eval-lengths 2", "seq_len=2 cannot hold"]),
    (["--task", "averaging", "--seq-len", "8", "--eval-lengths", "4"], ["--eval-lengths 4"]),
    (["--model", "fcn", "--eval-lengths", "16,32"], ["--eval-lengths", "16,32", "training length"]),
    (["--seq-len", "-3"], ["seq_len must be an integer >= 1, got -3"]),
    (["--seq-len", "4", "--n-selected", "5"], ["n_selected=5", "cannot exceed"]),
    (["--n-features", "0"], ["n_features", "got 0"]),
    (["--n-selected", "0"], ["n_selected", "got 0"]),
    (["--task", "single_location", "--model", "fcn", "--n-selected", "2"], ["--n-selected 2"]),
    (["--task", "nope"], ["--task", "invalid choice: 'nope'"]),
    (["--task", ""], ["--task", "invalid choice: ''"]),
    (["--model", ""], ["--model", "invalid choice: ''"]),
    (["--width", "abc"], ["--width", "invalid int value: 'abc'"]),
    (["--width", "0"], ["'width' parameter of SparseTokenSelector", "Got 0"]),
    (["--online-steps", "0"], ["--online-steps", "got 0"]),
    (["--online-steps", "-5"], ["--online-steps", "got -5"]),
    (["--online-steps", "5", "--n-train", "100"], ["--n-train 100", "--online-steps 5"]),
    (["--online-steps", "5", "--max-iter", "3"], ["--max-iter 3", "--online-steps 5"]),
    (["--n-train", "0"], ["--n-train", "got 0"]),
    (["--n-eval", "-1"], ["--n-eval", "got -1"]),
    (["--n-eval", "1000000000000"], ["--n-eval 1000000000000", "GiB"]),
    (["--n-train", "1000000000000"], ["--n-train 1000000000000", "GiB"]),
    (["--n-eval", "1", "--eval-lengths", "100000000000"], ["T'=100000000000", "GiB"]),
    (["--seed", "-1"], ["--seed", "got -1"]),
    (["--seed", "4294967295"], ["--seed", "got 4294967295"]),
    (["--device", "tpu"], ["device='tpu'"]),
    (["--device", "cuda:x"], ["device='cuda:x'"]),
    (["--threads", "0"], ["--threads", "got 0"]),
    (["--learning-rate-init", "0"], ["'learning_rate_init' parameter", "Got 0"]),
    (["--learning-rate-init", "nan"], ["'learning_rate_init' parameter", "Got nan"]),
    (["--learning-rate", "step"], ["'learning_rate' parameter", "'step'"]),
    (["--learning-rate", "adaptive", "--online-steps", "5"], ["--learning-rate adaptive"]),
    (["--n-pe-samples-fit", "0"], ["'n_pe_samples_fit' parameter", "Got 0"]),
    (["--positional-encoding", "rotary"], ["'positional_encoding' parameter", "'rotary'"]),
    (["--positional-encoding", ""], ["'positional_encoding' parameter", "Got ''"]),
    (["--pe-sampling", "exact"], ["'pe_sampling' parameter", "'exact'"]),
    (["--max-positions", "0"], ["'max_positions' parameter", "Got 0"]),
    (["--max-iter", "0"], ["'max_iter' parameter", "Got 0"]),
    (["--solver", ""], ["'solver' parameter", "Got ''"]),
    (["--model", "fcn", "--positional-encoding", "fixed"], ["'positional_encoding'"]),
    (["--set", "alpha"], ["--set", "expected KEY=VALUE, got 'alpha'"]),
    (["--set", "=1"], ["--set", "got '=1'"]),
    (["--set", "bogus=1"], ["Invalid parameter 'bogus'"]),
    (["--set", "alpha=-1"], ["'alpha' parameter", "Got -1"]),
    (["--set", "alpha=1", "--set", "alpha=2"], ["--set alpha=1", "twice"]),
    (["--set", "width=8"], ["--set width=8", "--width"]),
    (["--set", "random_state=1"], ["--set random_state=1", "--seed"]),
    (["--task", "retrieval", "--set", "task='averaging'"], ["--set task='averaging'", "--task"]),
    (["--solver", "adam", "--set", "solver=sgd"], ["--set solver='sgd'", "--solver"]),
]
_BAD = [
    *[
        (["reproduce", *argv, *extra], frags)
        for argv, frags in _REPRODUCE_BAD
        for extra in ([], ["--plan"], ["--tiny"], ["--tiny", "--plan"])
    ],
    *[(["fit", *argv], frags) for argv, frags in _FIT_BAD],
    *[
        (["fit", *argv, "--online-steps", "3"], frags)
        for argv, frags in _FIT_BAD
        if "--online-steps" not in argv and "--n-train" not in argv and "--max-iter" not in argv
    ],
    (["reproduce", "--quick", "--full"], ["--full", "not allowed with argument --quick"]),
    (["reproduce", "--plan", "extra"], ["unrecognized arguments: extra"]),
    (["bogus"], ["invalid choice: 'bogus'"]),
]


@pytest.mark.parametrize(("argv", "fragments"), _BAD, ids=lambda v: " ".join(map(str, v)))
def test_every_bad_option_is_one_line_and_exit_2_before_any_work(argv, fragments, no_work, capsys):
    """Issue 32 item 8: each option, under each flag combination, checked before any work."""
    code, err = _exit_code(argv, capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("stsq-learn") and ": error: " in err, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


@pytest.mark.parametrize(
    "argv",
    [
        ["reproduce", "--plan", "--tiny", "--seed", "2147483646"],
        ["reproduce", "--plan", "--tiny", "--only", "width", "--scheduler", "tcp://host:8786"],
        ["reproduce", "--tiny", "--only", "separation,convergence", "--threads", "2"],
        ["fit", "--seq-len", "8", "--eval-lengths", "3,8"],  # T' = q is allowed
        ["fit", "--seed", "4294967294", "--n-selected", "3", "--n-train", "10"],
        ["fit", "--task", "single_location", "--model", "fcn", "--eval-lengths", "16"],
        ["fit", "--set", "solver=sgd", "--set", "alpha=1e-4", "--online-steps", "3"],
        ["fit", "--model", "fcn", "--max-iter", "2"],
    ],
    ids=" ".join,
)
def test_good_edge_values_pass_validation(argv, no_work, tmp_path, monkeypatch):
    if "--scheduler" in argv:
        pytest.importorskip("distributed")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(_Work):
        main(argv)
    assert list(tmp_path.iterdir()) == []  # the checks left nothing behind


def test_bad_scheduler_is_named_without_the_distributed_extra(capsys, monkeypatch):
    # The specification is checked before dask is imported, so the message names
    # the bad value whether or not the extra is installed.
    monkeypatch.setitem(sys.modules, "distributed", None)
    monkeypatch.delitem(sys.modules, "stsq_learn.distributed", raising=False)
    code, err = _exit_code(["reproduce", "--scheduler", "local:0"], capsys)
    assert code == 2
    assert "scheduler='local:0'" in err and "at least one worker" in err
    code, err = _exit_code(["reproduce", "--tiny", "--scheduler", "local:2"], capsys)
    assert code == 2 and "needs dask.distributed" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA present")
def test_cuda_without_cuda_is_a_usage_error(capsys):
    code, err = _exit_code(["fit", "--device", "cuda"], capsys)
    assert code == 2 and "CUDA is not available" in err


def test_fit_prints_r2_per_length(capsys):
    argv = ["fit", "--seq-len", "8", "--n-features", "2", "--n-selected", "2", "--width", "8"]
    argv += ["--online-steps", "30", "--eval-lengths", "8,16", "--n-eval", "100", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == "SparseTokenSelector" and report["training"] == "online"
    assert set(report["r2"]) == {"8", "16"}
    assert all(-1 < v <= 1 for v in report["r2"].values())


def test_fit_passes_schedule_and_training_draws(capsys):
    argv = ["fit", "--seq-len", "8", "--n-features", "2", "--n-selected", "2", "--width", "8"]
    argv += ["--online-steps", "10", "--learning-rate", "cosine", "--n-pe-samples-fit", "2"]
    argv += ["--learning-rate-init", "0.02", "--set", "alpha=1e-4", "--set", "solver=sgd"]
    argv += ["--eval-lengths", "8", "--n-eval", "50", "--json"]
    assert main(argv) == 0
    params = json.loads(capsys.readouterr().out)["params"]
    assert params["learning_rate"] == "cosine" and params["n_pe_samples_fit"] == 2
    assert params["learning_rate_init"] == 0.02 and params["alpha"] == 1e-4
    assert params["solver"] == "sgd"


def test_fit_fcn_table(capsys):
    argv = ["fit", "--model", "fcn", "--seq-len", "4", "--n-features", "2", "--n-selected"]
    argv += ["1", "--width", "8", "--n-train", "100", "--max-iter", "2", "--n-eval", "50"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "FCNSelector" in out and "| eval length T' | R^2 |" in out and "| 4 |" in out


@pytest.mark.parametrize(
    ("task", "model", "expected"),
    [
        ("averaging", "transformer", "AttentionRegressor"),
        ("retrieval", "transformer", "AttentionRegressor"),
        ("retrieval", "fcn", "FCNRegressor"),
    ],
)
def test_fit_takes_any_registered_task(capsys, task, model, expected):
    argv = ["fit", "--task", task, "--model", model, "--seq-len", "6", "--n-features", "2"]
    argv += ["--n-selected", "2", "--width", "8", "--online-steps", "10", "--n-eval", "40"]
    argv += ["--json"] + (["--eval-lengths", "6"] if model == "fcn" else [])
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == expected and report["task"] == task
    assert report["params"]["task"] == task
    lengths = {"6"} if model == "fcn" else {"6", "12", "24"}  # the task's own shift
    assert set(report["r2"]) == lengths and all(-2 < v <= 1 for v in report["r2"].values())


def test_fit_names_an_unknown_task_and_a_length_its_shift_refuses(capsys):
    code, err = _exit_code(["fit", "--task", "nope"], capsys)
    assert code == 2 and "--task: invalid choice: 'nope' (choose from 'selection'," in err
    # q-sparse averaging rows only lengthen: refused before any training.
    argv = ["fit", "--task", "averaging", "--seq-len", "8", "--eval-lengths", "4"]
    code, err = _exit_code(argv, capsys)
    assert code == 2 and "can only be lengthened" in err


USER_MODULE = Path(__file__).with_name("cli_user_task.py")


@pytest.fixture
def restored_registry(monkeypatch):
    """Let a test --import the module that registers a task; restore everything afterwards."""
    import stsq_learn
    from stsq_learn import registry
    from stsq_learn.tasks import TASKS

    saved = (dict(registry._REGISTRATIONS), dict(TASKS), list(stsq_learn.__all__))
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    registry._REGISTRATIONS.clear()
    registry._REGISTRATIONS.update(saved[0])
    TASKS.clear()
    TASKS.update(saved[1])
    for name in set(stsq_learn.__all__) - set(saved[2]):
        delattr(stsq_learn, name)
    stsq_learn.__all__[:] = saved[2]
    sys.modules.pop("cli_user_task", None)


@pytest.mark.parametrize("spelling", ["path", "module", "path, after the task"])
def test_fit_imports_the_module_that_registers_a_users_task(
    restored_registry, capsys, monkeypatch, spelling
):
    """--import (a .py path or a dotted name, anywhere on the line) before --task is resolved."""
    argv = ["fit", "--task", "test_pair_mean", "--seq-len", "6", "--n-features", "3"]
    argv += ["--width", "8", "--online-steps", "30", "--n-eval", "50", "--json"]
    if spelling == "module":  # found from the current directory, as python -m finds it
        monkeypatch.chdir(USER_MODULE.parent)
        monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(USER_MODULE.parent)])
        argv[1:1] = ["--import", "cli_user_task"]
    elif spelling == "path":
        argv[1:1] = ["--import", str(USER_MODULE)]
    else:
        argv += [f"--import={USER_MODULE}"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == "AttentionRegressor" and report["task"] == "test_pair_mean"
    assert set(report["r2"]) == {"6", "12", "24"}  # the task's own length shift
    assert sys.modules["cli_user_task"].__file__ == str(USER_MODULE)


def test_reproduce_imports_the_module_that_registers_an_experiment(
    restored_registry, capsys, tmp_path
):
    """The experiment the module registers runs, on two worker processes that import it too."""
    out = tmp_path / "level"
    argv = ["reproduce", "--import", str(USER_MODULE), "--tiny", "--only", "test_level"]
    assert main([*argv, "--seeds", "2", "--jobs", "2", "--out", str(out), "--no-progress"]) == 0
    assert "| test_level | value |" in capsys.readouterr().out
    saved = json.loads((out / "results.json").read_text())["experiments"]["test_level"]
    assert saved["tables"]["levels"]["columns"]["seed"] == [0, 1]


def test_a_bad_import_is_a_usage_error(restored_registry, capsys, tmp_path):
    text = tmp_path / "tasks.txt"
    text.write_text("")
    bad_name = tmp_path / "my-tasks.py"
    bad_name.write_text("")
    for value, message in [
        ("no_such_module_here", "--import no_such_module_here: No module named"),
        (str(tmp_path / "missing.py"), "missing.py: no such file"),
        (str(text), "tasks.txt: not a .py file"),
        (str(bad_name), "'my-tasks' is not a module name"),
    ]:
        code, err = _exit_code(["fit", "--import", value], capsys)
        assert code == 2 and err.startswith("stsq-learn: error: ") and message in err, err
    code, err = _exit_code(["fit", "--task", "test_pair_mean"], capsys)  # not imported
    assert code == 2 and "invalid choice: 'test_pair_mean'" in err


def test_import_is_in_the_help_of_fit_and_reproduce(capsys):
    for command in ("fit", "reproduce"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "--import MODULE_OR_PATH" in text and "a dotted name" in text


def test_reproduce_help_lists_options(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for option in ("--quick", "--full", "--gpu", "--plan", "--out", "--device", "--seed", "--only"):
        assert option in out
    for option in ("--seeds", "--jobs", "--check", "--reference", "--write-reference"):
        assert option in out
    assert "encodings" in out
    assert "--tiny" not in out


def test_only_accepts_names_and_aliases():
    from stsq_learn.cli import build_parser

    args = build_parser().parse_args(["reproduce", "--quick", "--only", "length,convergence"])
    assert args.only == ["length", "convergence"]  # reproduce() resolves the aliases
    assert args.preset == "quick"
    assert build_parser().parse_args(["reproduce"]).preset is None  # chosen for the machine
    assert build_parser().parse_args(["reproduce", "--gpu"]).preset == "gpu"


def test_reproduce_plan_prints_the_estimate_and_runs_nothing(tmp_path, capsys):
    out = tmp_path / "planned"
    argv = ["reproduce", "--tiny", "--plan", "--only", "convergence,width", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "Plan of reproduce --tiny" in printed
    # convergence: the paper's algorithm and the preconditioned run, 30 steps each; the
    # separation's expected fits, as the Python plan counts them.
    from stsq_learn.experiments import plan

    fits = plan("tiny", only="separation")["separation"]["fits"]
    assert "| convergence | 2 | 60 |" in printed and f"| separation | {fits} |" in printed
    assert "| total |" in printed and not out.exists()


def test_reproduce_without_a_size_plans_and_picks_the_cpu_size(monkeypatch, tmp_path, capsys):
    import stsq_learn.experiments as experiments

    called = {}

    def fake_plan(preset, **kwargs):
        called["plan"] = preset
        return {"convergence": {"fits": 1, "steps": 300, "seconds": 4.0, "parts": []}}

    def fake_reproduce(preset, **kwargs):
        called["reproduce"] = preset
        return {}

    monkeypatch.setattr(experiments, "plan", fake_plan)
    monkeypatch.setattr(experiments, "reproduce", fake_reproduce)
    assert main(["reproduce", "--device", "cpu", "--out", str(tmp_path), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert called == {"plan": "quick", "reproduce": "quick"}
    assert "no size given; running --quick" in captured.err and "--full" in captured.err
    assert "Plan of reproduce --quick" in captured.out
    assert "| total | 1 | 300 | 4 s |" in captured.out


def test_fit_passes_the_sampler_and_the_encoding_family(capsys):
    argv = ["fit", "--seq-len", "8", "--n-features", "2", "--n-selected", "2", "--width", "8"]
    argv += ["--online-steps", "5", "--pe-sampling", "full", "--eval-lengths", "8,16"]
    argv += ["--n-eval", "50", "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["params"]["pe_sampling"] == "full"
    argv = ["fit", "--seq-len", "8", "--n-features", "2", "--n-selected", "2", "--width", "8"]
    argv += ["--online-steps", "5", "--positional-encoding", "randomized"]
    argv += ["--max-positions", "16", "--eval-lengths", "8,16", "--n-eval", "50", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["params"]["max_positions"] == 16 and set(report["r2"]) == {"8", "16"}


def _one_line_error(argv, capsys, message):
    code, err = _exit_code(argv, capsys)
    assert code == 2 and message in err
    assert err.count("\n") == 1 and "Traceback" not in err, err  # one line, exit 2
    return err


def test_an_unusable_out_directory_is_one_line_and_exit_2(tmp_path, capsys):
    """Issue 27, case 6: --out at a file, under a file or unwritable printed a traceback."""
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    base = ["reproduce", "--tiny", "--only", "convergence", "--no-progress", "--out"]
    _one_line_error([*base, str(a_file)], capsys, "is a file, not a directory")
    _one_line_error([*base, str(a_file / "sub")], capsys, f"{str(a_file)!r} is a file")
    _one_line_error([*base, "/proc/no/such"], capsys, "out='/proc/no/such' cannot be")
    assert a_file.read_text() == "" and sorted(tmp_path.iterdir()) == [a_file]


def test_every_cli_error_is_one_line(capsys):
    """Case 6: the memory check, a refused seed with --plan, and argparse's own errors."""
    _one_line_error(["fit", "--width", "1000000"], capsys, "width=1000000")
    _one_line_error(["fit", "--width", "1000000"], capsys, "Lower the width")
    _one_line_error(["reproduce", "--seed", "-1", "--plan"], capsys, "must lie in [0, 2147483646]")
    _one_line_error(["fit", "--width", "abc"], capsys, "invalid int value: 'abc'")


def test_plan_prints_no_warnings_from_its_own_timing_runs(capsys, recwarn):
    """Case 6: --plan printed 13 "worse than no model" warnings from its timed steps."""
    assert main(["reproduce", "--tiny", "--plan"]) == 0
    assert "| total |" in capsys.readouterr().out
    assert not [w for w in recwarn if "worse than no model" in str(w.message)]
