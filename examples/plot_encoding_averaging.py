"""
Test-time encoding averaging with n_pe_samples
==============================================

A model trained with stochastic positional encodings predicts with random
encodings too, so each prediction is noisy. Averaging the attention over K
independent encoding draws (``n_pe_samples=K``) removes much of that noise
without retraining: the error at fixed width falls roughly like 1/K until the
model's own bias is left.

``n_pe_samples`` is a plain hyperparameter: it can be changed on a fitted
model with ``set_params``. The second half fine-tunes the model for averaged
predictions with ``warm_start=True`` and ``n_pe_samples_fit``.
"""

# %%
import matplotlib.pyplot as plt
from stsq_learn import SparseTokenSelector, make_sparse_token_selection

X, y = make_sparse_token_selection(
    2000, seq_len=16, n_features=8, n_selected=3, random_state=0
)
model = SparseTokenSelector(width=64, random_state=0).fit(X, y)

test_sets = {
    T: make_sparse_token_selection(
        1000, seq_len=T, n_features=8, n_selected=3, random_state=T
    )
    for T in (16, 64)
}

# %%
# Score the same fitted W with K = 1 (the paper) up to 32 draws. On this task
# relative MSE = 1 - R^2.
draws = [1, 2, 4, 8, 16, 32]
errors = {T: [] for T in test_sets}
for K in draws:
    model.set_params(n_pe_samples=K)
    for T, (X_T, y_T) in test_sets.items():
        errors[T].append(1 - model.score(X_T, y_T))
    print(
        f"K={K:>2}: "
        + "  ".join(f"T={T}: {errors[T][-1]:.3f}" for T in test_sets)
    )

# %%
# At the training length the error falls about threefold: there most of it
# was the noise of the random cross terms ``p_t . p_s``. At T=64 it hardly
# moves: the error there is mostly bias, because the scale gamma of W learned
# at T=16 is too small to pull the softmax mass away from 61 unselected
# tokens, and averaging removes noise, not bias. Wider encodings (larger
# ``width``) lower both.
fig, ax = plt.subplots(figsize=(6, 4))
for T, marker in zip(test_sets, "os"):
    ax.plot(draws, errors[T], marker=marker, label=f"tested at T={T}")
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xticks(draws, [str(K) for K in draws])
ax.set(xlabel="encoding draws averaged at predict time (n_pe_samples)")
ax.set(
    ylabel="relative MSE (1 - $R^2$)",
    title="One fitted model (trained at T=16, m=64)",
)
ax.legend()
fig.tight_layout()
plt.show()

# %%
# Fine-tuning for averaged predictions
# ------------------------------------
# The W above was trained on one encoding draw per step, so it settled at the
# gamma that is best for one draw. K averaged draws are less noisy and are
# best served by a sharper attention, a larger gamma. ``n_pe_samples_fit=8``
# averages the attention over 8 draws in every training step too;
# ``warm_start=True`` continues from the fitted W for 20 more epochs instead
# of starting again from W = 0.
import warnings

from sklearn.exceptions import ConvergenceWarning
from stsq_learn.nn import positional_alignment

gamma_before = positional_alignment(model.key_query_, 8)["gamma"]
with warnings.catch_warnings():
    # A fixed budget of 20 epochs is the point here, not convergence.
    warnings.simplefilter("ignore", ConvergenceWarning)
    model.set_params(warm_start=True, n_pe_samples_fit=8, max_iter=20).fit(X, y)
gamma_after = positional_alignment(model.key_query_, 8)["gamma"]
print(
    f"gamma {gamma_before:.2f} -> {gamma_after:.2f}; "
    f"epochs in all: {model.n_iter_}"
)

X_16, y_16 = test_sets[16]
tuned = []
for K in draws:
    model.set_params(n_pe_samples=K)
    tuned.append(1 - model.score(X_16, y_16))
    print(f"K={K:>2}: T=16: {errors[16][draws.index(K)]:.3f} -> {tuned[-1]:.3f}")

# %%
# The fine-tuned W is worse with one draw and clearly better with several:
# one W is best either for one draw or for many, so fine-tune for the
# ``n_pe_samples`` you will predict with.
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(draws, errors[16], marker="o", label="trained on 1 draw")
ax.plot(draws, tuned, marker="^", label="then 20 epochs on 8 averaged draws")
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xticks(draws, [str(K) for K in draws])
ax.set(xlabel="encoding draws averaged at predict time (n_pe_samples)")
ax.set(ylabel="relative MSE (1 - $R^2$)", title="Tested at T=16, m=64")
ax.legend()
fig.tight_layout()
plt.show()
