"""Run scikit-learn searches over stsq-learn estimators on a dask cluster.

scikit-learn's :class:`~sklearn.model_selection.GridSearchCV`,
:func:`~sklearn.model_selection.cross_validate` and friends dispatch their fits
through joblib, and joblib's ``"dask"`` backend sends each fit to a worker of
a :mod:`dask.distributed` cluster. This module adds the two things the
estimators need on such a cluster and nothing else:

- :class:`TorchThreads`, a worker plugin that caps PyTorch's intra-op thread
  pool on every worker, so that workers sharing a machine do not each start
  one thread per core and oversubscribe it;
- :func:`dask_backend`, a context manager that opens (or connects to) a
  cluster, installs that plugin and makes joblib's ``"dask"`` backend the
  default inside the block.

Everything an estimator ships to a worker (the estimator, its fitted torch
module, the scorers, the data folds) pickles, and the estimators keep no
process-global random state: initialisation, batch order, encodings and
prediction draws all come from generators seeded by ``random_state``. A
search therefore gives the same scores on a cluster as in one process, as
long as each fit runs with the same number of torch threads (the reductions
inside torch may round differently with another thread count).

It needs the ``distributed`` extra: ``pip install ".[distributed]"`` from the
repository's root.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

try:
    import joblib
    from distributed import Client, LocalCluster
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "stsq_learn.distributed needs dask.distributed: install it with "
        "'pip install \".[distributed]\"' from the repository's root (or 'pip install "
        "distributed')."
    ) from exc

from ._validation import check_positive_int, check_scheduler

__all__ = ["TorchThreads", "dask_backend", "parse_scheduler"]


def parse_scheduler(scheduler):
    """Read a scheduler specification.

    Parameters
    ----------
    scheduler : str
        ``"local"`` (a :class:`~distributed.LocalCluster` with one worker
        process per core), ``"local:N"`` (one with ``N`` worker processes), or
        the address of a running scheduler such as ``"tcp://10.0.0.5:8786"``
        or ``"10.0.0.5:8786"``.

    Returns
    -------
    kind : {"local", "address"}
        Whether to start a local cluster or connect to a scheduler.
    value : int, None or str
        For ``"local"``, the number of workers (``None``: one per core);
        for ``"address"``, the address.

    Examples
    --------
    >>> from stsq_learn.distributed import parse_scheduler
    >>> parse_scheduler("local:4")
    ('local', 4)
    >>> parse_scheduler("tcp://10.0.0.5:8786")
    ('address', 'tcp://10.0.0.5:8786')
    """
    return check_scheduler(scheduler)


class TorchThreads(WorkerPlugin):
    """Worker plugin that sets the number of PyTorch threads on every worker.

    Register it once on a client and it runs on every current and future
    worker: ``client.register_plugin(TorchThreads(1))``. The setting reaches
    the threads that run the worker's tasks (PyTorch keeps it per thread).
    On unregistering it puts back the worker's previous setting (this
    matters for in-process workers, which share the client's torch).

    Parameters
    ----------
    n_threads : int, default=1
        Intra-op threads of :func:`torch.set_num_threads` on each worker.
        The rule against oversubscription: workers on a machine times their
        ``nthreads`` (tasks run at once) times ``n_threads`` should not exceed
        its cores. With one single-threaded worker per core (the layout
        :func:`dask_backend` starts) that is 1; with one worker per GPU, or
        one ``--nthreads 1`` worker per k cores, use k.

    Attributes
    ----------
    previous_ : dict
        Worker address -> thread count before the plugin changed it (kept on
        the copy of the plugin that lives on each worker).

    See Also
    --------
    dask_backend : Opens a cluster with this plugin and selects joblib's dask backend.

    Examples
    --------
    >>> from distributed import Client, LocalCluster
    >>> from stsq_learn.distributed import TorchThreads
    >>> import torch
    >>> cluster = LocalCluster(  # doctest: +SKIP
    ...     n_workers=1, threads_per_worker=1)
    >>> with Client(cluster) as client:  # doctest: +SKIP
    ...     client.register_plugin(TorchThreads(2))
    ...     threads = client.submit(torch.get_num_threads, pure=False)
    ...     threads.result()
    2
    """

    name = "stsq-learn-torch-threads"

    def __init__(self, n_threads=1):
        self.n_threads = check_positive_int(n_threads, "n_threads")
        self.previous_ = {}

    def setup(self, worker):
        """Record the worker's torch thread count, then cap it.

        Parameters
        ----------
        worker : distributed.Worker
            The worker the plugin is registered on.
        """
        import torch

        self.previous_[worker.address] = torch.get_num_threads()
        _set_torch_threads(worker, self.n_threads)

    def teardown(self, worker):
        """Restore the torch thread count the worker had before :meth:`setup`.

        Parameters
        ----------
        worker : distributed.Worker
            The worker the plugin is removed from.
        """
        previous = self.previous_.pop(worker.address, None)
        if previous is not None:
            _set_torch_threads(worker, previous)


def _set_torch_threads(worker, n_threads, timeout=10.0):
    """``torch.set_num_threads(n_threads)`` where the worker's tasks run.

    PyTorch keeps the setting per thread (OpenMP): a call changes the calling
    thread and the default of threads started later, but not threads that
    already exist. Tasks run in the worker's executor threads, which may
    exist already (a worker that has run tasks), so each of them is made to
    run the call once: as many calls as threads are queued and each waits
    at a barrier until all have arrived, so no thread takes two. A barrier
    that does not fill within ``timeout`` seconds (threads busy with long
    tasks) is given up; threads started later still get the setting.
    """
    import torch

    torch.set_num_threads(n_threads)
    executor = worker.executors.get("default")
    nthreads = worker.state.nthreads
    if executor is None or nthreads < 1:  # pragma: no cover - workers always have one
        return
    barrier = threading.Barrier(nthreads, timeout=timeout)

    def set_here():
        torch.set_num_threads(n_threads)
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            pass

    for _ in range(nthreads):
        executor.submit(set_here)


@contextmanager
def dask_backend(scheduler="local", *, torch_threads=1, resources=None, **cluster_kwargs):
    """Run joblib (and so scikit-learn's searches) on a dask cluster inside a ``with`` block.

    Opens the cluster named by ``scheduler`` (or connects to it), registers
    :class:`TorchThreads` on its workers, waits for them, makes joblib's
    ``"dask"`` backend the default (every ``n_jobs=None`` search then uses all
    workers) and, on exit, closes what it opened. A cluster reached by address
    or through a client is left running, its workers' torch threads as they
    were; only a connection this function opened is closed.

    Parameters
    ----------
    scheduler : str or distributed.Client, default="local"
        ``"local"`` starts a :class:`~distributed.LocalCluster` with one
        single-threaded worker process per core, ``"local:N"`` one with ``N``
        workers; an address (``"tcp://host:8786"``) connects to a running
        scheduler (started with ``dask scheduler`` and ``dask worker
        ADDRESS --nthreads 1``); a :class:`~distributed.Client` is used as it
        is and left open.
    torch_threads : int, default=1
        PyTorch threads per worker (see :class:`TorchThreads`).
    resources : dict or None, default=None
        Resources each task asks for, e.g. ``{"GPU": 1}`` on workers started
        with ``dask worker ADDRESS --nthreads 1 --resources GPU=1``, so that
        one fit runs per GPU at a time.
    **cluster_kwargs
        Passed to :class:`~distributed.LocalCluster` when one is started
        (e.g. ``memory_limit``, ``dashboard_address``); an error otherwise.
        ``processes`` defaults to True and ``threads_per_worker`` to 1.

    Yields
    ------
    client : distributed.Client
        The client; ``client.dashboard_link`` shows the cluster's dashboard.

    See Also
    --------
    TorchThreads : The worker plugin installed here.

    Examples
    --------
    >>> from sklearn.model_selection import GridSearchCV
    >>> from stsq_learn import SparseTokenSelector, make_sparse_token_selection
    >>> from stsq_learn.distributed import dask_backend
    >>> X, y = make_sparse_token_selection(200, 8, 4, 2, random_state=0)
    >>> search = GridSearchCV(SparseTokenSelector(max_iter=5, random_state=0),
    ...                       {"width": [8, 16]}, cv=2)
    >>> with dask_backend("local:2"):  # doctest: +SKIP
    ...     search.fit(X, y)
    """
    torch_threads = check_positive_int(torch_threads, "torch_threads")
    if resources is not None and not isinstance(resources, dict):
        raise TypeError(
            f"resources must be a dict such as {{'GPU': 1}} or None, got {resources!r}."
        )
    submit_kwargs = {} if resources is None else {"resources": dict(resources)}

    if isinstance(scheduler, Client):
        kind, value = "client", scheduler
    else:
        kind, value = parse_scheduler(scheduler)
    if cluster_kwargs and kind != "local":
        raise TypeError(
            f"Cluster options {sorted(cluster_kwargs)} only apply when a local cluster is "
            f"started, not with scheduler={scheduler!r}."
        )

    cluster = None
    client = None
    registered = False
    try:
        if kind == "local":
            options = {"processes": True, "threads_per_worker": 1, "dashboard_address": ":0"}
            options.update(cluster_kwargs)
            try:
                cluster = LocalCluster(n_workers=value, **options)
            except (RuntimeError, OSError) as exc:
                raise RuntimeError(
                    f"Could not start a local dask cluster for scheduler={scheduler!r} "
                    f"({exc}). Its worker processes import the main script again: in a "
                    'script, start the cluster under `if __name__ == "__main__":`.'
                ) from exc
            client = Client(cluster)
            client.wait_for_workers(len(cluster.workers))
        elif kind == "address":
            client = Client(value)
        else:
            client = value
        client.register_plugin(TorchThreads(torch_threads))
        registered = True
        with joblib.parallel_config(backend="dask", **submit_kwargs):
            yield client
    finally:
        if registered and cluster is None:
            # A cluster that outlives the block gets its workers' torch threads back.
            client.unregister_worker_plugin(TorchThreads.name)
        if kind != "client" and client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
