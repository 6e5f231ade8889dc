"""Several modules of one class as one: a leading member axis on every parameter and buffer.

The members of a batched fit (:mod:`stsq_learn.engine.members`) are S modules
of one class and settings, each made as its single fit makes it. They train
as one module of the same class whose every parameter and buffer has a
leading member axis S, with the same names (``key_query`` of shape
``(S, d + m, m')``, ``layers.0.weight`` of shape ``(S, out, in)``): the rows
of all members go through it as one batch of ``S * n`` rows, member-major
(member s's rows are the s-th block of n). Every row-wise operation is the
single module's own; only the products with parameters are grouped, by
:func:`linear` (a weight with a member axis multiplies each member's rows
by its own) and :class:`GroupedLinear` (``nn.Linear`` with a member axis).

:func:`stack` builds the stacked module from the members, and
:func:`member_weights` gives back member s's ``state_dict``
(``{name: tensor[s]}``), which its single module loads.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

__all__ = [
    "GroupedLinear",
    "forward_groups",
    "linear",
    "member_parts",
    "member_weights",
    "per_member",
    "stack",
]


def linear(x, weight):
    """``x @ weight.T``, each member's rows by its own weight when ``weight`` has a member axis.

    Each member's product is the single module's own expression on its
    block of rows (not one batched product), so that its result and the
    gradient it sends to the weight (a sum over the member's rows) are
    rounded as in its single fit: a member's float32 weights are its fit's
    to the bit, where a batched kernel would sum in another order and
    rounding, amplified by training, would move them by 1e-5.

    Parameters
    ----------
    x : Tensor of shape (N, ..., in)
        Rows; with a member axis, ``N = S * n`` rows, member-major.
    weight : Tensor of shape (out, in) or (S, out, in)
        One weight, or one per member.

    Returns
    -------
    Tensor of shape (N, ..., out)
        The product (the single module's expression when ``weight`` is 2-D).
    """
    if weight.dim() == 2:
        return x @ weight.T
    S = weight.shape[0]
    parts = zip(_rows_of(x, S), _members_of(weight))
    return torch.cat([x_s @ w_s.T for x_s, w_s in parts])


def per_member(function, x, *weights):
    """``function(x_s, *w_s)`` on each member's block of rows with its slices of ``weights``.

    The single module's own expression, member by member, for products
    that :func:`linear` does not express (an ``einsum`` over named axes, a
    weighted sum): each member's result and the gradient it sends to its
    weights are rounded as in its single fit (its block of rows and its
    weights start where their own tensors would, as in :func:`linear`).

    Parameters
    ----------
    function : callable
        ``function(x, *weights)`` of the single module: rows ``(n, ...)``
        and one member's weights to a tensor of n rows.
    x : Tensor of shape (S * n, ...)
        Every member's rows, member-major.
    *weights : Tensor of shape (S, ...)
        Parameters (or buffers) with a leading member axis S.

    Returns
    -------
    Tensor of shape (S * n, ...)
        The members' results, member-major.

    Examples
    --------
    >>> import torch
    >>> from stsq_learn.nn.members import per_member
    >>> q = torch.randn(3, 4, dtype=torch.float64)  # one query per member
    >>> X = torch.randn(3 * 5, 2, 4, dtype=torch.float64)
    >>> scores = per_member(lambda x, w: torch.einsum("nld,d->nl", x, w), X, q)
    >>> bool(torch.equal(scores[5:10], torch.einsum("nld,d->nl", X[5:10], q[1])))
    True
    """
    S = weights[0].shape[0]
    slices = [_members_of(w) for w in weights]
    parts = zip(_rows_of(x, S), *slices)
    return torch.cat([function(x_s, *w_s) for x_s, *w_s in parts])


def _rows_of(x, S):
    """The members' blocks of rows of ``x`` (member-major), each as its own tensor starts."""
    return _as_own(x, x.chunk(S), x.stride(0) * (x.shape[0] // S))


def _members_of(weight):
    """The members' slices of a stacked ``weight``, each as its own parameter starts."""
    return _as_own(weight, weight.unbind(0), weight.stride(0))


def _as_own(whole, parts, step):
    """``parts`` of ``whole``, ``step`` elements apart: as they are where that keeps every
    part at ``whole``'s 64-byte alignment (one check), else each by :func:`_as_alone`."""
    if (step * whole.element_size()) % 64 == 0:
        return parts
    return [_as_alone(part, whole) for part in parts]


def _as_alone(part, whole):
    """Member s's block ``part`` of ``whole``, starting where its own tensor would.

    A member's block of rows starts inside the batch, and its weight inside
    the stacked parameter, where the member's own fit reads them at the start
    of their own memory (as ``whole``'s first block starts). A BLAS kernel
    may take another path, and round otherwise, for a matrix that starts at
    another 64-byte alignment: such a block is copied, with its strides, to
    memory that starts at ``whole``'s alignment.
    """
    shift = (part.data_ptr() - whole.data_ptr()) % 64
    if shift == 0:
        return part
    size = part.element_size()
    span = 1 + sum((n - 1) * abs(st) for n, st in zip(part.shape, part.stride()))
    buffer = torch.empty(span + 64 // size, dtype=part.dtype, device=part.device)
    offset = ((whole.data_ptr() - buffer.data_ptr()) % 64) // size
    out = buffer.as_strided(part.shape, part.stride(), offset)
    return out.copy_(part)


class GroupedLinear(nn.Module):
    """``nn.Linear`` with a member axis: member s's rows through its own weight and bias.

    Parameters
    ----------
    in_features, out_features : int
        Sizes of a member's layer.
    n_members : int
        Members S.

    Attributes
    ----------
    weight : Parameter of shape (n_members, out_features, in_features)
    bias : Parameter of shape (n_members, out_features)
    """

    def __init__(self, in_features, out_features, n_members):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(n_members, out_features, in_features))
        self.bias = nn.Parameter(torch.empty(n_members, out_features))

    def forward(self, x):
        """Rows ``x`` (S * n, in_features), member-major, to (S * n, out_features).

        Each member's block goes through ``nn.functional.linear`` with its
        weight and bias, as in its single module (rounded as there).
        """
        W, b = self.weight, self.bias
        parts = zip(_rows_of(x, W.shape[0]), _members_of(W), b.unbind(0))
        return torch.cat([nn.functional.linear(x_s, w_s, b_s) for x_s, w_s, b_s in parts])


def stack(modules):
    """One module of the members' class whose every parameter and buffer stacks theirs.

    Parameters
    ----------
    modules : list of torch.nn.Module
        The members: modules of one class and architecture (each as its
        single fit makes it), on one device and dtype.

    Returns
    -------
    torch.nn.Module
        A copy of ``modules[0]`` whose parameter and buffer ``name`` is
        ``torch.stack([m.name for m in modules])`` (its ``nn.Linear``
        layers :class:`GroupedLinear`), with ``n_members`` set to S.
    """
    first, S = modules[0], len(modules)
    stacked = copy.deepcopy(first)
    for name, layer in list(stacked.named_modules()):
        if isinstance(layer, nn.Linear):
            grouped = GroupedLinear(layer.in_features, layer.out_features, S)
            parent, _, leaf = name.rpartition(".")
            setattr(stacked.get_submodule(parent), leaf, grouped)
    with torch.no_grad():
        for name, _ in first.named_parameters():
            parent, _, leaf = name.rpartition(".")
            value = torch.stack([m.get_parameter(name).detach() for m in modules])
            setattr(stacked.get_submodule(parent), leaf, nn.Parameter(value))
        for name, _ in first.named_buffers():
            parent, _, leaf = name.rpartition(".")
            value = torch.stack([m.get_buffer(name) for m in modules])
            stacked.get_submodule(parent).register_buffer(leaf, value)
    stacked.n_members = S
    return stacked


def member_weights(stacked, member):
    """Member ``member``'s ``state_dict``: every tensor of ``stacked``'s at that index.

    Parameters
    ----------
    stacked : torch.nn.Module
        A module made by :func:`stack`.
    member : int
        The member.

    Returns
    -------
    dict of str to Tensor
        What the member's single module loads (copies, detached).
    """
    return {name: t[member].detach().clone() for name, t in stacked.state_dict().items()}


def member_parts(rows, n_members):
    """The S members' parts of a batch's rows (member-major), or of a list of them.

    Parameters
    ----------
    rows : Tensor of shape (S * n, ...) or list of S tensors
        Rows of all members (a list where their shapes differ).
    n_members : int
        Members S.

    Returns
    -------
    list of Tensor
        Member s's rows at index s (``rows`` itself for one member).
    """
    if isinstance(rows, (list, tuple)):
        return list(rows)
    return [rows] if n_members == 1 else list(rows.chunk(n_members))


def forward_groups(module, batches, generator, **kwargs):
    """A stacked module's forward on members whose batches differ in shape (a range of lengths).

    The members with batches of one shape go through ``module``'s own
    forward together, with their slices of its parameters and buffers and
    their draws (``generator.members``): every member gets what its single
    fit computes.

    Parameters
    ----------
    module : torch.nn.Module
        A module made by :func:`stack`.
    batches : list of Tensor
        Member s's rows at index s.
    generator : StreamedDraws
        The members' draws (one generator each).
    **kwargs
        The forward's other arguments.

    Returns
    -------
    list of Tensor
        Member s's output at index s.
    """
    groups = {}
    for s, X in enumerate(batches):
        groups.setdefault(tuple(X.shape[1:]), []).append(s)
    tensors = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    outputs = [None] * len(batches)
    for index in groups.values():
        sub = {name: t[index] for name, t in tensors.items()}
        X = torch.cat([batches[s] for s in index])
        draws = generator.members(index)
        out = torch.func.functional_call(module, sub, (X,), {"generator": draws, **kwargs})
        for s, part in zip(index, member_parts(out, len(index))):
            outputs[s] = part
    return outputs
