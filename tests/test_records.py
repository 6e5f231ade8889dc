"""The experiments' records, and the plan of a run (fits, steps, estimated time)."""

import pytest
import torch

from stsq_learn.experiments import EXPERIMENTS, PRESETS, plan, plan_table
from stsq_learn.experiments._record import SIZES, Experiment
from stsq_learn.experiments._records import ENTRIES, RECORDS


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_public_names_come_from_the_records():
    assert EXPERIMENTS == tuple(ENTRIES) == tuple(RECORDS)
    assert list(PRESETS) == list(SIZES) == ["tiny", "quick", "full", "gpu"]
    for size in SIZES:
        for name, record in RECORDS.items():
            assert PRESETS[size][name] is record.presets[size]
    assert RECORDS["length_generalization"].aliases == ("length",)
    assert RECORDS["separation"].aliases == ("width",)
    assert RECORDS["qsa"].aliases == ("averaging",)
    assert EXPERIMENTS[-4] == "retrieval" and RECORDS["retrieval"].aliases == ("sparse_retrieval",)
    assert EXPERIMENTS[-3] == "single_location"
    assert RECORDS["single_location"].aliases == ("content",)
    assert EXPERIMENTS[-2] == "classification"
    assert RECORDS["classification"].aliases == ("sparse_token_classification",)
    assert EXPERIMENTS[-1] == "in_context_regression"
    assert RECORDS["in_context_regression"].aliases == ()


def test_a_record_needs_every_size():
    record = RECORDS["convergence"]
    with pytest.raises(ValueError, match=r"no preset for \['gpu'\]"):
        Experiment(
            name="new",
            function=record.function,
            presets={size: {} for size in SIZES[:-1]},
            summary_rows=record.summary_rows,
            work=record.work,
            settings=record.settings,
        )


@pytest.mark.parametrize("size", SIZES)
def test_every_preset_plans_without_running(size):
    for name, record in RECORDS.items():
        work = record.planned_work(size)
        assert work and all(part.fits >= 1 and part.steps >= 1 for part in work), name


def test_separation_presets_set_solver_and_rates():
    for size in ("quick", "full", "gpu"):
        for curve in PRESETS[size]["separation"]["curves"]:
            params = curve["transformer"].get_params()
            assert params["solver"] == "sgd" and params["learning_rate"] == "constant"
            if curve["fcn"] is not None:
                params = curve["fcn"].get_params()
                assert params["solver"] == "adam"
                assert params["learning_rate"] in ("constant", "cosine")
    full = PRESETS["full"]["separation"]["curves"]
    assert [max(c["seq_lens"]) for c in full] == [256, 256]
    assert [c["max_seq_len"] for c in full] == [{"fcn": 64}, {"fcn": 1}]


def test_qsa_presets_set_solver_and_rates():
    for size in SIZES:
        preset = PRESETS[size]["qsa"]
        for name in ("transformer", "fcn", "estimator"):
            assert preset[name].get_params()["solver"] in ("sgd", "adam")
        assert preset["fcn"].get_params()["batch_size"] in (256, 1024)
        assert preset["estimator"].get_params()["learning_rate"] == "cooldown"
    full = PRESETS["full"]["qsa"]
    assert full["seq_lens"][-1] == 256 and full["fcn_max_seq_len"] == 32
    assert full["transfer_task"] == (64, 8, 4) and full["transfer_width"] == 256
    assert full["length_task"][0] == 32 and full["factors"] == (1, 2, 4)


def test_plan_counts_fits_and_steps():
    est = plan("tiny", device="cpu")
    assert list(est) == list(EXPERIMENTS)
    conv = est["convergence"]
    # convergence: every block at the same step, then the preconditioned run.
    n_steps = PRESETS["tiny"]["convergence"]["n_steps"]
    assert (conv["fits"], conv["steps"]) == (2, 2 * n_steps)
    # length: two models and one over a range of lengths; encodings: 4 families + 2 extra
    # codebooks (one seed at tiny: the seeds are the runner's).
    assert est["length_generalization"]["fits"] == 3
    assert est["encodings"]["fits"] == 6
    # separation, two curves: 3 + 2 expected fits for the transformer each; on the first
    # the FCN's grid (4, 8) is below 4 T d at T=4: its two widths, then no search at T=8.
    assert est["separation"]["fits"] == 12
    # qsa: the studies' expected fits, 3 + 2 per search (attention and FCN against N,
    # attention against q); transfer and length 2 each.
    assert est["qsa"]["fits"] == 19
    assert [p["label"] for p in est["qsa"]["parts"]][-2:] == [
        "length_curve: stochastic",
        "length_curve: fixed",
    ]
    # retrieval: (q=2, H=1, 2); widths by T for both models (3 at T=4, 2 at T=8); length 2.
    assert est["retrieval"]["fits"] == 2 + 2 * (3 + 2) + 2
    # single_location: 2 initialisations x 2 schedules x 1 seed, then the softmax model.
    assert est["single_location"]["fits"] == 5
    # classification: 3 lengths x 3 classifiers x 2 halvings; 2 d x 2 ratios; 2 thetas x 3.
    assert est["classification"]["fits"] == 18 + 4 + 6
    # in_context_regression: 2 laws of the convergence, then 3 training lengths (one seed;
    # the baselines fit no steps and are not timed).
    icl = est["in_context_regression"]
    n_steps = PRESETS["tiny"]["in_context_regression"]["n_steps"]
    assert (icl["fits"], icl["steps"]) == (5, 5 * n_steps)
    assert all(e["seconds"] >= 0 for e in est.values())
    table = plan_table(est)
    assert table.startswith("| experiment | fits | steps | estimated time |")
    assert "| total | 94 |" in table


def test_plan_only_and_bad_arguments():
    assert list(plan("tiny", only="width", device="cpu")) == ["separation"]
    with pytest.raises(ValueError, match="preset must be one of"):
        plan("huge")
    with pytest.raises(ValueError, match="bogus"):
        plan("tiny", only="bogus")
    with pytest.raises(ValueError, match="n_threads"):
        plan("tiny", n_threads=0)


def test_every_experiment_declares_its_settings_once():
    import dataclasses
    import inspect
    import re

    from stsq_learn.experiments import Settings

    for name, record in RECORDS.items():
        assert issubclass(record.settings, Settings), name
        fields = record.settings.field_names()
        params = inspect.signature(record.function).parameters
        # The function takes the settings and keyword changes; it does not repeat them.
        assert next(iter(params)) == "settings", name
        assert not set(params) & set(fields), name
        assert list(inspect.signature(record.work).parameters) == ["settings"], name
        for size in SIZES:
            preset = record.presets[size]
            assert type(preset) is record.settings, (name, size)
            assert dict(preset) == {k: getattr(preset, k) for k in fields}
        assert record.function.__doc__ and record.settings.__doc__
        for field in fields:  # every setting is documented on its class
            assert field in record.settings.__doc__, (name, field)
        required = [
            f.name
            for f in dataclasses.fields(record.settings)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        if required:  # as the function's required arguments were: resolve names them
            missing = re.escape(f"missing required settings {required}")
            with pytest.raises(ValueError, match=missing):
                record.settings.resolve(None)
        else:
            assert record.settings() == record.settings.resolve(None)
    assert type(RECORDS["convergence"].presets["quick"]).__name__ == "ConvergenceSettings"


def test_settings_resolve_changes_and_refuse_unknown_names():
    import dataclasses

    from stsq_learn.experiments import ConvergenceSettings, Settings, training_dynamics

    base = ConvergenceSettings(seq_len=8, n_steps=30)
    assert base.replace(n_steps=60) == ConvergenceSettings(seq_len=8, n_steps=60)
    assert base.n_steps == 30  # replace makes a copy
    assert ConvergenceSettings.resolve(base, {"n_test": 5}).n_test == 5
    assert ConvergenceSettings.resolve({"seq_len": 8}).seq_len == 8
    assert dict(base)["seq_len"] == 8 and len(base) == len(ConvergenceSettings.field_names())
    assert base == {**dict(base)}  # compares with a mapping by its items
    with pytest.raises(ValueError, match=r"\['n_step'\] are not settings of ConvergenceSettings"):
        base.replace(n_step=1)
    with pytest.raises(ValueError, match=r"\['bogus'\] are not settings of ConvergenceSettings"):
        training_dynamics(bogus=1)

    class OtherSettings(Settings):  # a subclass is a frozen keyword-only dataclass
        width: int = 4

    assert OtherSettings(width=2).width == 2 and dict(OtherSettings()) == {"width": 4}
    with pytest.raises(TypeError, match="settings must be ConvergenceSettings"):
        training_dynamics(OtherSettings())
    with pytest.raises(TypeError, match="got int: 3"):
        training_dynamics(3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.n_steps = 1


def test_a_preset_naming_a_setting_its_function_lacks_fails_when_the_record_is_built():
    import dataclasses

    record = RECORDS["convergence"]
    typo = {size: dict(p) for size, p in record.presets.items()}
    typo["gpu"]["n_step"] = typo["gpu"].pop("n_steps")
    with pytest.raises(ValueError, match=r"preset 'gpu': \['n_step'\] are not settings of"):
        dataclasses.replace(record, presets=typo)
    # A setting without a default must be given.
    separation = RECORDS["separation"]
    bare = {size: dict(p) for size, p in separation.presets.items()}
    del bare["tiny"]["curves"]
    with pytest.raises(ValueError, match=r"preset 'tiny'.*curves"):
        dataclasses.replace(separation, presets=bare)
    # Settings are frozen: a preset is changed by making another.
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.presets["tiny"].n_steps = 1


def test_plan_times_a_model_whose_first_steps_raise_its_loss():
    """The full preset's plan stopped: a few timed steps at a large step "diverged"."""
    from sklearn.base import clone

    from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector
    from stsq_learn.experiments._record import Work, estimate

    # The full preset's model trained over lengths 8..32: twelve Adam steps raise its loss.
    model = SparseTokenSelector(
        128,
        solver="adam",
        learning_rate_init=0.01,
        learning_rate="constant",
        batch_size=256,
        length_scale="floor",
        device="cpu",  # CPU arithmetic: on CUDA these twelve steps happened not to diverge
        random_state=0,
    )
    task = SparseTokenSelectionTask((8, 32), 16, 4)
    with pytest.raises(ValueError, match="diverged"):
        clone(model).fit_online(task, n_steps=12)
    (row,) = estimate([Work("big step", 3, 100, model, task)], device="cpu")
    assert row["fits"] == 3 and row["steps"] == 300 and row["seconds"] > 0
    assert model.get_params()["on_divergence"] == "raise"  # the given model is not changed
