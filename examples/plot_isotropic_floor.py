"""
How close is my model to the best its width allows?
===================================================

Training with stochastic positional encodings drives the positional block of
the attention matrix towards a multiple of the identity, ``W = gamma I``. At
a given width no gamma does better than some error, the *isotropic floor*,
which :func:`~stsq_learn.isotropic_floor` computes in a second or two. The
ratio of a trained model's relative MSE to it says how much further training
can go; to do better than the floor, widen the encodings or average more
draws (``n_pe_samples``).
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from stsq_learn import (
    SparseTokenSelectionTask,
    SparseTokenSelector,
    isotropic_floor,
)
from stsq_learn.nn import positional_alignment

# %%
# The floor of one width
# ----------------------
# It depends on T, q and the width only, not on the token dimension d: given
# the attention weights, the expected error of Gaussian tokens is the same
# whatever their dimension.
floor = isotropic_floor(seq_len=16, n_selected=3, width=64, random_state=0)
print(f"T=16, q=3, width 64: relative MSE {floor.relative_mse:.4f}", end=" ")
print(f"+- {floor.std_error:.4f}, at gamma = {floor.gamma:.3g}")

# %%
# Train models of three widths
# ----------------------------
# ``fit_online`` on fresh rows at every step with a cosine schedule, then the
# relative MSE (``1 - R^2``) on held-out rows against the floor of each width.
task = SparseTokenSelectionTask(seq_len=16, n_features=8, n_selected=3)
X_test, y_test = task.sample(4000, random_state=1)
widths = [16, 64, 256]
trained, floors = {}, {}
for m in widths:
    model = SparseTokenSelector(width=m, learning_rate="cosine", random_state=0)
    model.fit_online(task, n_steps=1500)
    error = 1 - model.score(X_test, y_test)
    gamma = positional_alignment(model.key_query_, model.n_features_in_)["gamma"]
    floors[m] = isotropic_floor(16, 3, m, random_state=0)
    trained[m] = (error, gamma)
    floor = floors[m]
    print(
        f"width {m:>3}: relative MSE {error:.3f}, "
        f"floor {floor.relative_mse:.3f} "
        f"({error / floor.relative_mse:.2f} x); gamma {gamma:.2f}, "
        f"best {floor.gamma:.2f}"
    )

# %%
# Against the floor over the widths, and the error of ``W = gamma I`` as a
# function of gamma at each trained width (``floor.gammas`` and
# ``floor.relative_mse_curve``), with each trained model's gamma marked.
grid = [8, 16, 32, 64, 128, 256, 512]
curve = [
    isotropic_floor(16, 3, m, n_samples=30_000, random_state=0).relative_mse
    for m in grid
]

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
ax1.plot(grid, curve, "k-", label="isotropic floor")
ax1.plot(
    widths,
    [trained[m][0] for m in widths],
    "o",
    ms=8,
    label="trained, 1500 steps",
)
ax1.set_xscale("log", base=2)
ax1.set_yscale("log")
ax1.set(xlabel="width m", ylabel="relative MSE (1 - $R^2$)", title="T=16, q=3")
ax1.legend()

for m, color in zip(widths, ["tab:blue", "tab:orange", "tab:green"]):
    f = floors[m]
    finite = np.isfinite(f.gammas) & (f.gammas > 0)
    ax2.plot(
        f.gammas[finite],
        f.relative_mse_curve[finite],
        color=color,
        label=f"width {m}",
    )
    ax2.axvline(trained[m][1], color=color, ls=":", lw=1)
ax2.set_xscale("log")
ax2.set_ylim(0, 1.2)
ax2.set(xlabel="gamma", ylabel="relative MSE of W = gamma I")
ax2.set(title="dotted: the gamma each model learned")
ax2.legend()
fig.tight_layout()
plt.show()

# %%
# The two narrower models end at their floor (within the noise of 4000 test
# rows, so a ratio can come out a little below 1) and learned about the best
# gamma. The widest ends about 1.2 times above its floor, with a gamma still
# below the best: training is not finished there, so more steps (or
# ``solver="sgd"`` at large widths, see the user guide) would still pay.
# Narrow encodings have a high floor: their random cross terms
# ``p_t . p_s`` are of order ``1/sqrt(m)`` and blur the selection whatever
# gamma is. Once a model is at its floor, only a wider model or averaging
# the attention over several encoding draws (``n_pe_samples``, which has its
# own, lower floor: ``isotropic_floor(..., n_pe_samples=K)``) goes further.
