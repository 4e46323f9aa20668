"""TCP-RL's actor-critic network in numpy, with its gradients written out (no autodiff).

FC 128 (ReLU) -> FC 128 (ReLU) -> LSTM 128 -> FC 128 (ReLU) -> softmax policy head and linear
value head, shared lower layers (Nie et al., JSAC 2019, §VI-B). `forward` runs a sequence of
T steps for a batch of B environments from an LSTM state and keeps what `backward` needs;
`backward` is backpropagation through those T steps (the state before them is a constant:
truncated BPTT). `gradient_check` compares it with finite differences (tested).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

HIDDEN = 128

# Parameter names, in a fixed order (the ONNX export and the saved files use it).
NAMES = ("w1", "b1", "w2", "b2", "wx", "wh", "bl", "w3", "b3", "wp", "bp", "wv", "bv")


def init_params(obs_dim: int, actions: int, rng: np.random.Generator, hidden: int = HIDDEN) -> dict:
    """Glorot-uniform weights, zero biases (the LSTM's forget gate at 1), a near-uniform
    initial policy (policy head scaled by 0.01)."""

    def glorot(n_in: int, n_out: int, scale: float = 1.0) -> np.ndarray:
        lim = scale * np.sqrt(6.0 / (n_in + n_out))
        return rng.uniform(-lim, lim, size=(n_in, n_out))

    h = hidden
    bl = np.zeros(4 * h)
    bl[h : 2 * h] = 1.0  # forget gate
    return {
        "w1": glorot(obs_dim, h),
        "b1": np.zeros(h),
        "w2": glorot(h, h),
        "b2": np.zeros(h),
        "wx": glorot(h, 4 * h),
        "wh": glorot(h, 4 * h),
        "bl": bl,
        "w3": glorot(h, h),
        "b3": np.zeros(h),
        "wp": glorot(h, actions, 0.01),
        "bp": np.zeros(actions),
        "wv": glorot(h, 1),
        "bv": np.zeros(1),
    }


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@dataclass
class Trace:
    """What `forward` keeps per step for `backward`."""

    x: list = field(default_factory=list)
    a1: list = field(default_factory=list)
    a2: list = field(default_factory=list)
    gates: list = field(default_factory=list)  # (i, f, o, u)
    c_prev: list = field(default_factory=list)
    h_prev: list = field(default_factory=list)
    c: list = field(default_factory=list)
    h: list = field(default_factory=list)
    a3: list = field(default_factory=list)


def step(p: dict, x: np.ndarray, h: np.ndarray, c: np.ndarray, trace: Trace | None = None):
    """One step for a batch: (logits [B, A], value [B], h, c)."""
    a1 = np.maximum(x @ p["w1"] + p["b1"], 0.0)
    a2 = np.maximum(a1 @ p["w2"] + p["b2"], 0.0)
    g = a2 @ p["wx"] + h @ p["wh"] + p["bl"]
    n = h.shape[1]
    i = sigmoid(g[:, :n])
    f = sigmoid(g[:, n : 2 * n])
    o = sigmoid(g[:, 2 * n : 3 * n])
    u = np.tanh(g[:, 3 * n :])
    c_new = f * c + i * u
    h_new = o * np.tanh(c_new)
    a3 = np.maximum(h_new @ p["w3"] + p["b3"], 0.0)
    logits = a3 @ p["wp"] + p["bp"]
    value = (a3 @ p["wv"] + p["bv"])[:, 0]
    if trace is not None:
        # A copy: a caller that refills its observation array in place (as a rollout loop
        # does) must not change the inputs the gradients are computed from.
        trace.x.append(np.array(x, copy=True))
        trace.a1.append(a1)
        trace.a2.append(a2)
        trace.gates.append((i, f, o, u))
        trace.c_prev.append(c)
        trace.h_prev.append(h)
        trace.c.append(c_new)
        trace.h.append(h_new)
        trace.a3.append(a3)
    return logits, value, h_new, c_new


def forward(p: dict, xs: np.ndarray, h: np.ndarray, c: np.ndarray, resets: np.ndarray | None = None):
    """A sequence: `xs` [T, B, D]; `resets` [T, B] (1: the LSTM state is zeroed before that
    step, an episode started). Returns (logits [T, B, A], values [T, B], h, c, trace)."""
    tr = Trace()
    logits, values = [], []
    for t in range(xs.shape[0]):
        if resets is not None:
            keep = (1.0 - resets[t])[:, None]
            h, c = h * keep, c * keep
        lg, v, h, c = step(p, xs[t], h, c, tr)
        logits.append(lg)
        values.append(v)
    return np.stack(logits), np.stack(values), h, c, tr


def backward(p: dict, tr: Trace, dlogits: np.ndarray, dvalues: np.ndarray, resets: np.ndarray | None = None) -> dict:
    """Gradients of a loss whose derivatives by the logits [T, B, A] and values [T, B] are
    given, through the whole sequence of `tr`."""
    g = {k: np.zeros_like(v) for k, v in p.items()}
    T = len(tr.x)
    n = p["wh"].shape[0]
    dh_next = np.zeros_like(tr.h[0])
    dc_next = np.zeros_like(tr.c[0])
    for t in reversed(range(T)):
        a3 = tr.a3[t]
        dl = dlogits[t]
        dv = dvalues[t][:, None]
        g["wp"] += a3.T @ dl
        g["bp"] += dl.sum(0)
        g["wv"] += a3.T @ dv
        g["bv"] += dv.sum(0)
        da3 = dl @ p["wp"].T + dv @ p["wv"].T
        dz3 = da3 * (a3 > 0)
        g["w3"] += tr.h[t].T @ dz3
        g["b3"] += dz3.sum(0)
        dh = dz3 @ p["w3"].T + dh_next
        i, f, o, u = tr.gates[t]
        c = tr.c[t]
        tc = np.tanh(c)
        do = dh * tc
        dc = dh * o * (1 - tc * tc) + dc_next
        di = dc * u
        df = dc * tr.c_prev[t]
        du = dc * i
        dgate = np.concatenate(
            [di * i * (1 - i), df * f * (1 - f), do * o * (1 - o), du * (1 - u * u)], axis=1
        )
        g["wx"] += tr.a2[t].T @ dgate
        g["wh"] += tr.h_prev[t].T @ dgate
        g["bl"] += dgate.sum(0)
        dh_next = dgate @ p["wh"].T
        dc_next = dc * f
        if resets is not None:
            keep = (1.0 - resets[t])[:, None]
            dh_next, dc_next = dh_next * keep, dc_next * keep
        da2 = dgate @ p["wx"].T
        dz2 = da2 * (tr.a2[t] > 0)
        g["w2"] += tr.a1[t].T @ dz2
        g["b2"] += dz2.sum(0)
        da1 = dz2 @ p["w2"].T
        dz1 = da1 * (tr.a1[t] > 0)
        g["w1"] += tr.x[t].T @ dz1
        g["b1"] += dz1.sum(0)
    del n
    return g


def a2c_loss_grads(logits, values, actions, returns, beta: float, value_coef: float = 0.5, normalize: bool = False):
    """A2C's loss over [T, B] steps and its derivatives by the logits and values.

    loss = mean(-A log pi(a) + value_coef/2 (R - V)^2 - beta H(pi)), A = R - V held constant
    (with `normalize`, the policy term's A is divided by its standard deviation over the
    batch, so the entropy weight means the same whatever the rewards' scale).
    Returns (loss, dlogits, dvalues, entropy mean)."""
    T, B, A = logits.shape
    pi = softmax(logits)
    logp = np.log(pi + 1e-12)
    adv = returns - values
    pg_adv = adv / (adv.std() + 1e-8) if normalize else adv
    onehot = np.eye(A)[actions]
    ent = -(pi * logp).sum(-1)
    n = T * B
    lp_a = (logp * onehot).sum(-1)
    loss = (-(pg_adv * lp_a) + value_coef * 0.5 * adv**2 - beta * ent).mean()
    dlogits = (-pg_adv[..., None] * (onehot - pi) + beta * pi * (logp + ent[..., None])) / n
    dvalues = value_coef * (values - returns) / n
    return loss, dlogits, dvalues, ent.mean()


def imitation_loss_grads(logits, targets):
    """The cross-entropy of the policy against target distributions over [T, B] steps and
    its derivative by the logits.

    `targets` [T, B, A]: each step's distribution over the candidates (a one-hot label, or a
    soft one), or all zeros where no target is known (that step contributes nothing).
    loss = mean over the targeted steps of -sum(target x log pi). Returns (loss, dlogits,
    targeted steps)."""
    mass = targets.sum(-1)
    n = int((mass > 0).sum())
    if n == 0:
        return 0.0, np.zeros_like(logits), 0
    pi = softmax(logits)
    loss = float(-(np.log(pi + 1e-12) * targets).sum() / n)
    dlogits = (pi * mass[..., None] - targets) / n
    return loss, dlogits, n


class Adam:
    """Adam (Kingma & Ba) with global-norm gradient clipping."""

    def __init__(self, params: dict, lr: float = 1e-3, clip: float = 1.0, b1=0.9, b2=0.999, eps=1e-8):
        self.lr, self.clip, self.b1, self.b2, self.eps = lr, clip, b1, b2, eps
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.t = 0

    def update(self, params: dict, grads: dict) -> float:
        norm = float(np.sqrt(sum((g * g).sum() for g in grads.values())))
        scale = min(1.0, self.clip / (norm + 1e-12))
        self.t += 1
        for k, g in grads.items():
            g = g * scale
            self.m[k] = self.b1 * self.m[k] + (1 - self.b1) * g
            self.v[k] = self.b2 * self.v[k] + (1 - self.b2) * g * g
            mh = self.m[k] / (1 - self.b1**self.t)
            vh = self.v[k] / (1 - self.b2**self.t)
            params[k] -= self.lr * mh / (np.sqrt(vh) + self.eps)
        return norm


def gradient_check(seed: int = 0, T: int = 3, B: int = 2, D: int = 5, A: int = 3, hidden: int = 6) -> float:
    """Largest relative error between `backward` and central differences of the A2C loss on
    a random small network (float64)."""
    rng = np.random.default_rng(seed)
    p = init_params(D, A, rng, hidden)
    p["wp"] *= 100.0  # a policy far from uniform exercises every term
    xs = rng.normal(size=(T, B, D))
    h0 = rng.normal(size=(B, hidden)) * 0.5
    c0 = rng.normal(size=(B, hidden)) * 0.5
    resets = np.zeros((T, B))
    resets[1, 0] = 1.0
    actions = rng.integers(A, size=(T, B))
    returns = rng.normal(size=(T, B))

    def loss_of(q):
        lg, v, _, _, _ = forward(q, xs, h0, c0, resets)
        # The advantage is a constant in A2C: take it from the unperturbed values.
        return lg, v

    lg, v, _, _, tr = forward(p, xs, h0, c0, resets)
    adv_const = returns - v

    def scalar(q) -> float:
        lg2, v2 = loss_of(q)
        pi = softmax(lg2)
        logp = np.log(pi + 1e-12)
        onehot = np.eye(A)[actions]
        ent = -(pi * logp).sum(-1)
        return float((-(adv_const * (logp * onehot).sum(-1)) + 0.25 * (returns - v2) ** 2 - 0.1 * ent).mean())

    _, dl, dv, _ = a2c_loss_grads(lg, v, actions, returns, 0.1)
    g = backward(p, tr, dl, dv, resets)
    worst = 0.0
    eps = 1e-6
    for k in NAMES:
        flat = p[k].reshape(-1)
        for idx in rng.choice(flat.size, size=min(6, flat.size), replace=False):
            old = flat[idx]
            flat[idx] = old + eps
            up = scalar(p)
            flat[idx] = old - eps
            down = scalar(p)
            flat[idx] = old
            num = (up - down) / (2 * eps)
            ana = g[k].reshape(-1)[idx]
            worst = max(worst, abs(num - ana) / max(1e-7, abs(num) + abs(ana)))
    return worst
