"""The benchmark suite must keep running: one tiny case end to end."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("stsq_benchmarks", ROOT / "benchmarks" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TINY = dict(
    seq_len=8,
    n_features=2,
    n_selected=2,
    width=8,
    n_samples=64,
    batch_size=32,
    epochs=2,
    n_test=32,
    repeats=2,
)


def test_missing_reference_skips_comparisons(bench, tmp_path):
    messages = []
    out = tmp_path / "bench.json"
    report = bench.run(
        only=["fit"],
        reference=str(tmp_path / "nowhere.py"),
        out=str(out),
        log=messages.append,
        overrides={"fit": TINY},
    )
    assert any("reference not found" in m and "skipping" in m for m in messages)
    fit = report["results"]["fit"]
    assert "ratio" not in fit and fit["ours_seconds"] > 0 and fit["early_stopping_off"]
    assert json.loads(out.read_text())["results"]["fit"]["config"]["epochs"] == 2
    assert "ours (ref. model): fit seconds" in messages[-2]
    assert "ours (full W): test relative MSE" in messages[-2]


def test_fit_against_reference_end_to_end(bench, tmp_path):
    ref_path = tmp_path / "spe_reference.py"
    # A stand-in with the reference's interface, so the test does not depend on
    # where the shared folder is; the real one is used by benchmarks/run.py.
    ref_path.write_text(
        "def train(a, data=None):\n"
        "    return {'fit_seconds': 0.5, 'steps': 1, 'samples_per_second': 1,"
        " 'test_relative_mse': 0.25}\n"
    )
    report = bench.run(
        only=["fit"], reference=str(ref_path), log=lambda m: None, overrides={"fit": TINY}
    )
    fit = report["results"]["fit"]
    assert fit["reference_seconds"] == 0.5
    assert fit["ratio"] == pytest.approx(fit["ours_seconds"] / 0.5)
    assert fit["mse_gap"] == pytest.approx(fit["ours_mse"] - 0.25)
    assert 0 < fit["ours_mse"] < 2 and 0 < fit["ours_full_w_mse"] < 2
    assert fit["ours_full_w_mse_gap"] == pytest.approx(fit["ours_full_w_mse"] - 0.25)


def test_gpu_benchmark_code_path_on_cpu(bench):
    rec = bench.bench_gpu(
        None,
        device="cpu",
        seq_len=8,
        n_features=2,
        width=8,
        batch_size=16,
        n_steps=2,
        warmup_steps=1,
    )
    assert rec["samples_per_second"] > 0 and 0 < rec["draw_share"]
    if not bench.torch.cuda.is_available():
        assert "skipped" in bench.bench_gpu(None)


def test_reference_lookup(bench, tmp_path):
    assert bench.find_reference(str(tmp_path / "missing.py")) is None
    (tmp_path / "r.py").write_text("")
    assert bench.find_reference(str(tmp_path / "r.py")) == (tmp_path / "r.py").resolve()


def test_accuracy_path_with_schedule_and_finetune(bench):
    class FloorStandIn:  # the reference's floor() interface
        @staticmethod
        def floor(a):
            return {"floor_relative_mse": 0.5, "gamma": 3}

    rec = bench.bench_accuracy(
        FloorStandIn,
        seq_len=8,
        n_features=2,
        n_selected=2,
        widths=(8,),
        pe_width=8,
        n_pe_samples=(1, 2),
        n_steps=8,
        batch_size=16,
        finetune_steps=2,
        finetune_pe_samples=2,
        n_test=32,
    )
    base, tuned, sgd = rec["rows"]
    assert base["width"] == 8 and 0 < base["relative_mse_k1"] < 2 and "relative_mse_k2" in base
    assert tuned["finetuned_with_pe_samples"] == 2 and tuned["gamma"] != base["gamma"]
    # the trained W's gamma is kept apart from the floor's best gamma
    assert base["floor_gamma"] == 3 and base["gamma"] != 3 and 0 < base["cos_identity"] <= 1
    assert base["ratio_to_floor"] == base["relative_mse_k1"] / 0.5
    # gradient descent: the rate grows with the width, the token block stays 0
    assert sgd["recipe"] == "sgd" and sgd["learning_rate_init"] == 8 / 64
    assert sgd["token_norm"] == 0 and base["token_norm"] > 0
    table = bench.format_table({"accuracy": rec})
    assert "width 8 sgd trained gamma / cos(W_pp, I)" in table
    assert "width 8 adam ratio to floor" in table
    with pytest.raises(ValueError, match="unknown recipe 'lbfgs'"):
        bench.bench_accuracy(None, recipes=("lbfgs",), widths=(8,), pe_width=8)
