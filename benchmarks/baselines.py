"""What a user would run instead of the package: the peers of the comparisons.

* :func:`plain_loop_fit` / :func:`plain_loop_online`: the model written the
  short way a researcher writes it in plain PyTorch: a ``(width, width)``
  matrix W, every encoding of every row drawn at every step, ``einsum`` for
  the products, Adam. It is the like-for-like yardstick of
  ``SparseTokenSelector(learn_token_block=False).fit`` and ``fit_online``
  (the package's model with the token rows of W held at 0 is this model).
* :func:`skorch_fit`: skorch used directly, the way its documentation
  teaches: a ``NeuralNetRegressor`` over the package's torch module
  (``stsq_learn.nn.AttentionSelector``, the paper's full W), skorch's default
  loss and its standard ``DataLoader`` over the same NumPy rows.
* :func:`mlp_fit`: scikit-learn's ``MLPRegressor`` on the flattened rows,
  the peer of ``FCNSelector``.
* :func:`plain_lsa_online`: the linear self-attention layer of in-context
  regression written the short way (the value scalar and the key-query
  block, fresh prompts drawn at every step, ``einsum``, Adam with the same
  schedule), the yardstick of ``LinearAttentionRegressor.fit_online``.

Every function returns the fitted thing and the seconds its training took,
measured around the whole call a user would make (data conversion included).
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F

PLAIN_LOOP = "plain torch loop"
SKORCH = "skorch"
MLP = "MLPRegressor"


# -- the plain PyTorch loop ----------------------------------------------------
def _encodings(n, T, m, g):
    """Positional encodings uniform on the unit sphere, one per row and position."""
    return F.normalize(torch.randn(n, T, m, generator=g), dim=-1)


def plain_forward(W, tokens, mask, P):
    """Softmax attention with W = W_pp: scores ``p_t^T W s``, ``s`` the selected encodings' sum."""
    s = torch.einsum("nt,ntm->nm", mask, P)
    scores = torch.einsum("ntm,nm->nt", P, s @ W.T)
    return torch.einsum("nt,ntd->nd", scores.softmax(-1), tokens)


def _draw_batch(n, T, d, q, g):
    """A fresh batch of the task: Gaussian tokens, q random positions, their mean."""
    tokens = torch.randn(n, T, d, generator=g)
    chosen = torch.rand(n, T, generator=g).argsort(dim=1)[:, :q]
    mask = torch.zeros(n, T).scatter_(1, chosen, 1.0)
    y = torch.einsum("nt,ntd->nd", mask, tokens) / q
    return tokens, mask, y


def plain_loop_fit(X, y, *, width, batch_size, epochs, lr, seed):
    """Train on fixed rows for ``epochs`` epochs of shuffled minibatches.

    Returns ``(W, seconds)``.
    """
    t0 = time.perf_counter()
    g = torch.Generator().manual_seed(seed)
    X = torch.as_tensor(X, dtype=torch.float32)
    tokens, mask = X[..., :-1], X[..., -1]
    y = torch.as_tensor(y, dtype=torch.float32)
    n, T, _ = tokens.shape
    W = torch.zeros(width, width, requires_grad=True)
    opt = torch.optim.Adam([W], lr=lr)
    for _ in range(epochs):
        perm = torch.randperm(n, generator=g)
        for i in range(0, n, batch_size):
            b = perm[i : i + batch_size]
            P = _encodings(len(b), T, width, g)
            loss = (plain_forward(W, tokens[b], mask[b], P) - y[b]).pow(2).sum(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return W.detach(), time.perf_counter() - t0


def plain_loop_online(*, seq_len, n_features, n_selected, width, batch_size, n_steps, lr, seed):
    """Train on a fresh batch at every step for ``n_steps`` steps. Returns ``(W, seconds)``."""
    t0 = time.perf_counter()
    g = torch.Generator().manual_seed(seed)
    W = torch.zeros(width, width, requires_grad=True)
    opt = torch.optim.Adam([W], lr=lr)
    for _ in range(n_steps):
        tokens, mask, y = _draw_batch(batch_size, seq_len, n_features, n_selected, g)
        P = _encodings(batch_size, seq_len, width, g)
        loss = (plain_forward(W, tokens, mask, P) - y).pow(2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return W.detach(), time.perf_counter() - t0


@torch.no_grad()
def plain_predict(W, X, seed=0, chunk=1024):
    """Predictions of the plain loop's W on NumPy rows (one encoding draw per row)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.as_tensor(X, dtype=torch.float32)
    out = []
    for i in range(0, len(X), chunk):
        tokens, mask = X[i : i + chunk, :, :-1], X[i : i + chunk, :, -1]
        P = _encodings(len(tokens), tokens.shape[1], W.shape[0], g)
        out.append(plain_forward(W, tokens, mask, P))
    return torch.cat(out).numpy().astype(np.float64)


# -- skorch, used directly -----------------------------------------------------
def skorch_fit(X, y, *, width, batch_size, epochs, lr, seed):
    """``NeuralNetRegressor(AttentionSelector)`` fitted on the rows. Returns ``(net, seconds)``.

    The set-up of skorch's documentation: the module class and its arguments,
    an optimizer and a rate, ``max_epochs`` and ``batch_size``, the default
    ``MSELoss`` and ``DataLoader`` (rows collated one by one, shuffled);
    ``train_split=None`` so that it trains on all the rows, as the others do.
    """
    from skorch import NeuralNetRegressor

    from stsq_learn.nn import AttentionSelector

    t0 = time.perf_counter()
    torch.manual_seed(seed)  # the module draws its encodings from torch's global generator
    net = NeuralNetRegressor(
        AttentionSelector,
        module__n_features=X.shape[2] - 1,
        module__width=width,
        optimizer=torch.optim.Adam,
        lr=lr,
        max_epochs=epochs,
        batch_size=batch_size,
        iterator_train__shuffle=True,
        train_split=None,
        verbose=0,
    )
    net.fit(X.astype(np.float32), y.astype(np.float32))
    return net, time.perf_counter() - t0


def skorch_predict(net, X, seed=0):
    """``net.predict`` on the rows (one encoding draw per row, from a seeded global generator)."""
    torch.manual_seed(seed)
    return net.predict(X.astype(np.float32)).astype(np.float64)


# -- scikit-learn's MLPRegressor -------------------------------------------------
def mlp_fit(X, y, *, width, epochs, lr, batch_size, seed):
    """``MLPRegressor`` with one hidden layer of ``width`` on the flattened rows.

    Adam, no L2 penalty and every epoch run (``n_iter_no_change=epochs``,
    ``tol=0``), as ``FCNSelector`` is configured in the comparison. Returns
    ``(model, seconds)``.
    """
    from sklearn.neural_network import MLPRegressor

    t0 = time.perf_counter()
    model = MLPRegressor(
        hidden_layer_sizes=(width,),
        solver="adam",
        alpha=0.0,
        learning_rate_init=lr,
        batch_size=batch_size,
        max_iter=epochs,
        n_iter_no_change=epochs,
        tol=0.0,
        random_state=seed,
    )
    model.fit(X.reshape(len(X), -1), y)
    return model, time.perf_counter() - t0


# -- in-context regression: the linear self-attention layer, the plain way ----------------
def plain_lsa_forward(u, U, x, labels, xq):
    """``u x_q^T U^T h`` with ``h = (1/N) sum_i y_i x_i``: the layer, from the prompt's parts."""
    h = torch.einsum("nm,nmd->nd", labels, x) / x.shape[1]
    return u[0] * torch.einsum("ne,ed,nd->n", h, U, xq)


def plain_lsa_online(*, n_examples, n_features, batch_size, n_steps, lr, init_scale, seed, target):
    """Train ``y_hat = u x_q^T U^T (1/N) sum_i y_i x_i`` on fresh prompts (``w``, ``x`` standard).

    The paper's initialisation (``u = s``, ``U = s T T^T / ||T T^T||_F``),
    Adam at ``lr``, constant for four fifths of the steps then linearly to 0
    (the package's ``"cooldown"``), the mean squared error against the
    query's label. After every step the relative Frobenius distance of
    ``u U^T`` to ``target`` is taken, and the time since the call began.

    Returns
    -------
    dict
        ``A`` (the final ``u U^T``), ``seconds`` (the whole call),
        ``errors`` and ``times`` (after each step).
    """
    t0 = time.perf_counter()
    d, m = n_features, n_examples
    g = torch.Generator().manual_seed(seed)
    theta = torch.randn(d, d, generator=g)
    block = theta @ theta.T
    U = (init_scale * block / block.norm()).requires_grad_()
    u = torch.tensor([init_scale], requires_grad=True)
    opt = torch.optim.Adam([u, U], lr=lr)
    cool = 0.8 * n_steps
    norm = float(np.linalg.norm(target))
    errors, times = [], []
    for step in range(n_steps):
        for group in opt.param_groups:
            group["lr"] = lr * (1.0 if step < cool else (n_steps - step) / (n_steps - cool))
        w = torch.randn(batch_size, d, generator=g)
        x = torch.randn(batch_size, m, d, generator=g)
        xq = torch.randn(batch_size, d, generator=g)
        labels = torch.einsum("nmd,nd->nm", x, w)
        loss = (plain_lsa_forward(u, U, x, labels, xq) - (xq * w).sum(1)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        A = (u[0] * U.T).detach().numpy()
        errors.append(float(np.linalg.norm(A - target)) / norm)
        times.append(time.perf_counter() - t0)
    return {"A": A, "seconds": time.perf_counter() - t0, "errors": errors, "times": times}
