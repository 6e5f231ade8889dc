"""The ``stsq-learn`` command line.

``stsq-learn reproduce`` runs the registered experiments (the paper's three
claims, a comparison of positional encodings, and each task's own study) and
writes figures, ``results.json`` and a Markdown summary; ``stsq-learn fit``
trains one model on any registered task and prints its R^2 at several
sequence lengths. The lists of experiments and tasks in the help texts and
choices are read from the registry (:mod:`stsq_learn.registry`), after the
modules named by ``--import`` (which register a user's tasks and
experiments) are imported.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import sys
import time

from ._version import __version__
from .tasks import TASKS


def _items(text):
    """``"a, b"`` -> ``["a", "b"]``; an empty list, an empty item or a repeated item is refused."""
    items = [p.strip() for p in text.split(",")]
    if not any(items):
        raise argparse.ArgumentTypeError(f"expected at least one value, got {text!r}")
    if not all(items):
        raise argparse.ArgumentTypeError(f"expected no empty item, got {text!r}")
    repeated = sorted({p for p in items if items.count(p) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(f"{', '.join(repeated)} given twice in {text!r}")
    return items


def _int_list(text):
    """``"16,32,64"`` -> ``[16, 32, 64]``; the library checks the values."""
    items = _items(text)
    try:
        values = [int(p) for p in items]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of integers, got {text!r}"
        ) from None
    if len(set(values)) < len(values):  # "8,08": the same length twice
        raise argparse.ArgumentTypeError(f"the same length given twice in {text!r}")
    return values


def _assignment(text):
    """``KEY=VALUE`` -> ``(KEY, value)``, the value read as a Python literal when it is one."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        value = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError):
        value = raw.strip()
    return key.strip(), value


def _imported_names(argv):
    """The value of every ``--import`` in ``argv``, read before the parser is built."""
    pre = _Parser(prog="stsq-learn", add_help=False)
    _add_import(pre)
    return pre.parse_known_args(argv)[0].imports


def import_user_module(name):
    """Import the module ``--import NAME`` names: a dotted name or the path of a ``.py`` file.

    A dotted name is imported as ``import`` would from the current
    directory (appended to ``sys.path``) or the installed packages. A path
    is imported as the module named by its file name, from its directory
    (put first on ``sys.path``, so that the worker processes of
    ``reproduce`` import it by that name too).

    Parameters
    ----------
    name : str
        ``package.module`` or ``path/to/file.py``.

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    ValueError
        If a path is not a ``.py`` file, or its name is not a module name or
        is another module's already.
    ImportError
        If the module cannot be found, naming it.
    """
    if name.endswith(".py") or os.sep in name or (os.altsep and os.altsep in name):
        path = os.path.abspath(name)
        stem, ext = os.path.splitext(os.path.basename(path))
        if not os.path.isfile(path):
            raise ValueError(f"--import {name}: no such file ({path}).")
        if ext != ".py":
            raise ValueError(f"--import {name}: not a .py file.")
        if not stem.isidentifier():
            raise ValueError(f"--import {name}: {stem!r} is not a module name; rename the file.")
        directory = os.path.dirname(path)
        if directory not in sys.path:
            sys.path.insert(0, directory)
        module = importlib.import_module(stem)
        found = getattr(module, "__file__", None)
        if found is None or os.path.abspath(found) != path:
            raise ValueError(
                f"--import {name}: the module name {stem!r} is already that of {found or module}; "
                "rename the file."
            )
        return module
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise ImportError(f"--import {name}: {exc}.") from None


class _Parser(argparse.ArgumentParser):
    """An argument parser whose every error is one line on stderr and exit status 2."""

    def error(self, message):
        """Print ``<prog>: error: <message>`` on one line (and where to find help); exit 2."""
        one_line = " ".join(str(message).split())
        self.exit(2, f"{self.prog}: error: {one_line} (see {self.prog} --help)\n")


def build_parser():
    """The argument parser of ``stsq-learn`` (subcommands ``reproduce``, ``plot`` and ``fit``)."""
    parser = _Parser(
        prog="stsq-learn",
        description=(
            "Sparse token selection with transformers (Wang, Wei, Hsu, Lee; ICML 2024): "
            "train the paper's models and reproduce its figures."
        ),
    )
    parser.add_argument("--version", action="version", version=f"stsq-learn {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    _add_reproduce(sub)
    _add_plot(sub)
    _add_fit(sub)
    return parser


def _experiments_text():
    """The registered experiments in run order, each with its aliases, for the help texts."""
    from .experiments._registered import RECORDS

    return ", ".join(
        name + (f" (or {', '.join(rec.aliases)})" if rec.aliases else "")
        for name, rec in RECORDS.items()
    )


def _add_reproduce(sub):
    """The ``reproduce`` subcommand."""
    rep = sub.add_parser(
        "reproduce",
        help="run the paper's experiments; write figures, results.json and a summary",
        description=(
            "Run the registered experiments, in this order: "
            + _experiments_text()
            + ". The first three are the paper's claims: training dynamics (cos(W_pp, I) -> "
            "1), length generalization (stochastic vs fixed encodings) and the width "
            "separation (transformer ~ log T, FCN ~ T d). Writes <experiment>.png, "
            "bands.png, results.json (every seed's tables) and summary.md into --out and "
            "prints the summary table; `stsq-learn plot` redraws the figures of a run."
        ),
    )
    size = rep.add_mutually_exclusive_group()
    for preset, help_text in (
        ("quick", "CPU size: a few minutes on 2 cores"),
        ("full", "full size: about an hour on 2 CPU cores (--plan estimates it on this machine)"),
        ("gpu", "larger sizes (longer sequences, more steps), for one GPU"),
        ("tiny", argparse.SUPPRESS),
    ):
        size.add_argument(
            f"--{preset}", action="store_const", dest="preset", const=preset, help=help_text
        )
    rep.add_argument(
        "--plan",
        action="store_true",
        help="print the number of fits and steps and the estimated time of the chosen size "
        "and --only on this machine (from a few timed steps), and stop",
    )
    rep.add_argument(
        "--out", default="stsq-results", help="output directory (default: ./stsq-results)"
    )
    rep.add_argument(
        "--device",
        default="auto",
        help="training device: auto (CUDA when present, the default), cpu, cuda or cuda:N",
    )
    rep.add_argument(
        "--seed",
        type=int,
        default=0,
        help="the first seed: each experiment runs seeds SEED, SEED+1, ... (default: 0)",
    )
    rep.add_argument(
        "--seeds",
        type=int,
        metavar="N",
        help="seeds of each experiment, run together in one call of it; the bands of its "
        "headline numbers (median [min, max]) go to results.json, summary.md and bands.png "
        "(default: 3; 1 at the tests' size)",
    )
    rep.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="worker processes the experiments (one run each, every seed in it) are spread over "
        "(default: every usable core on a CPU, 1 on a GPU; -1: every usable core; "
        "1: this process); the numbers do not depend on it",
    )
    rep.add_argument(
        "--check",
        action="store_true",
        help="compare the run's headline numbers with the reference numbers the package ships "
        "for the size (or --reference), print the table, and exit with status 1, naming "
        "the numbers, if any is outside its tolerance",
    )
    rep.add_argument(
        "--reference",
        metavar="PATH",
        help="a reference file (written by --write-reference) to --check against instead of "
        "the shipped one (implies --check)",
    )
    rep.add_argument(
        "--write-reference",
        metavar="PATH",
        help="write the run's headline numbers, their tolerances (from the seed spread) and "
        "the run's provenance to PATH, a reference file for --check",
    )
    rep.add_argument(
        "--only",
        type=_items,
        metavar="NAME[,NAME]",
        help="run only these: " + _experiments_text(),
    )
    rep.add_argument(
        "--threads",
        type=int,
        default=1,
        help="PyTorch CPU threads of each run (default: 1; the models are small, and more "
        "threads on a busy CPU slow every step down)",
    )
    rep.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run every experiment's fits on a dask cluster: a scheduler address "
        "(tcp://host:8786) or local:N for a LocalCluster of N worker processes "
        "(needs the distributed extra; default: this process)",
    )
    rep.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    _add_import(rep)
    rep.set_defaults(handler=_run_reproduce, subparser=rep)


def _add_plot(sub):
    """The ``plot`` subcommand: redraw a run's figures from its results.json."""
    plot = sub.add_parser(
        "plot",
        help="redraw the figures of a run from its results.json, without training",
        description=(
            "Draw every figure of a run of `stsq-learn reproduce` (<experiment>.png and "
            "bands.png) from its results.json, which holds every seed's tables: no model is "
            "trained. On the machine of the run the PNGs equal the run's own, pixel for pixel."
        ),
    )
    plot.add_argument("results", metavar="RESULTS_JSON", help="a run's results.json or its folder")
    plot.add_argument("--out", required=True, help="the directory to write the PNGs into")
    _add_import(plot)
    plot.set_defaults(handler=_run_plot, subparser=plot)


def _run_plot(args):
    from .experiments import plot_results

    written = plot_results(args.results, args.out)
    print(f"Wrote {', '.join(p.name for p in written)} to {args.out}.")
    return 0


def _add_import(parser):
    """The ``--import`` option (read before parsing, by :func:`main`)."""
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE_OR_PATH",
        help="import this module first: a dotted name (found from the current directory or the "
        "installed packages) or the path of a .py file, whose import registers tasks or "
        "experiments of one's own (stsq_learn.tasks.register_task, stsq_learn.registry."
        "register), which the other options then take by name; repeatable",
    )


_HYPERPARAMETER_OPTIONS = {  # the estimator's parameter: (the option's type, its help)
    "positional_encoding": (None, "stochastic (default), fixed, randomized or sinusoidal"),
    "max_positions": (int, "codebook size of randomized encodings"),
    "pe_sampling": (
        None,
        "marginal (default: draws only what the scores need) or full (every encoding)",
    ),
    "n_pe_samples": (int, "encoding draws averaged at predict"),
    "n_pe_samples_fit": (int, "encoding draws averaged in every training step"),
    "solver": (
        None,
        "sgd or adam (default: the transformer's 'auto', sgd at rates that follow the "
        "width; the FCN's adam)",
    ),
    "learning_rate_init": (
        float,
        "initial step size (default: 'auto', the transformer's from the width, the FCN's "
        "from its layers' sizes and the steps)",
    ),
    "learning_rate": (
        None,
        "schedule of the step size: cooldown (the transformer's default), auto (the FCN's: "
        "cooldown with its 'auto' step, else constant), constant, invscaling, adaptive "
        "(--n-train rows only) or cosine",
    ),
    "max_iter": (
        int,
        "epochs over the rows (default: the transformer's planned steps; 200 for the FCN)",
    ),
}


def _add_fit(sub):
    """The ``fit`` subcommand."""
    fit = sub.add_parser(
        "fit",
        help="train one model on a task and print its R^2 per sequence length",
        description=(
            "Train the attention model (or the fully-connected net) on a task (--task: sparse "
            "token selection by default, any registered task by name) "
            "and print its R^2 on held-out rows moved to each evaluation length."
        ),
    )
    fit.add_argument(
        "--task",
        default="selection",
        choices=list(TASKS),
        help="a registered task by name: "
        + ", ".join(TASKS)
        + " (default: selection), or one of one's own that --import registers",
    )
    fit.add_argument("--seq-len", type=int, default=16, help="training length T")
    fit.add_argument("--n-features", type=int, default=8, help="token dimension d")
    fit.add_argument(
        "--n-selected",
        type=int,
        help="subset size q (named positions in retrieval; default: 3), for a task that has one",
    )
    fit.add_argument("--model", choices=["transformer", "fcn"], default="transformer")
    fit.add_argument("--width", type=int, default=64, help="model width m")
    model = fit.add_argument_group(
        "hyperparameters",
        "passed to the estimator, which validates them (see its documentation)",
    )
    for name, (kind, help_text) in _HYPERPARAMETER_OPTIONS.items():
        model.add_argument("--" + name.replace("_", "-"), type=kind, help=help_text)
    model.add_argument(
        "--set",
        type=_assignment,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other hyperparameter, e.g. --set alpha=1e-4 --set batch_size=128 "
        "(repeatable; VALUE is read as a Python literal when it is one)",
    )
    fit.add_argument(
        "--online-steps",
        type=int,
        help="train online for N steps on fresh batches (default: fit on --n-train rows)",
    )
    fit.add_argument("--n-train", type=int, help="training rows (default: 2000; not online)")
    fit.add_argument("--n-eval", type=int, default=1000, help="held-out rows")
    fit.add_argument(
        "--eval-lengths",
        type=_int_list,
        metavar="T1,T2,...",
        help="evaluation lengths (default: T,2T,4T for the transformer, T for the FCN)",
    )
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    fit.add_argument("--threads", type=int, default=1, help="PyTorch CPU threads")
    fit.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _add_import(fit)
    fit.set_defaults(handler=_run_fit, subparser=fit)


def _run_reproduce(args):
    from ._validation import check_positive_int
    from .experiments import (
        check_reference,
        load_reference,
        plan,
        plan_table,
        reproduce,
        summary_table,
        write_reference,
    )
    from .experiments._check import command_line
    from .experiments._reproduce import check_run_options

    # Every option is checked here, before any work, with --plan as without it:
    # a run that its plan accepted does not then fail on an option. The seeds are
    # checked by the one seed check of the studies.
    check_positive_int(args.threads, "--threads")
    if args.seeds is not None:
        check_positive_int(args.seeds, "--seeds")
    names, device, _ = check_run_options(
        out=args.out,
        device=args.device,
        seed=args.seed,
        only=args.only,
        n_threads=args.threads,
        scheduler=args.scheduler,
        n_seeds=args.seeds,
        n_jobs=args.jobs,
        preset=args.preset or "quick",
    )
    if args.only is not None and len(names) < len(args.only):
        raise ValueError(
            f"--only {','.join(args.only)} names an experiment twice (a name and its alias): "
            "give each once."
        )
    if args.write_reference is not None:
        _check_reference_path(args.write_reference)

    def say(line):
        print(line, file=sys.stderr, flush=True)

    on_cpu = device.type == "cpu"
    preset = args.preset
    if preset is None:
        preset = "quick" if on_cpu else "full"
        if not args.plan:
            say(
                f"note: no size given; running --{preset}, the size for this machine "
                f"({'no GPU' if on_cpu else 'a GPU'}). --full (about an hour on 2 CPU cores) "
                "and --gpu are run only when asked for; --plan estimates any size first."
            )
    check = args.check or args.reference is not None
    if check:  # no reference for this size, or one of another size: refused before the run
        reference = load_reference(preset if args.reference is None else args.reference)
        if reference["preset"] != preset:
            raise ValueError(
                f"--reference {args.reference} is the reference of --{reference['preset']}, "
                f"and this run is --{preset}: check a run against its own size's reference."
            )
    if preset == "gpu" and on_cpu and not args.plan:
        say("note: the gpu size is meant for one GPU; on a CPU it takes many hours.")
    if args.plan or args.preset is None:
        start = time.perf_counter()
        estimates = plan(
            preset,
            only=args.only,
            device=args.device,
            n_threads=args.threads,
            n_seeds=args.seeds,
            n_jobs=args.jobs,
        )
        print(f"Plan of reproduce --{preset} on this machine ({args.threads} torch thread(s)):\n")
        print(plan_table(estimates))
        print(f"\n(estimated from timed steps in {time.perf_counter() - start:.0f} s)")
        if args.plan:
            return 0
        print()
    start = time.perf_counter()
    results = reproduce(
        preset,
        out=args.out,
        device=args.device,
        seed=args.seed,
        n_seeds=args.seeds,
        only=args.only,
        n_jobs=args.jobs,
        n_threads=args.threads,
        progress=not args.no_progress,
        scheduler=args.scheduler,
        log=say,
    )
    print(summary_table(results))
    print(
        f"\nWrote {', '.join(f'{name}.png' for name in results)}, bands.png, results.json and "
        f"summary.md to {args.out} in {time.perf_counter() - start:.0f} s."
    )
    if args.write_reference is not None:
        write_reference(results, args.write_reference, command=command_line(args.argv))
        print(f"Wrote the reference numbers of --{preset} to {args.write_reference}.")
    if check:
        outcome = check_reference(results, reference)
        source = args.reference or f"the shipped reference of --{preset}"
        made = outcome.made
        print(
            f"\nCheck against {source} (made by stsq-learn {made.get('stsq_learn')} on "
            f"{made.get('date')}):\n"
        )
        print(outcome.table())
        if not outcome.ok:
            print(f"stsq-learn reproduce --check: {outcome.message()}", file=sys.stderr)
            return 1
        print(f"\n{outcome.message()}")
    return 0


def _check_reference_path(path):
    """Refuse a ``--write-reference`` path that cannot be written, before any work."""
    target = os.path.abspath(path)
    if os.path.isdir(target):
        raise ValueError(f"--write-reference {path}: a directory; give a file path (.json).")
    # A missing directory is made when the reference is written (as --out's is): the
    # nearest existing one above it must be a writable directory.
    ancestor = os.path.dirname(target)
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise ValueError(f"--write-reference {path}: {ancestor!r} is a file, not a directory.")
    if not os.access(ancestor, os.W_OK):
        raise ValueError(f"--write-reference {path}: the directory {ancestor!r} is not writable.")


_FIT_N_SELECTED = 3
_FIT_N_TRAIN = 2000
_FIT_SEED_MAX = 2**32 - 2
"""The held-out rows are drawn with ``--seed`` + 1, a NumPy seed (at most 2**32 - 1)."""
_SET_BY_OPTIONS = {"task": "--task", "width": "--width", "device": "--device"}
_SET_BY_OPTIONS["random_state"] = "--seed"


def _fit_task(args):
    """The task ``stsq-learn fit`` trains on: ``--task`` at the sizes of the other options."""
    import dataclasses

    from .tasks import get_task

    cls = get_task(args.task)
    fields = {f.name for f in dataclasses.fields(cls)}
    sizes = {"seq_len": args.seq_len, "n_features": args.n_features}
    if "n_selected" in fields:
        sizes["n_selected"] = _FIT_N_SELECTED if args.n_selected is None else args.n_selected
    elif args.n_selected is not None:
        raise ValueError(
            f"--n-selected {args.n_selected}: the task {args.task!r} has no subset size "
            "(no n_selected); drop the option."
        )
    return cls(**sizes)


def _check_set(args):
    """``--set`` pairs: none for a value that has its own option, and no key twice."""
    keys = [key for key, _ in args.set]
    for key, value in args.set:
        option = _SET_BY_OPTIONS.get(key)
        if option is None and key in _HYPERPARAMETER_OPTIONS and getattr(args, key) is not None:
            option = "--" + key.replace("_", "-")
        if option is not None:
            raise ValueError(f"--set {key}={value!r}: {key} is set by {option}; use that instead.")
        if keys.count(key) > 1:
            raise ValueError(f"--set {key}={value!r}: {key} is set twice by --set; give it once.")


def _fit_model(args, task):
    """The estimator ``stsq-learn fit`` trains, its hyperparameters set (and checked) here.

    Sparse token selection keeps its named estimators; another task is the
    core of ``--model`` with the task as a parameter.
    """
    from . import AttentionRegressor, FCNRegressor, FCNSelector, SparseTokenSelector
    from .tasks import SparseTokenSelectionTask

    _check_set(args)
    params = {"width": args.width, "device": args.device, "random_state": args.seed}
    if isinstance(task, SparseTokenSelectionTask):
        cls = SparseTokenSelector if args.model == "transformer" else FCNSelector
    else:
        cls = AttentionRegressor if args.model == "transformer" else FCNRegressor
        params["task"] = task.name
    params.update(
        {k: getattr(args, k) for k in _HYPERPARAMETER_OPTIONS if getattr(args, k) is not None}
    )
    params.update(args.set)
    model = cls().set_params(**params)
    model._validate_params()  # a bad value fails now, not after the training
    return model


def _check_fit_counts(args):
    """The counts and the seed of ``fit``, each named by its option; ``(n_train, n_eval)``."""
    from ._validation import check_positive_int

    check_positive_int(args.threads, "--threads")
    n_eval = check_positive_int(args.n_eval, "--n-eval")
    if args.seed < 0 or args.seed > _FIT_SEED_MAX:
        raise ValueError(f"--seed must be an integer in [0, {_FIT_SEED_MAX}], got {args.seed}.")
    if args.online_steps is None:
        n_train = _FIT_N_TRAIN if args.n_train is None else args.n_train
        return check_positive_int(n_train, "--n-train"), n_eval
    check_positive_int(args.online_steps, "--online-steps")
    for option, value in (("--n-train", args.n_train), ("--max-iter", args.max_iter)):
        if value is not None:
            raise ValueError(
                f"{option} {value} is for a fit on rows, and --online-steps "
                f"{args.online_steps} trains on fresh batches instead: give one of them."
            )
    return 0, n_eval


def _check_rows_fit(task, n_train, n_eval, lengths, row):
    """Refuse rows that would not fit in memory (before drawing them); ``row``: one drawn row."""
    from ._resources import available_bytes, gib

    per_token = row.shape[-1] * row.itemsize
    need = per_token * (n_train * task.seq_len + n_eval * (task.seq_len + max(lengths)))
    limit = available_bytes("cpu")
    if limit is not None and need > limit:
        rows = f"--n-train {n_train} and --n-eval {n_eval}" if n_train else f"--n-eval {n_eval}"
        raise ValueError(
            f"{rows} rows at T={task.seq_len} (evaluated up to T'={max(lengths)}) would take "
            f"about {gib(need)}, more than the {gib(limit)} of memory available; lower "
            f"{'them' if n_train else 'it'} or --eval-lengths."
        )


def _check_fit(args):
    """Every option of ``fit``, checked before any work.

    Returns ``(task, model, n_train, n_eval, lengths)``: what the run trains and scores.
    """
    from ._validation import resolve_device

    n_train, n_eval = _check_fit_counts(args)
    task = _fit_task(args)
    model = _fit_model(args, task)
    resolve_device(args.device)
    lengths = args.eval_lengths
    if lengths is None:
        lengths = [f * task.seq_len for f in ((1, 2, 4) if args.model == "transformer" else (1,))]
    if args.model == "fcn" and any(t != task.seq_len for t in lengths):
        raise ValueError(
            f"the FCN reads only its training length: --eval-lengths must be {task.seq_len}, "
            f"got {','.join(map(str, lengths))}."
        )
    if args.online_steps is not None and model.learning_rate == "adaptive":
        raise ValueError("--learning-rate adaptive needs epochs: use it without --online-steps.")
    X1, y1 = task.sample(1, random_state=0)
    _check_rows_fit(task, n_train, n_eval, lengths, X1)
    for t in lengths:
        try:
            task.shift(X1, y1, t, random_state=0)  # a length the task cannot reach fails now
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"--eval-lengths {','.join(map(str, lengths))}: {exc}") from None
    return task, model, n_train, n_eval, lengths


def _run_fit(args):
    import torch

    from .scoring import LengthShiftScorer

    task, model, n_train, n_eval, lengths = _check_fit(args)
    X_eval, y_eval = task.sample(n_eval, random_state=args.seed + 1)
    scorers = {t: LengthShiftScorer(t, random_state=args.seed) for t in lengths}
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    if args.online_steps is not None:
        model.fit_online(task, n_steps=args.online_steps)
    else:
        X, y = task.sample(n_train, random_state=args.seed)
        model.fit(X, y)
    seconds = time.perf_counter() - start
    r2 = {t: float(scorer(model, X_eval, y_eval)) for t, scorer in scorers.items()}
    report = {
        "model": type(model).__name__,
        "task": task.name,
        "params": {
            k: str(v) if k == "device" else v
            for k, v in model.get_params().items()
            if k != "callbacks"
        },
        "training": "online" if args.online_steps is not None else "fit",
        "train_seconds": round(seconds, 2),
        "device": str(model.device_),
        "r2": {str(t): v for t, v in r2.items()},
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"{report['model']} (width={model.width}) trained on {task.name} at T={task.seq_len} "
            f"({report['training']}, {seconds:.1f} s on {report['device']})\n"
        )
        print("| eval length T' | R^2 |\n|---|---|")
        for t, v in r2.items():
            print(f"| {t} | {v:.3f} |")
    return 0


def main(argv=None):
    """Entry point of the ``stsq-learn`` console script; returns the exit status.

    The modules of ``--import`` are imported first, so that the tasks and
    experiments they register are among the choices. The library validates
    every value; its ``ValueError`` or ``TypeError``, the ``ImportError`` of a
    missing extra or module, or an ``OSError`` (a file that cannot be read or
    written) is reported as a usage error of the subcommand: one line on
    stderr, exit status 2, no traceback.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    for name in _imported_names(argv):
        try:
            import_user_module(name)
        except (ValueError, TypeError, ImportError, OSError) as exc:
            build_parser().error(str(exc))
    parser = build_parser()
    args = parser.parse_args(argv)
    # What ran, for a reference's provenance: main(argv) names argv, not its caller's sys.argv.
    args.argv = argv
    if args.command is None:
        parser.print_help(sys.stdout)
        return 0
    try:
        return args.handler(args)
    except (ValueError, TypeError, ImportError, OSError) as exc:
        args.subparser.error(str(exc))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
