"""The benchmark suite keeps running, compares against its peers, and its peers are right."""

import importlib
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    """The benchmarks' modules, imported as ``python benchmarks/run.py`` sees them."""
    before = set(sys.modules)
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(BENCH))
        run = importlib.import_module("run")
        mods = {name: run.load(name) for name in run.ENTRIES}
        yield type(
            "Bench",
            (),
            {
                "run": run,
                "harness": importlib.import_module("_harness"),
                "baselines": importlib.import_module("baselines"),
                "plot": importlib.import_module("plot"),
                **mods,
            },
        )
    for name in set(sys.modules) - before:  # the benchmarks' top-level names: run, plot, ...
        if (getattr(sys.modules.get(name), "__file__", None) or "").startswith(str(BENCH)):
            del sys.modules[name]


TINY = {
    "fit": dict(seq_len=8, n_features=2, n_selected=2, width=8, n_samples=96, batch_size=32)
    | dict(epochs=2, n_test=64, repeats=2),
    "online": dict(seq_len=8, n_features=2, n_selected=2, width=8, batch_size=32, n_steps=3)
    | dict(n_test=64, repeats=2),
    "fcn": dict(seq_len=4, n_features=2, n_selected=2, widths=(8, 16), n_samples=96)
    | dict(batch_size=32, epochs=2, n_test=64, repeats=2),
}


def test_registry_and_configs(bench):
    assert bench.run.ENTRIES == [
        "fit",
        "online",
        "sampler",
        "predict",
        "fcn",
        "memory",
        "online_memory",
        "accuracy",
        "parity",
        "defaults",
        "baseline_defaults",
        "averaging",
        "reuse",
        "seeds",
        "studies",
        "plan",
        "members",
        "single_location",
        "in_context",
        "copying",
        "gpu",
        "distributed",
    ]
    for name in bench.run.ENTRIES:
        module = bench.run.load(name)
        assert callable(module.run) and module.__doc__
        assert set(module.QUICK) <= set(module.CONFIG), name
    with pytest.raises(ValueError, match="unknown benchmark 'nope'"):
        bench.run.load("nope")
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['epoch'\]"):
        bench.harness.merge_config(bench.fit, overrides={"epoch": 3})
    assert bench.harness.merge_config(bench.fit, quick=True)["epochs"] == bench.fit.QUICK["epochs"]


def test_set_option_parsing(bench):
    got = bench.run.parse_settings(["fit.repeats=5", "fcn.widths=[8, 16]", "gpu.device=cpu"])
    assert got == {"fit": {"repeats": 5}, "fcn": {"widths": (8, 16)}, "gpu": {"device": "cpu"}}
    with pytest.raises(ValueError, match=r"NAME\.KEY=VALUE"):
        bench.run.parse_settings(["repeats=5"])


def test_compare_rotates_and_takes_medians_of_paired_ratios(bench):
    order = []
    seconds = {"a": [1.0, 2.0, 9.0], "b": [2.0, 2.0, 3.0]}

    def runner(name):
        def fn(seed):
            order.append(name)
            return {"seconds": seconds[name][seed], "relative_mse": 0.1 * seed, "r2": 1.0}

        return fn

    rec = bench.harness.compare({"a": runner("a"), "b": runner("b")}, [("a", "b")], repeats=3)
    assert order == ["a", "b", "b", "a", "a", "b"]
    assert rec["runners"]["a"]["seconds"] == 2.0 and rec["runners"]["a"]["all_seconds"] == [1, 2, 9]
    (c,) = rec["comparisons"]
    assert (c["ours"], c["peer"]) == ("a", "b")
    assert c["time_ratio"] == 1.0  # median of 0.5, 1.0, 3.0
    assert c["ratio_of_medians"] == 1.0 and c["ratio_of_best"] == 0.5
    assert c["ours_relative_mse"] == pytest.approx(0.1) and c["peer_r2"] == 1.0


def test_plain_loop_is_the_package_model(bench):
    """The yardstick computes the same function as AttentionSelector(learn_token_block=False)."""
    from stsq_learn import SparseTokenSelectionTask
    from stsq_learn.nn import AttentionSelector

    X, _ = SparseTokenSelectionTask(12, 3, 2).sample(5, random_state=0)
    X = torch.as_tensor(X, dtype=torch.float32)
    module = AttentionSelector(3, 6, learn_token_block=False)
    W = torch.randn(6, 6, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        module.key_query[3:] = W
    P = bench.baselines._encodings(5, 12, 6, torch.Generator().manual_seed(1))
    tokens, mask = X[..., :-1], X[..., -1]
    ours = torch.bmm(module.attention(tokens, mask, P).unsqueeze(1), tokens).squeeze(1)
    torch.testing.assert_close(bench.baselines.plain_forward(W, tokens, mask, P), ours)


def test_fit_and_online_entries_compare_with_their_peers(bench, tmp_path):
    out = tmp_path / "bench.json"
    messages = []
    report = bench.run.run(only=["fit", "online"], settings=TINY, out=str(out), log=messages.append)
    fit, online = report["results"]["fit"], report["results"]["online"]
    ours = ["stsq-learn", "stsq-learn (full W)"]
    ours_draws = ["stsq-learn (full draws)", "stsq-learn (full W, full draws)"]
    assert set(fit["runners"]) == {*ours, *ours_draws, "plain torch loop", "skorch"}
    peers = [(c["ours"], c["peer"]) for c in fit["comparisons"]]
    assert peers == [
        (ours[0], "plain torch loop"),
        (ours[1], "skorch"),
        (ours_draws[0], "plain torch loop"),
        (ours_draws[1], "skorch"),
    ]
    assert [(c["ours"], c["peer"]) for c in online["comparisons"]] == [
        ("stsq-learn", "plain torch loop"),
        ("stsq-learn (full draws)", "plain torch loop"),
    ]
    for c in fit["comparisons"] + online["comparisons"]:
        assert c["time_ratio"] > 0 and len(c) >= 9
        assert 0 < c["ours_relative_mse"] < 2 and 0 < c["peer_relative_mse"] < 2
    assert online["comparisons"][0]["throughput_ratio"] == pytest.approx(
        1 / online["comparisons"][0]["time_ratio"]
    )
    assert online["runners"]["plain torch loop"]["samples_per_second"] > 0
    saved = json.loads(out.read_text())
    assert saved["results"]["fit"]["comparisons"][1]["peer"] == "skorch"
    assert saved["machine"]["threads"] == 1 and saved["results"]["fit"]["config"]["epochs"] == 2
    assert "stsq-learn (full W) / skorch" in messages[-2]
    assert "stsq-learn (full draws) / plain torch loop" in messages[-2]


def test_reuse_entry_times_both_workloads_and_checks_their_weights(bench):
    cfg = bench.harness.merge_config(
        bench.reuse,
        overrides=dict(seq_len=8, widths=(4, 8), fcn_widths=(8,), n_steps=4, models_seq_len=8)
        | dict(models_n_features=2, models_width=8, repeats=2),
    )
    rec = bench.reuse.run(cfg, None)
    assert set(rec) == {"search", "models"}
    assert rec["search"]["runners"]["reused"]["fits"] == 3
    assert rec["models"]["runners"]["drawn"]["fits"] == 4
    for r in rec.values():
        assert r["same_weights"] and r["comparisons"][0]["time_ratio"] > 0
    assert len(bench.reuse.table(rec)) == 2


def test_fcn_entry_names_mlpregressor(bench):
    rec = bench.fcn.run(bench.harness.merge_config(bench.fcn, overrides=TINY["fcn"]), None)
    assert [(c["ours"], c["peer"], c["width"]) for c in rec["comparisons"]] == [
        ("FCNSelector", "MLPRegressor", 8),
        ("FCNSelector", "MLPRegressor", 16),
    ]
    assert all(np.isfinite(c["peer_r2"]) and c["peer_seconds"] > 0 for c in rec["comparisons"])


def test_accuracy_entry_uses_the_isotropic_floor(bench):
    cfg = bench.harness.merge_config(
        bench.accuracy,
        overrides=dict(
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
            floor_samples=2000,
        ),
    )
    rec = bench.accuracy.run(cfg, bench.harness.Context(log=lambda m: None))
    base, tuned, sgd = rec["rows"]
    from stsq_learn import isotropic_floor

    floor = isotropic_floor(8, 2, 8, n_samples=2000, random_state=0)
    assert base["floor_relative_mse"] == floor.relative_mse and base["floor_gamma"] == floor.gamma
    assert base["ratio_to_floor"] == base["relative_mse_k1"] / floor.relative_mse
    assert [f["n_pe_samples"] for f in rec["floors"]] == [1, 2]
    assert tuned["finetuned_with_pe_samples"] == 2 and "relative_mse_k2" in tuned
    assert sgd["recipe"] == "sgd" and sgd["learning_rate_init"] == 8 / 64
    assert sgd["token_norm"] == 0 and base["token_norm"] > 0
    lines = dict(bench.accuracy.table(rec))
    assert "width 8 sgd ratio to floor" in lines and "width 8 isotropic floor, 2 draws" in lines
    with pytest.raises(ValueError, match="unknown recipe 'lbfgs'"):
        bench.accuracy.run({**cfg, "recipes": ("lbfgs",)}, None)


def test_gpu_entry_covers_both_samplers_and_skips_without_cuda(bench):
    tiny = dict(seq_len=8, n_features=2, width=8, batch_size=16, n_steps=2, warmup_steps=1)
    rec = bench.gpu.run({**bench.gpu.CONFIG, **tiny, "device": "cpu", "repeats": 2}, None)
    assert list(rec["samplers"]) == ["marginal", "full"] and rec["draw_ms"] > 0
    for r in rec["samplers"].values():
        assert r["samples_per_second"] > 0 and 0 < r["draw_share"] and len(r["all_seconds"]) == 2
    assert rec["samplers"]["full"]["marginal_over_this"] > 0
    assert "fit_online full" in dict(bench.gpu.table(rec))
    if not torch.cuda.is_available():
        skipped = bench.gpu.run(bench.gpu.CONFIG, None)
        assert "CUDA is not available" in skipped["skipped"]
        assert skipped["samplers"] == ["marginal", "full"]


def test_memory_entry_in_child_processes(bench):
    cfg = bench.harness.merge_config(
        bench.memory,
        overrides=dict(seq_lens=(64, 256), batch_size=8, n_samples=16, width=8)
        | dict(online_seq_len=128, online_batch_size=4, online_steps=2)
        | dict(online_cases=((4, "marginal"), (32, "marginal"))),
    )
    rec = bench.memory.run(cfg, bench.harness.Context())
    assert [r["seq_len"] for r in rec["rows"]] == [64, 256]
    assert all(r["fit_peak_mib"] >= 0 for r in rec["rows"])
    assert [(r["width"], r["pe_sampling"]) for r in rec["online"]] == list(cfg["online_cases"])
    assert all(r["seq_len"] == 128 and r["fit_online_peak_mib"] >= 0 for r in rec["online"])
    # The measure of the device the children ran on (device="auto": CUDA where there is one).
    assert rec["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
    if rec["device"] == "cuda":
        assert {r["method"] for r in rec["online"]} == {"torch.cuda.max_memory_allocated"}
    else:
        assert rec["online"][0]["method"].startswith("VmHWM - VmRSS")
    if rec["online"][0]["fit_online_peak_mib"] > 0:
        assert rec["online_width_ratio"]["widths"] == [4, 32]
        ratio = rec["online_width_ratio"]
        assert np.isfinite(ratio["ratio"])
        # W ((d + m) x m floats), its gradient and two Adam moments, at widths 4 and 32.
        d = cfg["n_features"]
        state = 16 * ((d + 32) * 32 - (d + 4) * 4) / 2**20
        assert ratio["parameter_state_mib"] == pytest.approx(state)
        assert ratio["full_encodings_mib"] == pytest.approx(4 * 128 * 32 * 4 / 2**20)
        assert "fit_online width 32 - width 4 (marginal)" in dict(bench.memory.table(rec))
    lines = dict(bench.memory.table(rec))
    assert "T=256 fit / predict peak" in lines
    assert "fit_online T=128 width 32 marginal peak" in lines


def test_online_memory_entry_measures_the_call_in_a_fresh_process(bench):
    assert bench.online_memory.CONFIG["seq_len"] == 16384
    assert bench.online_memory.BASELINE_0_4["peak_mib"] == 536
    small = dict(seq_len=64, n_features=2, n_selected=2, width=8, batch_size=4, repeats=1)
    cfg = bench.harness.merge_config(bench.online_memory, overrides=small)
    rec = bench.online_memory.run(cfg, bench.harness.Context())
    assert rec["call"] == {k: cfg[k] for k in bench.online_memory.CALL_KEYS}
    assert len(rec["runs"]) == 1
    assert rec["peak_mib"] == np.median([r["peak_mib"] for r in rec["runs"]])
    # A process that imported torch holds more than 50 MiB; less would be a misread unit.
    assert all(50 < r["peak_mib"] < 4096 and r["seconds"] > 0 for r in rec["runs"])
    assert rec["baseline"]["applies"] is False and "ratio_to_0_4" not in rec
    lines = dict(bench.online_memory.table(rec))
    assert "fit_online T=64 width 8 marginal peak RSS" in lines
    assert lines["  0.4.0 baseline"] == "not comparable: other sizes than CONFIG"
    full = dict(rec, baseline=dict(rec["baseline"], applies=True), ratio_to_0_4=1.0)
    ((_, baseline),) = [row for row in bench.online_memory.table(full) if "0.4.0 (" in row[0]]
    assert baseline == "536 MiB; this / 0.4.0 = 1.00x"


def test_sampler_entry_times_both_samplers_and_the_draw(bench):
    cfg = bench.harness.merge_config(
        bench.sampler,
        overrides=dict(seq_lens=(8, 32), n_features=2, n_selected=2, width=8, batch_size=16)
        | dict(warmup_steps=1, timed_steps=2, long_seq_len=32, long_timed_steps=1)
        | dict(sample_draws=2, full_max_seq_len=8, sampling_ratio_seq_len=32, repeats=2),
    )
    messages = []
    rec = bench.sampler.run(cfg, bench.harness.Context(log=messages.append))
    short, long = rec["rows"]
    assert (short["seq_len"], long["seq_len"]) == (8, 32)
    assert set(short["runners"]) == {"marginal", "full", "sample_torch"}
    assert set(long["runners"]) == {"marginal", "sample_torch"}
    assert "full_max_seq_len=8" in long["skipped_full"] and "full_ms" not in long
    for key in ("marginal_ms", "full_ms", "sampling_ms", "marginal_over_full"):
        assert np.isfinite(short[key]) and short[key] > 0
    for r in rec["rows"]:
        assert r["marginal_over_sampling"] > 0 and len(r["runners"]["marginal"]["all_seconds"]) == 2
    c = {x["peer"]: x for x in short["comparisons"]}
    assert (
        c["full"]["ours"] == "marginal" and c["full"]["time_ratio"] == short["marginal_over_full"]
    )
    assert rec["marginal_over_sampling_at"] == {
        "seq_len": 32,
        "ratio": long["marginal_over_sampling"],
    }
    lines = dict(bench.sampler.table(rec))
    assert "full skipped" in lines["T=32 step"] and "marginal step / sample_torch at T=32" in lines
    assert len(messages) == 2


def test_predict_entry_compares_keyed_and_streamed_draws(bench):
    cfg = bench.harness.merge_config(
        bench.predict,
        overrides=dict(seq_lens=(8, 16), n_rows=120, n_features=2, n_selected=2, width=8)
        | dict(train_steps=3, batch_size=16, breakdown_repeats=1, repeats=2),
    )
    messages = []
    rec = bench.predict.run(cfg, bench.harness.Context(log=messages.append))
    # One line per length, and one for its rows at 2T with the length scales.
    assert [r["seq_len"] for r in rec["rows"]] == [8, 16] and len(messages) == 4
    for r in rec["rows"]:
        assert set(r["runners"]) == {"keyed", "streamed"}
        assert r["keyed_us_per_row"] > 0 and r["streamed_us_per_row"] > 0
        assert r["keyed_over_streamed"] == r["comparisons"][0]["time_ratio"]
        assert len(r["runners"]["keyed"]["all_seconds"]) == 2
        assert set(r["breakdown_us_per_row"]) == {
            "row_keys",
            "keyed_vectors",
            "streamed_vectors",
            "keyed_coordinates",
            "streamed_coordinates",
        }
        assert -1 < r["keyed_r2"] <= 1 and -1 < r["streamed_r2"] <= 1
        scaled = r["scale_at_2T"]
        assert set(scaled["runners"]) == {"plain_2T", "log_2T", "floor_2T"}
        assert scaled["log_over_plain"] > 0 and scaled["floor_first_call_seconds"] >= 0
    lines = dict(bench.predict.table(rec))
    assert "ratio" in lines["T=8 predict"] and "row_keys" in lines["T=16 draws (us/row)"]
    assert "floor x" in lines["T=8 predict at 2T with a length scale"]


def test_the_streamed_baseline_is_the_draws_of_0_3(bench):
    """The baseline is the streamed algorithm: same law, other draws than predict's."""
    from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector

    task = SparseTokenSelectionTask(6, 2, 2)
    model = SparseTokenSelector(width=8, random_state=0).fit_online(task, n_steps=3)
    X, _ = task.sample(40, random_state=1)
    streamed = bench.predict.streamed_predict(model, X)
    assert streamed.shape == (40, 2) and not np.allclose(streamed, model.predict(X))
    np.testing.assert_array_equal(bench.predict.streamed_predict(model, X), streamed)
    half = bench.predict.streamed_predict(model, X[:20])
    assert not np.allclose(half, streamed[:20])  # a row's draws depend on the other rows


def test_step_clock_counts_every_step(bench):
    from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector

    model = SparseTokenSelector(width=4, batch_size=8, random_state=0)
    seconds, wall = bench.sampler.step_seconds(model, SparseTokenSelectionTask(6, 2, 2), 1, 3)
    assert 0 < seconds <= wall * 5 and model.n_iter_ == 5


def test_parity_entry_compares_samplers_floor_and_forward_law(bench):
    cfg = bench.harness.merge_config(
        bench.parity,
        overrides=dict(seq_len=8, n_features=2, n_selected=2, widths=(8,), seeds=(0, 1))
        | dict(n_steps=4, batch_size=16, n_test=64, large_width=16, large_n_steps=3)
        | dict(large_seeds=(0,), floor_samples=2000, law_width=8, law_rows=200),
    )
    rec = bench.parity.run(cfg, bench.harness.Context(log=lambda m: None))
    assert [(r["width"], r["seed"], r["sampler"]) for r in rec["rows"]] == [
        (8, 0, "marginal"),
        (8, 0, "full"),
        (8, 1, "marginal"),
        (8, 1, "full"),
    ]
    (p,) = rec["parity"]
    full = [r["relative_mse"] for r in rec["rows"] if r["sampler"] == "full"]
    assert p["full_mean"] == pytest.approx(np.mean(full))
    assert p["difference"] == pytest.approx(p["marginal_mean"] - p["full_mean"])
    large = rec["large_width"]
    from stsq_learn import isotropic_floor

    floor = isotropic_floor(8, 2, 16, n_samples=2000, random_state=0)
    assert large["floor_relative_mse"] == floor.relative_mse
    (r,) = large["rows"]
    assert r["sampler"] == "marginal" and r["ratio_to_floor"] > 0
    assert large["marginal_ratio_to_floor"] == pytest.approx(r["relative_mse"] / floor.relative_mse)
    law = rec["forward_law"]
    assert law["rows"] == 200 and set(law) >= {"trained_marginal", "trained_full"}
    for v in (law["trained_marginal"], law["trained_full"]):
        assert np.isfinite(v["r2_marginal"]) and np.isfinite(v["r2_full"])
        assert v["difference"] == v["r2_marginal"] - v["r2_full"]
    lines = dict(bench.parity.table(rec))
    assert "width 8 mean rel. MSE marginal / full" in lines
    large_line = lines["width 16, 0.3's large-width recipe, marginal"]
    assert "3 of the recipe's 3000 steps: too short to near the floor" in large_line  # issue 27


def test_defaults_entry_scores_new_and_0_3_defaults_against_the_floor(bench):
    cfg = bench.harness.merge_config(
        bench.defaults,
        overrides=dict(settings=((6, 2), (8, 2)), n_features=2, widths=(4,), large_widths=(8,))
        | dict(online_widths=(4,), online_settings=((8, 2),), n_train=64, n_test=64)
        | dict(floor_samples=2000),
    )
    rec = bench.defaults.run(cfg, bench.harness.Context(log=lambda m: None))
    assert [(r["seq_len"], r["width"]) for r in rec["fit"]] == [(6, 4), (8, 4)]
    assert [(r["seq_len"], r["width"]) for r in rec["fit_online"]] == [(8, 4)]
    from stsq_learn import isotropic_floor

    r = rec["fit"][0]
    assert r["floor"] == isotropic_floor(6, 2, 4, n_samples=2000, random_state=0).relative_mse
    assert r["ratio_to_floor"] == pytest.approx(r["relative_mse"] / r["floor"])
    assert r["time_ratio"] == pytest.approx(r["seconds"] / r["seconds_0_3"])
    assert r["solver"] == "sgd" and r["learning_rate_init"] > 0 and r["planned_steps"] == 960
    assert 1 <= r["epochs_0_3"] <= 200
    o = rec["fit_online"][0]
    assert o["planned_steps"] == 960 and o["epochs"] == 960  # n_iter_ counts the steps online
    lines = dict(bench.defaults.table(rec))
    assert "fit T=6 q=2 width 4" in lines and "fit_online T=8 q=2 width 4" in lines


def test_baseline_defaults_entry_sweeps_every_fcn_and_classifier(bench):
    cfg = bench.harness.merge_config(
        bench.baseline_defaults,
        overrides=dict(seq_lens=(4,), budgets=(3,), steps=(0.001, 0.1), seeds=(0, 1))
        | dict(n_test=40, classifiers=("pooled",), classifier_seq_lens=(4,), n_train=(30,))
        | dict(cs=(0.1, 10.0), fit_widths=(8,), fit_seq_len=4, fit_rows=60),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = bench.baseline_defaults.run(cfg, bench.harness.Context(log=lambda m: None))
    from stsq_learn.engine.rates import fcn_adam_rate

    assert [r["estimator"] for r in rec["fcn"]] == list(cfg["estimators"])
    sizes = {"FCNSelector": (20, 4), "FCNAverager": (32, 16), "FCNRetriever": (24, 8)}
    sizes["FCNRegressor"] = (16, 1)  # single-location rows: T d inputs, one output
    for r in [*rec["fcn"], *rec["classifiers"]]:
        assert set(r["sweep"]) == {
            str(v) for v in (cfg["steps"] if "estimator" in r else cfg["cs"])
        }
        assert r["best"] == max(r["sweep"].values()) and r["sweep"][str(r["best_at"])] == r["best"]
        assert r["gap"] == pytest.approx(r["best"] - r["default"])
        assert r["ok"] == (r["gap"] <= 0.03)
    for r in rec["fcn"]:
        n_in, n_out = sizes[r["estimator"]]
        assert r["default_step"] == pytest.approx(fcn_adam_rate(256, n_in, n_out, 3))
    assert rec["classifiers"][0]["signal"] == 2.0  # sqrt(L)
    lines = dict(bench.baseline_defaults.table(rec))
    assert "FCNAverager T=4 3 steps" in lines and "pooled logistic L=4 n=30" in lines
    (fit,) = rec["fit"]
    assert fit["width"] == 8 and fit["default_step"] == pytest.approx(fcn_adam_rate(8, 12, 2, 600))
    assert "0.6's" in lines["FCNSelector.fit width 8"]


def test_averaging_entry_times_steps_of_equal_queries_and_scores_the_floor(bench):
    cfg = bench.harness.merge_config(
        bench.averaging,
        overrides=dict(seq_lens=(8,), n_features=2, n_selected=2, width=4, timed_steps=2)
        | dict(repeats=2, fit_seq_len=8, fit_batch_sizes=("auto", 4), n_train=32, n_test=16),
    )
    rec = bench.averaging.run(cfg, bench.harness.Context(log=lambda m: None))
    step = rec["steps"]["8"]
    assert set(step["runners"]) == {"averager", "selector_full", "selector_marginal"}
    assert step["runners"]["averager"]["queries"] == 32 * 8  # ceil(256 / 8) rows of 8
    assert [c["peer"] for c in step["comparisons"]] == ["selector_full", "selector_marginal"]
    assert [r["batch_size"] for r in rec["fit"]] == ["auto", 4]
    r = rec["fit"][0]
    assert r["ratio_to_floor"] == pytest.approx(r["relative_mse"] / r["floor"])
    assert r["planned_steps"] >= 960
    lines = dict(bench.averaging.table(rec))
    assert "step N=8 (256 queries)" in lines and "fit N=8 batch 4" in lines


def test_distributed_entry_skips_without_the_extra(bench, monkeypatch):
    monkeypatch.setitem(sys.modules, "stsq_learn.distributed", None)
    rec = bench.distributed.run(bench.distributed.CONFIG, None)
    assert "needs the distributed extra" in rec["skipped"]


def test_command_line_from_anywhere(tmp_path):
    """``python benchmarks/run.py`` needs no path set-up, from any directory."""
    out = tmp_path / "r.json"
    sets = [f"--set=fit.{k}={json.dumps(v)}" for k, v in TINY["fit"].items()]
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--only", "fit", "--out", str(out), *sets],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["command"].startswith("python benchmarks/run.py --only fit --out")
    assert [c["peer"] for c in report["results"]["fit"]["comparisons"]] == [
        "plain torch loop",
        "skorch",
        "plain torch loop",
        "skorch",
    ]


def test_plots_from_a_report(bench, tmp_path):
    report = {
        "machine": {"cpu": "test CPU", "cpu_count": 2, "threads": 1, "date": "2026-01-01"},
        "command": "python benchmarks/run.py --quick",
        "results": {
            "fit": {
                "comparisons": [
                    {"ours": "stsq-learn", "peer": "plain torch loop", "time_ratio": 0.8}
                    | {"ours_relative_mse": 0.30, "peer_relative_mse": 0.31},
                ]
            },
            "fcn": {
                "comparisons": [
                    {"ours": "FCNSelector", "peer": "MLPRegressor", "width": 256}
                    | {"time_ratio": 1.2, "ours_r2": 0.5, "peer_r2": 0.4},
                ]
            },
            "accuracy": {
                "rows": [
                    {"width": 64, "recipe": "adam", "relative_mse_k1": 0.30},
                    {"width": 256, "recipe": "adam", "relative_mse_k1": 0.12},
                ],
                "floors": [
                    {"width": 64, "n_pe_samples": 1, "relative_mse": 0.27, "gamma": 3.7},
                    {"width": 256, "n_pe_samples": 1, "relative_mse": 0.11, "gamma": 4.4},
                ],
            },
        },
    }
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    written = bench.plot.main([str(path), "--out", str(tmp_path / "png")])
    assert sorted(p.name for p in written) == ["perf_accuracy_floor.png", "perf_time_ratio.png"]
    assert all(p.stat().st_size > 5000 for p in written)
    merged = bench.plot.load([path])
    assert merged["sources"]["fcn"]["command"] == "python benchmarks/run.py --quick"
    labels = bench.plot.ratio_bars(merged["results"])
    assert [b[0] for b in labels] == ["fit vs plain torch loop", "FCN width 256 vs MLPRegressor"]
    report["results"]["sampler"] = {
        "config": {"batch_size": 256, "n_features": 16, "n_selected": 4, "width": 256},
        "rows": [
            {"seq_len": 64, "marginal_ms": 7.0, "full_ms": 28.0, "sampling_ms": 1.6}
            | {"marginal_over_full": 0.25, "marginal_over_sampling": 4.4},
            {"seq_len": 16384, "marginal_ms": 1300.0, "sampling_ms": 850.0}
            | {"marginal_over_sampling": 1.5},
        ],
    }
    report["results"]["online"] = {
        "comparisons": [
            {"ours": "stsq-learn (full draws)", "peer": "plain torch loop", "time_ratio": 0.8}
        ]
    }
    path.write_text(json.dumps(report))
    written = bench.plot.main([str(path), "--out", str(tmp_path / "png2")])
    assert "perf_sampler_steps.png" in [p.name for p in written]
    assert all(p.stat().st_size > 5000 for p in written)
    labels = [b[0] for b in bench.plot.ratio_bars(bench.plot.load([path])["results"])]
    assert "fit_online (full draws) vs plain torch loop" in labels


def test_timing_entries_print_no_worse_than_no_model_warnings(bench, monkeypatch, recwarn):
    """Issue 27: --quick printed about 15 such warnings from its own short timing runs."""
    assert "fcn" not in bench.run.LEARNING_ENTRIES and "accuracy" in bench.run.LEARNING_ENTRIES
    original = bench.fcn.run

    def short_run(cfg, ctx):  # what a timing run's too-short fit says at its end
        warnings.warn(
            "FCNSelector: ... the model is worse than no model.", UserWarning, stacklevel=2
        )
        warnings.warn("another warning", UserWarning, stacklevel=2)
        return original(cfg, ctx)

    monkeypatch.setattr(bench.fcn, "run", short_run)
    bench.run.run(only=["fcn"], settings=TINY, log=lambda m: None)
    messages = [str(w.message) for w in recwarn]
    assert "another warning" in messages  # only that warning is silenced
    assert not [m for m in messages if "worse than no model" in m]
    with pytest.warns(UserWarning, match="worse than no model"):  # and only in there
        warnings.warn("the model is worse than no model.", UserWarning, stacklevel=2)


def test_single_location_entry_times_ours_and_skips_jax_cleanly(bench, monkeypatch):
    module = bench.run.load("single_location")
    monkeypatch.delenv("STSQ_BENCH_JAX_PYTHON", raising=False)
    monkeypatch.setattr(module.peer, "available", lambda: "no jax here")
    cfg = bench.harness.merge_config(
        module, overrides=dict(n_features=8, seq_len=3, n_steps=3, seeds=(1, 2), repeats=1)
    )
    rec = module.run(cfg, bench.harness.Context(log=lambda m: None))
    assert rec["jax_skipped"].startswith("no jax here; set jax_python")
    for n_seeds in ("1", "2"):
        runners = rec["per_seeds"][n_seeds]["runners"]
        assert set(runners) == {"ours batched", "ours one by one"}
        assert runners["ours batched"]["seconds_per_step"] > 0
    assert ("jax vmap", f"skipped: {rec['jax_skipped']}") in module.table(rec)


def test_members_entry_times_each_part_and_finds_the_same_fits(bench):
    module = bench.run.load("members")
    small = dict(classifier_seeds=3, classifier_seq_lens=(4,), n_features=3, n_train=40)
    small |= dict(classifier_steps=3, sl_seeds=(2,), sl_n_features=8, sl_steps=20)
    small |= dict(floor_members=3, floor_steps=5, repeats=2)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*worse than no model")
        rec = module.run(bench.harness.merge_config(module, overrides=small), None)
    assert rec["classifier"]["L=4"]["max_logit_difference"] == 0.0  # to the bit
    assert len(rec["classifier"]["L=4"]["runners"]["batched"]["all_seconds"]) == 2
    sl = rec["single_location"]["8 runs"]
    assert set(sl["runners"]) == {"batched", "per setting", "sequential"}
    assert sl["max_k_difference"] < 1e-10 and len(sl["comparisons"]) == 3
    assert rec["engine_step"]["members_us_per_step"] > 0
    labels = [label for label, _ in module.table(rec)]
    assert labels == ["classifier L=4", "single-location 8 runs", "engine step, smallest model"]


def test_in_context_entry_times_both_layers_to_the_target(bench):
    module = bench.run.load("in_context")
    small = dict(n_features=3, n_examples=12, batch_size=64, n_steps=80, lr=0.03, repeats=2)
    rec = module.run(bench.harness.merge_config(module, overrides=small), None)
    for r in rec["runners"].values():
        assert r["seconds_per_step"] > 0 and len(r["all_seconds"]) == 2
        assert r["final_distance"] < 0.2
        assert r["steps_to_target"] is None or 1 <= r["steps_to_target"] <= 80
    assert rec["comparisons"][0]["time_ratio"] > 0
    assert [label for label, _ in module.table(rec)][-1] == "stsq-learn / plain torch loop"


def test_copying_entry_trains_to_its_budget_and_checks_the_constructions(bench):
    module = bench.run.load("copying")
    small = dict(train_len=4, min_len=2, test_lens=(8,), transformer_steps=20, lstm_steps=10**5)
    small |= dict(transformer_params={"width": 16, "n_heads": 4}, budget_s=2.0, every=5)
    small |= dict(n_test=100, ngram_lengths=(16,), n_ngram=2000, n_bits=4)
    small |= dict(fixed_cases=((2, 6), (2, 3)), n_fixed=4000)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*worse than no model")
        rec = module.run(bench.harness.merge_config(module, overrides=small), None)
    json.dumps(rec)  # the report is JSON
    t, lstm = rec["trained"]["transformer"], rec["trained"]["LSTM"]
    assert t["estimator"] == "TransformerCopier(n_heads=4, random_state=0, width=16)"
    assert lstm["estimator"].startswith("LSTMCopier(hidden_size=")
    assert abs(t["parameters"] - lstm["parameters"]) < 0.05 * t["parameters"]
    assert not t["stopped_by_budget"] and t["steps"] == t["planned_steps"] == 20
    assert [r["step"] for r in t["curve"]] == [5, 10, 15, 20]
    assert [r["strings"] for r in t["curve"]] == [80, 160, 240, 320]  # 16 strings a step
    assert lstm["stopped_by_budget"] and lstm["steps"] < 10**5 == lstm["planned_steps"]
    assert lstm["curve"][-1]["step"] == lstm["steps"] and lstm["strings"] == 16 * lstm["steps"]
    assert 2 <= lstm["training_seconds"] < 4  # stopped at the first step past the budget
    for r in (t, lstm):
        seconds = [c["seconds"] for c in r["curve"]]
        assert seconds == sorted(seconds) and r["evaluation_seconds"] > 0
        assert set(r["final_accuracy"]) == {"4", "8"}
        assert r["final_accuracy"]["4"] == r["curve"][-1]["accuracy"]
        reached = [c for c in r["curve"] if c["accuracy"] >= 0.9]
        assert r["strings_to_target"] == (reached[0]["strings"] if reached else None)
    (g,) = rec["ngram"]["rows"]
    assert g["bound"] == pytest.approx(16**2 / 10**4) and g["error"] < g["bound"]
    assert g["reference"] == 0.0061 and abs(g["z"]) < 3
    assert g["z"] == pytest.approx((g["error"] - 0.0061) / g["difference_se"])
    for f, bound in zip(rec["fixed_state"]["rows"], (1 - 16 / 64, 0.0)):
        assert f["bound"] == bound and abs(f["error"] - bound) <= 3 * f["standard_error"]
    assert rec["fixed_state"]["rows"][1]["error"] == 0.0  # 8 strings fit in 15 states
    labels = [label for label, _ in module.table(rec)]
    ratio = ["LSTM / transformer strings"] if rec["strings_ratio"] is not None else []
    assert labels == [
        "transformer (L=4)",
        "LSTM (L=4)",
        *ratio,
        "n-gram copier D=10 n=4 L=16",
        "fixed-state copier b=4 D=2 L=6",
        "fixed-state copier b=4 D=2 L=3",
    ]


def test_plain_lsa_loop_is_the_package_layer(bench):
    """The yardstick computes the function of LinearSelfAttention (reduced) on the same prompts."""
    from stsq_learn import InContextRegressionTask
    from stsq_learn.tasks.in_context.modules import LinearSelfAttention

    X, _ = InContextRegressionTask(9, 3).sample_torch(6, generator=torch.Generator().manual_seed(0))
    module = LinearSelfAttention(3, init_scale=0.7)
    plain = bench.baselines.plain_lsa_forward(
        module.value, module.key_query, X[:, :-1, :-1], X[:, :-1, -1], X[:, -1, :-1]
    )
    torch.testing.assert_close(plain, module(X))


def test_studies_entry_times_both_ways_and_checks_the_numbers(bench):
    module = bench.run.load("studies")
    cfg = bench.harness.merge_config(
        module,
        overrides=dict(seq_len=6, n_features=2, search_widths=(2, 8), search_lengths=(4, 6))
        | dict(target=0.5, n_steps=30, n_test=100, search_seeds=2, curve_seeds=2)
        | dict(curve_width=8, curve_steps=20, every=5, repeats=1),
    )
    rec = module.run(cfg, None)
    assert set(rec["cases"]) == {"search", "curve"}
    for case in rec["cases"].values():
        assert set(case["runners"]) == {"batched", "seed by seed"}
        assert all(v == 0.0 for v in case["max_difference"].values())  # to the bit
    assert [name for name, _ in module.table(rec)] == ["search", "curve"]


def test_plan_entry_compares_the_estimate_with_the_run(bench):
    module = bench.run.load("plan")
    cfg = bench.harness.merge_config(
        module,
        overrides=dict(seq_len=8, n_features=2, seeds=2, n_steps=20, n_test=100, every=5)
        | dict(studies=("length_curve", "search")),
    )
    rec = module.run(cfg, None)
    assert set(rec["cases"]) == {
        f"{s}, {w}" for s in ("length_curve", "search") for w in ("batched", "seed by seed")
    }
    for case in rec["cases"].values():
        assert case["planned_seconds"] > 0 and case["seconds"] > 0
        assert case["ratio"] == case["planned_seconds"] / case["seconds"]


def test_profile_step_splits_a_step_into_its_parts():
    import importlib.util

    spec = importlib.util.spec_from_file_location("profile_step", BENCH / "profile_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    lines = []
    rows = module.profile("in_context", steps=3, repeats=1, out=lines.append)
    assert list(rows) == ["step", "batch", "model", "optimiser", "engine"]
    assert rows["step"] > 0 and min(rows["batch"], rows["model"], rows["optimiser"]) > 0
    assert rows["engine"] == pytest.approx(
        rows["step"] - rows["batch"] - rows["model"] - rows["optimiser"]
    )
    assert lines[0].startswith("in_context: LinearAttentionRegressor, 1 member(s), 3 steps")
    assert set(module.TASKS) == {"selection", "fcn", "averaging", "retrieval", "in_context"}
