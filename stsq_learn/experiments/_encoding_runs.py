"""The runs of the encodings experiment: its checked settings, and the models' R^2.

The settings of :func:`~stsq_learn.experiments.encoding_families` are
checked into an :class:`EncodingsPlan`; every positional-encoding family,
then the codebooks of the sweep that the families do not already hold, are
trained online alike over several seeds and scored on one validation set
moved to each evaluation length; a codebook cannot be scored beyond its
size (NaN).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sklearn.base import clone

from .._validation import check_positive_int
from ..encodings.families import POSITIONAL_ENCODINGS
from ..scoring import LengthShiftScorer
from ..tasks import SparseTokenSelectionTask
from ._common import derived_seed, n_workers, progress_bar, run_jobs, train_online


@dataclass(frozen=True)
class EncodingsPlan:
    """The checked settings of :func:`~stsq_learn.experiments.encoding_families`."""

    seq_len: int
    n_steps: int
    factors: list
    max_positions: int
    codebook_factors: list
    sweep_factor: int
    n_seeds: int
    n_val: int
    random_state: int

    @property
    def eval_lengths(self):
        """The evaluation lengths T' = factor * T, increasing."""
        return sorted({f * self.seq_len for f in self.factors})

    @property
    def codebook_sizes(self):
        """The codebook sizes L = c * T of the sweep, increasing."""
        return [c * self.seq_len for c in self.codebook_factors]

    def config(self):
        """The settings a result records after the task's and the estimator's."""
        return {
            "factors": self.factors,
            "max_positions": self.max_positions,
            "codebook_factors": self.codebook_factors,
            "sweep_factor": self.sweep_factor,
            "n_seeds": self.n_seeds,
            "n_val": self.n_val,
        }


def checked_arguments(settings, random_state):
    """The task and the plan of ``encoding_families``, every setting validated.

    ``settings`` is its :class:`~stsq_learn.experiments.EncodingsSettings`.
    """
    s = settings
    n_steps = check_positive_int(s.n_steps, "n_steps")
    n_seeds = check_positive_int(s.n_seeds, "n_seeds")
    n_val = check_positive_int(s.n_val, "n_val")
    factors = [check_positive_int(f, "factors[i]") for f in s.factors]
    if not factors:
        raise ValueError("factors must name at least one length multiple, got an empty sequence.")
    codebook_factors = sorted(
        {check_positive_int(c, "codebook_factors[i]") for c in s.codebook_factors}
    )
    if not codebook_factors:
        raise ValueError(
            "codebook_factors must name at least one codebook size, got an empty sequence."
        )
    sweep_factor = check_positive_int(s.sweep_factor, "sweep_factor")
    if sweep_factor not in factors:
        raise ValueError(
            f"sweep_factor={sweep_factor} must be one of factors={factors}: the sweep is "
            "compared with fixed and stochastic encodings at that length."
        )
    task = SparseTokenSelectionTask(s.seq_len, s.n_features, s.n_selected)
    T = task.seq_len
    max_positions = s.max_positions
    if max_positions is None:
        max_positions = max(factors) * T
    max_positions = check_positive_int(max_positions, "max_positions")
    if max_positions < T:
        raise ValueError(
            f"max_positions={max_positions} must be at least seq_len={T}: a codebook "
            "smaller than the training length cannot place a training row."
        )
    plan = EncodingsPlan(
        seq_len=T,
        n_steps=n_steps,
        factors=factors,
        max_positions=max_positions,
        codebook_factors=codebook_factors,
        sweep_factor=sweep_factor,
        n_seeds=n_seeds,
        n_val=n_val,
        random_state=random_state,
    )
    return task, plan


def planned_runs(max_positions, codebook_sizes):
    """Parameters of every model, by name: the families, then the codebooks they lack."""
    runs = {family: {"positional_encoding": family} for family in POSITIONAL_ENCODINGS}
    runs["randomized"]["max_positions"] = max_positions
    for L in codebook_sizes:
        if L != max_positions:
            runs[f"L={L}"] = {"positional_encoding": "randomized", "max_positions": L}
    return runs


def train_and_score(base, task, plan, *, progress, n_jobs=None):
    """Train every planned model ``plan.n_seeds`` times; score each at every length.

    Parameters
    ----------
    base : SparseTokenSelector
        The prepared estimator, cloned for every model.
    task : SparseTokenSelectionTask
        The training task.
    plan : EncodingsPlan
        The checked settings.
    progress : bool
        Show tqdm progress bars.
    n_jobs : int or None, default=None
        Worker processes the models train on (joblib's process backend);
        the scores do not depend on it.

    Returns
    -------
    scores : dict of str to list of list of float
        ``scores[name][seed][i]``: R^2 at ``plan.eval_lengths[i]`` (NaN
        beyond the model's codebook); ``name`` is a family or ``"L=..."``.
    device : torch.device
        The device the models trained on.
    """
    X, y = task.sample(plan.n_val, random_state=derived_seed(plan.random_state, 2))
    runs = planned_runs(plan.max_positions, plan.codebook_sizes)
    jobs = [
        (
            clone(base).set_params(random_state=derived_seed(plan.random_state, 100 + seed), **p),
            f"{name}, seed {seed}",
        )
        for seed in range(plan.n_seeds)
        for name, p in runs.items()
    ]
    shift = derived_seed(plan.random_state, 5)
    one_process = n_workers(n_jobs, len(jobs)) == 1
    args = [
        (model, task, plan.n_steps, X, y, plan.eval_lengths, shift, what, progress and one_process)
        for model, what in jobs
    ]
    with progress_bar(len(jobs), "encodings: models", enabled=progress, leave=False) as bar:
        if one_process:
            done = []
            for a in args:
                done.append(_train_and_score(*a))
                bar.update()
        else:
            done = run_jobs(_train_and_score, args, n_jobs)
            bar.update(len(jobs))
    scores = {name: [] for name in runs}
    for (name, _), (row, _) in zip([(n, s) for s in range(plan.n_seeds) for n in runs], done):
        scores[name].append(row)
    return scores, done[-1][1]


def _train_and_score(model, task, n_steps, X, y, lengths, shift, what, progress):
    """One model of the experiment trained, and its R^2 at each length (one job)."""
    model = train_online(model, task, n_steps, desc=f"encodings: train {what}", progress=progress)
    scorers = {t: LengthShiftScorer(t, random_state=shift) for t in lengths}
    return _scored(model, scorers, X, y), model.device_


def _scored(model, scorers, X, y):
    """R^2 of ``model`` by each length's scorer, NaN at lengths beyond its codebook."""
    L = model.max_positions_
    return [
        math.nan if L is not None and t > L else float(scorer(model, X, y))
        for t, scorer in scorers.items()
    ]
