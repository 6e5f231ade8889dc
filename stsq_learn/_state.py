"""Checks of an estimator's fitted state: what a saved or continued model must satisfy.

:meth:`~stsq_learn.SparseTokenSelector.set_fitted_state` runs these before it
assigns anything (a loaded file), and a warm start compares architectures
with :func:`architecture_changes`.
"""

from __future__ import annotations

import math

import torch

from ._training import available_device
from ._validation import resolve_device


def _is_int(value, minimum):
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _is_number_list(value):
    return isinstance(value, list) and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in value
    )


def _is_positive_number(value):
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


# What get_fitted_state returns under "fitted": name -> (check, description).
FITTED_SCHEMA = {
    "n_features_in_": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "seq_len_": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "n_iter_": (lambda v: _is_int(v, 0), "an integer >= 0"),
    "t_": (lambda v: _is_int(v, 0), "an integer >= 0"),
    "loss_curve_": (_is_number_list, "a list of numbers"),
    "predict_seed": (lambda v: _is_int(v, 0), "an integer >= 0"),
    "y_1d": (lambda v: isinstance(v, bool), "a boolean"),
    "device": (lambda v: isinstance(v, str), "a device string"),
    "module_seed": (lambda v: _is_int(v, 0), "an integer >= 0"),
    "solver": (lambda v: v in ("sgd", "adam"), "'sgd' or 'adam'"),
    "learning_rate_init": (lambda v: _is_positive_number(v), "a number > 0"),
    "token_block_rate": (
        lambda v: v is None or _is_positive_number(v),
        "None or a number > 0",
    ),
    "planned_steps": (lambda v: v is None or _is_int(v, 1), "None or an integer >= 1"),
}


def check_state(state):
    """Raise ``ValueError`` unless ``state`` has the structure of ``get_fitted_state()``."""
    if not isinstance(state, dict) or set(state) != {"fitted", "history", "weights"}:
        raise ValueError("state must be a dict with keys 'fitted', 'history' and 'weights'.")
    fitted, history = state["fitted"], state["history"]
    if not isinstance(fitted, dict):
        raise ValueError(f"state['fitted'] must be a dict, got {fitted!r}.")
    unknown = sorted(set(fitted) - set(FITTED_SCHEMA))
    if unknown:
        raise ValueError(f"unknown fitted attributes {unknown}.")
    for key, (ok, what) in FITTED_SCHEMA.items():
        if key not in fitted:
            raise ValueError(f"the fitted attribute {key!r} is missing.")
        if not ok(fitted[key]):
            raise ValueError(f"fitted {key} must be {what}, got {fitted[key]!r}.")
    if not all(math.isfinite(v) for v in fitted["loss_curve_"]):
        raise ValueError("fitted loss_curve_ holds NaN or infinity.")
    if not isinstance(history, list) or not all(isinstance(e, dict) for e in history):
        raise ValueError("the history must be a list of per-epoch records (dicts).")


def check_weights(weights, expected, described_by):
    """Raise ``ValueError`` unless ``weights`` has exactly the tensors of ``expected``.

    ``expected`` is a ``state_dict`` (its tensors may be on the meta device);
    ``described_by`` names what fixed those shapes, for the message.
    """
    if not isinstance(weights, dict) or not all(isinstance(k, str) for k in weights):
        raise ValueError("the weights must be a dict of named tensors.")
    missing, unknown = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
    if missing or unknown:
        raise ValueError(
            f"the weights do not match the model: missing {missing}, unknown {unknown}."
        )
    for key, ref in expected.items():
        value = weights[key]
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"weight {key!r} is a {type(value).__name__}, not a tensor.")
        if value.shape != ref.shape:
            raise ValueError(
                f"weight {key!r} has shape {tuple(value.shape)}, but the model of "
                f"{described_by} needs {tuple(ref.shape)}."
            )
        if not value.is_floating_point():
            raise ValueError(f"weight {key!r} has dtype {value.dtype}, not a float.")
        if not torch.isfinite(value).all():
            raise ValueError(f"weight {key!r} holds NaN or infinity.")


def state_device(saved, requested, owner):
    """The device a loaded model predicts on: ``requested``, else ``saved`` if present."""
    if requested is not None:
        return resolve_device(requested)
    try:
        device = torch.device(saved)
    except RuntimeError:
        raise ValueError(f"The saved device {saved!r} is not a device.") from None
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"The saved device {saved!r} is not supported; use 'cpu' or 'cuda'.")
    device = available_device(device, owner)
    return resolve_device(str(device)) if device.type == "cuda" else device


def _architecture(module):
    """What a warm start must keep: the module's class, settings and weight shapes."""
    arch = {"class": type(module).__name__}
    for key in ("positional_encoding", "learn_token_block", "max_positions"):
        if hasattr(module, key):
            arch[key] = getattr(module, key)
    for name, param in module.named_parameters():
        arch[f"{name} shape"] = tuple(param.shape)
    return arch


def architecture_changes(old, new):
    """``"key: old -> new"`` for every setting or weight shape in which two modules differ."""
    before, after = _architecture(old), _architecture(new)
    return [
        f"{k}: {before.get(k)} -> {after.get(k)}"
        for k in sorted(set(before) | set(after))
        if before.get(k) != after.get(k)
    ]
