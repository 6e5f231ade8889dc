"""Grid searches on a dask cluster give the same scores as in one process."""

import json
import os
import pickle

import joblib
import numpy as np
import pytest
import torch
from sklearn.model_selection import GridSearchCV, KFold

pytest.importorskip("distributed")

from distributed import Client, LocalCluster, get_task_stream

import stsq_learn
from stsq_learn import (
    FCNSelector,
    SparseTokenSelector,
    length_shift_scoring,
    make_sparse_token_selection,
)
from stsq_learn.distributed import TorchThreads, dask_backend, parse_scheduler

PARAM_GRID = {"width": [8, 16], "positional_encoding": ["stochastic", "fixed"]}


def _search():
    return GridSearchCV(
        SparseTokenSelector(max_iter=8, random_state=0),
        PARAM_GRID,
        cv=KFold(2, shuffle=True, random_state=0),
        # Length-shift scorers travel to the workers with the fits.
        scoring={**length_shift_scoring((1, 2), random_state=0), "mse": "neg_mean_squared_error"},
        refit="r2",
    )


def _score_arrays(search):
    return {k: v for k, v in search.cv_results_.items() if "_test_" in k and "rank" not in k}


@pytest.fixture(scope="module")
def data():
    return make_sparse_token_selection(240, 8, 4, 2, random_state=0)


@pytest.fixture
def one_torch_thread():
    """Run the sequential reference with the workers' thread count, then restore."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# -- scheduler specifications and bad input (no cluster started) ------------
@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("local", ("local", None)),
        ("local:3", ("local", 3)),
        (" local:1 ", ("local", 1)),
        ("tcp://10.0.0.5:8786", ("address", "tcp://10.0.0.5:8786")),
        ("scheduler.example.org:8786", ("address", "scheduler.example.org:8786")),
    ],
)
def test_parse_scheduler(spec, expected):
    assert parse_scheduler(spec) == expected


@pytest.mark.parametrize(
    ("spec", "error", "match"),
    [
        ("local:0", ValueError, "at least one worker"),
        ("local:two", ValueError, "positive integer"),
        ("local:-1", ValueError, "at least one worker"),
        ("", ValueError, "neither 'local'"),
        ("myhost", ValueError, "'myhost' is neither"),
        ("tcp://a b:1", ValueError, "neither"),
        (4, TypeError, "got 4 of type int"),
        (None, TypeError, "got None"),
    ],
)
def test_parse_scheduler_rejects(spec, error, match):
    with pytest.raises(error, match=match):
        parse_scheduler(spec)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"torch_threads": 0}, ValueError, "torch_threads must be an integer >= 1"),
        ({"torch_threads": 1.5}, TypeError, "torch_threads must be an integer"),
        ({"resources": ["GPU"]}, TypeError, "resources must be a dict"),
        ({"scheduler": "local:0"}, ValueError, "at least one worker"),
        ({"scheduler": "tcp://h:8786", "memory_limit": "1GB"}, TypeError, "memory_limit"),
    ],
)
def test_dask_backend_rejects_before_starting(kwargs, error, match):
    with pytest.raises(error, match=match), dask_backend(**kwargs):
        pytest.fail("the block must not run")  # pragma: no cover


def test_torch_threads_plugin_checks_and_pickles():
    with pytest.raises(ValueError, match="n_threads must be an integer >= 1, got 0"):
        TorchThreads(0)
    plugin = pickle.loads(pickle.dumps(TorchThreads(3)))
    assert plugin.n_threads == 3 and plugin.name == TorchThreads.name


def _task_threads(client, n=6):
    """torch.get_num_threads() as seen by the threads that run tasks."""
    return set(client.gather(client.map(lambda _: torch.get_num_threads(), range(n), pure=False)))


def test_existing_client_left_open_and_task_threads_restored():
    """The plugin reaches the task threads, even ones that ran work before, and undoes itself."""
    main_before = torch.get_num_threads()
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        before = _task_threads(client)  # the executor threads exist from here on
        assert len(before) == 1
        target = 3 if before != {3} else 2
        with dask_backend(client, torch_threads=target) as yielded:
            assert yielded is client
            assert _task_threads(client) == {target}
            backend = joblib.parallel.get_active_backend()[0]
            assert type(backend).__name__ == "DaskDistributedBackend"
        assert _task_threads(client) == before
        assert client.status == "running"
        assert client.submit(sum, [1, 2]).result() == 3
    assert torch.get_num_threads() == main_before


# -- the acceptance test: a real cluster of worker processes ----------------
@pytest.mark.distributed
def test_local_cluster_grid_search_matches_sequential(data, one_torch_thread):
    X, y = data
    sequential = _search().fit(X, y)

    with dask_backend("local:2") as client:
        workers = client.scheduler_info()["workers"]
        assert len(workers) == 2
        assert all(w["nthreads"] == 1 for w in workers.values())
        assert _task_threads(client) == {1}
        pids = set(client.run(os.getpid).values())
        assert len(pids) == 2 and os.getpid() not in pids  # separate processes

        with get_task_stream(client) as stream:
            distributed = _search().fit(X, y)
        # The fits ran on both workers, not in this process.
        assert {task["worker"] for task in stream.data} == set(workers)

    expected, got = _score_arrays(sequential), _score_arrays(distributed)
    assert expected.keys() == got.keys() and len(expected) >= 12
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
    assert distributed.best_params_ == sequential.best_params_
    np.testing.assert_array_equal(
        distributed.best_estimator_.predict(X[:20]), sequential.best_estimator_.predict(X[:20])
    )


@pytest.mark.distributed
def test_ray_joblib_backend_matches_sequential(data, one_torch_thread):
    """Ray's joblib backend (the ``ray`` extra) runs the same search to the same scores."""
    ray = pytest.importorskip("ray")
    from ray.util.joblib import register_ray

    X, y = data
    sequential = _search().fit(X, y)
    # Ray's workers are fresh interpreters: make an uninstalled checkout importable there.
    root = os.path.dirname(os.path.dirname(os.path.abspath(stsq_learn.__file__)))
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": root}},
    )
    try:
        register_ray()
        with joblib.parallel_config(backend="ray"):
            on_ray = _search().fit(X, y)
            # Ray limits each task to its one CPU, so torch runs one thread there too.
            threads = joblib.Parallel()(joblib.delayed(torch.get_num_threads)() for _ in range(2))
        assert threads == [1, 1]
    finally:
        ray.shutdown()
    expected, got = _score_arrays(sequential), _score_arrays(on_ray)
    assert expected.keys() == got.keys()
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


# -- stsq-learn reproduce --scheduler ---------------------------------------
# One curve of the width separation fitted on finite rows (the tiny preset's, scanned).
GRIDSEARCH = dict(
    seq_lens=(4,),
    target_r2=0.5,
    transformer=SparseTokenSelector(max_iter=3),
    fcn=FCNSelector(max_iter=3),
    widths={"transformer": (2, 8), "fcn": (4, 16)},
    regime="finite",
    stop_fits=False,
    search="scan",
    n_train=300,
    device="cpu",
    seeds=1,
)


@pytest.fixture(scope="module")
def running_cluster():
    """A cluster started elsewhere, reached by its address (as on a real cluster)."""
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        yield cluster


def _as_json(result):
    """An experiment's result as JSON, less the wall-clock seconds (which differ by run)."""
    return _without_seconds(json.loads(json.dumps(result.to_dict())))


def _without_seconds(out):
    """A result's JSON less its seconds and its tables' ``seconds`` columns."""
    out.pop("seconds", None)
    for table in out["tables"].values():
        table["columns"].pop("seconds", None)
    return out


@pytest.mark.parametrize("plan", [[], ["--plan"]])
def test_reproduce_rejects_bad_scheduler_before_work(tmp_path, capsys, plan):
    from stsq_learn.cli import main

    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:  # --plan too (issue 32 item 8)
        main(["reproduce", "--tiny", *plan, "--scheduler", "local:0", "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "scheduler='local:0'" in err and err.count("\n") == 1  # one line (issue 27)
    assert not out.exists()
    from stsq_learn.experiments import reproduce

    with pytest.raises(ValueError, match="'nowhere' is neither"):
        reproduce("tiny", scheduler="nowhere", progress=False)


@pytest.mark.distributed
def test_reproduce_separation_on_a_scheduler_matches_sequential(
    tmp_path, running_cluster, one_torch_thread
):
    """`stsq-learn reproduce --scheduler ADDRESS`: the searches, the same result as in-process."""
    from stsq_learn.cli import main
    from stsq_learn.experiments import width_separation_by_q

    sequential = width_separation_by_q("tiny", seeds=1, device="cpu")
    with Client(running_cluster):
        rc = main(
            [
                "reproduce",
                "--tiny",
                "--only",
                "separation",
                "--device",
                "cpu",
                "--no-progress",
                "--scheduler",
                running_cluster.scheduler_address,
                "--out",
                str(tmp_path),
            ]
        )
    assert rc == 0
    # reproduce runs the experiment inside dask_backend with n_jobs=-1: the searches hand
    # the cluster the fits pending at once; the numbers are those of a run in this process.
    got = json.loads((tmp_path / "results.json").read_text())["experiments"]["separation"]
    got.pop("headline")
    assert _without_seconds(got) == _as_json(sequential)
    # The cluster was reached by address: it is still up, its workers as they were.
    with Client(running_cluster) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        assert TorchThreads.name not in client.run_on_scheduler(
            lambda dask_scheduler: list(dask_scheduler.worker_plugins)
        )


@pytest.mark.distributed
def test_width_separation_on_finite_rows_on_a_scheduler_matches_sequential(
    running_cluster, one_torch_thread
):
    from stsq_learn.experiments import width_separation

    sequential = width_separation("tiny", **GRIDSEARCH)
    with Client(running_cluster) as client:
        with dask_backend(client):
            on_cluster = width_separation("tiny", n_jobs=-1, **GRIDSEARCH)
        assert client.status == "running"
    assert _as_json(on_cluster) == _as_json(sequential)
