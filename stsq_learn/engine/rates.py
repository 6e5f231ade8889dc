"""Step sizes that follow the width: what ``solver="auto"`` and ``"auto"`` rates resolve to.

The derivation (the user guide's "Step sizes that follow the width" has it
at more length; this is the short form the code follows). Training with
stochastic encodings drives the positional block ``W_pp`` of W towards
``gamma I``. Write ``L`` for the loss (mean ``||y_hat - y||^2``, whose scale
is the error of predicting 0, ``d / q``).

1. *The useful direction.* Along ``W_pp = gamma I`` plain gradient descent
   at rate ``eta`` moves gamma by ``-eta <grad, I> / <I, I> = -(eta / m)
   dL/dgamma``: it is gradient descent on ``L(gamma)`` at rate ``eta / m``,
   and ``dL/dgamma`` does not grow with m. So ``eta = c m / L0``, with
   ``L0`` the loss of predicting 0 (``d / q``; dividing by it puts the loss
   on the relative-MSE scale), gives gamma the same dynamics at every
   width: ``c`` is the gamma-rate of a step.
2. *The other directions.* ``W_pp`` has ``m^2 - 1`` more, whose expected
   gradient is 0 at ``gamma I``; their minibatch noise moves the scores by
   a width-independent amount per step at a given ``c``, and their restoring
   force is weak, so it accumulates like the sum of ``c^2`` over the steps.
   The floor itself falls with the width, so at large widths this noise
   decides how close to the floor a run ends: their gamma-rate is held at
   most ``_NOISE_BUDGET / sqrt(m)`` (the noise's cost relative to the floor,
   measured, grows about like ``sqrt(m)``).
3. *Two rates.* Gamma is one direction, and the noise of a step along it is
   an average over the ``m`` diagonal entries: it can move at the largest
   gamma-rate, ``c_gamma = _MAX_GAMMA_RATE``, at every width. The step's
   component along the identity, ``tr(delta W_pp) / m`` times I, is
   therefore ``identity_rate = c_gamma / c`` times that of the other
   directions (:class:`IdentityRate`, a preconditioner: gradient descent
   keeps its fixed points). A run must travel a gamma-distance,
   ``_GAMMA_TRAVEL`` (the sum of ``c_gamma`` over its steps), so the plan is
   ``_GAMMA_TRAVEL / _MAX_GAMMA_RATE`` steps at every width. With one rate
   for all directions, the noise bound set the steps (``_GAMMA_TRAVEL /
   c``, 4800 at width 1024) and gamma still ended short of its best value;
   with two, the run is 5 times shorter at width 1024 and ends closer to
   the floor. The schedule is ``"cooldown"``: a constant rate, which covers
   the distance with the least accumulated noise, then a linear decay over
   the last fifth, which lets the noise that does relax settle.
4. *Adam.* Adam divides each entry's gradient by its own scale, so every
   entry of W moves by about the step size whatever its gradient: the
   ``m^2`` noise directions random-walk as fast as the useful one, and the
   noise in the scores grows with m. The width-following default is
   therefore plain gradient descent (``solver="auto"`` is ``"sgd"``).
5. *The token rows.* ``W_xp`` acts on the scores through ``x_t^T W_xp s``;
   ``x_t`` is a Gaussian token, not a unit vector nearly orthogonal to every
   direction of ``W``, so a direction of ``W_xp`` moves the scores ``m``
   times more than one of ``W_pp`` (curvature ``q / m`` against
   ``q / m^2``). Its stable rate is ``1 / m`` that of ``W_pp``: the token
   block's step is ``learning_rate_init / m`` (``token_block_rate="auto"``),
   with ``learning_rate_init`` the rate ``c m / L0`` of the noisy directions.
   Its expected gradient is 0 and the theory sends it to 0; at the positional
   rate it overshoots and training diverges at large width.

6. *Heads.* With H heads each head answers for a share of the loss: where
   the output is one average, the readout starts at the heads' mean, so a
   head's gradient is ``1 / H`` of a single head's; in q-sparse token
   retrieval each head retrieves one role, whose loss of predicting 0 is
   ``L0 / q``. Either way gamma of a head moves as one head's does at
   ``eta = c m H / L0`` (``L0 / H`` in place of ``L0`` in item 1). Along a
   query of several slots (retrieval), each slot's m x m positional block
   has its own identity direction, and :class:`IdentityRate` paces every
   block's trace. The readout is a least-squares map from the heads'
   outputs, whose curvature (about 2 per direction once each head returns
   a token) does not follow the width: it steps at :data:`READOUT_RATE`
   in plain SGD (:class:`ReadoutRate`). Measured on retrieval (T=16, d=4,
   width 64, 4000 rows, the planned 960 steps): relative MSE 0.005 at
   H = q = 2 and 0.006 at H = q = 3, against 0.006 and 0.008 for Adam.

7. *The fully-connected baseline* (Adam, its default solver). Adam moves
   every weight by about its step whatever the gradient's scale; a hidden
   unit reads ``n_inputs`` numbers, so its input moves by about the step
   times ``n_inputs``: the step falls like ``1 / n_inputs``, the first
   layer's fan-in (as in muP's rule for Adam), and, measured, like
   ``1 / sqrt(width)`` and like ``1 / sqrt(n_outputs)`` above 8 outputs
   (q-sparse averaging's ``N d``). A longer plan takes a larger step,
   ``(planned_steps / 600) ** 0.3``, whose noise the cooldown settles; the
   step is at most :data:`FCN_MAX_RATE`. ``fit``'s epochs over finite data
   end when the loss stalls, not at a plan: there the step is that of 600
   steps, divided by 5 each time the epoch loss stalls (``"adaptive"``).
   :data:`FCN_ADAM_SCALE` was chosen by a sweep (the benchmark entry
   ``baseline_defaults``: every FCN on its task, d = 4, q = 2, at T = 8, 16,
   32 and 300, 600, 2000 online steps).

The three constants were measured at T=16 and 64 (q=3 and 4, d=8, 8000
rows, batches of 200) at widths 64 to 1024 and are the same for every case:
the width and ``L0`` carry all the dependence. The two rates were measured
at T=16, 64 and 256, widths 64 to 1024: at width 1024 the run ends 1.05,
1.01 and 1.04 times the floor, where one rate for all directions ended
1.09, 1.07 and 1.08 times it after 4800 steps.
"""

from __future__ import annotations

import math

import torch
from skorch.callbacks import Callback

__all__ = [
    "BlockRate",
    "Cooldown",
    "IdentityRate",
    "ReadoutRate",
    "auto_steps",
    "fcn_adam_rate",
    "noise_rate",
    "sgd_rates",
]

_GAMMA_TRAVEL = 120.0
"""Sum over the planned steps of the gamma-rate ``c_gamma`` (the cooldown covers 0.9 of it)."""
_MAX_GAMMA_RATE = 1.0 / 8
"""Largest gamma-rate: beyond it the steps along gamma itself become noisy."""
_NOISE_BUDGET = 0.8
"""``c * sqrt(m)`` at most: the noise of the ``m^2 - 1`` other directions of W_pp."""
ADAM_RATE = 0.01
"""``learning_rate_init="auto"`` with ``solver="adam"``: 0.3's default, width-blind."""
READOUT_RATE = 0.1
"""Plain-SGD step of the heads' linear readout (item 6): its curvature is that of a least-
squares fit on the heads' outputs, about 2 per direction, whatever the width."""


FCN_ADAM_SCALE = 1.2
"""Adam's step of the fully-connected baseline times its first layer's fan-in (item 7)."""
FCN_REFERENCE_STEPS = 600
"""The plan of the ``"auto"`` step in ``fit``, whose epochs end when the loss stalls."""
FCN_MAX_RATE = 0.05
"""The largest ``"auto"`` step of the fully-connected baseline: Adam overshot above it."""
FCN_SGD_RATE = 0.001
"""``learning_rate_init="auto"`` of the fully-connected baseline with plain SGD: 0.6's step."""


def fcn_adam_rate(width, n_inputs, n_outputs, planned_steps):
    """Adam's ``"auto"`` step of the fully-connected baseline (item 7).

    ``FCN_ADAM_SCALE / n_inputs * sqrt(256 / width) * sqrt(min(1, 8 / n_outputs))
    * (planned_steps / 600) ** 0.3``, at most ``FCN_MAX_RATE``, run with the
    ``"cooldown"`` schedule.
    """
    rate = (
        FCN_ADAM_SCALE
        / n_inputs
        * math.sqrt(256 / width)
        * math.sqrt(min(1.0, 8 / n_outputs))
        * (planned_steps / FCN_REFERENCE_STEPS) ** 0.3
    )
    return min(rate, FCN_MAX_RATE)


def noise_rate(width):
    """The largest gamma-rate ``c`` of the directions of W_pp other than the identity (item 2)."""
    return min(_MAX_GAMMA_RATE, _NOISE_BUDGET / math.sqrt(width))


def auto_steps():
    """Optimiser steps of the planned run: ``_GAMMA_TRAVEL / _MAX_GAMMA_RATE``, at every width."""
    return math.ceil(_GAMMA_TRAVEL / _MAX_GAMMA_RATE - 1e-9)


def sgd_rates(width, zero_loss, planned_steps):
    """``(eta, identity_rate)`` of a plain-SGD run of ``planned_steps`` steps (item 3).

    ``eta = c m / L0`` is the rate of W_pp (``L0``, the training loss of
    predicting 0, is ``d / q`` for Gaussian tokens: dividing by it puts the
    loss on the relative-MSE scale); the step's component along the identity
    moves ``identity_rate`` times as far, at the gamma-rate ``c_gamma``.

    ``c_gamma = _GAMMA_TRAVEL / planned_steps`` travels the gamma-distance in
    the planned steps, at most ``_MAX_GAMMA_RATE``, and the other directions
    take ``c = min(c_gamma, noise_rate(width))``: the :func:`auto_steps`
    plan moves gamma at ``_MAX_GAMMA_RATE`` and the rest at the width's
    :func:`noise_rate`; a plan long enough for ``c_gamma`` to fall below
    that is plain SGD (``identity_rate`` 1).
    """
    c_gamma = min(_MAX_GAMMA_RATE, _GAMMA_TRAVEL / planned_steps)
    c = min(c_gamma, noise_rate(width))
    return c * width / zero_loss, c_gamma / c


class Cooldown:
    """Factor of ``"cooldown"`` at step k: 1, then linear to 0 over the last ``fraction``."""

    def __init__(self, n_steps, fraction=0.2):
        self.n_steps = n_steps
        self.start = n_steps * (1 - fraction)

    def __call__(self, step):
        if step < self.start:
            return 1.0
        return max(0.0, (self.n_steps - step) / (self.n_steps - self.start))


class _StepPace(Callback):
    """Rescale one part of every optimiser step: record it before the step, pace it after.

    Subclasses give :meth:`_before` (what to record, or None to leave this
    step alone) and :meth:`_pace` (scale the part's change by ``rate``).
    Working on the step itself, after the optimiser, makes a per-part step
    size for any optimiser (SGD with or without momentum, Adam, weight decay).
    """

    def __init__(self, rate):
        self.rate = rate

    def initialize(self):
        self.before_ = None
        return self

    def on_grad_computed(self, net, named_parameters, training=False, **kwargs):
        if training:
            self.before_ = self._before(net.module_)

    def on_batch_end(self, net, training=False, **kwargs):
        if not training or self.before_ is None:
            return
        with torch.no_grad():
            self._pace(net.module_, self.before_)
        self.before_ = None


class BlockRate(_StepPace):
    """Pace W's token rows at ``rate`` times the step of the rest of the module.

    After every optimiser step the change of the token rows (the first
    ``module.n_features`` rows of every head's ``key_query``) is scaled by
    ``rate``, which is a per-block step size for any optimiser (SGD with or
    without momentum, Adam, weight decay included). The rows are copied
    before the step, in ``on_grad_computed``: ``n_features * width`` numbers
    a head.
    """

    def _before(self, module):
        if module.learn_token_block:
            return module.key_query.detach()[..., : module.n_features, :].clone()
        return None

    def _pace(self, module, before):
        rows = module.key_query[..., : module.n_features, :]
        rows.sub_(before).mul_(self.rate).add_(before)


class ReadoutRate(_StepPace):
    """Pace the heads' linear readout at ``rate`` times the step of the rest of the module.

    The readout (several heads, or a task whose output is not one average) is
    a least-squares map from the heads' outputs, whose stable step does not
    follow the width: :data:`READOUT_RATE` in plain SGD, a ``rate`` of
    ``READOUT_RATE / learning_rate_init``.
    """

    def _before(self, module):
        return None if module.readout is None else module.readout.detach().clone()

    def _pace(self, module, before):
        module.readout.sub_(before).mul_(self.rate).add_(before)


class IdentityRate(_StepPace):
    """Move W_pp along the identity at ``rate`` times the step of the rest of the module.

    After every optimiser step, the step's component along the identity of
    the positional block (the rows after the first ``module.n_features`` of
    ``key_query``), ``tr(delta W_pp) / m`` times I, is scaled by ``rate``: a
    step size of its own for gamma, for any optimiser. With several heads,
    or a query of several slots, every head's and slot's m x m block is
    paced along its own identity (and every member's, for the stacked
    members of a batched fit). The traces are recorded before the step, in
    ``on_grad_computed``: one number a block.
    """

    def _before(self, module):
        return _block_traces(module.key_query.detach(), module.n_features)

    def _pace(self, module, before):
        W, d = module.key_query, module.n_features
        if W.dim() == 2 and W.shape[1] == W.shape[0] - d:  # one head, one slot: its W_pp
            diagonal = W[d:].diagonal()
            change = (diagonal.sum() - before) / diagonal.numel()
            diagonal.add_((self.rate - 1.0) * change)
            return
        diagonals = _block_diagonals(W, d)  # (H, S, m), a view
        change = (diagonals.sum(-1) - before) / diagonals.shape[-1]
        diagonals.add_((self.rate - 1.0) * change.unsqueeze(-1))


def _block_diagonals(W, d):
    """The diagonals of every head's and slot's m x m positional block: a view (H, S, m).

    The members of a batched fit (a leading member axis: one 3-D W of one
    head each, or a 4-D W of several) pace every member's blocks: their
    heads come member after member.
    """
    heads = W.flatten(0, 1) if W.dim() == 4 else W if W.dim() == 3 else W.unsqueeze(0)
    rows, cols = heads.shape[1:]
    m = rows - d
    blocks = heads[:, d:].unflatten(2, (cols // m, m))  # (H, m, S, m)
    return blocks.diagonal(dim1=1, dim2=3)


def _block_traces(W, d):
    """Trace of W_pp (one head, one slot), else the traces of every (head, slot) block."""
    if W.dim() == 2 and W.shape[1] == W.shape[0] - d:
        return W[d:].trace()
    return _block_diagonals(W, d).sum(-1)
