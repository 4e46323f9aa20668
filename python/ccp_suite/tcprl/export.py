"""TCP-RL's two networks as ONNX graphs for the selector's `tcprl` policy (written with the
`onnx` package's helper API, float32, opset 17).

- `policy.onnx`: inputs `obs` [1, D], `h_in` [1, H], `c_in` [1, H]; outputs `probs` [1, A]
  (softmax), `value` [1, 1], `h_out` [1, H], `c_out` [1, H]: one step of the network of
  `net.py`, the LSTM state explicit.
- `dnc.onnx`: input `x` [1, 2 D + A] (last observation, one-hot of the last action, current
  observation); output `p_change` [1, 1].
- `tcprl.json`: the sidecar the selector checks (schema, candidates, window, step, hidden
  size, the files, the DNC's threshold).
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto, helper, numpy_helper

from . import net

OPSET = 17
# The policy graph's initializers: the layers stored whole, and the LSTM's input, recurrent and
# bias weights split per gate (`net`'s column order, i f o u), e.g. `wx_i`.
WHOLE = ("w1", "b1", "w2", "b2", "w3", "b3", "wp", "bp", "wv", "bv")
GATES = "ifou"
SCHEMA_VERSION = 1


def _f32(name: str, a: np.ndarray):
    return numpy_helper.from_array(np.asarray(a, dtype=np.float32), name)


def policy_graph(p: dict) -> onnx.ModelProto:
    D, H = p["w1"].shape
    A = p["wp"].shape[1]
    inits = [_f32(k, p[k]) for k in WHOLE]
    for k, g in enumerate(GATES):
        inits.append(_f32(f"wx_{g}", p["wx"][:, k * H : (k + 1) * H]))
        inits.append(_f32(f"wh_{g}", p["wh"][:, k * H : (k + 1) * H]))
        inits.append(_f32(f"bl_{g}", p["bl"][k * H : (k + 1) * H]))
    n = [
        helper.make_node("Gemm", ["obs", "w1", "b1"], ["z1"]),
        helper.make_node("Relu", ["z1"], ["a1"]),
        helper.make_node("Gemm", ["a1", "w2", "b2"], ["z2"]),
        helper.make_node("Relu", ["z2"], ["a2"]),
    ]
    for g in GATES:
        n += [
            helper.make_node("Gemm", ["a2", f"wx_{g}", f"bl_{g}"], [f"gx_{g}"]),
            helper.make_node("MatMul", ["h_in", f"wh_{g}"], [f"gh_{g}"]),
            helper.make_node("Add", [f"gx_{g}", f"gh_{g}"], [f"g_{g}"]),
        ]
    n += [
        helper.make_node("Sigmoid", ["g_i"], ["i"]),
        helper.make_node("Sigmoid", ["g_f"], ["f"]),
        helper.make_node("Sigmoid", ["g_o"], ["o"]),
        helper.make_node("Tanh", ["g_u"], ["u"]),
        helper.make_node("Mul", ["f", "c_in"], ["fc"]),
        helper.make_node("Mul", ["i", "u"], ["iu"]),
        helper.make_node("Add", ["fc", "iu"], ["c_out"]),
        helper.make_node("Tanh", ["c_out"], ["tc"]),
        helper.make_node("Mul", ["o", "tc"], ["h_out"]),
        helper.make_node("Gemm", ["h_out", "w3", "b3"], ["z3"]),
        helper.make_node("Relu", ["z3"], ["a3"]),
        helper.make_node("Gemm", ["a3", "wp", "bp"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
        helper.make_node("Gemm", ["a3", "wv", "bv"], ["value"]),
    ]
    g = helper.make_graph(
        n,
        "tcprl_policy",
        [
            helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, D]),
            helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [1, H]),
            helper.make_tensor_value_info("c_in", TensorProto.FLOAT, [1, H]),
        ],
        [
            helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, A]),
            helper.make_tensor_value_info("value", TensorProto.FLOAT, [1, 1]),
            helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, H]),
            helper.make_tensor_value_info("c_out", TensorProto.FLOAT, [1, H]),
        ],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="ccp_suite.tcprl")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def dnc_graph(d: dict) -> onnx.ModelProto:
    n_in, H = d["w1"].shape
    g = helper.make_graph(
        [
            helper.make_node("Gemm", ["x", "w1", "b1"], ["z1"]),
            helper.make_node("Relu", ["z1"], ["a1"]),
            helper.make_node("Gemm", ["a1", "w2", "b2"], ["z2"]),
            helper.make_node("Sigmoid", ["z2"], ["p_change"]),
        ],
        "tcprl_dnc",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n_in])],
        [helper.make_tensor_value_info("p_change", TensorProto.FLOAT, [1, 1])],
        [_f32(k, d[k]) for k in ("w1", "b1", "w2", "b2")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="ccp_suite.tcprl")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def read_policy(sidecar_path) -> tuple[dict, list[str]]:
    """The parameters (float64, `net.init_params`' layout) and candidates of a model written by
    `write`, from its `tcprl.json` and `policy.onnx`: the inverse of `policy_graph`, so a
    shipped policy can be trained further. Raises `ValueError` on a file that is not one."""
    path = pathlib.Path(sidecar_path)
    try:
        sidecar = json.loads(path.read_text())
        graph = onnx.load(str(path.parent / sidecar["policy"])).graph
        candidates = [str(c) for c in sidecar["candidates"]]
    except (OSError, ValueError, KeyError, TypeError, DecodeError) as e:
        raise ValueError(f"{path}: not a tcprl model ({e})") from e
    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in graph.initializer}
    split = [f"{k}_{g}" for g in GATES for k in ("wx", "wh", "bl")]
    missing = [k for k in (*WHOLE, *split) if k not in w]
    if missing:
        raise ValueError(f"{path}: policy graph lacks {missing}")
    p = {k: w[k] for k in WHOLE}
    for k in ("wx", "wh"):
        p[k] = np.concatenate([w[f"{k}_{g}"] for g in GATES], axis=1)
    p["bl"] = np.concatenate([w[f"bl_{g}"] for g in GATES])
    D, H = p["w1"].shape
    # The shapes a network of this input, hidden size and candidates has.
    template = net.init_params(D, len(candidates), np.random.default_rng(0), H)
    for k, t in template.items():
        if p[k].shape != t.shape:
            raise ValueError(f"{path}: {k} has shape {p[k].shape}, expected {t.shape}")
    bad = [k for k, v in p.items() if not np.isfinite(v).all()]
    if bad:
        raise ValueError(f"{path}: non-finite weights in {bad}")
    if sidecar.get("obs_dim") != D:
        raise ValueError(f"{path}: obs_dim {sidecar.get('obs_dim')} but the policy takes {D}")
    return p, candidates


def write(
    out_dir,
    policy: dict,
    candidates: list[str],
    window: int,
    step_rtts: float,
    step_s: float | None,
    dnc: dict | None = None,
    dnc_threshold: float = 0.5,
    start: str = "random",
) -> pathlib.Path:
    """Writes `policy.onnx`, `dnc.onnx` (if given) and `tcprl.json` into `out_dir`. `start`:
    the candidate every flow starts on in the selector, or "random" (TCP-RL's random initial
    scheme, drawn per flow)."""
    if start != "random" and start not in candidates:
        raise ValueError(f"start must be 'random' or one of {list(candidates)}, not {start!r}")
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    onnx.save(policy_graph(policy), str(out / "policy.onnx"))
    if dnc is not None:
        onnx.save(dnc_graph(dnc), str(out / "dnc.onnx"))
    sidecar = {
        "schema_version": SCHEMA_VERSION,
        "candidates": list(candidates),
        "window": window,
        "obs_dim": int(policy["w1"].shape[0]),
        "hidden": int(policy["wh"].shape[0]),
        "step": {"seconds": step_s} if step_s else {"rtts": step_rtts},
        "policy": "policy.onnx",
        "dnc": "dnc.onnx" if dnc is not None else None,
        "dnc_threshold": dnc_threshold,
        "start": start,
    }
    (out / "tcprl.json").write_text(json.dumps(sidecar, indent=1) + "\n")
    (out / "reference.json").write_text(json.dumps(reference(policy, dnc)) + "\n")
    return out / "tcprl.json"


def reference(policy: dict, dnc: dict | None, steps: int = 4, seed: int = 0) -> dict:
    """What the numpy networks give on a few random observations, float32 as exported: the
    selector's tests replay them through ONNX Runtime."""
    from . import dnc as dnc_mod
    from . import net

    p32 = {k: np.asarray(v, dtype=np.float32).astype(np.float64) for k, v in policy.items()}
    rng = np.random.default_rng(seed)
    D, H = policy["w1"].shape[0], policy["wh"].shape[0]
    A = policy["wp"].shape[1]
    h = np.zeros((1, H))
    c = np.zeros((1, H))
    obs_seq, probs_seq = [], []
    for _ in range(steps):
        obs = rng.uniform(0.0, 2.0, size=(1, D)).astype(np.float32).astype(np.float64)
        lg, _, h, c = net.step(p32, obs, h, c)
        obs_seq.append(obs[0].tolist())
        probs_seq.append(net.softmax(lg)[0].tolist())
    out = {"obs": obs_seq, "probs": probs_seq, "h_last": h[0].tolist(), "c_last": c[0].tolist()}
    if dnc is not None:
        d32 = {k: np.asarray(v, dtype=np.float32).astype(np.float64) for k, v in dnc.items()}
        x = rng.uniform(0.0, 2.0, size=(1, 2 * D + A)).astype(np.float32).astype(np.float64)
        out["dnc_x"] = x[0].tolist()
        out["dnc_p"] = float(dnc_mod.predict(d32, x)[0])
    return out
