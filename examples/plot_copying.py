"""
Copying: a transformer, an LSTM and the theory's two copiers
============================================================

A model reads a uniform string x of L symbols and must write it back.
Jelassi, Brandfonbrener, Kakade and Malach (ICML 2024) prove that any model
with a state of b bits (an LSTM, a state space model) errs with probability
at least ``1 - 2^b / D^L``, while a two-layer transformer copies every
string that repeats no n-gram. Here the two bounds are set beside the two
constructions that meet them (measured by Monte Carlo), and a small
transformer and an LSTM of about as many parameters are trained on short
strings and tested on longer ones.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullLocator
from stsq_learn import (
    CopyingTask,
    FixedStateCopier,
    LSTMCopier,
    NGramCopier,
    TransformerCopier,
    fixed_state_error_bound,
    make_copying,
    ngram_error_bound,
)

X, y = make_copying(3, 12, min_len=5, random_state=0)
print("strings to copy (-1 after each one's end):\n", X)

# %%
# The constructions. :class:`~stsq_learn.NGramCopier` is the transformer of
# the theorem as an algorithm: it writes the token after the first
# occurrence in x of the last 4 tokens it wrote, and fails only on strings
# that repeat a 4-gram. :class:`~stsq_learn.FixedStateCopier` is the best
# 16-bit machine: it stores the 2^16 - 1 first strings and guesses the rest.
lengths = [4, 5, 6, 8, 16, 32, 64]
copiers = {
    "n-gram copier (n=4)": NGramCopier(4),
    "fixed-state copier (b=16)": FixedStateCopier(16),
}
measured = {label: [] for label in copiers}
for L in lengths:
    X_L, y_L = make_copying(4000, L, random_state=L)
    for label, copier in copiers.items():
        measured[label].append(copier.fit(X_L, y_L).score(X_L, y_L))

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 4), layout="constrained")
for (label, accuracy), color in zip(measured.items(), ("C0", "C1")):
    ax1.plot(lengths, accuracy, "o-", color=color, label=f"{label}: measured")
ax1.plot(
    lengths,
    [1 - ngram_error_bound(L, 10, 4) for L in lengths],
    ":",
    color="C0",
    label="theorem: 1 - L^2 D^-4",
)
ax1.plot(
    lengths,
    [1 - fixed_state_error_bound(L, 10, 16) for L in lengths],
    ":",
    color="C1",
    label="theorem: 2^16 / D^L",
)
ax1.set(
    xscale="log",
    xlabel="string length L",
    ylabel="string accuracy (D = 10)",
    title="The constructions meet their bounds",
)
ax1.set_xticks(lengths, labels=[str(L) for L in lengths], minor=False)
ax1.xaxis.set_minor_locator(NullLocator())  # the lengths, not 4 x 10^0
ax1.legend(fontsize=9, loc="center left", bbox_to_anchor=(0.2, 0.45))

# %%
# The trained models: 2 layers each, about 100k parameters, on strings of 5
# to 12 symbols (fresh ones at every step), then tested at 12, 24 and 48
# symbols. A float32 LSTM state holds thousands of bits, so the bound says
# nothing here: what the LSTM does past its training length is measured.
task = CopyingTask(seq_len=12, min_len=5)
test_lengths = [12, 24, 48]
models = (TransformerCopier(random_state=0), LSTMCopier(random_state=0))
for model, color in zip(models, ("C2", "C3")):
    model.fit_online(task, n_steps=1500)
    accuracy = []
    for L in test_lengths:
        X_L, y_L = make_copying(300, L, random_state=1)
        accuracy.append(model.score(X_L, y_L))
    name, rounded = type(model).__name__, np.round(accuracy, 3)
    print(f"{name}: string accuracy at L = {test_lengths}: {rounded}")
    ax2.plot(test_lengths, accuracy, "o-", color=color, label=name)
ax2.axvline(12, color="0.6", ls=":", lw=1)
ax2.set(
    xscale="log",
    xlabel="test string length",
    ylabel="string accuracy (measured)",
    title="Trained on L = 5..12, tested longer",
    ylim=(-0.03, 1.03),
)
ax2.set_xticks(test_lengths, labels=[str(L) for L in test_lengths])
ax2.xaxis.set_minor_locator(NullLocator())
ax2.legend()
plt.show()
