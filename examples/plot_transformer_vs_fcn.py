"""
Width separation: transformer vs fully-connected net
====================================================

The paper's expressivity result: the one-layer transformer solves sparse
token selection with width ``O(d + q log T)``, while a fully-connected net
needs a first layer of width of order ``T d`` -- it must read every
coordinate of every token through its first layer, because any token may be
one of the selected ones.

This example trains both models on fresh batches (``fit_online``, the
paper's regime) at two sequence lengths and several widths, with the same
budget of fresh rows for every fit, and plots R^2 against width. When T
quadruples the transformer loses a little at every width; the FCN, which was
good at T=8 from width 256 on, fails at T=32 even with 1024 units.
"""

# %%
import matplotlib.pyplot as plt
from stsq_learn import FCNSelector, SparseTokenSelectionTask, SparseTokenSelector

n_features, n_selected = 4, 2
seq_lens = [8, 32]
grids = {
    "transformer": (SparseTokenSelector(random_state=0), [4, 16, 64]),
    "fcn": (
        FCNSelector(learning_rate_init=3e-3, random_state=0),
        [64, 256, 1024],
    ),
}

scores = {name: {} for name in grids}
for T in seq_lens:
    task = SparseTokenSelectionTask(T, n_features, n_selected)
    X_val, y_val = task.sample(1000, random_state=1)
    for name, (estimator, widths) in grids.items():
        scores[name][T] = [
            estimator.set_params(width=w)
            .fit_online(task, n_steps=300)
            .score(X_val, y_val)
            for w in widths
        ]
        print(
            f"{name:>11} T={T:>2}: "
            + "  ".join(
                f"w={w}: {s:.2f}" for w, s in zip(widths, scores[name][T])
            )
        )

# %%
# On the x axis, width; each line one sequence length. The dotted lines mark
# the FCN's input size ``T (d + 1)`` (40 and 160). The FCN reaches a high R^2
# only with a first layer several times wider than its input, and the width
# it needs, like the number of rows it needs, grows with T. The transformer's
# width m multiplies nothing by T: its parameter count ``(d + m) m`` is the
# same at every length.
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
for ax, (name, (_, widths)) in zip(axes, grids.items()):
    for T, marker in zip(seq_lens, "os"):
        line = ax.plot(widths, scores[name][T], marker=marker, label=f"T={T}")[0]
        if name == "fcn":
            size = T * (n_features + 1)
            ax.axvline(
                size,
                color=line.get_color(),
                ls=":",
                lw=1,
                label=f"input size {size}",
            )
    ax.set_xscale("log", base=2)
    ax.set_xticks(widths, [str(w) for w in widths])
    ax.set(xlabel="width", ylim=(-0.05, 1.05))
    ax.legend()
axes[0].set(ylabel="$R^2$ on fresh rows", title="SparseTokenSelector (width m)")
axes[1].set(title="FCNSelector (first-layer width)")
fig.suptitle(f"d={n_features}, q={n_selected}, 300 steps of 256 fresh rows")
fig.tight_layout()
plt.show()
