"""ARC's actor and critic in numpy, with their gradients written out (no autodiff).

Both are fully connected with two hidden layers of 128 (ReLU), as in the paper: the actor
maps a state to one action through tanh, the critic maps (state, action) to a value (linear
output). `forward` keeps what `backward` needs; `backward` returns the parameter gradients and
the gradient with respect to the input (the critic's, for the actor's update).
`gradient_check` compares them with finite differences (tested).
"""

from __future__ import annotations

import numpy as np

HIDDEN = 128
NAMES = ("w1", "b1", "w2", "b2", "w3", "b3")


def init(n_in: int, rng: np.random.Generator, hidden: int = HIDDEN, out_scale: float = 3e-3) -> dict:
    """Glorot-uniform hidden layers, zero biases, a small uniform output layer (so the first
    actions and values start near 0)."""

    def glorot(a: int, b: int) -> np.ndarray:
        lim = np.sqrt(6.0 / (a + b))
        return rng.uniform(-lim, lim, size=(a, b))

    return {
        "w1": glorot(n_in, hidden),
        "b1": np.zeros(hidden),
        "w2": glorot(hidden, hidden),
        "b2": np.zeros(hidden),
        "w3": rng.uniform(-out_scale, out_scale, size=(hidden, 1)),
        "b3": np.zeros(1),
    }


def forward(p: dict, x: np.ndarray, out: str):
    """y [B, 1] and the cache for `backward`; `out` is "tanh" (actor) or "linear" (critic)."""
    z1 = x @ p["w1"] + p["b1"]
    a1 = np.maximum(z1, 0.0)
    z2 = a1 @ p["w2"] + p["b2"]
    a2 = np.maximum(z2, 0.0)
    z3 = a2 @ p["w3"] + p["b3"]
    y = np.tanh(z3) if out == "tanh" else z3
    return y, (x, z1, a1, z2, a2, y, out)


def backward(p: dict, cache, dy: np.ndarray):
    """Gradients of sum(dy * y) with respect to the parameters, and to the input."""
    x, z1, a1, z2, a2, y, out = cache
    dz3 = dy * (1.0 - y * y) if out == "tanh" else dy
    g = {"w3": a2.T @ dz3, "b3": dz3.sum(0)}
    da2 = dz3 @ p["w3"].T
    dz2 = da2 * (z2 > 0)
    g["w2"] = a1.T @ dz2
    g["b2"] = dz2.sum(0)
    da1 = dz2 @ p["w2"].T
    dz1 = da1 * (z1 > 0)
    g["w1"] = x.T @ dz1
    g["b1"] = dz1.sum(0)
    dx = dz1 @ p["w1"].T
    return g, dx


def gradient_check(seed: int = 0, B: int = 3, D: int = 5, hidden: int = 7) -> float:
    """Largest relative error between `backward` and central differences, over both heads."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    for out in ("tanh", "linear"):
        p = init(D, rng, hidden, out_scale=1.0)
        x = rng.normal(size=(B, D))
        dy = rng.normal(size=(B, 1))
        y, cache = forward(p, x, out)
        g, dx = backward(p, cache, dy)

        def f(q, xx):
            return float((forward(q, xx, out)[0] * dy).sum())

        eps = 1e-6
        for k in NAMES:
            flat = p[k].reshape(-1)
            for i in range(0, flat.size, max(1, flat.size // 7)):
                old = flat[i]
                flat[i] = old + eps
                up = f(p, x)
                flat[i] = old - eps
                down = f(p, x)
                flat[i] = old
                num = (up - down) / (2 * eps)
                ana = g[k].reshape(-1)[i]
                worst = max(worst, abs(num - ana) / max(1e-6, abs(num) + abs(ana)))
        for i in range(D):
            xp = x.copy()
            xp[0, i] += eps
            xm = x.copy()
            xm[0, i] -= eps
            num = (f(p, xp) - f(p, xm)) / (2 * eps)
            worst = max(worst, abs(num - dx[0, i]) / max(1e-6, abs(num) + abs(dx[0, i])))
    return worst
