"""
Error against width: the defaults reach each width's floor
==========================================================

The claim a width search should show: the wider the positional encodings,
the lower the error, down to the lowest error any isotropic attention matrix
``W = gamma I`` reaches at that width (:func:`~stsq_learn.isotropic_floor`,
the point that training with stochastic encodings converges to). With only
``width`` set, :class:`~stsq_learn.SparseTokenSelector` resolves its
optimiser from the width in ``fit`` (plain gradient descent at a rate that
grows with the width, the token rows at ``1 / width`` of it, and the
identity direction of the positional block, along which gamma moves, at a
rate of its own), so every width gets close to its floor and a scikit-learn
search picks the widest.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import validation_curve
from stsq_learn import (
    SparseTokenSelector,
    isotropic_floor,
    make_sparse_token_selection,
)

T, d, q = 16, 8, 3
X, y = make_sparse_token_selection(
    2000, seq_len=T, n_features=d, n_selected=q, random_state=0
)
widths = [4, 16, 64, 256]

train_scores, test_scores = validation_curve(
    SparseTokenSelector(random_state=0),
    X,
    y,
    param_name="width",
    param_range=widths,
    cv=2,
)
error = 1 - test_scores.mean(axis=1)  # relative MSE = 1 - R^2 on this task
floor = [isotropic_floor(T, q, m, random_state=0).relative_mse for m in widths]
for m, e, f in zip(widths, error, floor):
    print(
        f"width {m:4d}: cross-validated 1 - R^2 {e:.3f}, "
        f"floor {f:.3f}, ratio {e / f:.2f}"
    )

# %%
# What ``"auto"`` resolved to is recorded on the fitted model:
model = SparseTokenSelector(width=256, random_state=0).fit(X, y)
print(
    f"solver_={model.solver_!r}, "
    f"learning_rate_init_={model.learning_rate_init_:.3g}, "
    f"token_block_rate_={model.token_block_rate_:.3g}, "
    f"planned_steps_={model.planned_steps_}, "
    f"epochs run: {model.n_iter_}"
)

# %%
# The cross-validated error follows the floor down as the width grows.
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(widths, error, "o-", label="SparseTokenSelector(width=m), defaults")
ax.plot(widths, floor, "k--", label="isotropic floor of width m")
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xticks(widths, [str(w) for w in widths])
ax.set(xlabel="width m", ylabel="cross-validated 1 - $R^2$")
ax.set_title(f"T={T}, q={q}, d={d}, 2000 rows, 2-fold validation_curve")
ax.legend()
fig.tight_layout()
plt.show()
print("picked by the error:", widths[int(np.argmin(error))])
