"""Run the four experiments at a named size; write figures, results.json and a summary."""

from __future__ import annotations

import json
import math
import platform
import time
from pathlib import Path

import torch

from .. import __version__
from .._validation import check_positive_int, check_scheduler, resolve_device
from ..estimators import SparseTokenSelector
from ._convergence import training_dynamics
from ._encodings import encoding_families
from ._length import length_generalization
from ._separation import width_separation

EXPERIMENTS = ("convergence", "length_generalization", "separation", "encodings")
"""Names of the experiments, as sections of ``results.json`` and values of ``--only``."""

_ALIASES = {"length": "length_generalization", "width": "separation"}

_FUNCTIONS = {
    "convergence": training_dynamics,
    "length_generalization": length_generalization,
    "separation": width_separation,
    "encodings": encoding_families,
}

_GD = dict(solver="sgd", learning_rate_init=1.0)  # plain gradient descent, the paper's

PRESETS = {
    # Seconds: the test suite's size. Numbers are not expected to show the paper's story.
    "tiny": {
        "convergence": dict(
            seq_len=8,
            n_features=2,
            n_selected=2,
            estimator=SparseTokenSelector(8, **_GD),
            n_steps=30,
            n_test=200,
        ),
        "length_generalization": dict(
            seq_len=8,
            n_features=2,
            n_selected=2,
            estimator=SparseTokenSelector(8),
            n_steps=30,
            factors=(1, 2),
            n_pe_samples=4,
            n_val_large=200,
        ),
        "separation": dict(
            seq_lens=(4, 8),
            n_features=2,
            n_selected=2,
            target_r2=0.5,
            widths={"transformer": (4, 8), "fcn": (4, 8)},
            n_steps={"transformer": 20, "fcn": 20},
            n_val=200,
        ),
        "encodings": dict(
            seq_len=8,
            n_features=2,
            n_selected=2,
            estimator=SparseTokenSelector(8),
            n_steps=30,
            factors=(1, 2),
            codebook_factors=(1, 2, 4),
            sweep_factor=2,
            n_seeds=2,
            n_val=200,
        ),
    },
    # Minutes on 2 CPU cores.
    "quick": {
        "convergence": dict(
            seq_len=16,
            n_features=8,
            n_selected=3,
            estimator=SparseTokenSelector(64, **_GD),
            n_steps=300,
        ),
        "length_generalization": dict(
            seq_len=16,
            n_features=8,
            n_selected=3,
            estimator=SparseTokenSelector(64),
            n_steps=1500,
            factors=(1, 2, 4, 8, 16),
            n_pe_samples=16,
            n_val_large=1000,
        ),
        "separation": dict(
            seq_lens=(4, 8, 16, 32, 64),
            n_features=2,
            n_selected=2,
            target_r2=0.9,
            widths={
                "transformer": (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64),
                "fcn": (
                    *(2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512),
                    *(768, 1024, 1536, 2048),
                ),
            },
            n_steps={"transformer": 300, "fcn": 500},
            n_val=2000,
        ),
        # 8 models per seed (4 families, 4 more codebooks), 40-50 s per seed on one core.
        "encodings": dict(
            seq_len=16,
            n_features=8,
            n_selected=3,
            estimator=SparseTokenSelector(64),
            n_steps=1500,
            factors=(1, 2, 4, 8),
            max_positions=128,
            codebook_factors=(1, 2, 4, 8, 16),
            sweep_factor=4,
            n_seeds=3,
            n_val=1000,
        ),
    },
    # Sized for one large GPU (tens of minutes).
    "full": {
        "convergence": dict(
            seq_len=64,
            n_features=16,
            n_selected=4,
            estimator=SparseTokenSelector(256, **_GD),
            n_steps=10000,
            record_every=10,
        ),
        "length_generalization": dict(
            seq_len=64,
            n_features=16,
            n_selected=4,
            estimator=SparseTokenSelector(256),
            n_steps=5000,
            factors=(1, 2, 4, 8, 16, 32, 64),
            n_pe_samples=64,
            n_val_large=10000,
        ),
        "separation": dict(
            seq_lens=(4, 8, 16, 32, 64, 128, 256),
            n_features=2,
            n_selected=2,
            target_r2=0.9,
            widths={
                "transformer": (2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128),
                "fcn": (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384),
            },
            n_steps={"transformer": 2000, "fcn": 4000},
            n_val=10000,
            monotone_search=False,
        ),
        "encodings": dict(
            seq_len=64,
            n_features=16,
            n_selected=4,
            estimator=SparseTokenSelector(256),
            n_steps=5000,
            factors=(1, 2, 4, 8, 16),
            max_positions=1024,
            codebook_factors=(1, 2, 4, 8, 16, 32, 64),
            sweep_factor=4,
            n_seeds=5,
            n_val=10000,
        ),
    },
}
"""Sizes of :func:`reproduce`: ``"tiny"`` (tests), ``"quick"`` (CPU), ``"full"`` (GPU)."""


def resolve_experiments(only):
    """Experiment names from ``only`` (None, a name, or a sequence of names)."""
    if only is None:
        return list(EXPERIMENTS)
    names = [only] if isinstance(only, str) else list(only)
    out = []
    for name in names:
        full = _ALIASES.get(name, name)
        if full not in EXPERIMENTS:
            raise ValueError(
                f"Unknown experiment {name!r}; choose from {', '.join(EXPERIMENTS)} "
                f"(aliases: {', '.join(_ALIASES)})."
            )
        if full not in out:
            out.append(full)
    if not out:
        raise ValueError("only must name at least one experiment, got an empty sequence.")
    return out


def reproduce(
    preset="quick",
    *,
    out=None,
    device="auto",
    seed=0,
    only=None,
    n_threads=None,
    progress=True,
    log=None,
    scheduler=None,
):
    """Run the paper's experiments; optionally write figures and ``results.json``.

    Parameters
    ----------
    preset : {"tiny", "quick", "full"}, default="quick"
        Sizes (see ``PRESETS``): ``"quick"`` takes a few minutes on 2 CPU
        cores, ``"full"`` is sized for one GPU, ``"tiny"`` for tests.
    out : str or path, default=None
        Directory to write ``<experiment>.png``, ``results.json`` and
        ``summary.md`` into (created if missing); None writes nothing.
    device : str, default="auto"
        Training device of every model.
    seed : int, default=0
        Seed of every experiment.
    only : str or sequence of str, default=None
        Run only these experiments (names of ``EXPERIMENTS``, or the aliases
        ``"length"`` and ``"width"``).
    n_threads : int, default=None
        PyTorch intra-op CPU threads during the run (restored afterwards);
        None keeps the current setting. The models are small, so on a busy
        or small CPU one thread is often fastest: several threads competing
        with other processes can make each step many times slower.
    progress : bool, default=True
        Show tqdm progress bars (on stderr).
    log : callable, default=None
        Called with a line of text after each experiment (e.g. ``print``).
    scheduler : str, default=None
        Run the width-separation sweep on a dask cluster: ``"local:N"`` (a
        LocalCluster of N worker processes) or a scheduler address; see
        :func:`width_separation`. None runs everything in this process.

    Returns
    -------
    results : dict
        Experiment name to its result object, in ``EXPERIMENTS`` order.

    Examples
    --------
    >>> from stsq_learn.experiments import reproduce, summary_table
    >>> results = reproduce("tiny", only="convergence", progress=False)
    >>> list(results)
    ['convergence']
    """
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(PRESETS)}, got {preset!r}.")
    names = resolve_experiments(only)
    resolved = resolve_device(device)  # fail on a bad device before any work
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}.")
    if n_threads is not None:
        n_threads = check_positive_int(n_threads, "n_threads")
    if scheduler is not None:
        check_scheduler(scheduler)  # a bad specification fails before any work
        from .. import distributed  # noqa: F401  (so does a missing extra)
    threads_before = torch.get_num_threads()
    try:
        if n_threads is not None:
            torch.set_num_threads(n_threads)
        return _run(preset, names, resolved, seed, out, progress, log, scheduler)
    finally:
        torch.set_num_threads(threads_before)


def _run(preset, names, resolved, seed, out, progress, log, scheduler=None):
    out_dir = None if out is None else Path(out)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    results, timings = {}, {}
    for name in names:
        start = time.perf_counter()
        extra = {"scheduler": scheduler} if name == "separation" and scheduler else {}
        results[name] = _FUNCTIONS[name](
            **PRESETS[preset][name],
            device=str(resolved),
            random_state=seed,
            progress=progress,
            **extra,
        )
        timings[name] = round(time.perf_counter() - start, 1)
        if out_dir is not None:
            _save_figure(results[name], out_dir / f"{name}.png")
        if log is not None:
            log(f"{name}: done in {timings[name]} s")
    if out_dir is not None:
        payload = {
            "meta": {
                "stsq_learn": __version__,
                "torch": torch.__version__,
                "python": platform.python_version(),
                "preset": preset,
                "device": str(resolved),
                "seed": seed,
                "torch_threads": torch.get_num_threads(),
                "seconds": timings,
            },
            **{name: res.to_dict() for name, res in results.items()},
        }
        (out_dir / "results.json").write_text(json.dumps(payload, indent=2) + "\n")
        (out_dir / "summary.md").write_text(summary_table(results) + "\n")
    return results


def _save_figure(result, path):
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig = result.plot()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fmt(value, digits=3):
    return "n/a" if value is None else f"{value:.{digits}f}"


def summary_table(results):
    """A short Markdown table of the headline numbers of ``results``.

    Parameters
    ----------
    results : dict
        As returned by :func:`reproduce`.

    Returns
    -------
    str
        The Markdown table.
    """
    rows = ["| experiment | measure | value |", "|---|---|---|"]
    for name, add_rows in _SUMMARY_ROWS.items():
        if results.get(name) is not None:
            add_rows(rows, results[name])
    return "\n".join(rows)


def _convergence_rows(rows, conv):
    """Summary rows of the training dynamics."""
    f = conv.final
    cfg = conv.config
    where = f"T={cfg['seq_len']}, d={cfg['n_features']}, q={cfg['n_selected']}, m={cfg['width']}"
    rows.append(f"| convergence ({where}) | final cos(W_pp, I) | {_fmt(f['cos'])} |")
    rows.append(f"| | final gamma = tr(W_pp)/m | {_fmt(f['gamma'], 2)} |")
    rows.append(f"| | final token-block norm | {_fmt(f['token_norm'], 2)} |")
    solver = "SGD" if cfg["solver"] == "sgd" else "Adam"
    rows.append(f"| | test R^2 after {cfg['n_steps']} {solver} steps | {_fmt(f['test_r2'])} |")


def _length_rows(rows, length):
    """Summary rows of the length experiment."""
    T = length.config["seq_len"]
    lens = ", ".join(f"{t // T}T" for t in length.eval_lengths)
    rows.append(
        f"| length generalization (T={T}, {length.config['n_val_large']} rows) | R^2 at {lens} | |"
    )
    for model in length.models:
        vals = " / ".join(_fmt(v) for v in length.r2["val_large"][model])
        rows.append(f"| | {model} | {vals} |")


def _separation_rows(rows, sep):
    """Summary rows of the width separation."""
    d = sep.config["n_features"]
    rows.append(
        f"| width separation (d={d}, q={sep.config['n_selected']}, "
        f"R^2 >= {sep.config['target_r2']}, {sep.config['regime']}) | "
        f"T = {', '.join(map(str, sep.seq_lens))} | |"
    )
    for model in ("transformer", "fcn"):
        ws = " / ".join("-" if w is None else str(w) for w in sep.minimal_width[model])
        rows.append(f"| | minimal width, {model} | {ws} |")
    ratio = " / ".join(_fmt(r, 1) for r in sep.width_ratio())
    rows.append(f"| | FCN / transformer width | {ratio} |")
    for model, law_name, label in (
        ("transformer", "log_T", "transformer: w = a + b log2 T"),
        ("fcn", "T_d", "FCN: w = b T d"),
    ):
        law = sep.growth_laws[model][law_name]
        if law is not None:
            rows.append(
                f"| | {label} | a={law['intercept']:.1f}, b={law['slope']:.2f} "
                f"(fit R^2 {law['r2']:.2f}) |"
            )


def _encodings_rows(rows, enc):
    """Summary rows of the encodings experiment."""
    cfg = enc.config
    T = cfg["seq_len"]
    lens = ", ".join(f"{t // T}T" for t in enc.eval_lengths)
    rows.append(
        f"| encodings (T={T}, m={cfg['width']}, {cfg['n_steps']} steps, "
        f"{cfg['n_seeds']} seeds, {cfg['n_val']} rows) | R^2 at {lens}: mean [min, max] | |"
    )
    for family in enc.families:
        label = f"randomized, L={cfg['max_positions']}" if family == "randomized" else family
        vals = " / ".join(
            _spread(m, lo, hi)
            for m, lo, hi in zip(enc.r2_mean[family], enc.r2_min[family], enc.r2_max[family])
        )
        rows.append(f"| | {label} | {vals} |")
    sizes = ", ".join(map(str, enc.codebook_sizes))
    vals = " / ".join(_fmt(_finite(v)) for v in enc.sweep_mean)
    rows.append(
        f"| | randomized at {enc.sweep_length // T}T, L = {sizes} "
        f"(n/a: L < {enc.sweep_length}) | {vals} |"
    )


_SUMMARY_ROWS = {
    "convergence": _convergence_rows,
    "length_generalization": _length_rows,
    "separation": _separation_rows,
    "encodings": _encodings_rows,
}


def _finite(value):
    return None if value is None or not math.isfinite(value) else value


def _spread(mean, low, high):
    mean, low, high = _finite(mean), _finite(low), _finite(high)
    if mean is None:
        return "n/a"
    return f"{mean:.3f} [{low:.2f}, {high:.2f}]"
