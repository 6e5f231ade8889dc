"""save_model / load_model: round trips, a fresh process, and tampered files."""

import copy
import hashlib
import io
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import textwrap
import warnings
import zipfile
from pathlib import Path

import joblib
import numpy as np
import pytest
import torch
from children import child_env
from sklearn.base import clone

from stsq_learn import (
    FCNSelector,
    SparseTokenRetriever,
    SparseTokenSelector,
    load_model,
    make_sparse_averaging,
    make_sparse_retrieval,
    make_sparse_token_selection,
    save_model,
)
from stsq_learn.io.archive import seal

ROOT = Path(__file__).resolve().parents[1]
ESTIMATORS = {
    "spe": lambda: SparseTokenSelector(width=6, max_iter=3, n_pe_samples=2, random_state=0),
    "fixed": lambda: SparseTokenSelector(
        width=6, max_iter=3, positional_encoding="fixed", random_state=0
    ),
    "fcn": lambda: FCNSelector(width=8, extra_hidden_layers=(4,), max_iter=3, random_state=0),
    "spe-1d-float64": lambda: SparseTokenSelector(width=4, max_iter=2, dtype="float64"),
    "spe-full-sampler": lambda: SparseTokenSelector(
        width=6, max_iter=2, pe_sampling="full", random_state=0
    ),
    "randomized": lambda: SparseTokenSelector(
        width=6, max_iter=3, positional_encoding="randomized", max_positions=12, random_state=0
    ),
    "sinusoidal": lambda: SparseTokenSelector(
        width=6, max_iter=3, positional_encoding="sinusoidal", random_state=0
    ),
}


@pytest.fixture(scope="module")
def data():
    return make_sparse_token_selection(80, 6, 3, 2, random_state=0)


@pytest.fixture(scope="module")
def models(data):
    X, y = data
    X1, y1 = make_sparse_token_selection(80, 6, 1, 2, random_state=0)
    out = {}
    for name, make in ESTIMATORS.items():
        out[name] = make().fit(X1, y1.ravel()) if "1d" in name else make().fit(X, y)
    return out


@pytest.fixture
def saved(models, tmp_path):
    path = tmp_path / "spe.stsq"
    save_model(models["spe"], path)
    return path


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_round_trip_is_exact(name, models, data, tmp_path):
    est = models[name]
    X = data[0] if "1d" not in name else make_sparse_token_selection(20, 9, 1, 2)[0]
    path = tmp_path / "model.stsq"
    save_model(est, path)
    assert os.listdir(tmp_path) == ["model.stsq"]  # no temporary file left behind
    loaded = load_model(str(path))
    assert type(loaded) is type(est)
    assert loaded.get_params() == est.get_params()
    assert sorted(vars(loaded)) == sorted(vars(est))  # every fitted attribute restored
    for attr in ("n_features_in_", "seq_len_", "loss_curve_", "n_iter_", "t_", "device_"):
        assert getattr(loaded, attr) == getattr(est, attr), attr
    assert len(loaded.net_.history) == len(est.net_.history)
    state, ref = loaded.net_.module_.state_dict(), est.net_.module_.state_dict()
    assert state.keys() == ref.keys()
    for key in ref:
        assert torch.equal(state[key], ref[key]) and state[key].dtype == ref[key].dtype
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    # the loaded model is an ordinary estimator: it pickles and refits
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(loaded)).predict(X), est.predict(X))


def test_loaded_model_refits_like_the_original(models, data, tmp_path):
    X, y = data
    save_model(models["fcn"], tmp_path / "m.stsq")
    refit = load_model(tmp_path / "m.stsq").fit(X, y)
    np.testing.assert_array_equal(refit.predict(X), ESTIMATORS["fcn"]().fit(X, y).predict(X))


_FRESH_PROCESS = textwrap.dedent(
    """
    import hashlib, pickle, sys
    import numpy as np, torch
    torch.set_num_threads(1)
    from stsq_learn import *

    X_path, model_path, pickle_path, out_prefix = sys.argv[1:]
    # 1. a model saved by the parent process, loaded both ways
    X = np.load(X_path)
    np.save(out_prefix + "safe.npy", load_model(model_path).predict(X))
    with open(pickle_path, "rb") as fh:
        np.save(out_prefix + "pickled.npy", pickle.load(fh).predict(X))
    # 2. fits with a fixed random_state: print a hash of everything they produce
    X, y = make_sparse_token_selection(200, 8, 3, 2, random_state=0)
    h = hashlib.sha256()
    for est in (SparseTokenSelector(width=8, max_iter=5, random_state=3),
                SparseTokenSelector(width=8, max_iter=5, positional_encoding="fixed",
                                    n_pe_samples=3, random_state=3),
                FCNSelector(width=16, max_iter=5, random_state=3)):
        est.fit(X, y)
        h.update(est.predict(X).tobytes())
        h.update(repr(est.loss_curve_).encode())
    online = SparseTokenSelector(width=8, random_state=3).fit_online(
        SparseTokenSelectionTask(8, 3, 2), 20)
    h.update(online.key_query_.tobytes())
    h.update(online.predict(X).tobytes())
    print(h.hexdigest())
    """
)


@pytest.fixture(scope="module")
def fresh_processes(models, data, tmp_path_factory):
    """Two fresh interpreters, run at once, each loading the saved model and fitting."""
    tmp = tmp_path_factory.mktemp("fresh")
    est = models["spe"]
    save_model(est, tmp / "m.stsq")
    with open(tmp / "m.pkl", "wb") as fh:
        pickle.dump(est, fh)
    np.save(tmp / "X.npy", data[0])
    env = child_env(PYTHONWARNINGS="ignore")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _FRESH_PROCESS]
            + [str(tmp / n) for n in ("X.npy", "m.stsq", "m.pkl")]
            + [str(tmp / f"run{i}-")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(2)
    ]
    runs = []
    for i, proc in enumerate(procs):
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        runs.append(
            {
                "hash": out.strip(),
                "safe": np.load(tmp / f"run{i}-safe.npy"),
                "pickled": np.load(tmp / f"run{i}-pickled.npy"),
            }
        )
    return runs


@pytest.mark.slow
def test_save_then_load_in_a_fresh_process_predicts_the_same(fresh_processes, models, data):
    expected = models["spe"].predict(data[0])
    for run in fresh_processes:
        np.testing.assert_array_equal(run["safe"], expected)
        np.testing.assert_array_equal(run["pickled"], expected)


@pytest.mark.slow
def test_same_random_state_same_results_across_processes(fresh_processes):
    first, second = (run["hash"] for run in fresh_processes)
    assert len(first) == 64 and first == second
    assert first != hashlib.sha256(b"").hexdigest()  # a hash of results, not a constant


# -- tampered files ------------------------------------------------------------
def rewrite(path, member, change):
    """Replace one member of the zip at ``path`` with ``change(old_bytes)`` (None drops it)."""
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    new = change(members[member])
    if new is None:
        del members[member]
    else:
        members[member] = new
    with zipfile.ZipFile(path, "w") as zf:
        for name, blob in members.items():
            zf.writestr(name, blob)
    seal(path)  # a forger recomputes the checksum: the checks behind it must hold alone


def edit_metadata(edit):
    def change(blob):
        meta = json.loads(blob)
        edit(meta)
        return json.dumps(meta).encode()

    return change


def edit_weights(edit):
    def change(blob):
        state = torch.load(io.BytesIO(blob), weights_only=True)
        state = edit(state)
        buf = io.BytesIO()
        torch.save(state, buf)
        return buf.getvalue()

    return change


class _RunsCode:
    """Unpickling this object would run a shell command."""

    def __init__(self, sentinel):
        self.sentinel = sentinel

    def __reduce__(self):
        return (os.system, (f"touch {self.sentinel}",))


def _put(section, key, value):
    def edit(meta):
        meta[section][key] = value

    return edit


def _drop(section, key):
    return lambda meta: meta[section].pop(key)


TAMPERED = [
    ("bad-json", "metadata.json", lambda b: b[:-5], "metadata.json is not valid JSON"),
    ("metadata-list", "metadata.json", lambda b: b"[1, 2]", "must hold a JSON object"),
    ("no-weights", "weights.pt", lambda b: None, "no weights.pt"),
    ("no-metadata", "metadata.json", lambda b: None, "no metadata.json"),
    ("history-not-list", "history.json", lambda b: b'{"a": 1}', "history.json must be a list"),
    (
        "wrong-format",
        "metadata.json",
        edit_metadata(lambda m: m.update(format="keras")),
        "format='keras'",
    ),
    (
        "future-version",
        "metadata.json",
        edit_metadata(lambda m: m.update(format_version=99)),
        "format_version=99",
    ),
    (
        "class-os-system",
        "metadata.json",
        edit_metadata(lambda m: m.update({"class": "os.system"})),
        "class 'os.system' is not an stsq-learn estimator",
    ),
    (
        "unknown-param",
        "metadata.json",
        edit_metadata(_put("params", "evil", 1)),
        r"unknown \['evil'\]",
    ),
    (
        "missing-param",
        "metadata.json",
        edit_metadata(_drop("params", "width")),
        r"missing \['width'\]",
    ),
    (
        "invalid-param",
        "metadata.json",
        edit_metadata(_put("params", "width", -3)),
        "invalid hyperparameter.*'width'",
    ),
    (
        "missing-fitted",
        "metadata.json",
        edit_metadata(_drop("fitted", "n_features_in_")),
        "'n_features_in_' is missing",
    ),
    (
        "fitted-wrong-type",
        "metadata.json",
        edit_metadata(_put("fitted", "seq_len_", "6")),
        "seq_len_ must be an integer from 1 to 2147483647, got '6'",
    ),
    (
        "fitted-nan-loss",
        "metadata.json",
        edit_metadata(_put("fitted", "loss_curve_", [float("nan")])),
        "loss_curve_ holds NaN",
    ),
    (
        "shape-mismatch",
        "metadata.json",
        edit_metadata(_put("fitted", "n_features_in_", 5)),
        r"'key_query' has shape \(9, 6\).* needs \(11, 6\)",
    ),
    (
        "huge-width",
        "metadata.json",
        edit_metadata(_put("params", "width", 10**7)),
        r"'key_query' has shape \(9, 6\)",
    ),
    (
        "extra-tensor",
        "weights.pt",
        edit_weights(lambda s: {**s, "backdoor": torch.zeros(1)}),
        r"unknown \['backdoor'\]",
    ),
    (
        "missing-tensor",
        "weights.pt",
        edit_weights(lambda s: {}),
        r"missing \['key_query'\]",
    ),
    (
        "nan-weight",
        "weights.pt",
        edit_weights(lambda s: {"key_query": s["key_query"] * np.nan}),
        "'key_query' holds NaN",
    ),
    (
        "int-weight",
        "weights.pt",
        edit_weights(lambda s: {"key_query": s["key_query"].long()}),
        "dtype torch.int64, not a float",
    ),
    (
        "weights-not-dict",
        "weights.pt",
        edit_weights(lambda s: s["key_query"]),
        "dict of named tensors",
    ),
    ("weights-garbage", "weights.pt", lambda b: b"not torch", "not a plain tensor archive"),
]


@pytest.mark.parametrize(
    "member, change, match", [t[1:] for t in TAMPERED], ids=[t[0] for t in TAMPERED]
)
def test_tampered_file_is_refused(saved, member, change, match):
    rewrite(saved, member, change)
    with pytest.raises(ValueError, match=match):
        load_model(saved)


def test_pickled_code_in_the_weights_is_refused_and_never_run(saved, tmp_path):
    sentinel = tmp_path / "pwned"
    rewrite(saved, "weights.pt", edit_weights(lambda s: {"key_query": _RunsCode(sentinel)}))
    with pytest.raises(ValueError, match="not a plain tensor archive and was refused"):
        load_model(saved)
    assert not sentinel.exists()
    # the same file through pickle would have run the command: the test is meaningful
    with zipfile.ZipFile(saved) as zf:
        torch.load(io.BytesIO(zf.read("weights.pt")), weights_only=False)
    assert sentinel.exists()


def test_fixed_encodings_with_a_tampered_length_are_refused(models, tmp_path):
    path = tmp_path / "fixed.stsq"
    save_model(models["fixed"], path)
    rewrite(path, "metadata.json", edit_metadata(_put("fitted", "seq_len_", 10**9)))
    with pytest.raises(ValueError, match=r"'fixed_pe' has shape \(6, 6\).*seq_len_=1000000000"):
        load_model(path)


def test_not_a_model_file(tmp_path):
    path = tmp_path / "x.stsq"
    path.write_bytes(b"\x00" * 100)
    with pytest.raises(ValueError, match="not a zip archive"):
        load_model(path)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("other.txt", "hello")
    with pytest.raises(ValueError, match=r"no metadata\.json"):
        load_model(path)
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "missing.stsq")


@pytest.mark.parametrize(
    "write, says",
    [
        (lambda m, p: p.write_bytes(pickle.dumps(m)), "it is a pickle file"),
        (lambda m, p: joblib.dump(m, p), "it is a pickle file"),
        (lambda m, p: joblib.dump(m, p, compress=3), "it is a zlib-compressed file"),
        (lambda m, p: joblib.dump(m, p, compress=("gzip", 3)), "it is a gzip-compressed file"),
    ],
    ids=["pickle", "joblib", "joblib-zlib", "joblib-gzip"],
)
def test_a_joblib_or_pickle_file_is_named_with_how_to_load_it(models, tmp_path, write, says):
    path = tmp_path / "model.joblib"
    write(models["fcn"], path)
    with pytest.raises(ValueError) as info:
        load_model(path)
    message = str(info.value)
    assert message.startswith(f"{str(path)!r} is not an stsq-learn model file (not a zip archive)")
    assert says in message and "joblib.load" in message and "unpickling runs code" in message


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_model_file_has_the_mode_open_gives_it(models, tmp_path, umask):
    """0o666 less the umask, as open() gives a new file, also when it replaces one."""
    path = tmp_path / "model.stsq"
    before = os.umask(umask)
    try:
        save_model(models["fcn"], path)
        first = os.stat(path).st_mode & 0o777
        save_model(models["fcn"], path)  # replaced atomically: the same mode
        second = os.stat(path).st_mode & 0o777
    finally:
        os.umask(before)
    assert first == second == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir()] == ["model.stsq"]  # no temporary file left


# -- devices and odd hyperparameters ---------------------------------------------
def test_save_refuses_what_it_cannot_store(models, tmp_path):
    with pytest.raises(TypeError, match="got dict"):
        save_model({}, tmp_path / "m.stsq")
    with pytest.raises(TypeError, match="path must be a str"):
        save_model(models["spe"], None)
    with pytest.raises(TypeError, match="path must be a str"):
        load_model(3)


def test_random_state_instance_is_saved_as_none_with_a_warning(data, tmp_path):
    est = SparseTokenSelector(width=4, max_iter=2, random_state=np.random.RandomState(0))
    est.fit(*data)
    with pytest.warns(UserWarning, match="saved as None"):
        save_model(est, tmp_path / "m.stsq")
    loaded = load_model(tmp_path / "m.stsq")
    assert loaded.random_state is None
    np.testing.assert_array_equal(loaded.predict(data[0]), est.predict(data[0]))


@pytest.mark.skipif(torch.cuda.is_available(), reason="simulates a machine without CUDA")
def test_model_saved_on_cuda_loads_on_cpu(saved, data):
    rewrite(saved, "metadata.json", edit_metadata(_put("fitted", "device", "cuda:0")))
    with pytest.warns(UserWarning, match="fitted on cuda:0.*loaded on the CPU"):
        loaded = load_model(saved)
    assert loaded.device_ == torch.device("cpu")
    assert np.isfinite(loaded.predict(data[0])).all()
    with pytest.raises(ValueError, match="CUDA is not available"):
        load_model(saved, device="cuda")
    assert load_model(saved, device="cpu").device_ == torch.device("cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_model_round_trip_and_cpu_load(data, tmp_path):
    X, y = data
    est = SparseTokenSelector(width=6, max_iter=3, device="cuda", random_state=0).fit(X, y)
    save_model(est, tmp_path / "m.stsq")
    on_gpu = load_model(tmp_path / "m.stsq")
    assert on_gpu.device_.type == "cuda"
    np.testing.assert_array_equal(on_gpu.predict(X), est.predict(X))
    on_cpu = load_model(tmp_path / "m.stsq", device="cpu")
    np.testing.assert_allclose(on_cpu.key_query_, est.key_query_)
    assert np.isfinite(on_cpu.predict(X)).all()


def test_file_from_before_the_0_2_hyperparameters_loads_with_their_defaults(saved, data):
    """0.1.0 wrote no learning_rate, power_t, warm_start, n_pe_samples_fit, learn_token_block.

    Format version 1 is migrated explicitly; the current version must hold them all.
    """
    added = ("learning_rate", "power_t", "warm_start", "n_pe_samples_fit", "learn_token_block")

    def strip(meta):
        for key in added:
            meta["params"].pop(key)

    def as_version_1(meta):
        strip(meta)
        meta["format_version"] = 1
        meta["params"].pop("callbacks")
        for new, old in (
            ("predict_seed", "_predict_seed"),
            ("y_1d", "_y_1d"),
            ("device", "device_"),
        ):
            meta["fitted"][old] = meta["fitted"].pop(new)

    expected = load_model(saved).predict(data[0])
    original = saved.read_bytes()
    rewrite(saved, "metadata.json", edit_metadata(as_version_1))
    loaded = load_model(saved)
    trained_with = {  # what 0.1 trained with, not today's defaults
        "learning_rate": "constant",
        "power_t": 0.5,
        "warm_start": False,
        "n_pe_samples_fit": 1,
        "learn_token_block": True,
    }
    assert {k: loaded.get_params()[k] for k in added} == trained_with
    np.testing.assert_array_equal(loaded.predict(data[0]), expected)
    saved.write_bytes(original)
    rewrite(saved, "metadata.json", edit_metadata(strip))
    with pytest.raises(ValueError, match=r"missing \['learn_token_block', 'learning_rate'"):
        load_model(saved)


def test_loaded_model_continues_with_warm_start(models, data, tmp_path):
    est = models["spe"]
    path = tmp_path / "model.stsq"
    save_model(est, path)
    loaded = load_model(path).set_params(warm_start=True, learning_rate_init=1e-9)
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 3 planned epochs that ran are no ConvergenceWarning
        loaded.fit(X, y)
    assert loaded.n_iter_ == est.n_iter_ + 3 and loaded.t_ == 2 * est.t_
    np.testing.assert_allclose(loaded.key_query_, est.key_query_, atol=1e-6)


# -- files written by earlier releases ------------------------------------------------
MODEL_FILES = Path(__file__).parent / "data" / "models"


def assert_predicts_as_then(got, expected):
    """Predictions equal to those a release stored, up to float32 kernel rounding.

    On the machine that wrote them they agree bit for bit; torch's CPU kernels
    differ by instruction set (AVX2 against AVX-512) in the last float32 bit, so
    another processor may differ by a float32 ulp or two (measured on an AVX2
    machine: at most 2.4e-7, values of order 1).
    """
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def _streamed_predict(model, X):
    """The prediction of stsq-learn 0.1 to 0.3: streamed draws from the prediction seed."""
    module = model.net_.module_
    device = next(module.parameters()).device  # the CPU generator's draws are moved there
    g = torch.Generator().manual_seed(model._predict_seed)
    with torch.inference_mode():
        X = torch.as_tensor(X, dtype=torch.float32, device=device)
        out = module(X, g, 1, model.pe_sampling)
    return out.cpu().numpy().astype(np.float64)


@pytest.mark.parametrize("version", ["0.1.0", "0.2.0", "0.3.0"])
@pytest.mark.parametrize("name", ["spe", "fixed", "fcn"])
def test_files_written_by_earlier_releases_load_and_predict_as_they_did(name, version):
    """Real files saved by stsq-learn 0.1.0, 0.2.0 and 0.3.0, with their predictions then.

    They keep the hyperparameters they were saved with (0.3 had no "auto"
    values: Adam at an explicit rate, max_iter epochs, early stopping), so a
    refit of a loaded model trains as it did then.
    """
    expected = np.load(MODEL_FILES / f"predictions-{version}.npz")
    model = load_model(MODEL_FILES / f"{name}-{version}.stsq")
    predict = _streamed_predict if name == "spe" else type(model).predict
    # 0.3's marginal sampler drew the coordinates by another exact method than
    # 0.4's streamed draws (same law): its stored numbers are not reproducible.
    exact = not (name == "spe" and model.pe_sampling == "marginal")
    assert exact or version == "0.3.0"
    if exact:
        assert_predicts_as_then(predict(model, expected["X"]), expected[f"{name}_T6"])
    if name != "fcn" and exact:
        assert_predicts_as_then(predict(model, expected["X_long"]), expected[f"{name}_T9"])
    if name == "spe":
        # 0.4 keys the draws by row: other draws of the same law, row by row.
        keyed = model.predict(expected["X"])
        assert keyed.shape == expected["spe_T6"].shape and np.isfinite(keyed).all()
        assert not np.array_equal(keyed, expected["spe_T6"])
        np.testing.assert_array_equal(model.predict(expected["X"][:3]), keyed[:3])
    assert model.n_features_in_ == 3 and model.seq_len_ == 6 and model.n_iter_ == 3
    params = model.get_params()
    assert params["solver"] == model.solver_ == "adam"
    assert params["learning_rate_init"] == model.learning_rate_init_
    assert params["max_iter"] == 3 and params["n_iter_no_change"] == 10
    assert params["learning_rate"] == "constant"
    if name != "fcn":
        assert params["token_block_rate"] == model.token_block_rate_ == 1.0


FILES_0_4 = ["spe", "fixed", "randomized", "fcn", "averager", "fcn_averager"]


@pytest.mark.parametrize("name", FILES_0_4)
def test_files_written_by_0_4_predict_exactly_as_they_did(name, request):
    """Real files saved by stsq-learn 0.4.0 (all four estimators), with their predictions then.

    0.4 keys its prediction draws by row, so these numbers are what
    ``predict`` must still give, bit for bit, at the training length and at
    a longer one.
    """
    expected = np.load(MODEL_FILES / "predictions-0.4.0.npz")  # computed with 1 torch thread
    model = load_model(MODEL_FILES / f"{name}-0.4.0.stsq")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the float rounding of a layer can depend on the thread count
    request.addfinalizer(lambda: torch.set_num_threads(threads))
    averaging = "averager" in name
    X, X_long = (
        (expected["Xa"], expected["Xa_long"]) if averaging else (expected["X"], expected["X_long"])
    )
    assert_predicts_as_then(model.predict(X), expected[f"{name}_T6"])
    if not name.startswith("fcn"):
        assert_predicts_as_then(model.predict(X_long), expected[f"{name}_T9"])
    assert model.n_features_in_ == 3 and model.seq_len_ == 6 and model.n_iter_ == 3


# -- forged or old metadata: one ValueError naming the file and what is wrong ----------------
@pytest.fixture(scope="module")
def retriever():
    X, y = make_sparse_retrieval(30, 6, 2, 2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one epoch
        return SparseTokenRetriever(width=4, n_heads=2, max_iter=1, random_state=0).fit(X, y)


def _refused(path, match):
    with pytest.raises(ValueError, match=match) as info:
        load_model(path)
    assert repr(str(path)) in str(info.value)
    return str(info.value)


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize(
    "name", ["SparseTokenRetriever", "FCNRetriever", "AttentionRegressor", "FCNRegressor"]
)
def test_a_class_of_0_5_in_an_older_format_version_is_refused_naming_it(saved, name, version):
    """The reported case: version 1 naming SparseTokenRetriever raised KeyError from migration."""

    def forge(meta):
        meta.update({"class": name, "format_version": version})

    rewrite(saved, "metadata.json", edit_metadata(forge))
    _refused(
        saved,
        rf"class '{name}' cannot be in a file of format_version={version}: it was first "
        r"saved in format version 4\.",
    )


@pytest.mark.parametrize("name", ["SparseTokenAverager", "FCNAverager"])
def test_an_averager_in_a_file_of_0_1_to_0_3_is_refused(saved, name):
    rewrite(
        saved, "metadata.json", edit_metadata(lambda m: m.update({"class": name}, format_version=2))
    )
    _refused(saved, rf"class '{name}' cannot be in a file of format_version=2: .* version 3\.")


@pytest.mark.parametrize("version", [[1], "1", 1.0, True, None, 0, 6])
def test_a_format_version_not_an_integer_read_is_refused(saved, version):
    rewrite(saved, "metadata.json", edit_metadata(lambda m: m.update(format_version=version)))
    _refused(
        saved,
        rf"has format_version={re.escape(repr(version))}; .* reads versions \[1, 2, 3, 4, 5\]",
    )


@pytest.mark.parametrize("name", [["SparseTokenSelector"], None, 3, {"a": 1}])
def test_a_class_name_not_a_string_is_refused(saved, name):
    rewrite(saved, "metadata.json", edit_metadata(lambda m: m.update({"class": name})))
    _refused(saved, rf"class {re.escape(repr(name))} is not an stsq-learn estimator")


def test_a_length_scale_fit_refuses_for_the_task_is_refused_at_load(retriever, tmp_path):
    """The reported case: loaded, then failed only at predict."""
    X = make_sparse_retrieval(5, 6, 2, 2, random_state=1)[0]
    path = tmp_path / "r.stsq"
    save_model(retriever, path)
    rewrite(path, "metadata.json", edit_metadata(_put("params", "length_scale", "floor")))
    message = _refused(
        path, "invalid hyperparameter for its task 'retrieval': length_scale='floor'"
    )
    assert "use length_scale='log'" in message
    with pytest.raises(ValueError, match="length_scale='floor'"):  # what fit says of it
        clone(retriever).set_params(length_scale="floor").fit(
            *make_sparse_retrieval(30, 6, 2, 2, random_state=0)
        )
    save_model(retriever, path)  # the valid rule loads and predicts as the model set to it
    rewrite(path, "metadata.json", edit_metadata(_put("params", "length_scale", "log")))
    loaded = load_model(path)
    expected = copy.deepcopy(retriever).set_params(length_scale="log").predict(X)
    np.testing.assert_array_equal(loaded.predict(X), expected)


@pytest.mark.parametrize(
    "key, value, match",
    [
        ("callbacks", [1], r"invalid hyperparameter: callbacks\[0\] must be a skorch callback"),
        ("callbacks", "x", r"invalid hyperparameter: .*'callbacks' parameter"),
        ("device", "bogus", r"invalid hyperparameter: device='bogus' is not a device"),
        ("device", "tpu", r"invalid hyperparameter: device='tpu' is not a device"),
        ("device", 3, r"invalid hyperparameter: .*'device' parameter"),
        (
            "dtype",
            "float64",
            r"weight 'key_query' has dtype torch.float32, but the model's dtype is torch.float64",
        ),
        (
            "width",
            True,
            r"'width' parameter of SparseTokenSelector must be an integer, got the boolean True",
        ),
    ],
)
def test_hyperparameters_fit_refuses_are_refused_at_load(saved, key, value, match):
    rewrite(saved, "metadata.json", edit_metadata(_put("params", key, value)))
    _refused(saved, match)


def test_a_model_fitted_on_cuda_still_names_a_device_that_loads(saved, data):
    rewrite(saved, "metadata.json", edit_metadata(_put("params", "device", "cuda:1")))
    loaded = load_model(saved, device="cpu")  # the name is checked, not this machine's devices
    assert loaded.device == "cuda:1" and loaded.device_ == torch.device("cpu")


def test_one_output_per_row_where_the_task_predicts_more_is_refused(retriever, tmp_path):
    path = tmp_path / "r.stsq"
    save_model(retriever, path)
    rewrite(path, "metadata.json", edit_metadata(_put("fitted", "y_1d", True)))
    _refused(path, "fitted y_1d is true .* predicts 4 outputs per row")


def test_one_output_per_row_loads_where_the_task_has_one(models, tmp_path):
    path = tmp_path / "m.stsq"
    save_model(models["spe-1d-float64"], path)
    assert load_model(path)._y_1d is True


def test_save_model_names_every_class_it_saves(tmp_path):
    from stsq_learn.persistence import _CLASSES

    with pytest.raises(TypeError) as info:
        save_model(object(), tmp_path / "m.stsq")
    message = str(info.value)
    assert message.startswith("save_model saves a SparseTokenSelector, FCNSelector, ")
    assert message.endswith("; got object.")
    for name in _CLASSES:
        assert name in message
    assert len(_CLASSES) >= 8


_LOAD_ALL = textwrap.dedent(
    """
    import json, sys
    import numpy as np, torch
    torch.set_num_threads(1)
    from sklearn.exceptions import NotFittedError
    from stsq_learn import load_model

    out = {}
    for name, path, X_path, fitted in json.loads(sys.argv[1]):
        model = load_model(path)
        if fitted:
            np.save(path + ".npy", model.predict(np.load(X_path)))
            out[name] = "fitted"
        else:
            try:
                model.predict(np.load(X_path))
            except NotFittedError:
                out[name] = json.dumps(model.get_params(deep=False), default=repr)
    print(json.dumps(out))
    """
)


def test_every_registered_estimator_round_trips_fitted_and_unfitted_in_a_fresh_process(
    tmp_path,
):
    """Each estimator the registry lists: a fitted one predicts the same in another process,
    an unfitted one loads unfitted with the same hyperparameters."""
    import inspect
    import json

    from stsq_learn import registry

    jobs, expected = [], {}
    for reg in registry.registrations():
        sizes = {"seq_len": 6, "n_features": 4}
        signature = inspect.signature(reg.make).parameters
        if "n_selected" in signature:
            sizes["n_selected"] = 2
        if "n_examples" in signature:  # in-context prompts: 5 examples, then the query
            sizes["n_examples"] = sizes.pop("seq_len") - 1
        if "vocab_size" in signature:  # strings of tokens: an alphabet, no token features
            sizes["vocab_size"] = sizes.pop("n_features")
        X, y = reg.make(60, random_state=0, **sizes)
        np.save(tmp_path / f"{reg.task.name}.npy", X)
        classes = [(cls, {}) for cls in reg.estimators]
        classes += [(cls, {"task": reg.task.name}) for cls in registry.estimators()[-2:]]
        for cls, extra in classes:
            if reg.task.structure is None and extra and "n_heads" in cls().get_params():
                continue  # the attention core (of any task) needs a query structure
            defaults = dict(width=8, max_iter=3, random_state=0)
            params = {k: v for k, v in defaults.items() if k in cls().get_params()}
            model = cls(**extra, **params)
            name = f"{cls.__name__}-{reg.task.name}"
            save_model(model, tmp_path / f"{name}-unfitted.stsq")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(X, y)
            save_model(model, tmp_path / f"{name}.stsq")
            expected[name] = model.predict(X)
            X_path = str(tmp_path / f"{reg.task.name}.npy")
            jobs += [
                (name, str(tmp_path / f"{name}.stsq"), X_path, True),
                (name + "-unfitted", str(tmp_path / f"{name}-unfitted.stsq"), X_path, False),
            ]
            expected[name + "-unfitted"] = cls(**extra, **params)
    assert {c for c in registry.estimators()} <= {
        type(m) for m in expected.values() if not isinstance(m, np.ndarray)
    }
    env = child_env(PYTHONWARNINGS="ignore")
    proc = subprocess.run(
        [sys.executable, "-c", _LOAD_ALL, json.dumps(jobs)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, path, _, fitted in jobs:
        if fitted:
            assert out[name] == "fitted"
            np.testing.assert_array_equal(np.load(path + ".npy"), expected[name])
        else:
            params = json.loads(out[name])
            want = json.loads(json.dumps(expected[name].get_params(deep=False), default=repr))
            assert params == want


FILES_0_5 = [
    "selector",
    "fcn",
    "averager",
    "retriever",
    "fcn_retriever",
    "attention_regressor",
    "fcn_regressor",
]


@pytest.mark.parametrize("name", FILES_0_5)
def test_files_written_by_0_5_predict_as_they_did(name):
    """Real files saved by stsq-learn 0.5.0 (its estimators with heads, length scales and the
    task as a parameter), with their predictions then: the 0.6 layout reads them unchanged."""
    expected = np.load(MODEL_FILES / "predictions-0.5.0.npz")
    model = load_model(MODEL_FILES / f"{name}-0.5.0.stsq")
    assert_predicts_as_then(model.predict(expected[f"{name}_X"]), expected[name])
    assert model.n_iter_ == 3 and model.n_features_in_ == 3


FILES_0_6 = ["fcn", "fcn_averager", "fcn_retriever", "fcn_regressor"]


@pytest.mark.parametrize("name", FILES_0_6)
def test_fcn_files_written_by_0_6_predict_and_refit_as_they_did(name):
    """Real files of stsq-learn 0.6.0's FCNs (Adam at 0.001, a constant rate, its defaults
    then): they load with those values, predict as they did, and a refit trains as 0.6 did
    (0.7's "auto" step is for models that leave the step unset)."""
    expected = np.load(MODEL_FILES / "predictions-0.6.0.npz")
    model = load_model(MODEL_FILES / f"{name}-0.6.0.stsq")
    params = model.get_params()
    assert (params["learning_rate_init"], params["learning_rate"]) == (0.001, "constant")
    assert model.learning_rate_init_ == 0.001
    X = expected[f"{name}_X"]
    assert_predicts_as_then(model.predict(X), expected[name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refit = clone(model).set_params(random_state=1)
        refit.fit(*_FILES_0_6_DATA[name]())
    assert_predicts_as_then(refit.predict(X), expected[f"{name}_refit"])


_FILES_0_6_DATA = {  # the rows the 0.6 models were fitted on
    "fcn": lambda: make_sparse_token_selection(60, 6, 3, 2, random_state=0),
    "fcn_averager": lambda: make_sparse_averaging(60, 6, 3, 2, random_state=0),
    "fcn_retriever": lambda: make_sparse_retrieval(60, 6, 3, 2, random_state=0),
    "fcn_regressor": lambda: make_sparse_averaging(60, 6, 3, 2, random_state=0),
}


def test_a_child_process_imports_this_checkout_and_the_parents_path(tmp_path, monkeypatch):
    """A child process finds stsq_learn here and the dependencies the parent's path holds
    (on the GPU machine skorch came from a PYTHONPATH entry the child had lost)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "only_on_the_parents_path.py").write_text("WHERE = 'site'\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(ROOT)]))
    env = child_env(PYTHONWARNINGS="ignore")
    assert env["PYTHONPATH"].split(os.pathsep) == [str(ROOT), str(site)]
    assert env["PYTHONWARNINGS"] == "ignore" and env["PATH"] == os.environ["PATH"]
    code = (
        "import importlib.util, only_on_the_parents_path as m\n"
        "print(m.WHERE, importlib.util.find_spec('stsq_learn').origin)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    where, origin = out.stdout.split()
    assert where == "site" and Path(origin) == ROOT / "stsq_learn" / "__init__.py"
    monkeypatch.delenv("PYTHONPATH")
    assert child_env()["PYTHONPATH"] == str(ROOT)


@pytest.mark.parametrize("name", ["classifier", "classifier_two_step"])
def test_classifier_files_written_by_0_6_predict_exactly_as_they_did(name):
    """Real files of stsq-learn 0.6.0's SparseTokenClassifier (its own float64 loop on the
    CPU; labels -1/+1 and strings): format 5 gives them the engine's hyperparameters with
    what 0.6 trained with, and the same weights predict the same logits, bit for bit."""
    expected = np.load(MODEL_FILES / "predictions-0.6.0.npz")
    model = load_model(MODEL_FILES / f"{name}-0.6.0.stsq")
    np.testing.assert_array_equal(model.decision_function(expected["X"]), expected[f"{name}_T6"])
    np.testing.assert_array_equal(
        model.decision_function(expected["X_long"]), expected[f"{name}_T9"]
    )
    params = model.get_params()
    assert params["dtype"] == "float64" and params["device"] == "cpu"
    assert params["batch_size"] == "full" and params["learning_rate"] == "constant"
    two_step = name == "classifier_two_step"
    assert params["solver"] == ("two_step" if two_step else "adam")
    assert model.classes_.tolist() == (["noise", "signal"] if two_step else [-1, 1])
    assert (model.two_step_query_ is not None) == two_step
    assert model.solver_ == ("sgd" if two_step else "adam") and model.t_ == 0
    # a refit trains as 0.6 did (full-batch steps in float64), on the engine
    X = expected["X"]
    refit = model.fit(X, np.resize(model.classes_, len(X)))
    assert refit.n_iter_ == (3 + 2 if two_step else 5) and refit.t_ == refit.n_iter_ * len(X)


def test_a_solver_gd_file_of_0_6_loads_as_full_batch_sgd(tmp_path):
    """0.6's solver='gd' (full-batch gradient descent) becomes solver='sgd' on all rows."""
    path = tmp_path / "gd.stsq"
    shutil.copy(MODEL_FILES / "classifier-0.6.0.stsq", path)
    rewrite(path, "metadata.json", edit_metadata(lambda m: m["params"].update(solver="gd")))
    model = load_model(path)
    assert model.get_params()["solver"] == "sgd" and model.solver_ == "sgd"
    assert model.get_params()["batch_size"] == "full"
