"""An estimator's fitted state: what a saved or continued model must satisfy, and its I/O.

:class:`FittedState` gives the estimators ``get_fitted_state`` and
``set_fitted_state``; the latter runs the checks here before it assigns
anything (a loaded file). A warm start continues the fitted module
(``_initial_module``) after comparing architectures with
:func:`architecture_changes`.
"""

from __future__ import annotations

import math
import sys

import torch
from sklearn.utils.validation import check_is_fitted
from skorch.history import History

from .._validation import check_callbacks, resolve_device
from . import training as tr
from .training import available_device

MAX_SIZE = 2**31 - 1
"""The largest size (a length, a token dimension) a model file may give.

No model of this package has a larger one: a row of more tokens, or a token
of more features, than int32 indices reach; and a weight as large as the
token dimension would exceed the 1 GiB a model file's member may unpack to.
A forged larger one is refused before torch computes a shape from it.
"""


SIZE_PARAMETERS = ("width", "n_heads", "max_positions", "extra_hidden_layers")
"""The hyperparameters that size a model's weights (named by the messages about them)."""


SEED_MAX = 2**31 - 1
"""Seeds a fit draws (prediction, encodings) are in ``[0, SEED_MAX)`` (int32's maximum)."""


def _is_seed(value):
    """A seed a fit could have drawn: another would be another model, not a saved one."""
    return _is_int(value, 0) and value < SEED_MAX


def _is_int(value, minimum):
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _is_size(value, minimum):
    """An integer in ``[minimum, MAX_SIZE]``: a size a model file may give."""
    return _is_int(value, minimum) and value <= MAX_SIZE


def size_check(minimum):
    """The ``(check, description)`` of a fitted size, for a fitted-state schema."""
    return (lambda v: _is_size(v, minimum), f"an integer from {minimum} to {MAX_SIZE}")


def _is_number(value):
    """An int or float (not a boolean) that a float64 holds: a JSON integer may be far larger."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, float) or abs(value) <= sys.float_info.max


def _is_number_list(value):
    return isinstance(value, list) and all(_is_number(x) for x in value)


def _is_positive_number(value):
    return _is_number(value) and math.isfinite(value) and value > 0


# What get_fitted_state returns under "fitted": name -> (check, description).
FITTED_SCHEMA = {
    "n_features_in_": size_check(1),
    "seq_len_": size_check(1),
    "n_iter_": (lambda v: _is_int(v, 0), "an integer >= 0"),
    "t_": (lambda v: _is_int(v, 0), "an integer >= 0"),
    "loss_curve_": (_is_number_list, "a list of numbers"),
    "predict_seed": (_is_seed, f"an integer from 0 to {SEED_MAX - 1} (a seed fit draws)"),
    "y_1d": (lambda v: isinstance(v, bool), "a boolean"),
    "device": (lambda v: isinstance(v, str), "a device string"),
    "module_seed": (_is_seed, f"an integer from 0 to {SEED_MAX - 1} (a seed fit draws)"),
    "solver": (lambda v: v in ("sgd", "adam"), "'sgd' or 'adam'"),
    "learning_rate_init": (lambda v: _is_positive_number(v), "a number > 0"),
    "token_block_rate": (
        lambda v: v is None or _is_positive_number(v),
        "None or a number > 0",
    ),
    "planned_steps": (lambda v: v is None or _is_int(v, 1), "None or an integer >= 1"),
}


def check_fitted_state(state, schema, *, known=None, records=False):
    """Raise ``ValueError`` unless ``state`` has the structure of a ``get_fitted_state()``.

    What every ``set_fitted_state`` checks first: ``state`` is a dict of ``"fitted"``,
    ``"history"`` and ``"weights"``, and ``state["fitted"]`` holds every key of ``schema``
    (name -> ``(check, description)``; sizes: :func:`size_check`), each passing its check.
    ``known``: the other fitted keys a file may hold (None: others are not checked); ``records``:
    whether the history must be a list of per-epoch dicts (else any list).
    """
    if not isinstance(state, dict) or set(state) != {"fitted", "history", "weights"}:
        raise ValueError("state must be a dict with keys 'fitted', 'history' and 'weights'.")
    fitted, history = state["fitted"], state["history"]
    if not isinstance(fitted, dict):
        raise ValueError(f"state['fitted'] must be a dict, got {fitted!r}.")
    if known is not None:
        unknown = sorted(set(fitted) - set(schema) - set(known))
        if unknown:
            raise ValueError(f"unknown fitted attributes {unknown}.")
    for key, (ok, what) in schema.items():
        if key not in fitted:
            raise ValueError(f"the fitted attribute {key!r} is missing.")
        if not ok(fitted[key]):
            raise ValueError(f"fitted {key} must be {what}, got {fitted[key]!r}.")
    if records and not (isinstance(history, list) and all(isinstance(e, dict) for e in history)):
        raise ValueError("the history must be a list of per-epoch records (dicts).")
    if not isinstance(history, list):
        raise ValueError("the history must be a list.")


def check_state(state, task_keys=()):
    """Raise ``ValueError`` unless ``state`` has the structure of ``get_fitted_state()``.

    ``task_keys`` are the fitted keys of the estimator's task (its values are
    checked when the task is rebuilt from them); a file without one means None.
    """
    check_fitted_state(state, FITTED_SCHEMA, known=task_keys, records=True)
    if not all(math.isfinite(v) for v in state["fitted"]["loss_curve_"]):
        raise ValueError("fitted loss_curve_ holds NaN or infinity.")


def check_sizes(fitted, keys, weights):
    """Raise ``ValueError`` unless each fitted size of ``keys`` fits the weights' shapes.

    Run before any module (or expected shape) is built from the sizes. A
    size in ``keys`` fixes the model's weights: it is a summand or a factor
    of one of their dimensions, so a file whose weights have no dimension as
    large holds another model's weights. The sizes' types and range are the
    schema's (:func:`check_fitted_state`); the exact shapes are compared by
    :func:`check_weights` once the sizes are known to be the weights' (which
    also names the missing tensors of a file that holds none).
    """
    if not isinstance(weights, dict):
        raise ValueError("the weights must be a dict of named tensors.")
    largest = max(
        (n for w in weights.values() if isinstance(w, torch.Tensor) for n in w.shape),
        default=None,
    )
    if largest is None:  # no tensor: check_weights names the missing ones
        return
    for key in keys:
        if fitted[key] > largest:
            raise ValueError(
                f"fitted {key}={fitted[key]!r} does not fit the weights: a model of "
                f"{key}={fitted[key]!r} has a weight dimension of at least {fitted[key]!r}, "
                f"and the largest in this file is {largest}."
            )


def check_layer_counts(params, keys, weights):
    """Raise ``ValueError`` unless each layer count of ``keys`` is at most the tensors' count.

    Run before any module is built: every layer holds at least one tensor, so a
    file with fewer tensors than a forged ``n_layers`` holds another model's
    weights (building its module, even on the meta device, would take as long
    as the count is large).
    """
    n_tensors = len(weights) if isinstance(weights, dict) else 0
    for key in keys:
        if params[key] > n_tensors:
            raise ValueError(
                f"invalid hyperparameter {key}={params[key]!r}: a model of {params[key]!r} "
                f"layers has at least as many tensors, and this file holds {n_tensors}."
            )


def expected_weights(build, described_by):
    """The ``state_dict`` of ``build()`` on the meta device: shapes only, nothing allocated.

    Hyperparameters read from a file may still describe a model whose
    shapes torch cannot compute (a forged ``width`` of 10**30): torch's
    overflow error is then a ``ValueError`` naming ``described_by``.
    """
    try:
        with torch.device("meta"):
            return build().state_dict()
    except (OverflowError, RuntimeError, TypeError) as exc:
        if not isinstance(exc, OverflowError) and "overflow" not in str(exc).lower():
            raise
        raise ValueError(
            f"the model of {described_by} is too large for torch to describe "
            f"({str(exc).splitlines()[0]}): these are not the sizes of its weights."
        ) from None


def check_weights(weights, expected, described_by, dtype=None):
    """Raise ``ValueError`` unless ``weights`` has exactly the tensors of ``expected``.

    ``expected`` is a ``state_dict`` (its tensors may be on the meta device);
    ``described_by`` names what fixed those shapes, for the message; ``dtype``,
    when given, is the floating dtype every tensor must have (the model's).
    """
    if not isinstance(weights, dict) or not all(isinstance(k, str) for k in weights):
        raise ValueError("the weights must be a dict of named tensors.")
    missing, unknown = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
    if missing or unknown:
        raise ValueError(
            f"the weights do not match the model of {described_by}: missing {missing}, "
            f"unknown {unknown}."
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
        if dtype is not None and value.dtype != dtype:
            raise ValueError(
                f"weight {key!r} has dtype {value.dtype}, but the model's dtype is {dtype}."
            )
        if not torch.isfinite(value).all():
            raise ValueError(f"weight {key!r} holds NaN or infinity.")


def rebuild_task(build, fields):
    """``build()``: the task of a fitted state, or a ``ValueError`` naming ``fields``.

    ``fields`` are the fitted values the task is built from (name -> value):
    a task that refuses them is a file whose fields do not describe a task.
    """
    try:
        return build()
    except (TypeError, ValueError) as exc:
        named = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        raise ValueError(f"the fitted state of its task ({named}) is invalid: {exc}") from None


def check_device_name(device):
    """Raise ``ValueError`` unless ``device`` names a device ``fit`` could train on.

    Whether this machine has it is not checked: a model fitted on CUDA loads
    on a machine without (``set_fitted_state``'s ``device`` decides where it
    predicts).
    """
    if isinstance(device, torch.device) or device == "auto":
        return
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError, ValueError):
        kind = None
    if kind not in ("cpu", "cuda"):
        raise ValueError(
            f"device={device!r} is not a device; use 'auto', 'cpu', 'cuda' or 'cuda:N'."
        )


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
    for key in ("positional_encoding", "learn_token_block", "max_positions", "n_heads"):
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


class FittedState:
    """``get_fitted_state`` / ``set_fitted_state`` and unpickling, for the estimators."""

    _sizes_in_weights = ("n_features_in_",)
    """The fitted sizes that fix the weights' shapes (:func:`check_sizes`)."""

    _layers_in_weights = ()
    """The hyperparameters that count the module's layers (:func:`check_layer_counts`)."""

    _fitted_extra_keys = ()
    """Fitted keys a subclass adds to the file (it writes, checks and assigns them itself)."""

    def _size_hyperparameters(self):
        """``"name=value"`` of every hyperparameter that sizes the weights, for messages."""
        return [f"{k}={v}" for k, v in self.get_params().items() if k in SIZE_PARAMETERS]

    def _extra_fitted(self):
        """The fitted values a subclass adds to the file (JSON types): none."""
        return {}

    def get_fitted_state(self):
        """The fitted state as plain values and CPU tensors (what :func:`save_model` writes).

        Returns
        -------
        state : dict
            ``"fitted"``: the fitted scalars and the loss curve (JSON types;
            a classifier's ``classes_`` as a list);
            ``"history"``: the skorch training history as a list of dicts;
            ``"weights"``: the module's ``state_dict`` on the CPU.
        """
        check_is_fitted(self)
        module = self.net_.module_
        fitted = {
            "n_features_in_": int(self.n_features_in_),
            "seq_len_": int(self.seq_len_),
            "n_iter_": int(self.n_iter_),
            "t_": int(self.t_),
            "loss_curve_": [float(v) for v in self.loss_curve_],
            "predict_seed": int(self._predict_seed),
            "y_1d": bool(self._y_1d),
            "device": str(self.device_),
            "module_seed": int(getattr(module, "encoding_seed", 0)),
            "solver": self.solver_,
            "learning_rate_init": float(self.learning_rate_init_),
            "token_block_rate": self._token_block_rate,
            "planned_steps": self.planned_steps_,
            **self.task_.fitted_state(),
            **self._extra_fitted(),
        }
        weights = {k: v.detach().cpu() for k, v in module.state_dict().items()}
        return {"fitted": fitted, "history": list(self.net_.history), "weights": weights}

    def set_fitted_state(self, state, *, device=None):
        """Make this estimator the fitted model described by ``state``.

        The inverse of :meth:`get_fitted_state`, used by :func:`load_model`.
        The hyperparameters are validated, the module is rebuilt from them and
        every weight is checked against it before anything is assigned.

        Parameters
        ----------
        state : dict
            As returned by :meth:`get_fitted_state`.
        device : str, torch.device or None, default=None
            Device to predict on. None uses the device in ``state`` when this
            machine has it, else the CPU (with a ``UserWarning``).

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        ValueError
            If a hyperparameter is invalid, or ``state`` is incomplete,
            ill-typed, or holds weights that do not fit the model.
        """
        try:  # what fit checks of its hyperparameters, before any work
            self._validate_params()
            check_callbacks(self.callbacks)
            check_device_name(self.device)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"invalid hyperparameter: {exc}") from None
        task_class = self._task_class()
        check_state(state, (*task_class.fitted_keys, *self._fitted_extra_keys))
        fitted = state["fitted"]
        check_sizes(fitted, self._sizes_in_weights, state["weights"])
        check_layer_counts(self.get_params(), self._layers_in_weights, state["weights"])
        target = state_device(fitted["device"], device, type(self).__name__)
        T, d, seed = fitted["seq_len_"], fitted["n_features_in_"], fitted["module_seed"]
        task_state = {k: fitted.get(k) for k in task_class.fitted_keys}
        task = rebuild_task(
            lambda: task_class.from_fitted(T, d, task_state),
            {"seq_len_": T, "n_features_in_": d, **task_state},
        )
        try:  # what fit checks of the hyperparameters against the task it trains on
            self._check_train_length(task)
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"invalid hyperparameter for its task {task_class.name!r}: {exc}"
            ) from None
        outputs = math.prod(task.output_shape(1, T)[1:])
        if fitted["y_1d"] and outputs != 1:
            raise ValueError(
                f"fitted y_1d is true (one output per row), but the model of its task "
                f"predicts {outputs} outputs per row."
            )
        sizes = [f"seq_len_={T}", f"n_features_in_={d}"]
        sizes += [f"{k}={v!r}" for k, v in task.fitted_state().items()]  # the task's, e.g. q
        sizes = ", ".join([*sizes, *self._size_hyperparameters()])
        described_by = f"{sizes} and the other hyperparameters"
        # shapes only: a tampered size allocates nothing
        expected = expected_weights(lambda: self._make_module(task, seed), described_by)
        check_weights(state["weights"], expected, described_by, dtype=tr.DTYPES[self.dtype])
        module = self._make_module(task, seed).to(dtype=tr.DTYPES[self.dtype])
        module.load_state_dict(state["weights"])
        net = self._build_net(
            module.to(device=target),
            target,
            solver=fitted["solver"],
            learning_rate_init=fitted["learning_rate_init"],
        )
        net = tr.initialize_net(net)
        net.history = History(state["history"])
        self.net_, self.device_, self.task_ = net, target, task
        self.n_features_in_, self.seq_len_ = d, T
        self.loss_curve_ = fitted["loss_curve_"]
        self.n_iter_, self.t_ = fitted["n_iter_"], fitted["t_"]
        self._predict_seed, self._y_1d = fitted["predict_seed"], fitted["y_1d"]
        self.solver_, self.learning_rate_init_ = fitted["solver"], fitted["learning_rate_init"]
        self._token_block_rate = fitted["token_block_rate"]
        self.planned_steps_ = fitted["planned_steps"]
        return self

    def _initial_module(self, task, seed, warm):
        """A new module (W = 0 for attention), or the fitted one's weights to continue.

        A continuation is built anew for ``task`` (at its training length)
        and takes the fitted module's parameters: the buffers the length
        decides (fixed encodings) are those of the new length, so the model
        stays one that its fitted state describes.
        """
        if not warm:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                return self._make_module(task, seed)
        old = self.net_.module_
        if task.n_features != self.n_features_in_:
            raise ValueError(
                f"warm_start=True continues the previous fit, which had n_features="
                f"{self.n_features_in_}; this data has n_features={task.n_features}. "
                "Set warm_start=False to start afresh."
            )
        with torch.random.fork_rng(devices=[]):
            fresh = self._make_module(task, getattr(old, "encoding_seed", seed))
        changed = architecture_changes(old, fresh)
        if changed:
            raise ValueError(
                "warm_start=True continues the previous fit, but the model it would "
                f"continue has another architecture ({'; '.join(changed)}). Restore "
                "those hyperparameters (or the training seq_len) or set warm_start=False."
            )
        fresh = fresh.to(device=next(old.parameters()).device, dtype=next(old.parameters()).dtype)
        with torch.no_grad():
            for name, param in old.named_parameters():
                fresh.get_parameter(name).copy_(param)
        return fresh

    def __setstate__(self, state):
        super().__setstate__(state)
        # Unpickled on a machine without the CUDA device it was fitted on: predict on the CPU.
        device = self.__dict__.get("device_")
        if device is None or device.type != "cuda":
            return
        self.device_ = tr.available_device(device, type(self).__name__)
        net = self.__dict__.get("net_")
        if net is not None and self.device_.type == "cpu":
            net.device = "cpu"
            net.iterator_train__device = torch.device("cpu")
