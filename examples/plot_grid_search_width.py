"""
Grid search over width with length-shift scoring
================================================

Length generalization is a score like any other, so scikit-learn's model
selection can search for it. :func:`~stsq_learn.length_shift_scoring` builds
a ``scoring=`` dict of :class:`~stsq_learn.LengthShiftScorer` objects: each
one moves the validation fold to another sequence length (inserting fresh
unselected tokens at random positions, so every target stays exactly the
same) and computes R^2 there. ``GridSearchCV`` then reports a whole
length-generalization curve for every candidate width, and ``refit`` picks
the width on whichever length matters.
"""

# %%
import matplotlib.pyplot as plt
from sklearn.model_selection import GridSearchCV
from stsq_learn import (
    LengthShiftScorer,
    SparseTokenSelector,
    length_shift_scoring,
    make_sparse_token_selection,
)

X, y = make_sparse_token_selection(
    1500, seq_len=16, n_features=8, n_selected=3, random_state=0
)

# Keys: "r2" (the rows as they are, T=16), "x2" (T'=32) and "x4" (T'=64).
scoring = length_shift_scoring(factors=(1, 2, 4), random_state=0)
print({name: scorer.factor for name, scorer in scoring.items()})

search = GridSearchCV(
    SparseTokenSelector(random_state=0),
    param_grid={"width": [4, 16, 64]},
    scoring=scoring,
    refit="x4",  # keep the width that generalizes best to 4x longer rows
    cv=3,
)
search.fit(X, y)
print("best width for T'=64:", search.best_params_["width"])
print(f"refitted model, R^2 on 4x longer folds: {search.best_score_:.3f}")

# %%
# ``cv_results_`` holds one mean and standard deviation per scorer and
# candidate: a length-generalization curve per width. Wider positional
# encodings are less noisy and degrade more slowly as T grows.
widths = search.cv_results_["param_width"].data.astype(int)
fig, ax = plt.subplots(figsize=(6, 4))
for name, label in (
    ("r2", "T'=16 (as trained)"),
    ("x2", "T'=32"),
    ("x4", "T'=64"),
):
    mean = search.cv_results_[f"mean_test_{name}"]
    std = search.cv_results_[f"std_test_{name}"]
    ax.errorbar(widths, mean, yerr=std, marker="o", capsize=3, label=label)
ax.set_xscale("log", base=2)
ax.set_xticks(widths, [str(w) for w in widths])
ax.set(xlabel="width m", ylabel="cross-validated $R^2$", ylim=(0, 1))
ax.set_title("GridSearchCV(scoring=length_shift_scoring((1, 2, 4)))")
ax.legend(title="validation fold moved to")
fig.tight_layout()
plt.show()

# %%
# The scorers are ordinary picklable callables, so they also work one at a
# time, with ``cross_validate`` or directly on a fitted model and fresh rows:
X_test, y_test = make_sparse_token_selection(
    1000, seq_len=16, n_features=8, n_selected=3, random_state=1
)
for factor in (1, 8):
    scorer = LengthShiftScorer(factor=factor, random_state=0)
    score = scorer(search.best_estimator_, X_test, y_test)
    print(f"refitted model on test rows at T'={16 * factor}: R^2 = {score:.3f}")
