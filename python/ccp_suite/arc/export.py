"""ARC's actor as an ONNX graph for the `arc` algorithm (`algorithms/src/arc/actor.rs`),
written with the `onnx` package's helper API (float32, opset 17, TCP-RL's export helpers).

- `actor.onnx`: input `obs` [N, history * 7], output `action` [N, 1] (tanh).
- `actor.json`: the sidecar the algorithm checks (schema, feature names, history, delta, the
  decision interval, the model version) and what the run recorded (`training`).

Both are written under temporary names and renamed into place, the sidecar first, so an agent
that hot-reloads the model never reads half a file.
"""

from __future__ import annotations

import json
import os
import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..tcprl.export import OPSET, _f32

# The algorithm's feature schema (`ccp_algorithms::arc::features`); the environment reports
# the same names (`EnvCore.feature_names()`).
SCHEMA_VERSION = 1
FEATURES = [
    "send_rate_norm",
    "delivery_rate_norm",
    "loss_frac",
    "rtt_ratio",
    "rtt_gradient",
    "sent_over_acked",
    "last_action",
]


def actor_graph(p: dict) -> onnx.ModelProto:
    D = p["w1"].shape[0]
    g = helper.make_graph(
        [
            helper.make_node("Gemm", ["obs", "w1", "b1"], ["z1"]),
            helper.make_node("Relu", ["z1"], ["a1"]),
            helper.make_node("Gemm", ["a1", "w2", "b2"], ["z2"]),
            helper.make_node("Relu", ["z2"], ["a2"]),
            helper.make_node("Gemm", ["a2", "w3", "b3"], ["z3"]),
            helper.make_node("Tanh", ["z3"], ["action"]),
        ],
        "arc_actor",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["N", D])],
        [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["N", 1])],
        [_f32(k, p[k]) for k in ("w1", "b1", "w2", "b2", "w3", "b3")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="ccp_suite.arc")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _replace(path: pathlib.Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write(out_dir, actor: dict, history: int, delta: float, interval_rtts: float, version: int = 0, training: dict | None = None) -> pathlib.Path:
    """Writes `actor.onnx` and `actor.json` into `out_dir`; returns the model's path."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if actor["w1"].shape[0] != history * len(FEATURES):
        raise ValueError(f"the actor takes {actor['w1'].shape[0]} inputs, history {history} needs {history * len(FEATURES)}")
    sidecar = {
        "schema_version": SCHEMA_VERSION,
        "features": FEATURES,
        "history": int(history),
        "delta": float(delta),
        "interval_rtts": float(interval_rtts),
        "input_name": "obs",
        "output_name": "action",
        "version": int(version),
        "training": training or {},
    }
    model = actor_graph(actor).SerializeToString()
    _replace(out / "actor.json", (json.dumps(sidecar, indent=1) + "\n").encode())
    _replace(out / "actor.onnx", model)
    return out / "actor.onnx"


def load_params(path) -> dict:
    """The actor's parameters back from an `actor.onnx` (float64), e.g. to continue training."""
    from onnx import numpy_helper

    m = onnx.load(str(path))
    return {t.name: numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer}


CRITIC_FILE = "critic.npz"


def write_critic(out_dir, learner) -> pathlib.Path:
    """The critic and its target beside the actor (`critic.npz`), so an online learner
    continues from them; written under a temporary name and renamed."""
    out = pathlib.Path(out_dir)
    arrays = {f"critic.{k}": v for k, v in learner.critic.items()}
    arrays.update({f"target.{k}": v for k, v in learner.critic_t.items()})
    tmp = out / f".{CRITIC_FILE}.tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, out / CRITIC_FILE)
    return out / CRITIC_FILE


def load_critic(model_dir) -> dict | None:
    """{"critic": params, "target": params} from `critic.npz` in `model_dir`, or None when
    there is none. A file that is not a critic of this shape is an error naming it."""
    path = pathlib.Path(model_dir) / CRITIC_FILE
    if not path.exists():
        return None
    with np.load(path) as z:
        out: dict = {"critic": {}, "target": {}}
        for key in z.files:
            part, _, name = key.partition(".")
            if part not in out or not name:
                raise ValueError(f"{path}: unexpected array {key!r}")
            out[part][name] = z[key].astype(np.float64)
    from .net import NAMES

    for part in ("critic", "target"):
        if set(out[part]) != set(NAMES):
            raise ValueError(f"{path}: {part} has {sorted(out[part])}, expected {list(NAMES)}")
    return out
