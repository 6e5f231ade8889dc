"""What a fit would allocate, checked against the machine before any work.

An impossible size (a width of a million, a codebook of a billion vectors, a
batch of a hundred thousand rows of length 4096) must be a clear error naming
the parameter and the bytes, not torch's allocator failing, or a machine
swapping, halfway through a fit.
"""

from __future__ import annotations

import itertools

import torch

from .._resources import available_bytes, gib
from .._validation import tensor_view_of

_TRAINING_COPIES = 4
"""Copies of the weights a fit holds: the weights, their gradients, Adam's two moments."""
_STEP_COPIES = 3
"""A step's activations: the forward pass, its saved tensors, the backward pass."""


PREDICT_ELEMENTS = 2**24
"""Floats of encodings per chunk of a prediction (64 MiB in float32): ``predict`` and the
members' predictions go through their rows in chunks of at most this many."""


def copied_bytes(arrays, dtype, device):
    """Bytes the training copies of NumPy ``arrays`` take in ``dtype`` on ``device``.

    An array the tensor shares (on the CPU, C-contiguous, already of the
    dtype, in native byte order: :func:`stsq_learn._validation.as_tensor`)
    costs nothing; any other is one copy, a broadcast view of zeros included.
    """
    cpu = torch.device(device).type == "cpu"
    size = torch.finfo(dtype).bits // 8
    return sum(0 if cpu and tensor_view_of(a, dtype) else a.size * size for a in arrays)


def check_fit_memory(estimator, task, batch_size, device, n_read, rows=(), members=1):
    """Refuse, before any work, a fit whose model, steps or rows would not fit in memory.

    ``task`` is the fitted task (its training length), ``n_read`` the most
    positions a query of the training rows reads (None: unknown, bounded by
    the width); ``rows`` are the NumPy arrays (``X``, ``y``) that ``fit``
    is about to copy to the device (:func:`copied_bytes`), checked before
    the copy; ``members`` fits trained together as one model
    (:mod:`stsq_learn.engine.members`) hold ``members`` times the model and
    the step.
    """
    from .training import DTYPES

    params = estimator._size_hyperparameters()
    if members > 1:
        params.insert(0, f"{members} members trained together")
    T = task.reference_length
    try:
        with torch.device("meta"):  # shapes only: nothing is allocated
            module = estimator._make_module(task, 0)
    except RuntimeError as exc:  # a shape whose byte count overflows torch's sizes
        raise ValueError(
            f"{type(estimator).__name__} with {', '.join([*params, f'seq_len={T}'])} is too "
            f"large to build: its weights' sizes overflow ({exc}). Lower the sizes named."
        ) from None
    kwargs = estimator._fit_forward_kwargs()
    per_row = module.elements_per_row(T, kwargs.get("pe_sampling"), n_selected=n_read)
    check_training_memory(
        module,
        per_row * kwargs.get("n_pe_samples", 1),
        batch_size,
        torch.finfo(DTYPES[estimator.dtype]).bits // 8,
        device,
        type(estimator).__name__,
        ", ".join([*params, f"batch_size={batch_size}", f"seq_len={T}"]),
        members=members,
        data_bytes=copied_bytes(rows, DTYPES[estimator.dtype], device),
    )


def check_training_memory(
    module,
    per_row,
    batch_size,
    element_size,
    device,
    owner,
    params,
    advice="Lower the width or the batch size.",
    members=1,
    data_bytes=0,
):
    """Raise ``ValueError`` if training ``module`` would need more memory than ``device`` has.

    ``module`` is built on the meta device (shapes only); ``per_row`` the floats a forward pass
    holds per row (its ``elements_per_row``), ``element_size`` the bytes of a float of the
    training dtype; ``owner`` (the class name), ``params`` (the sizing hyperparameters as
    ``name=value`` text) and ``advice`` (its last sentence) make the message; ``members``
    copies of the model and its steps train together; ``data_bytes`` are the training rows
    copied to the device (:func:`copied_bytes`).
    """
    numel = sum(t.numel() for t in itertools.chain(module.parameters(), module.buffers()))
    model = _TRAINING_COPIES * numel * element_size * members
    step = _STEP_COPIES * batch_size * per_row * element_size * members
    limit = available_bytes(device)
    if limit is None or model + step + data_bytes <= limit:
        return
    parts = f"{gib(model)} for the model and its training state, {gib(step)} for a step"
    if data_bytes:
        parts += f", {gib(data_bytes)} for the training rows"
        if data_bytes > model + step:
            advice = (
                f"fit copies its rows to {device} in the training dtype: train on fewer "
                "rows, or on a stream of fresh batches (fit_online), which holds one "
                "batch at a time."
            )
    raise ValueError(
        f"{owner} with {params} would need about {gib(model + step + data_bytes)} to train "
        f"({parts}), more than the {gib(limit)} available on {device}. {advice}"
    )
