"""
Training dynamics: W aligns with the identity
=============================================

The paper's analysis of gradient descent: starting from W = 0, the positional
block of the key-query matrix turns into a multiple of the identity,
``W_pp -> gamma * I``, with gamma growing, while the token block stays near
zero. Then a selected token, whose encoding ``p_t`` is one of the summands of
the query ``sum_{s in S} p_s``, scores ``gamma * (1 + noise)``, and an
unselected one scores ``gamma * noise``: the softmax concentrates on the
selection.

This example runs the paper's regime by hand on the torch modules of
:mod:`stsq_learn.nn`: plain gradient descent on a fresh batch of 256 rows at
every step, every block of W at the same step, tracking ``cos(W_pp, I)``
and ``gamma`` with :func:`~stsq_learn.nn.positional_alignment`. The width,
the step size 0.5 and the 600 steps are ours. (The estimator does the same
with ``SparseTokenSelector(width, solver="sgd", learning_rate_init=0.5,
learning_rate="constant", token_block_rate=1.0).fit_online(task, n_steps=600)``;
its default ``token_block_rate="auto"`` steps the token rows at ``1 / width``
of the step, a preconditioning of ours.)
"""

# %%
import matplotlib.pyplot as plt
import torch
from stsq_learn import SparseTokenSelectionTask
from stsq_learn.nn import AttentionSelector, SquaredError, positional_alignment

task = SparseTokenSelectionTask(seq_len=16, n_features=8, n_selected=3)
width = 32
model = AttentionSelector(
    task.n_features, width, positional_encoding="stochastic"
)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
loss_fn = SquaredError()
generator = torch.Generator().manual_seed(0)

history = {"step": [], "loss": [], "cos": [], "gamma": [], "token_norm": []}
for step in range(601):
    X, y = task.sample_torch(256, generator=generator)
    loss = loss_fn(model(X, generator=generator), y)
    if step % 5 == 0:
        stats = positional_alignment(
            model.key_query.detach().numpy(), task.n_features
        )
        history["step"].append(step)
        history["loss"].append(loss.item() / task.trivial_mse)  # relative MSE
        for key, value in stats.items():
            history[key].append(value)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

print(
    f"after {step} steps: relative MSE {history['loss'][-1]:.3f}, "
    f"cos(W_pp, I) {history['cos'][-1]:.4f}, gamma {history['gamma'][-1]:.2f}, "
    f"||W_xp|| {history['token_norm'][-1]:.2f}"
)

# %%
# Loss, alignment and scale along training, and the learned W itself: its
# lower, positional block is a bright diagonal; its top ``d = 8`` rows, the
# token block, stay pale.
W = model.key_query.detach().numpy()
fig, axes = plt.subplot_mosaic(
    [["loss", "W"], ["align", "W"]], figsize=(10, 6.5), layout="constrained"
)
axes = [axes["loss"], axes["align"], axes["W"]]
axes[0].plot(history["step"], history["loss"])
axes[0].set(
    xlabel="step", ylabel="relative MSE (batch)", title="Loss", yscale="log"
)

axes[1].plot(history["step"], history["cos"], label=r"$\cos(W_{pp}, I)$")
axes[1].set(
    xlabel="step", ylabel="cosine", title="Alignment and scale", ylim=(0, 1.05)
)
twin = axes[1].twinx()
twin.plot(
    history["step"], history["gamma"], color="tab:orange", label=r"$\gamma$"
)
twin.set_ylabel(r"$\gamma = \mathrm{tr}(W_{pp}) / m$")
handles = (
    axes[1].get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
)
axes[1].legend(handles=handles, loc="lower right")

limit = abs(W).max()
image = axes[2].imshow(W, cmap="RdBu_r", vmin=-limit, vmax=limit)
axes[2].axhline(task.n_features - 0.5, color="black", lw=0.8)
axes[2].set(title="Learned W (token rows on top)", xlabel="column", ylabel="row")
fig.colorbar(image, ax=axes[2], shrink=0.8)
plt.show()
