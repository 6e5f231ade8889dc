"""
q-sparse averaging: every position asks its own question
=========================================================

In q-sparse averaging (Sanford, Hsu and Telgarsky, 2023) every position of a
row has its own subset of q positions, and the output at that position is the
mean of the tokens in it. The attention model answers with one query per
position; each query is a sparse token selection question over the same
tokens, so the error floor of a width is the one of sparse token selection,
and a W trained on that simpler task answers this one with no further
training.
"""

# %%
import matplotlib.pyplot as plt
from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter
from stsq_learn import (
    LengthShiftScorer,
    SparseTokenAverager,
    SparseTokenSelector,
    isotropic_floor,
    make_sparse_averaging,
    make_sparse_token_selection,
)

N, d, q = 16, 4, 3
X, y = make_sparse_averaging(
    600, seq_len=N, n_features=d, n_selected=q, random_state=0
)
X_test, y_test = make_sparse_averaging(
    300, seq_len=N, n_features=d, n_selected=q, random_state=1
)
print("X:", X.shape, " y:", y.shape)
print("position 0 averages positions", X[0, 0, d:].astype(int).tolist())

# %%
# Error against width: an averager trained on q-sparse averaging, a selector
# trained on sparse token selection and used as an averager as it is, and the
# floor of an isotropic W at each width. Both use the defaults, with steps
# that follow the width.
X_sts, y_sts = make_sparse_token_selection(
    3000, seq_len=N, n_features=d, n_selected=q, random_state=0
)
widths = [8, 16, 32, 64]
trained, transferred, floors = [], [], []
for m in widths:
    averager = SparseTokenAverager(width=m, random_state=0).fit(X, y)
    selector = SparseTokenSelector(width=m, random_state=0).fit(X_sts, y_sts)
    zero_shot = SparseTokenAverager.from_selector(selector, n_selected=q)
    trained.append(1 - averager.score(X_test, y_test))
    transferred.append(1 - zero_shot.score(X_test, y_test))
    floors.append(isotropic_floor(N, q, m).relative_mse)
    print(
        f"width {m:>2}: trained {trained[-1]:.3f}  "
        f"from STS {transferred[-1]:.3f}  "
        f"floor {floors[-1]:.3f}"
    )

# %%
# Length generalization: train at N=16 and score rows moved to 2 and 4 times
# the length (new positions with fresh tokens and their own subsets).
factors = [1, 2, 4]
shifted = {}
for encoding in ("stochastic", "fixed"):
    model = SparseTokenAverager(
        width=32, positional_encoding=encoding, random_state=0
    ).fit(X, y)
    shifted[encoding] = [
        LengthShiftScorer(factor=f, random_state=0)(model, X_test, y_test)
        for f in factors
    ]
    print(
        f"{encoding:>10}: "
        + "  ".join(
            f"N={f * N}: {s:.2f}" for f, s in zip(factors, shifted[encoding])
        )
    )

# %%
# The trained and the transferred W sit on the floor at every width: the
# queries of q-sparse averaging are sparse token selections. Fixed encodings
# fit the training length better (W can memorise 16 particular vectors) and
# collapse beyond it; stochastic ones sit on the floor at N=16 and degrade
# gently, as longer rows only add positions competing for the softmax mass.
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 4))
ax0.plot(widths, trained, "o-", label="trained on qSA")
ax0.plot(widths, transferred, "s--", label="trained on STS, no further training")
ax0.plot(widths, floors, "k:", label="isotropic floor")
ax0.set(
    xscale="log",
    yscale="log",
    xlabel="width m",
    ylabel="relative MSE on qSA",
    title=f"N={N}, q={q}, d={d}",
)
ax0.set_xticks(widths, [str(m) for m in widths])
ax0.xaxis.set_minor_formatter(
    NullFormatter()
)  # only the chosen ticks are labelled
ax0.yaxis.set_major_locator(
    LogLocator(subs=(1, 2, 3, 4, 5, 7))
)  # 0.1, 0.2, ... as numbers
ax0.yaxis.set_major_formatter(FormatStrFormatter("%.2g"))
ax0.yaxis.set_minor_formatter(NullFormatter())
ax0.legend()
for encoding, marker in (("stochastic", "o"), ("fixed", "s")):
    ax1.plot(
        [f * N for f in factors],
        shifted[encoding],
        marker=marker,
        label=f"{encoding} encodings",
    )
ax1.set(
    xscale="log",
    xlabel="positions N at test time",
    ylabel="$R^2$",
    ylim=(-0.05, 1.05),
    title="Trained at N=16, width 32",
)
ax1.set_xticks([f * N for f in factors], [str(f * N) for f in factors])
ax1.xaxis.set_minor_formatter(NullFormatter())
ax1.legend()
fig.tight_layout()
plt.show()
