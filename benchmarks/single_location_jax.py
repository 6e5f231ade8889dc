"""The peer of ``bench_single_location``: projected GD on single-location regression in JAX.

A reimplementation, for timing, of the update in the public code of Marion,
Berthier, Biau and Boyer (ICLR 2025), ``PierreMarion23/single-location-regression``
(``dynamics.py``: ``R``, ``pgd_step``; ``utils.py``: ``zeta_integ``), in
their precision (float32) and with their tools:

* the risk ``R(k, v)`` in closed form in the five products ``<k, v>``,
  ``<v, k*>``, ``<k, k*>``, ``<k, v*>``, ``<v, v*>``, with the function
  ``zeta(t, s) = 1 + int_{-inf}^t zeta'(u, s) du`` computed by
  ``quadax.quadgk`` (adaptive Gauss-Kronrod) and differentiated through its
  integrand (a ``custom_jvp``), as theirs; their ``R`` leaves out the noise
  tokens' constant ``(L - 1) zeta(0, lambda)``, which they add when logging;
* the gradients by ``jax.grad``; the step
  ``k <- (k - alpha (g - <k, g> k)) / |...|`` (the gradient projected on the
  sphere's tangent, then normalised), the same for ``v``;
* one jitted call per step, vmapped over the seeds (``driver="loop"``, their
  ``run.py`` loop with a seed axis added), or the whole run under
  ``jax.lax.scan`` (``driver="scan"``).

It needs ``jax`` and ``quadax`` (their versions: ``jax==0.4.31``,
``quadax==0.2.2``; later quadax versions are an order of magnitude slower
here). Run it alone to time it in its own interpreter::

    python benchmarks/single_location_jax.py --seeds 10 --steps 2000 [--driver loop]

which prints one JSON record. Pin one thread with
``XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"``
(``bench_single_location`` sets it for the process it starts).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from functools import partial


def available():
    """None if jax and quadax import, else why not (a sentence)."""
    try:
        import jax  # noqa: F401
        import quadax  # noqa: F401
    except ImportError as exc:
        return f"jax or quadax is not installed ({exc})"
    return None


def build(d, L, gamma, alpha):
    """The jitted step for a batch of seeds: ``step(k, v, k_star, v_star, lam)``, rows = seeds."""
    import jax
    import jax.numpy as jnp
    import quadax
    from jax.scipy.special import erf

    sqrt_pi = math.sqrt(math.pi)

    def erf1(x):  # erf'
        return 2 * jnp.exp(-(x**2)) / sqrt_pi

    def erf2(x):  # erf''
        return -4 * x * jnp.exp(-(x**2)) / sqrt_pi

    def dzeta(t, s):
        return (
            2
            / jnp.sqrt(1 + 2 * s**2)
            * erf(t / jnp.sqrt((1 + 4 * s**2) * (1 + 2 * s**2)))
            * erf1(t / jnp.sqrt(1 + 2 * s**2))
        )

    @jax.custom_jvp
    def zeta(t, s):
        value, _ = quadax.quadgk(dzeta, interval=[-jnp.inf, t], args=(s,))
        return 1.0 + value

    @zeta.defjvp
    def _zeta_jvp(primals, tangents):  # their rule: the derivative in t is the integrand
        t, s = primals
        t_dot, _ = tangents
        return zeta(s, t), dzeta(t, s) * t_dot  # (s, t) as in their code; unused by grad

    g2 = gamma**2
    root_d2 = math.sqrt(d / 2)

    def risk(k, v, k_star, v_star, lam):
        rho, theta, kappa, eta, nu = k @ v, v @ k_star, k @ k_star, v_star @ k, v @ v_star
        q = 1 + 2 * lam**2 * g2
        r = 1 + 4 * lam**2 * g2
        arg = lam * jnp.sqrt(d / (2 * q)) * kappa
        c = 2 * lam / jnp.sqrt(jnp.pi * (1 + 2 * lam**2))
        z = zeta(lam * root_d2 * kappa, lam * gamma)
        read = (
            g2 * nu * erf(arg)
            + lam * g2 * root_d2 * eta * theta / jnp.sqrt(q) * erf1(arg)
            + lam**2 * g2**2 * eta * rho / q * erf2(arg)
        )
        out = g2 - 2 * read + (d / 2 * theta**2 + g2) * z
        out += (
            4
            * lam
            * g2
            * root_d2
            * (theta * rho - lam**2 * g2 * rho**2 * kappa / q)
            / jnp.sqrt(q)
            * erf(arg / jnp.sqrt(r))
            * erf1(arg)
        )
        out += (
            4
            / sqrt_pi
            * lam**2
            * g2**2
            * rho**2
            / (q * jnp.sqrt(r))
            * erf1(-lam * math.sqrt(d) * kappa / jnp.sqrt(r))
        )
        out += (L - 1) * 8 / jnp.pi * lam**2 / jnp.sqrt(1 + 4 * lam**2) / (1 + 2 * lam**2) * rho**2
        out += 4 * lam**2 * (L - 1) * (L - 2) / (jnp.pi * (1 + 2 * lam**2)) * rho**2
        out -= (
            2
            * (L - 1)
            * c
            * rho
            * (-root_d2 * theta * erf(arg) - lam * g2 * rho / jnp.sqrt(q) * erf1(arg))
        )
        return out

    grad_k, grad_v = jax.grad(risk, 0), jax.grad(risk, 1)

    def step(k, v, k_star, v_star, lam):
        value = risk(k, v, k_star, v_star, lam)
        gk = grad_k(k, v, k_star, v_star, lam)
        gv = grad_v(k, v, k_star, v_star, lam)
        k = k - alpha * (gk - (k @ gk) * k)
        v = v - alpha * (gv - (v @ gv) * v)
        k, v = k / jnp.linalg.norm(k), v / jnp.linalg.norm(v)
        return k, v, value, k @ k_star, v @ v_star

    batched = jax.vmap(step, in_axes=(0, 0, 0, 0, None))
    noise_constant = jax.jit(lambda lam: (L - 1) * zeta(0.0, lam))
    return jax.jit(batched), batched, noise_constant


def starts(n_seeds, d, seed=0):
    """Their starts on the sphere (``initialize_on_sphere``), one key per seed: k, v, k*, v*."""
    import jax
    import jax.numpy as jnp

    def one(key):
        keys = jax.random.split(key, 3)
        stars = jax.random.split(keys[0], 2)
        k_star = jax.random.normal(stars[0], (d,))
        k_star = k_star / jnp.linalg.norm(k_star)
        v_star = jax.random.normal(stars[1], (d,))
        v_star = v_star - (k_star @ v_star) * k_star
        v_star = v_star / jnp.linalg.norm(v_star)
        k = jax.random.normal(keys[1], (d,))
        v = jax.random.normal(keys[2], (d,))
        return k / jnp.linalg.norm(k), v / jnp.linalg.norm(v), k_star, v_star

    return jax.vmap(one)(jax.random.split(jax.random.key(seed), n_seeds))


def time_run(
    n_seeds,
    n_steps,
    d=400,
    L=10,
    gamma=None,
    alpha=4e-3,
    lambda_init=1.0,
    lambda_decay=1e-4,
    driver="loop",
):
    """Time ``n_steps`` steps of ``n_seeds`` vmapped runs; the compilation is timed apart.

    Returns
    -------
    dict
        ``seconds`` (the steps), ``seconds_per_step``, ``compile_seconds``
        (the first call, with its compilation), ``final_risk`` (per seed, with
        the noise tokens' constant added back: the full population risk),
        ``driver`` and the versions.
    """
    import jax
    import jax.numpy as jnp
    import quadax

    gamma = math.sqrt(0.5) if gamma is None else gamma  # the paper's gamma^2 = 1/2
    step, batched, noise_constant = build(d, L, gamma, alpha)
    k, v, k_star, v_star = starts(n_seeds, d)
    lams = [lambda_init / (1 + lambda_decay * t) for t in range(n_steps)]
    if driver == "loop":
        t0 = time.perf_counter()
        jax.block_until_ready(step(k, v, k_star, v_star, lams[0]))  # compile
        compile_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        for lam in lams:
            k, v, risk, _, _ = step(k, v, k_star, v_star, lam)
        jax.block_until_ready((k, v, risk))
        seconds = time.perf_counter() - t0
    elif driver == "scan":

        @partial(jax.jit, static_argnames=("n",))
        def run(k, v, n):
            def body(carry, t):
                lam = lambda_init / (1 + lambda_decay * t)
                k, v, risk, _, _ = batched(carry[0], carry[1], k_star, v_star, lam)
                return (k, v), risk

            (k, v), risks = jax.lax.scan(body, (k, v), jnp.arange(n, dtype=jnp.float32))
            return k, v, risks[-1]

        t0 = time.perf_counter()
        jax.block_until_ready(run(k, v, n_steps))  # compile (and one full run)
        compile_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        k, v, risk = jax.block_until_ready(run(k, v, n_steps))
        seconds = time.perf_counter() - t0
    else:
        raise ValueError(f"driver must be 'loop' or 'scan', got {driver!r}")
    last_lam = lams[-1]
    full = risk + noise_constant(jnp.float32(last_lam))
    return {
        "seconds": seconds,
        "seconds_per_step": seconds / n_steps,
        "compile_seconds": compile_seconds,
        "final_risk": [float(x) for x in full],
        "driver": driver,
        "n_seeds": n_seeds,
        "n_steps": n_steps,
        "jax": jax.__version__,
        "quadax": getattr(quadax, "__version__", "?"),
        "dtype": str(k.dtype),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--d", type=int, default=400)
    parser.add_argument("--L", type=int, default=10)
    parser.add_argument("--alpha", type=float, default=4e-3)
    parser.add_argument("--lambda-init", type=float, default=1.0)
    parser.add_argument("--lambda-decay", type=float, default=1e-4)
    parser.add_argument("--driver", choices=("loop", "scan"), default="loop")
    args = parser.parse_args(argv)
    why = available()
    if why:
        print(json.dumps({"skipped": why}))
        return
    print(
        json.dumps(
            time_run(
                args.seeds,
                args.steps,
                d=args.d,
                L=args.L,
                alpha=args.alpha,
                lambda_init=args.lambda_init,
                lambda_decay=args.lambda_decay,
                driver=args.driver,
            )
        )
    )


if __name__ == "__main__":
    main()
