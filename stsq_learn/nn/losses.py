"""The training losses: the criteria of the owned skorch nets, one per kind of target.

Each is a module whose ``forward`` is the mean, over a batch's output
units, of :meth:`losses`: the loss of every unit. The engine measures the
starting model with :meth:`losses` too (its probe), so the loss it judges a
run by is the criterion's.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["LogisticLoss", "SequenceCrossEntropy", "SquaredError"]


class _Loss(nn.Module):
    """A criterion: the mean of :meth:`losses` over a batch, or the members' sum of means.

    Parameters
    ----------
    n_members : int or None, default=None
        For the S members of a batched fit (rows member-major, or a list of
        each member's rows): the loss is the sum of the members' means, so
        that each member's gradient is its own fit's; the members' losses
        are kept as ``member_losses_``.
    """

    def __init__(self, n_members=None):
        super().__init__()
        self.n_members = n_members

    def forward(self, y_pred, y_true):
        """Return the loss of a batch.

        Parameters
        ----------
        y_pred : Tensor
            Predictions (members: a list of each member's, where their
            shapes differ).
        y_true : Tensor
            Targets, as :meth:`losses` reads them.

        Returns
        -------
        Tensor of shape ()
            The mean of :meth:`losses` over the batch; with members, the
            sum of every member's mean.
        """
        if self.n_members is None:
            return self.losses(y_pred, y_true).mean()
        if isinstance(y_pred, list):
            losses = torch.stack([self.losses(p, t).mean() for p, t in zip(y_pred, y_true)])
        else:
            losses = self._member_means(y_pred, y_true)
        self.member_losses_ = losses.detach()
        return losses.sum()

    def _member_means(self, y_pred, y_true):
        """Each member's mean loss as its fit takes it (one reduction of its rows' losses)."""
        rows = self.losses(y_pred, y_true).chunk(self.n_members)
        return torch.stack([part.mean() for part in rows])


class SquaredError(_Loss):
    """Mean over output rows of the squared Euclidean error ``||y_hat - y||^2``.

    Parameters
    ----------
    n_members : int or None, default=None
        The members of a batched fit (see :class:`_Loss`).
    """

    @staticmethod
    def losses(y_pred, y_true):
        """The squared error of every output row.

        Parameters
        ----------
        y_pred : Tensor of shape (n, ..., n_outputs) or (n,)
            Predictions.
        y_true : Tensor of the same shape
            Targets.

        Returns
        -------
        Tensor of shape (n_rows,)
            ``||y_pred[i] - y_true[i]||^2`` per output row (a 1-D target, one
            number per row: its squared error).
        """
        err = (y_pred - y_true).square()
        return (err.sum(-1) if err.dim() > 1 else err).reshape(-1)


class LogisticLoss(_Loss):
    """Mean logistic loss (cross-entropy) of logits against class indices.

    One logit per row (binary): ``log(1 + exp(-s f))`` with ``s = 2y - 1``,
    torch's binary cross-entropy with logits. Several (one per class):
    ``-log softmax(f)_y``, the softmax cross-entropy. Its value at logits 0 is
    ``log(n_classes)``: the loss of a model that has learned nothing.

    Parameters
    ----------
    n_members : int or None, default=None
        The members of a batched fit (see :class:`_Loss`).
    """

    def _member_means(self, y_pred, y_true):
        """Each member's mean loss, its rows' losses computed on its block alone.

        Torch's vectorised exponential may round otherwise than its scalar
        one, and which a row's loss takes depends on its place in the
        tensor: computed on the member's block, each row's loss is its fit's.
        """
        parts = zip(y_pred.chunk(self.n_members), y_true.chunk(self.n_members))
        return torch.stack([self.losses(p, t).mean() for p, t in parts])

    @staticmethod
    def losses(y_pred, y_true):
        """The loss of every row.

        Parameters
        ----------
        y_pred : Tensor of shape (n,) or (n, n_classes)
            Logits: one per row (binary), or one per class.
        y_true : Tensor of shape (n,) or (n, 1)
            Class indices (0 or 1 for one logit), as floats or integers.

        Returns
        -------
        Tensor of shape (n,)
            The loss of each row.
        """
        y_true = y_true.reshape(len(y_pred))
        if y_pred.dim() == 1:
            return nn.functional.binary_cross_entropy_with_logits(
                y_pred, y_true.to(y_pred.dtype), reduction="none"
            )
        return nn.functional.cross_entropy(y_pred, y_true.to(torch.long), reduction="none")


class SequenceCrossEntropy(_Loss):
    """Mean cross-entropy over the tokens of written strings, each string then its end.

    The loss of the sequence-to-sequence models: logits over ``C`` classes
    (the symbols, then the end, ``C - 1``) at each of a row's ``T + 1``
    answer positions, against the row's string ``y_1 .. y_m`` (``-1`` after
    it) and its end at position ``m``; the positions after the end are not
    counted. Its value at logits 0 is ``log(C)``.

    Parameters
    ----------
    n_members : int or None, default=None
        The members of a batched fit (see :class:`_Loss`); their strings
        must then have as many tokens in all.
    """

    @staticmethod
    def losses(y_pred, y_true):
        """The loss of every written token (the end included).

        Parameters
        ----------
        y_pred : Tensor of shape (n, T + 1, C)
            Logits of each answer position.
        y_true : Tensor of shape (n, T)
            The strings: class indices (as floats or integers), ``-1`` after each one's end.

        Returns
        -------
        Tensor of shape (n_tokens,)
            The cross-entropy of each counted position, row by row.
        """
        y = y_true.reshape(len(y_pred), -1).long()
        n = len(y)
        end = y_pred.shape[-1] - 1
        target = torch.cat([y, y.new_full((n, 1), -1)], 1)
        target[torch.arange(n, device=y.device), (y >= 0).sum(1)] = end
        counted = target >= 0
        return nn.functional.cross_entropy(y_pred[counted], target[counted], reduction="none")
