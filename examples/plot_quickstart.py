"""
Quickstart: fit the transformer, read longer sequences
======================================================

Generate the sparse token selection task, fit the paper's one-layer
transformer (:class:`~stsq_learn.SparseTokenSelector`) with the scikit-learn
API, score it, and look inside: where does the fitted model put its attention?
"""

# %%
# The task
# --------
# A row holds ``seq_len`` = T Gaussian tokens in ``R^d`` and marks q of them;
# the target is the average of the marked tokens. ``X`` carries the marks as
# a last 0/1 channel, so one array holds a whole row.
import matplotlib.pyplot as plt
import numpy as np
import torch
from stsq_learn import SparseTokenSelector, make_sparse_token_selection

X, y = make_sparse_token_selection(
    2000, seq_len=16, n_features=8, n_selected=3, random_state=0
)
X_test, y_test = make_sparse_token_selection(
    1000, seq_len=16, n_features=8, n_selected=3, random_state=1
)
print("X:", X.shape, " y:", y.shape)
print("selected positions of row 0:", np.flatnonzero(X[0, :, -1]))

# %%
# Fit and score
# -------------
# ``score`` is the coefficient of determination R^2, which on this task is
# 1 minus the relative mean squared error (0 is the trivial predictor 0).
model = SparseTokenSelector(width=64, random_state=0).fit(X, y)
print(
    f"R^2 at T=16: {model.score(X_test, y_test):.3f} "
    f"after {model.n_iter_} epochs"
)

# %%
# The same fitted model reads rows four times longer than any it saw in
# training: its stochastic positional encodings carry no position index.
X_long, y_long = make_sparse_token_selection(
    1000, seq_len=64, n_features=8, n_selected=3, random_state=2
)
print(f"R^2 at T=64: {model.score(X_long, y_long):.3f}")

# %%
# Inside the model
# ----------------
# The torch module of the fitted model is ``model.net_.module_``
# (:class:`stsq_learn.nn.Attention`). Its attention weights on one test row
# (head 0, one draw of the encodings) show the selection: nearly all the mass
# sits on the marked tokens.
module = model.net_.module_
row = torch.as_tensor(X_test[:1], dtype=torch.float32)
generator = torch.Generator().manual_seed(0)
with torch.no_grad():
    attention = module.attention_weights(row, generator)[0, 0].numpy()

fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.6), layout="constrained")
axes[0].plot(model.loss_curve_)
axes[0].set(
    xlabel="epoch", ylabel="training loss", title="Training loss", yscale="log"
)

y_pred = model.predict(X_test)
axes[1].scatter(y_test[:, 0], y_pred[:, 0], s=4, alpha=0.5)
lim = np.abs(y_test[:, 0]).max()
axes[1].plot([-lim, lim], [-lim, lim], color="black", lw=1)
axes[1].set(
    xlabel="true $y_1$",
    ylabel="predicted $y_1$",
    title="Test predictions (T=16)",
)

selected = X_test[0, :, -1] == 1
colors = np.where(selected, "tab:orange", "tab:blue")
axes[2].bar(np.arange(16), attention, color=colors)
axes[2].axhline(1 / 3, color="tab:orange", ls="--", lw=1, label="1/q")
axes[2].set(
    xlabel="position t", ylabel="softmax weight", title="Attention on one row"
)
axes[2].set_xticks(range(0, 16, 3))
axes[2].legend()
plt.show()
