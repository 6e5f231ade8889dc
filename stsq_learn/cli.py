"""The ``stsq-learn`` command line.

``stsq-learn reproduce`` runs the paper's three experiments (training
dynamics, length generalization, width separation) and writes figures,
``results.json`` and a Markdown summary; ``stsq-learn fit`` trains one model
and prints its R^2 at several sequence lengths.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from . import __version__


def _int_at_least(minimum, expected):
    """An argparse type: an integer >= ``minimum``, else an error saying ``expected``."""

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


_positive_int = _int_at_least(1, "a positive integer")
_non_negative_int = _int_at_least(0, "an integer >= 0")


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _int_list(text):
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of integers, got {text!r}"
        )
    return [_positive_int(p) for p in parts]


def _experiment_names(text):
    from .experiments._reproduce import resolve_experiments

    try:
        return resolve_experiments([p.strip() for p in text.split(",") if p.strip()])
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser():
    """The argument parser of ``stsq-learn`` (subcommands ``reproduce`` and ``fit``)."""
    parser = argparse.ArgumentParser(
        prog="stsq-learn",
        description=(
            "Sparse token selection with transformers (Wang, Wei, Hsu, Lee; ICML 2024): "
            "train the paper's models and reproduce its figures."
        ),
    )
    parser.add_argument("--version", action="version", version=f"stsq-learn {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    rep = sub.add_parser(
        "reproduce",
        help="run the paper's experiments; write figures, results.json and a summary",
        description=(
            "Run the three experiments of the paper: training dynamics (cos(W_pp, I) -> 1), "
            "length generalization (stochastic vs fixed encodings) and the width separation "
            "(transformer ~ log T, FCN ~ T d). Writes <experiment>.png, results.json and "
            "summary.md into --out and prints the summary table."
        ),
    )
    size = rep.add_mutually_exclusive_group()
    size.add_argument(
        "--quick",
        action="store_const",
        dest="preset",
        const="quick",
        help="CPU size: a few minutes on 2 cores",
    )
    size.add_argument(
        "--full",
        action="store_const",
        dest="preset",
        const="full",
        help="full size, for one GPU (the default)",
    )
    size.add_argument(
        "--tiny", action="store_const", dest="preset", const="tiny", help=argparse.SUPPRESS
    )
    rep.set_defaults(preset="full")
    rep.add_argument(
        "--out", default="stsq-results", help="output directory (default: ./stsq-results)"
    )
    rep.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="training device (default: auto = CUDA when present)",
    )
    rep.add_argument(
        "--seed", type=_non_negative_int, default=0, help="seed of every experiment (default: 0)"
    )
    rep.add_argument(
        "--only",
        type=_experiment_names,
        metavar="NAME[,NAME]",
        help="run only these: convergence, length_generalization (or length), separation",
    )
    rep.add_argument(
        "--threads",
        type=_positive_int,
        default=1,
        help="PyTorch CPU threads (default: 1; the models are small, and more threads "
        "on a busy CPU slow every step down)",
    )
    rep.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="run the width-separation sweep on a dask cluster: a scheduler address "
        "(tcp://host:8786) or local:N for a LocalCluster of N worker processes "
        "(needs the distributed extra; default: this process)",
    )
    rep.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    rep.set_defaults(handler=_run_reproduce, subparser=rep)

    fit = sub.add_parser(
        "fit",
        help="train one model on the task and print its R^2 per sequence length",
        description=(
            "Train a SparseTokenSelector (or FCNSelector) on the sparse token selection task "
            "and print its R^2 on held-out rows moved to each evaluation length."
        ),
    )
    fit.add_argument("--seq-len", type=_positive_int, default=16, help="training length T")
    fit.add_argument("--n-features", type=_positive_int, default=8, help="token dimension d")
    fit.add_argument("--n-selected", type=_positive_int, default=3, help="subset size q")
    fit.add_argument("--width", type=_positive_int, default=64, help="model width m")
    fit.add_argument("--model", choices=["transformer", "fcn"], default="transformer")
    fit.add_argument("--positional-encoding", choices=["stochastic", "fixed"], default="stochastic")
    fit.add_argument(
        "--n-pe-samples", type=_positive_int, default=1, help="encoding draws averaged at predict"
    )
    fit.add_argument("--solver", choices=["adam", "sgd"], default="adam")
    fit.add_argument("--learning-rate", type=_positive_float, default=None)
    fit.add_argument(
        "--lr-schedule",
        choices=["constant", "invscaling", "adaptive", "cosine"],
        default="constant",
        help="schedule of the learning rate (adaptive: --n-train rows only)",
    )
    fit.add_argument(
        "--n-pe-samples-fit",
        type=_positive_int,
        default=1,
        help="encoding draws averaged in every training step",
    )
    fit.add_argument(
        "--online-steps",
        type=_positive_int,
        default=None,
        help="train online for N steps on fresh batches (default: fit on --n-train rows)",
    )
    fit.add_argument("--n-train", type=_positive_int, default=2000, help="training rows")
    fit.add_argument("--max-iter", type=_positive_int, default=200, help="epochs over the rows")
    fit.add_argument("--n-eval", type=_positive_int, default=1000, help="held-out rows")
    fit.add_argument(
        "--eval-lengths",
        type=_int_list,
        default=None,
        metavar="T1,T2,...",
        help="evaluation lengths (default: T,2T,4T for the transformer, T for the FCN)",
    )
    fit.add_argument("--seed", type=_non_negative_int, default=0)
    fit.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    fit.add_argument("--threads", type=_positive_int, default=1, help="PyTorch CPU threads")
    fit.add_argument("--json", action="store_true", help="print JSON instead of a table")
    fit.set_defaults(handler=_run_fit, subparser=fit)
    return parser


def _check_device(parser, device):
    from ._validation import resolve_device

    try:
        return resolve_device(device)
    except ValueError as exc:
        parser.error(str(exc))


def _run_reproduce(parser, args):
    from .experiments import reproduce, summary_table

    device = _check_device(parser, args.device)
    if args.preset == "full" and device.type == "cpu":
        print(
            "note: the full size is meant for one GPU and takes hours on a CPU; "
            "use --quick for the CPU size.",
            file=sys.stderr,
        )
    if args.scheduler is not None:
        try:
            from .distributed import parse_scheduler

            parse_scheduler(args.scheduler)
        except (ImportError, ValueError) as exc:
            parser.error(f"--scheduler: {exc}")
    start = time.perf_counter()
    results = reproduce(
        args.preset,
        out=args.out,
        device=args.device,
        seed=args.seed,
        only=args.only,
        n_threads=args.threads,
        progress=not args.no_progress,
        scheduler=args.scheduler,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    print(summary_table(results))
    print(
        f"\nWrote {', '.join(f'{name}.png' for name in results)}, results.json and summary.md "
        f"to {args.out} in {time.perf_counter() - start:.0f} s."
    )
    return 0


def _run_fit(parser, args):
    if args.n_selected > args.seq_len:
        parser.error(f"--n-selected ({args.n_selected}) cannot exceed --seq-len ({args.seq_len})")
    lengths = args.eval_lengths
    if lengths is None:
        factors = (1, 2, 4) if args.model == "transformer" else (1,)
        lengths = [f * args.seq_len for f in factors]
    too_short = [t for t in lengths if t < args.n_selected]
    if too_short:
        parser.error(
            f"--eval-lengths {too_short[0]} is shorter than --n-selected ({args.n_selected})"
        )
    if args.model == "fcn" and any(t != args.seq_len for t in lengths):
        parser.error(
            f"the FCN reads only its training length; --eval-lengths must be {args.seq_len}"
        )
    if args.lr_schedule == "adaptive" and args.online_steps is not None:
        parser.error("--lr-schedule adaptive needs epochs: use it without --online-steps")
    _check_device(parser, args.device)

    import torch

    from . import FCNSelector, SparseTokenSelectionTask, SparseTokenSelector
    from .scoring import LengthShiftScorer

    torch.set_num_threads(args.threads)

    task = SparseTokenSelectionTask(args.seq_len, args.n_features, args.n_selected)
    common = dict(
        solver=args.solver,
        learning_rate=args.lr_schedule,
        max_iter=args.max_iter,
        device=args.device,
        random_state=args.seed,
    )
    if args.learning_rate is not None:
        common["learning_rate_init"] = args.learning_rate
    if args.model == "transformer":
        model = SparseTokenSelector(
            args.width,
            positional_encoding=args.positional_encoding,
            n_pe_samples=args.n_pe_samples,
            n_pe_samples_fit=args.n_pe_samples_fit,
            **common,
        )
    else:
        model = FCNSelector(args.width, **common)
    start = time.perf_counter()
    if args.online_steps is not None:
        model.fit_online(task, n_steps=args.online_steps)
    else:
        X, y = task.sample(args.n_train, random_state=args.seed)
        model.fit(X, y)
    seconds = time.perf_counter() - start
    X_eval, y_eval = task.sample(args.n_eval, random_state=args.seed + 1)
    r2 = {
        t: float(LengthShiftScorer(t, random_state=args.seed)(model, X_eval, y_eval))
        for t in lengths
    }
    report = {
        "model": type(model).__name__,
        "params": {k: str(v) if k == "device" else v for k, v in model.get_params().items()},
        "training": "online" if args.online_steps is not None else "fit",
        "train_seconds": round(seconds, 2),
        "device": str(model.device_),
        "r2": {str(t): v for t, v in r2.items()},
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"{report['model']} (width={args.width}) trained at T={args.seq_len} "
            f"({report['training']}, {seconds:.1f} s on {report['device']})\n"
        )
        print("| eval length T' | R^2 |\n|---|---|")
        for t, v in r2.items():
            print(f"| {t} | {v:.3f} |")
    return 0


def main(argv=None):
    """Entry point of the ``stsq-learn`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stdout)
        return 0
    return args.handler(args.subparser, args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
