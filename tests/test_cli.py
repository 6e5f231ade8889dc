import json
import subprocess
import sys

import pytest
import torch

from stsq_learn import __version__
from stsq_learn.cli import main


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


def test_reproduce_tiny_writes_figures_and_json(tmp_path, capsys):
    out = tmp_path / "rq"
    assert main(["reproduce", "--tiny", "--out", str(out), "--no-progress", "--seed", "1"]) == 0
    printed = capsys.readouterr().out
    assert "| experiment |" in printed and "minimal width, transformer" in printed
    assert sorted(p.name for p in out.glob("*.png")) == [
        "convergence.png",
        "length_generalization.png",
        "separation.png",
    ]
    payload = json.loads((out / "results.json").read_text())
    assert {"convergence", "length_generalization", "separation"} <= set(payload)
    assert payload["meta"]["seed"] == 1 and payload["meta"]["torch_threads"] == 1
    assert (out / "summary.md").read_text().startswith("| experiment |")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["reproduce", "--only", "bogus"], "Unknown experiment 'bogus'"),
        (["reproduce", "--seed", "-1"], "integer >= 0"),
        (["reproduce", "--device", "tpu"], "invalid choice"),
        (["reproduce", "--quick", "--full"], "not allowed with"),
        (["reproduce", "--threads", "0"], "positive integer"),
        (["fit", "--seq-len", "-3"], "positive integer"),
        (["fit", "--width", "abc"], "positive integer"),
        (["fit", "--eval-lengths", "16,x"], "positive integer"),
        (["fit", "--eval-lengths", ","], "comma-separated"),
        (["fit", "--learning-rate", "0"], "positive number"),
        (["fit", "--seq-len", "4", "--n-selected", "5"], "cannot exceed"),
        (["fit", "--seq-len", "8", "--eval-lengths", "2"], "shorter than --n-selected"),
        (["fit", "--model", "fcn", "--eval-lengths", "16,32"], "training length"),
        (["fit", "--lr-schedule", "step"], "invalid choice"),
        (["fit", "--lr-schedule", "adaptive", "--online-steps", "5"], "needs epochs"),
        (["fit", "--n-pe-samples-fit", "0"], "positive integer"),
        (["bogus"], "invalid choice"),
    ],
)
def test_bad_options_exit_2_with_a_message(argv, message, capsys):
    code, err = _exit_code(argv, capsys)
    assert code == 2
    assert message in err


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
    argv += ["--online-steps", "10", "--lr-schedule", "cosine", "--n-pe-samples-fit", "2"]
    argv += ["--eval-lengths", "8", "--n-eval", "50", "--json"]
    assert main(argv) == 0
    params = json.loads(capsys.readouterr().out)["params"]
    assert params["learning_rate"] == "cosine" and params["n_pe_samples_fit"] == 2


def test_fit_fcn_table(capsys):
    argv = ["fit", "--model", "fcn", "--seq-len", "4", "--n-features", "2", "--n-selected"]
    argv += ["1", "--width", "8", "--n-train", "100", "--max-iter", "2", "--n-eval", "50"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "FCNSelector" in out and "| eval length T' | R^2 |" in out and "| 4 |" in out


def test_reproduce_help_lists_options(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for option in ("--quick", "--out", "--device", "--seed", "--only"):
        assert option in out
    assert "--tiny" not in out


def test_only_accepts_names_and_aliases():
    from stsq_learn.cli import build_parser

    args = build_parser().parse_args(["reproduce", "--quick", "--only", "length,convergence"])
    assert args.only == ["length_generalization", "convergence"]
    assert args.preset == "quick"
    assert build_parser().parse_args(["reproduce"]).preset == "full"
