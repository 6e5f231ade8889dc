"""
In-context regression: the trained layer is one preconditioned GD step
======================================================================

Each prompt holds 20 labelled examples of its own linear function and a
query; nothing is shared between prompts but the law. Zhang, Frei and
Bartlett (JMLR 2024) prove that one linear self-attention layer trained on
such prompts converges to ``y_hat = x_q^T Gamma^{-1} (1/M) sum_i y_i x_i``
with ``Gamma = (1 + 1/N) Lambda + (tr Lambda / N) I``: one step of
preconditioned gradient descent on the prompt. Here the layer is trained on
fresh prompts, its ``preconditioner_`` is compared with ``Gamma^{-1}``, and
its error on prompts of other lengths M is drawn beside the theory's
formula, one gradient step with the best step for each M, and least squares.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from skorch.callbacks import Callback
from stsq_learn import (
    InContextRegressionTask,
    LinearAttentionRegressor,
    PromptGradientStep,
    PromptRidge,
    in_context_gd_step,
    in_context_preconditioner,
    in_context_risk,
)

covariance = np.array([2.0, 1.5, 1.0, 0.5, 0.25])  # Lambda, diagonal
task = InContextRegressionTask(
    seq_len=21, n_features=5, covariance=covariance
)  # N = 20
target = in_context_preconditioner(20, covariance)
print(
    "prompts:",
    task.sample(3, random_state=0)[0].shape,
    " Gamma^-1 diagonal:",
    target.diagonal(),
)


# %%
# Training on a fresh batch of 256 prompts at every step (the defaults:
# Adam at 0.01, 1000 steps, the last fifth a linear decay), with a callback
# that records the distance of ``u U^T`` to ``Gamma^{-1}`` after each step.
class Distance(Callback):
    def initialize(self):
        self.errors_ = []
        return self

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            A = net.module_.preconditioner().detach().numpy()
            self.errors_.append(
                np.linalg.norm(A - target) / np.linalg.norm(target)
            )


distance = Distance()
model = LinearAttentionRegressor(
    random_state=0, callbacks=[distance]
).fit_online(task)
print(
    f"relative distance to Gamma^-1 after {model.n_iter_} steps: "
    f"{distance.errors_[-1]:.3f}"
)

# %%
# The error at test length M, on 4000 fresh prompts per M. The layer's
# curve decreases in M with no spike past N = 20 and tends to a floor above
# 0 (its preconditioner was tuned for N). One gradient step with the best
# scalar step for each M (:func:`~stsq_learn.in_context_gd_step`) wins at
# short prompts, but near N the layer's matrix step, adapted to Lambda's
# directions, is better (for Lambda = I the two meet at M = N). Least
# squares is exact from M = d = 5.
lengths = np.array([2, 3, 5, 10, 20, 40, 80, 160])
measured = {"layer": [], "one GD step (tuned to M)": [], "least squares": []}
for M in lengths:
    X, y = task.at_examples(int(M)).sample(4000, random_state=int(M))
    gd = PromptGradientStep(step=in_context_gd_step(int(M), covariance)).fit(
        X, y
    )
    for name, estimator in zip(
        measured, (model, gd, PromptRidge().fit(X, y)), strict=True
    ):
        measured[name].append(np.mean((estimator.predict(X) - y) ** 2))
fine = np.geomspace(2, 160, 60)
formula = [in_context_risk(m, 20, covariance) for m in np.round(fine)]
tuned = [
    in_context_risk(
        m,
        m,
        covariance,
        preconditioner=in_context_gd_step(m, covariance) * np.eye(5),
    )
    for m in np.round(fine)
]

fig, axes = plt.subplot_mosaic(
    [["convergence", "matrix"], ["error", "error"]],
    figsize=(10, 7.5),
    layout="constrained",
)
ax0, ax1, ax2 = axes["convergence"], axes["matrix"], axes["error"]
ax0.semilogy(np.arange(1, len(distance.errors_) + 1), distance.errors_)
ax0.axhline(0.05, color="grey", linestyle=":", label="5%")
ax0.set(
    xlabel="step",
    ylabel="||u U^T - Gamma^-1|| / ||Gamma^-1||",
    title="Convergence",
)
ax0.legend()
lim = np.abs(target).max()
image = ax1.imshow(
    np.hstack([model.preconditioner_, np.full((5, 1), np.nan), target]),
    cmap="RdBu_r",
    vmin=-lim,
    vmax=lim,
)
ax1.set(title="preconditioner_  |  Gamma^-1", xticks=[], yticks=[])
fig.colorbar(image, ax=ax1, shrink=0.8, label="entry")
ax2.loglog(fine, formula, color="C0", label="layer, formula")
ax2.loglog(
    fine, tuned, color="C1", linestyle="--", label="GD step tuned to M, formula"
)
for (name, values), marker, color in zip(
    measured.items(), "o^s", ("C0", "C1", "C2"), strict=True
):
    values = np.array(values)
    shown = values > 1e-6  # least squares is 0 (to rounding) from M = d
    ax2.loglog(
        lengths[shown],
        values[shown],
        marker,
        color=color,
        label=f"{name}, measured",
    )
ax2.text(
    0.03,
    0.04,
    "least squares: 0 from M = d = 5",
    transform=ax2.transAxes,
    color="C2",
)
ax2.axvline(20, color="grey", linestyle=":")
ax2.set(
    xlabel="examples M in the test prompt",
    ylabel="mean squared error",
    title="Error vs M",
)
ax2.legend(loc="upper right")
plt.show()

# %%
# The measured errors beside the formula (the layer trained at N = 20).
for i, M in enumerate(lengths):
    print(
        f"M={M:4d}: layer {measured['layer'][i]:.3f} "
        f"(formula {in_context_risk(int(M), 20, covariance):.3f}), "
        f"GD step {measured['one GD step (tuned to M)'][i]:.3f}, least squares "
        f"{measured['least squares'][i]:.1e}"
    )
