"""Shared pieces of the estimators' docstrings, filled in by :class:`Substitution`.

As in imbalanced-learn: a docstring names a piece as ``{name}`` alone on a
line, and the decorator fills it once, at import, indented as that line.
"""

from __future__ import annotations

import re
import textwrap

_FIELD = re.compile(r"^( *)\{(\w+)\}$", re.MULTILINE)


class Substitution:
    """Decorator filling the ``{name}`` fields of a docstring with ``pieces[name]``."""

    def __init__(self, **pieces):
        self.pieces = pieces

    def __call__(self, obj):
        used = set()

        def fill(match):
            indent, name = match.groups()
            if name not in self.pieces:
                raise KeyError(f"{obj.__qualname__}'s docstring field {{{name}}} has no piece.")
            used.add(name)
            return textwrap.indent(textwrap.dedent(self.pieces[name]), indent)

        doc = _FIELD.sub(fill, obj.__doc__ or "")
        unused = sorted(set(self.pieces) - used)
        if unused:  # a piece that does not apply is an error, not silently dropped
            raise ValueError(f"{obj.__qualname__}'s docstring has no field for {unused}.")
        obj.__doc__ = doc
        return obj


def replace_once(text, old, new):
    """``text`` with the one occurrence of ``old`` replaced by ``new``.

    Docstrings composed from shared pieces use it instead of ``str.replace``:
    a piece whose text moved (no occurrence, or several) raises at import
    (``ValueError``) instead of silently leaving the docstring unchanged.
    """
    count = text.count(old)
    if count != 1:
        raise ValueError(f"the docstring piece {old!r} occurs {count} times, not once.")
    return text.replace(old, new)


def inherit_docstrings(interface):
    """Class decorator: the undocumented methods of a class get ``interface``'s docstrings."""

    def decorate(cls):
        for name, member in vars(cls).items():
            doc = getattr(getattr(interface, name, None), "__doc__", None)
            if callable(member) and not member.__doc__ and doc:
                member.__doc__ = doc
        return cls

    return decorate


SOLVER = """\
    solver : {"adam", "sgd"}, default="adam"
        Optimiser: Adam, or plain (full-step) gradient descent on minibatches
        as in the paper's theory (``momentum`` adds momentum)."""


def schedule(default):
    """The entries learning_rate (its default: ``default``), power_t and batch_size."""
    text = _SCHEDULE.replace("DEFAULT", default)
    if default == "auto":  # the fully-connected baselines': the schedule their step needs
        text = replace_once(text, '{"constant",', '{"auto", "constant",')
        text = replace_once(text, '        - ``"constant"``:', _AUTO_SCHEDULE)
    return text


_AUTO_SCHEDULE = """        - ``"auto"``: with the step ``learning_rate_init="auto"`` resolves
          for Adam, ``"cooldown"`` in :meth:`fit_online` and ``"adaptive"``
          in :meth:`fit`; else ``"constant"`` (an explicit step, and plain
          SGD, run as in 0.6).
        - ``"constant"``:"""


_SCHEDULE = """\
    learning_rate : {"constant", "invscaling", "adaptive", "cosine", "cooldown"}, \
            default="DEFAULT"
        Schedule of the step size, applied at every optimiser step (for
        every solver; :class:`~sklearn.neural_network.MLPRegressor` applies
        it to SGD only). The rate of every step is recorded in
        ``net_.history`` as ``event_lr`` (except ``"constant"``):

        - ``"constant"``: ``learning_rate_init`` throughout.
        - ``"invscaling"``: ``learning_rate_init / (t + 1) ** power_t``,
          with ``t`` the rows seen so far (``t_``, which a warm start
          continues).
        - ``"adaptive"``: ``learning_rate_init`` while the epoch loss keeps
          improving; each time it fails to improve by ``tol`` for
          ``n_iter_no_change`` epochs the rate is divided by 5, and training
          stops once the rate is at most 1e-6. :meth:`fit` only (it replaces
          early stopping); :meth:`fit_online` has no epochs and raises
          ``ValueError``.
        - ``"cosine"``: from ``learning_rate_init`` down to 0 along a half
          cosine over the planned steps (``max_iter`` epochs in :meth:`fit`,
          ``n_steps`` in :meth:`fit_online`); early stopping, where
          ``n_iter_no_change`` asks for it, may end it sooner. Long runs
          reach a lower loss than at a constant rate.
        - ``"cooldown"``: ``learning_rate_init`` for the first four fifths
          of the planned steps, then linearly down to 0 over the last fifth
          (a constant rate travels furthest for the noise it adds; the
          decay lets that noise settle).
    power_t : float, default=0.5
        Exponent of ``"invscaling"``.
    batch_size : int or "auto", default="auto"
        Rows per step. ``"auto"`` is ``min(200, n_samples)`` in :meth:`fit`
        (as in :class:`~sklearn.neural_network.MLPRegressor`) and 256 in
        :meth:`fit_online` (as in the paper)."""


STOPPING = """\
    max_iter : int, default=200
        Maximum number of epochs over ``X`` in :meth:`fit`.
    tol : float, default=1e-4
        Training stops when the epoch loss has not improved by at least
        ``tol`` for ``n_iter_no_change`` consecutive epochs.
    n_iter_no_change : int, default=10
        Patience of that rule, in epochs."""

STOPPING_PLANNED = """\
    max_iter : int or "auto", default="auto"
        Number of epochs over ``X`` in :meth:`fit`. ``"auto"`` plans the
        optimiser steps of the width-following recipe (see
        ``learning_rate_init``) and runs as many epochs as they fill.
    tol : float, default=1e-4
        With ``n_iter_no_change`` set, training stops when the epoch loss has
        not improved by at least ``tol`` for that many consecutive epochs.
    n_iter_no_change : int or None, default=None
        Patience of that rule, in epochs. None: no early stopping; the
        schedule is a plan and runs its whole course (no
        ``ConvergenceWarning`` then). Set an int to ask for early stopping."""

TRAINING = """\
    alpha : float, default=0.0
        L2 penalty (weight decay) of the optimiser.
    momentum : float, default=0.0
        Momentum of ``solver="sgd"``; 0 is plain gradient descent.
    dtype : {"float32", "float64"}, default="float32"
        Precision of the computation; float64 input is cast to it.
    device : str or torch.device, default="auto"
        ``"auto"`` trains on CUDA when available, else on the CPU;
        ``"cuda"`` on a machine without CUDA raises ``ValueError``.
        Predictions always come back as NumPy arrays.
    random_state : int, RandomState instance or None, default=None
        Seeds initialisation, batch order, encodings and prediction draws.
        An int makes :meth:`fit` and :meth:`predict` reproducible.
    verbose : int, default=0
        1 prints a table of the epoch losses, with a progress bar of the
        steps in :meth:`fit_online` (one epoch of many steps) and of the
        chunks of a long :meth:`predict`; 2 adds a progress bar to every
        epoch of :meth:`fit`.
    warm_start : bool, default=False
        When True, :meth:`fit` and :meth:`fit_online` continue from the
        weights of the previous call (with a fresh optimiser state, as in
        :class:`~sklearn.neural_network.MLPRegressor`), and ``loss_curve_``,
        ``n_iter_`` and ``t_`` count on from it. The data must keep
        ``n_features`` and the architecture must stay the same; anything
        else raises ``ValueError``. The other hyperparameters (rate,
        schedule, solver, batch size) may change between calls.
    on_divergence : {"raise", "warn"}, default="raise"
        What a fit that diverges does: its final training loss more than
        1.5 times that of the model it started from (W = 0, a fresh net, or
        the previous fit of a warm start). ``"raise"``: a ``ValueError``
        naming the step size, and the estimator stays as it was before the
        call. ``"warn"``: the diverged model is kept, with a
        ``UserWarning``. Weights that become NaN or infinite always raise.
    callbacks : list of skorch callbacks or None, default=None
        The hook into training: :class:`skorch.callbacks.Callback` instances
        (or ``(name, callback)`` pairs) that the owned skorch net runs in
        every :meth:`fit` and :meth:`fit_online`, after the package's own.
        They see the net at every batch and epoch (``net.module_`` is the
        torch module being trained, ``net.history`` the records), so they
        serve progress reports, records of the weights during training and
        checkpoints. :func:`~stsq_learn.save_model` does not save them."""

ATTRIBUTES = """\
    n_features_in_ : int
        Token dimension d seen in fit (the last axis of ``X`` minus the indicator).
    seq_len_ : int
        Sequence length T seen in fit.
    loss_curve_ : list of float
        Training loss per epoch (:meth:`fit`) or per step (:meth:`fit_online`),
        across warm-started calls.
    n_iter_ : int
        Number of epochs (:meth:`fit`) or steps (:meth:`fit_online`) run,
        across warm-started calls.
    t_ : int
        Number of training rows seen by the optimiser.
    device_ : torch.device
        Device the model was trained on and predicts on.
    net_ : skorch.NeuralNetRegressor
        The skorch net that ran the training; ``net_.history`` holds the
        per-epoch and per-batch records (``stop_reason`` in the last epoch
        when early stopping or the adaptive rate ended it) and
        ``net_.module_`` the torch module. It is training machinery: with
        drawn encodings its own ``net_.predict`` takes them from torch's
        global generator and does not give the numbers of :meth:`predict`,
        whose draws are keyed by the row."""

FIT_RAISES = """\
Raises
------
ValueError
    If an input or hyperparameter is invalid (before any training), or
    if training diverges (the loss or the weights become NaN or
    infinite). The estimator is then left exactly as it was."""


def fit_returns(online=False):
    """The Returns and Raises sections of a ``fit`` (``online``: of a ``fit_online``)."""
    curve = "; ``loss_curve_`` holds the loss of every step" if online else ""
    return f"Returns\n-------\nself : object\n    The fitted estimator{curve}.\n\n{FIT_RAISES}"


def online_fit(task):
    """The docstring of a ``fit_online`` drawing from ``task`` (a task class's name)."""
    return f"""Fit on a fresh batch drawn from ``task`` at every step.

    Batches of ``batch_size`` rows are drawn on the training device;
    there are no epochs and no early stopping.

    Parameters
    ----------
    task : {task}
        The law to draw training batches from.
    n_steps : int or "auto", default="auto"
        Number of optimisation steps; ``"auto"``: the planned steps of
        the model's default recipe.

{textwrap.indent(fit_returns(online=True), "    ")}
    """


def section(obj, title):
    """The body of the numpydoc section ``title`` of ``obj``'s docstring (indented as there).

    Lets a sibling class document the parameters it shares with ``obj`` by
    reference to one text, not a copy.
    """
    lines = (obj.__doc__ or "").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == title) + 2
    end = next(
        (
            i - 1
            for i in range(start + 1, len(lines))
            if set(lines[i].strip()) == {"-"} and lines[i - 1].strip()
        ),
        len(lines),
    )
    return "\n".join(lines[start:end]).rstrip()
