"""The attention classifier of sparse-token classification.

:class:`SparseTokenClassifier` is the single-layer attention classifier of
Barnfield, Cui and Lu (ICLR 2026, arXiv 2509.25153): a trainable query
vector scores every token, a softmax over the tokens weighs them, and a
linear readout of the weighted token gives the logit. It is trained by
gradient descent on the logistic loss, jointly or by the paper's two-step
protocol (``solver="two_step"``: one gradient step on the readout, one on
the query, then the readout alone). It reads ``X`` of shape
``(n_samples, seq_len, n_features)`` at any length.

The linear baselines it is compared with live in :mod:`.baselines`.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ..._validation import as_tensor
from ...engine.params import AtomicSetParams, refuse_booleans
from ...engine.state import (
    _is_int,
    _is_number_list,
    check_fitted_state,
    check_sizes,
    check_weights,
    size_check,
)
from .task import SparseTokenClassificationTask, as_tokens

__all__ = ["SparseTokenClassifier"]

_CPU = torch.device("cpu")
_F64 = torch.float64
_WEIGHTS = ("query", "readout", "intercept")


def attention_logits(X, query, readout, intercept):
    """The classifier's logit ``<w, sum_l softmax(X q)_l x_l> + b`` of each row (torch).

    Parameters
    ----------
    X : Tensor of shape (n, L, d)
        Rows.
    query, readout : Tensor of shape (d,)
        ``q`` and ``w``.
    intercept : Tensor of shape (1,)
        ``b``.

    Returns
    -------
    Tensor of shape (n,)
    """
    weights = torch.softmax(X @ query, dim=1)  # (n, L): attention over the tokens
    pooled = torch.einsum("nl,nld->nd", weights, X)
    return pooled @ readout + intercept[0]


class SparseTokenClassifier(AtomicSetParams, ClassifierMixin, BaseEstimator):
    """Single-layer attention classifier with a trainable query vector (binary).

    The model of Barnfield, Cui and Lu (ICLR 2026): for a row ``X`` of
    ``L`` tokens ``x_l`` in ``R^d``,

    ``f(X) = <w, sum_l softmax_l(<x_l, q>) x_l> + b``,

    the softmax over the ``L`` tokens; ``P(y = classes_[1] | X) = sigmoid(f(X))``.
    The query ``q``, the readout ``w`` and the intercept ``b`` minimise the
    mean logistic loss plus ``alpha / 2 (|q|^2 + |w|^2)`` by full-batch
    gradient steps:

    - ``solver="adam"`` (default) or ``"gd"``: ``max_iter`` Adam or plain
      gradient steps on ``(q, w, b)`` jointly, from ``w = 0, b = 0`` and a
      small random ``q`` (standard deviation ``1e-2 / sqrt(d)``);
    - ``solver="two_step"``: the two-step protocol. From
      ``q = 0, w = 0, b = 0`` (uniform attention), one gradient step of size
      ``learning_rate_init`` on ``w`` (at ``q = 0`` the gradient in ``q``
      vanishes), then one on ``q`` at that ``w``: the query's alignment
      with the signal ``xi`` after these two steps is what the paper
      analyses (:attr:`two_step_query_` keeps it). The query is then frozen
      (rescaled to norm ``query_norm`` if given) and ``(w, b)`` are fitted
      by ``max_iter`` L-BFGS iterations on the (convex) regularised
      logistic loss.

    Parameters
    ----------
    solver : {"adam", "gd", "two_step"}, default="adam"
        The training protocol (above).
    learning_rate_init : float, default=0.05
        Step size of the gradient steps (of both steps of ``"two_step"``).
    max_iter : int, default=300
        Gradient steps (``"adam"``, ``"gd"``), or L-BFGS iterations of the
        readout after the two steps (``"two_step"``).
    alpha : float, default=1e-4
        L2 penalty on ``q`` and ``w`` (not on ``b``).
    query_norm : float or None, default=None
        ``"two_step"`` only: the norm the query is rescaled to after the
        second step (the attention's inverse temperature); None keeps the
        step's norm. Ignored by the other solvers.
    random_state : int, RandomState instance or None, default=None
        Seed of the query's initialisation (``"adam"``, ``"gd"``).
    verbose : int, default=0
        Prints the loss every tenth of the steps when positive.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        The two labels; ``classes_[1]`` is the positive class (the signal).
    query_ : ndarray of shape (n_features,)
        The fitted query ``q``.
    readout_ : ndarray of shape (n_features,)
        The fitted readout ``w``.
    intercept_ : float
        The fitted intercept ``b``.
    two_step_query_ : ndarray of shape (n_features,) or None
        The query after the two steps (before any rescaling), with
        ``solver="two_step"``; None otherwise.
    loss_curve_ : ndarray of shape (`n_iter_`,)
        The training loss (penalty included) before each step or iteration.
    n_iter_ : int
        Steps (or readout iterations) taken.
    task_ : SparseTokenClassificationTask
        The data contract (sizes of the training rows).
    n_features_in_, seq_len_ : int
        Token dimension and length seen in fit.

    See Also
    --------
    make_flat_logistic : The vectorized linear baseline.
    make_pooled_logistic : The mean-pooled linear baseline.

    Notes
    -----
    What the paper's public text confirms and what is ours: the data law,
    the two linear baselines, the query vector, the softmax over tokens, the
    logistic-type classification and "two gradient updates" aligning the
    query with ``xi`` are confirmed from public summaries of the paper. Not
    confirmed (the paper's full text was out of reach): whether the readout
    is a learned vector (ours) or tied to the query, whether the attention
    has a temperature or a key/value matrix, the exact loss (ours: the
    logistic loss, penalised), the initialisation, the step sizes, whether
    the two steps reuse the same rows (ours: the same rows) and how the
    readout is trained after them (ours: L-BFGS to convergence).

    Examples
    --------
    >>> from stsq_learn import SparseTokenClassifier, make_sparse_token_classification
    >>> X, y = make_sparse_token_classification(400, seq_len=16, n_features=8,
    ...                                         signal=4.0, random_state=0)
    >>> clf = SparseTokenClassifier(random_state=0).fit(X, y)
    >>> clf.classes_
    array([0., 1.])
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    >>> bool(clf.score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = {
        "solver": [StrOptions({"adam", "gd", "two_step"})],
        "learning_rate_init": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "query_norm": [Interval(Real, 0, None, closed="left"), None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }
    _task = "classification"
    _first_format_version = None  # model files of format version 4 on

    def __init__(
        self,
        solver="adam",
        learning_rate_init=0.05,
        max_iter=300,
        alpha=1e-4,
        query_norm=None,
        random_state=None,
        verbose=0,
    ):
        self.solver = solver
        self.learning_rate_init = learning_rate_init
        self.max_iter = max_iter
        self.alpha = alpha
        self.query_norm = query_norm
        self.random_state = random_state
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.input_tags.two_d_array = False
        tags.classifier_tags.multi_class = False
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = False
        return tags

    def _validate_params(self):
        super()._validate_params()
        refuse_booleans(self)
        for name in ("learning_rate_init", "alpha", "query_norm"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(
                    f"The {name!r} parameter of {type(self).__name__} must be finite, "
                    f"got {value!r}."
                )

    # -- fitting ---------------------------------------------------------------------
    def fit(self, X, y):
        """Fit the attention classifier on rows ``X`` and labels ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens.
        y : array-like of shape (n_samples,)
            Labels, exactly two distinct values; ``classes_[1]`` (the larger
            in sort order, e.g. 1 of 0/1 or +1 of -1/+1) is the positive class.

        Returns
        -------
        self : object
            The fitted classifier.

        Raises
        ------
        ValueError, TypeError
            For a bad hyperparameter, rows that are not 3-D finite reals,
            labels of another length or not of two classes, before any
            work; for a run whose loss or weights stop being finite (lower
            ``learning_rate_init``). A failed call leaves the model as it was.
        """
        self._validate_params()
        X = as_tokens(X)
        if y is None:
            raise ValueError(
                f"y is required: labels of shape (n_samples,) = ({len(X)},), got None."
            )
        y = column_or_1d(np.asarray(y), warn=True)
        if len(y) != len(X):
            raise ValueError(f"y has {len(y)} labels but X has {len(X)} rows; they must match.")
        check_classification_targets(y)
        classes, y01 = np.unique(y, return_inverse=True)
        if len(classes) != 2:
            raise ValueError(
                f"{type(self).__name__} is a binary classifier: y must hold exactly 2 classes, "
                f"got {len(classes)}: {classes.tolist()[:5]}."
            )
        task, X, y01 = SparseTokenClassificationTask.from_data(X, y01.astype(np.float64))
        Xt = as_tensor(X, _F64)
        yt = torch.as_tensor(y01)
        rng = check_random_state(self.random_state)
        state = self._train(Xt, yt, rng)
        for name in ("query_", "readout_"):
            if not np.isfinite(state[name]).all() or not np.isfinite(state["loss_curve_"]).all():
                raise ValueError(
                    "Training diverged: the loss or the weights became NaN or infinite. The "
                    f"step size is the likely cause: lower learning_rate_init (it was "
                    f"{self.learning_rate_init:.4g}), or rescale X. The estimator was left as "
                    "it was before this call."
                )
        # Fitted state is assigned only now: a failed call leaves a fitted model as it was.
        self.classes_ = classes
        for key, value in state.items():
            setattr(self, key, value)
        self.task_ = task
        self.n_features_in_ = task.n_features
        self.seq_len_ = task.seq_len
        return self

    def _loss(self, Xt, yt, q, w, b):
        logits = attention_logits(Xt, q, w, b)
        data = torch.nn.functional.binary_cross_entropy_with_logits(logits, yt)
        return data + 0.5 * float(self.alpha) * (q.square().sum() + w.square().sum())

    def _train(self, Xt, yt, rng):
        d = Xt.shape[2]
        lr, steps = float(self.learning_rate_init), int(self.max_iter)
        two_step = self.solver == "two_step"
        q0 = np.zeros(d) if two_step else rng.standard_normal(d) * (1e-2 / math.sqrt(d))
        q = torch.tensor(q0, dtype=_F64, requires_grad=True)
        w = torch.zeros(d, dtype=_F64, requires_grad=True)
        b = torch.zeros(1, dtype=_F64, requires_grad=True)
        losses = []
        two_step_query = None
        if two_step:
            for param in (w, q):  # step 1 on the readout, step 2 on the query
                loss = self._loss(Xt, yt, q, w, b)
                (grad,) = torch.autograd.grad(loss, param)
                with torch.no_grad():
                    param -= lr * grad
            two_step_query = q.detach().numpy().copy()
            with torch.no_grad():
                norm = float(q.norm())
                if self.query_norm is not None and norm > 0:
                    q *= float(self.query_norm) / norm
            q.requires_grad_(False)
            optimizer = torch.optim.LBFGS(
                [w, b],
                lr=1.0,
                max_iter=steps,
                tolerance_grad=1e-9,
                tolerance_change=1e-12,
                history_size=20,
                line_search_fn="strong_wolfe",
            )

            def closure():
                optimizer.zero_grad()
                loss = self._loss(Xt, yt, q, w, b)
                losses.append(float(loss.detach()))
                loss.backward()
                return loss

            optimizer.step(closure)
            n_iter = len(losses)
        else:
            params = [q, w, b]
            if self.solver == "adam":
                optimizer = torch.optim.Adam(params, lr=lr)
            else:
                optimizer = torch.optim.SGD(params, lr=lr)
            for t in range(steps):
                optimizer.zero_grad()
                loss = self._loss(Xt, yt, q, w, b)
                losses.append(float(loss.detach()))
                if not math.isfinite(losses[-1]):
                    break
                loss.backward()
                optimizer.step()
                if self.verbose and (t % max(1, steps // 10) == 0 or t == steps - 1):
                    print(f"{type(self).__name__}: step {t + 1}/{steps}, loss {losses[-1]:.6g}")
            n_iter = len(losses)
        return {
            "query_": q.detach().numpy().copy(),
            "readout_": w.detach().numpy().copy(),
            "intercept_": float(b.detach()[0]),
            "two_step_query_": two_step_query,
            "loss_curve_": np.array(losses, dtype=np.float64),
            "n_iter_": n_iter,
        }

    # -- prediction --------------------------------------------------------------------
    def decision_function(self, X):
        """The logit ``f(X)`` of each row: positive for ``classes_[1]``.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens, at any length.

        Returns
        -------
        ndarray of shape (n_samples,)
            The logits, as float64.
        """
        check_is_fitted(self)
        X = self.task_.check_rows(X, type(self).__name__)
        with torch.no_grad():
            out = attention_logits(
                as_tensor(X, _F64),
                torch.as_tensor(self.query_),
                torch.as_tensor(self.readout_),
                torch.tensor([self.intercept_], dtype=_F64),
            )
        return out.numpy().astype(np.float64)

    def predict_proba(self, X):
        """Probabilities of the two classes, ``[1 - sigmoid(f), sigmoid(f)]``.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens, at any length.

        Returns
        -------
        ndarray of shape (n_samples, 2)
            Columns in the order of ``classes_``; each row sums to 1.
        """
        f = self.decision_function(X)
        p = 1.0 / (1.0 + np.exp(-f))
        return np.stack([1.0 - p, p], axis=1)

    def predict_log_proba(self, X):
        """Logarithms of :meth:`predict_proba`, computed stably.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens, at any length.

        Returns
        -------
        ndarray of shape (n_samples, 2)
            The log of :meth:`predict_proba`: column ``j`` for ``classes_[j]``.
        """
        f = self.decision_function(X)
        return np.stack([-np.logaddexp(0.0, f), -np.logaddexp(0.0, -f)], axis=1)

    def predict(self, X):
        """The label of each row: ``classes_[1]`` where the logit is positive.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens, at any length.

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels of ``classes_``.
        """
        check_is_fitted(self)
        return self.classes_[(self.decision_function(X) > 0).astype(int)]

    def score(self, X, y, sample_weight=None):
        """Accuracy of :meth:`predict` on rows ``X`` with labels ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens, at any length.
        y : array-like of shape (n_samples,)
            True labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the rows.

        Returns
        -------
        float
            The fraction of rows labelled correctly (weighted).
        """
        return super().score(X, y, sample_weight=sample_weight)

    def attention(self, X):
        """The attention weights ``softmax_l(<x_l, q>)`` of each row over its tokens.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens, at any length.

        Returns
        -------
        ndarray of shape (n_samples, seq_len)
            Each row sums to 1.
        """
        check_is_fitted(self)
        X = self.task_.check_rows(X, type(self).__name__)
        with torch.no_grad():
            s = as_tensor(X, _F64) @ torch.as_tensor(self.query_)
            return torch.softmax(s, dim=1).numpy()

    # -- fitted state --------------------------------------------------------------------
    def get_fitted_state(self):
        """The fitted state as plain values and CPU tensors (what :func:`save_model` writes).

        Returns
        -------
        state : dict
            ``"fitted"``: sizes, classes, step count and curve (JSON types);
            ``"history"``: an empty list; ``"weights"``: ``query``,
            ``readout`` and ``intercept`` as float64 tensors.
        """
        check_is_fitted(self)
        fitted = {
            "n_features_in_": int(self.n_features_in_),
            "seq_len_": int(self.seq_len_),
            "n_iter_": int(self.n_iter_),
            "classes_": self.classes_.tolist(),
            "loss_curve_": [float(v) for v in self.loss_curve_],
            "two_step_query_": (
                None if self.two_step_query_ is None else [float(v) for v in self.two_step_query_]
            ),
        }
        weights = {
            "query": torch.tensor(self.query_, dtype=_F64),
            "readout": torch.tensor(self.readout_, dtype=_F64),
            "intercept": torch.tensor([self.intercept_], dtype=_F64),
        }
        return {"fitted": fitted, "history": [], "weights": weights}

    def set_fitted_state(self, state, *, device=None):
        """Make this estimator the fitted model described by ``state`` (:func:`load_model`).

        Parameters
        ----------
        state : dict
            As returned by :meth:`get_fitted_state`.
        device : str, torch.device or None, default=None
            None, ``"auto"`` or ``"cpu"``: the classifier computes on the CPU.

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        ValueError
            If a hyperparameter is invalid, ``device`` is not the CPU, or
            ``state`` is incomplete, ill-typed or inconsistent; nothing is
            assigned then.
        """
        try:
            self._validate_params()
        except (ValueError, TypeError) as exc:
            raise ValueError(f"invalid hyperparameter: {exc}") from None
        if device is not None and str(device) not in ("auto", "cpu"):
            raise ValueError(
                f"{type(self).__name__} computes in float64 on the CPU; device={device!r} "
                "cannot hold it. Load it with device=None or 'cpu'."
            )
        check_fitted_state(state, _FITTED_SCHEMA, known=())
        fitted = state["fitted"]
        check_sizes(fitted, ("n_features_in_",), state["weights"])
        n_iter, d, L = fitted["n_iter_"], fitted["n_features_in_"], fitted["seq_len_"]
        losses = np.array(fitted["loss_curve_"], dtype=np.float64)
        if losses.shape != (n_iter,) or not np.isfinite(losses).all():
            raise ValueError(f"fitted loss_curve_ must hold n_iter_={n_iter} finite numbers.")
        two = fitted["two_step_query_"]
        if two is not None:
            two = np.array(two, dtype=np.float64)
            if two.shape != (d,) or not np.isfinite(two).all():
                raise ValueError(
                    f"fitted two_step_query_ must be None or {d} finite numbers "
                    f"(n_features_in_={d})."
                )
        try:
            task = SparseTokenClassificationTask(L, d)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the fitted sizes are invalid: {exc}") from None
        expected = {
            "query": torch.empty(d, device="meta"),
            "readout": torch.empty(d, device="meta"),
            "intercept": torch.empty(1, device="meta"),
        }
        check_weights(state["weights"], expected, f"n_features_in_={d}", dtype=_F64)
        weights = {k: state["weights"][k].detach().numpy().copy() for k in _WEIGHTS}
        self.classes_ = np.asarray(fitted["classes_"])
        self.query_ = weights["query"]
        self.readout_ = weights["readout"]
        self.intercept_ = float(weights["intercept"][0])
        self.two_step_query_ = two
        self.loss_curve_ = losses
        self.n_iter_ = n_iter
        self.task_ = task
        self.n_features_in_ = d
        self.seq_len_ = L
        return self


def _is_classes(value):
    """Two distinct labels of one JSON type (int, float, str or bool), in sort order."""
    if not isinstance(value, list) or len(value) != 2:
        return False
    kinds = {type(v) for v in value}
    if len(kinds) != 1 or next(iter(kinds)) not in (int, float, str, bool):
        return False
    if isinstance(value[0], float) and not all(math.isfinite(v) for v in value):
        return False
    return value[0] < value[1]


_FITTED_SCHEMA = {
    "n_features_in_": size_check(1),
    "seq_len_": size_check(1),
    "n_iter_": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "classes_": (_is_classes, "two distinct labels of one type, sorted"),
    "loss_curve_": (_is_number_list, "a list of numbers"),
    "two_step_query_": (lambda v: v is None or _is_number_list(v), "None or a list of numbers"),
}
"""What ``get_fitted_state`` returns under ``"fitted"``: name -> (check, description)."""
