# The two commands of this project: `make run` and `make test`. Both install what they need.
SHELL := /bin/bash
CARGO ?= cargo
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian packages: clang and libclang for bindgen (the libccp oracle in the conformance tests);
# libsqlite3-dev for ccp-agent's ARC trajectory store (rusqlite against the system library).
APT_PACKAGES := clang libclang-dev bpftool libbpf-dev libelf-dev zlib1g-dev pkg-config libsqlite3-dev

# Python venv for the `onnx` selection policy: ONNX Runtime's shared library comes from the PyPI
# wheel (the Rust `ort` crate, 2.0.0-rc.15, targets ONNX Runtime 1.31 and loads it at run time),
# and the training script (selector/train/train_onnx.py) needs scikit-learn and skl2onnx.
# Gymnasium (pure Python, ~3 MB with its one dependency) for `ccp_suite.gym`; the TCP-RL
# trainer (python/ccp_suite/tcprl/) is numpy only and writes ONNX with the `onnx` package that
# skl2onnx already brings.
VENV := .venv
ONNXRUNTIME_VERSION := 1.31.1
GYMNASIUM_VERSION := 1.4.0
PY_PACKAGES := onnxruntime==$(ONNXRUNTIME_VERSION) scikit-learn==1.9.1 skl2onnx==1.20.0 numpy==2.4.6 gymnasium==$(GYMNASIUM_VERSION)
# The venv's site-packages is named after the python3 that creates it, so the library path is
# known before the venv exists (a `wildcard` here would be empty on a fresh checkout).
PYTHON_DIR := $(shell python3 -c 'import sys; print("python%d.%d" % sys.version_info[:2])')
export ORT_DYLIB_PATH ?= $(CURDIR)/$(VENV)/lib/$(PYTHON_DIR)/site-packages/onnxruntime/capi/libonnxruntime.so.$(ONNXRUNTIME_VERSION)
# Tells the onnx tests that a missing library is a failure, not a skip.
export CCP_ONNX_REQUIRED := 1
# `ccp-eval run --ray` (docs/scale.md): Ray in the venv; its test must not skip.
RAY_VERSION := 2.60.0
export CCP_RAY_REQUIRED := 1

.PHONY: all build run test deps bench demo venv onnx-example models tcprl-model arc-model probe-model probe-kind-model ns3 ns3-calibrate

# `ccp-agent/kernel` and `ccp-eval/kernel` enable `ccp-datapath/kernel` too (the agent's
# `iw.kernel_cgroup` and `ccp-kernel-datapath`, the harness's `run --datapath kernel`); all are
# named so each crate's kernel code is built and tested.
KERNEL_FEATURES := --features ccp-datapath/kernel,ccp-agent/kernel,ccp-eval/kernel
# The harness alone (what `make run` and `make models` run), with its kernel mode.
EVAL := $(CARGO) run --release -q -p ccp-eval --features kernel --

# `make`: every binary the README shows, with everything they can do (`ccp-eval run --datapath
# kernel`, `ccp-agent` with `iw.kernel_cgroup`, `ccp-kernel-datapath`), in target/release/.
all: build

build: deps
	$(CARGO) build --release --workspace $(KERNEL_FEATURES)

deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

# LP-TCP's loss predictor (`lptcp`): NewReno data on its training scenario, a linfa random
# forest and the paper's threshold choice (eval/src/lptcp.rs); about 15 s.
LPTCP_MODEL := eval/models/lptcp/forest.json
$(LPTCP_MODEL): eval/models.version eval/scenarios/lptcp-train.toml
	$(EVAL) gen-data lptcp-train --kind lptcp --out results/lptcp-train
	$(EVAL) train lptcp results/lptcp-train --out eval/models/lptcp

# The learned selectors' models (`selector-antelope`, `selector-outcome`): generated on the training scenario (disjoint
# from every evaluation scenario) and fitted, once, and again whenever eval/models.version is newer (a change that made
# earlier training data wrong); about 75 s.
MODELS := eval/models/antelope/manifest.json eval/models/outcome/manifest.json
# LP-TCP is one of the selectors' candidates: its forest comes first.
$(MODELS) &: eval/models.version $(LPTCP_MODEL)
	$(EVAL) gen-data antelope-train --out results/antelope-train
	$(EVAL) train antelope results/antelope-train --out eval/models/antelope
	$(EVAL) train outcome results/antelope-train --per-mode --out eval/models/outcome

# The probe policy's shipped models (`selector-probe`, selector/models/probe, docs/selector.md):
# counterfactual runs on `selection-train` (every flow probed on its mode's start candidate, then
# switched to each candidate in turn: about 7,200 30-s runs, 3 min on two cores since ARC's rate
# ceiling, 1-1.5 h before) and the regressors fitted on them. Not part of `make models`: the
# models are in the repository, like TCP-RL's; run this after a change that moves the candidates
# or the simulator. The shipped set was fitted before the simulator's SACK compression and ARC's
# ceiling; refits since lose on the validation sets and were not shipped
# (docs/selector/measured-not-deployed.md). It is this target's output at commit 73387e6
# (byte-identical, checked on 2026-11-30: 9,912 rows, 24 min on two cores there).
probe-model: deps $(LPTCP_MODEL)
	$(EVAL) gen-data selection-train --kind probe --out results/probe-selection-train
	$(EVAL) train probe results/probe-selection-train --out selector/models/probe

# The probe policy's kind model (selector/models/probe-kind, shipped; docs/selector.md, "The
# competitors' kind at the probe's end"): counterfactual runs of five training sets started as
# the shipped probe models start, labelled by their long-running cross traffic.
KIND_SETS := selection-train selection-train2 competition-train competition-train2 lone-train
probe-kind-model: deps $(LPTCP_MODEL)
	for s in $(KIND_SETS); do \
	  $(EVAL) gen-data $$s --kind probe --starts selector/models/probe/manifest.json --out results/probe-kind/$$s || exit 1; \
	done
	$(EVAL) train probe-kind $(addprefix results/probe-kind/,$(KIND_SETS)) --out selector/models/probe-kind

models: deps $(LPTCP_MODEL) $(MODELS)


# The Python package `ccp_suite` (python/, PyO3): maturin builds it into an abi3 wheel, installed
# into the venv again when a source of the suite changed since the stamp (or it does not import).
MATURIN_VERSION := 1.16.0
PYTEST_VERSION := 9.2.0
PY_STAMP := $(VENV)/.ccp_suite.stamp
PY_SOURCES := $(shell find python/src python/ccp_suite algorithms datapath eval agent selector iw-controller \( -name '*.rs' -o -name '*.toml' -o -name '*.pyi' -o -name '*.py' \) -print) python/Cargo.toml python/pyproject.toml Cargo.toml Cargo.lock

venv:
	@if ! { [ -f "$$ORT_DYLIB_PATH" ] && $(VENV)/bin/python -c 'import onnxruntime, sklearn, skl2onnx, numpy, gymnasium; assert onnxruntime.__version__ == "$(ONNXRUNTIME_VERSION)" and gymnasium.__version__ == "$(GYMNASIUM_VERSION)"' 2>/dev/null; }; then \
	  echo "creating $(VENV) with $(PY_PACKAGES)"; \
	  rm -rf $(VENV) && python3 -m venv $(VENV) && $(VENV)/bin/pip install -q $(PY_PACKAGES) && \
	  test -f "$$ORT_DYLIB_PATH" || { echo "no ONNX Runtime library at $$ORT_DYLIB_PATH"; exit 1; }; \
	fi
	@$(VENV)/bin/python -c 'import importlib.metadata as m; assert (m.version("maturin"), m.version("pytest")) == ("$(MATURIN_VERSION)", "$(PYTEST_VERSION)")' 2>/dev/null || \
	  $(VENV)/bin/pip install -q maturin==$(MATURIN_VERSION) pytest==$(PYTEST_VERSION)
	@$(VENV)/bin/python -c 'import importlib.metadata as m; assert m.version("ray") == "$(RAY_VERSION)"' 2>/dev/null || \
	  $(VENV)/bin/pip install -q ray==$(RAY_VERSION)
	@$(VENV)/bin/python -c 'import ccp_suite' 2>/dev/null || rm -f $(PY_STAMP)
	@$(MAKE) --no-print-directory $(PY_STAMP)

$(PY_STAMP): $(PY_SOURCES)
	rm -rf target/py-wheel
	$(VENV)/bin/maturin build --release -q -m python/Cargo.toml -i $(VENV)/bin/python --compatibility linux -o target/py-wheel
	$(VENV)/bin/pip install -q --force-reinstall --no-deps target/py-wheel/ccp_suite-*.whl
	touch $@

# The selectors' twelve candidates, in the suite's order (the shipped learned models are over them).
CANDIDATES := cubic,reno,bbr,copa,vegas,westwood,illinois,c2tcp,vivace,lptcp,rltcp,arc

# Regenerates the example model of the onnx policy from `gen-data`'s feature windows
# (results/antelope-train/onnx.csv: explore flows' 8-report windows labelled with the
# condition's best candidate alone).
onnx-example: venv
	[ -f results/antelope-train/onnx.csv ] || $(EVAL) gen-data antelope-train --out results/antelope-train
	$(VENV)/bin/python selector/train/train_onnx.py --data results/antelope-train/onnx.csv --out-dir selector/models/example-onnx \
	  --candidates $(CANDIDATES)

# TCP-RL's shipped policy and change detector (selector/models/tcprl, docs/learning.md): the twelve
# candidates alone on `tcprl-train` (no rate, RTT or non-zero loss rate of tcprl-288 or dynamic;
# 4,704 runs, a few minutes), then A2C on ccp/Select-v0 over its conditions, each drawn in
# proportion to what choosing gains there over the best single CCA (--oversample), then the DNC
# on paths that change on purpose, both exported to ONNX; a seed's training takes one core for
# about 10 min on a quiet machine, and the seeds train side by side, one per core.
# Flows start on Copa in the selector: the best mean reward of the twelve alone on tcprl-train.
# One run is one draw: on another machine the same seed diverges (floating point) and can end
# far from the shipped model (docs/learning.md, "Re-running the shipped command on another
# machine"); so every seed of TCPRL_SEEDS is trained, run as `selector-tcprl` on `tcprl-val`
# (tcprl-train's grid at another seed with 30-s flows), and the best mean score there is kept
# (`ccp_suite.tcprl pick`, which writes selection.json beside the model); the model already in
# selector/models/tcprl competes too and stays on a tie, so a poor set of draws never
# replaces a better model.
TCPRL_SEEDS ?= 1 2 3
tcprl-model: venv deps
	$(EVAL) run eval/scenarios/tcprl-train.toml --schemes $(CANDIDATES) --out results/tcprl-train-singles
	sed 's/^name = .*/name = "tcprl-val"/; s/^duration_s = 20/duration_s = 30/; s/^seeds = .*/seeds = [3]/' \
	  eval/scenarios/tcprl-train.toml > results/tcprl-val.toml
	printf '%s\n' $(TCPRL_SEEDS) | xargs -P $$(nproc) -I{} sh -c 'echo "seed {}: results/tcprl-seed{}.log"; \
	  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(VENV)/bin/python -m ccp_suite.tcprl train --out results/tcprl-seed{} \
	    --scenario eval/scenarios/tcprl-train.toml --iterations 5000 --beta-decay-iterations 3000 --envs 8 --rollout 10 --seed {} \
	    --oversample results/tcprl-train-singles/results.csv --dnc-conditions 100 --dnc-episodes 2 --start copa \
	    > results/tcprl-seed{}.log 2>&1 || { echo "seed {} failed, see results/tcprl-seed{}.log"; exit 255; }'
	set -e; for s in $(TCPRL_SEEDS); do \
	  CCP_TCPRL_MODEL=results/tcprl-seed$$s/tcprl.json $(EVAL) run results/tcprl-val.toml --schemes selector-tcprl \
	    --out results/tcprl-val-seed$$s; \
	done; \
	shipped=; if [ -f selector/models/tcprl/tcprl.json ]; then \
	  CCP_TCPRL_MODEL=selector/models/tcprl/tcprl.json $(EVAL) run results/tcprl-val.toml --schemes selector-tcprl \
	    --out results/tcprl-val-shipped; \
	  shipped=selector/models/tcprl:results/tcprl-val-shipped/results.csv; \
	fi; \
	$(VENV)/bin/python -m ccp_suite.tcprl pick --out selector/models/tcprl $$shipped \
	  $(foreach s,$(TCPRL_SEEDS),results/tcprl-seed$(s):results/tcprl-val-seed$(s)/results.csv)

# ARC's shipped actor (algorithms/models/arc: actor.onnx, actor.json, curve.json; docs/algorithms.md):
# off-policy actor-critic on ccp/Rate-v0 over `arc-train` (disjoint from arc-paper's buffers),
# warm-started from a rule controller's episodes; a few minutes on two busy cores.
ARC_TRAIN := --scenario arc-train --episodes 300 --lr-actor 1e-5 --lr-critic 1e-3 --n-step 4 \
  --warm-episodes 30 --clone-updates 400 --critic-warmup-updates 1500 --updates-per-trajectory 16 --seed 1
arc-model: venv
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(VENV)/bin/python -m ccp_suite.arc train --out algorithms/models/arc $(ARC_TRAIN)

run: deps venv models
	$(EVAL) run quick --out results/quick

demo: deps
	$(EVAL) demo


# The learned selectors' and LP-TCP's models are made first (once; again when models.version
# changes): the selection benchmark's test and others run the selectors that need them.
test: deps venv models
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets $(KERNEL_FEATURES) -- -D warnings
	$(CARGO) test --workspace $(KERNEL_FEATURES)
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps -q $(KERNEL_FEATURES)
	CCP_EVAL=$(CURDIR)/target/debug/ccp-eval $(VENV)/bin/python -m pytest -q python/tests

bench: deps
	$(CARGO) bench -p ccp-datapath -p ccp-selector -p ccp-agent -p ccp-algorithms

# ns-3 beside the simulator (docs/calibration-ns3.md), optional and not
# part of `make test` (whose ns-3 test runs only when ns-3 is installed): Debian's ns-3 3.37 and
# the program that runs one calibration condition through its TCP models.
NS3_PACKAGES := ns3 libns3-dev g++ pkg-config
NS3_BIN := target/ns3/calibrate

ns3:
	@missing=""; for p in $(NS3_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@$(MAKE) --no-print-directory $(NS3_BIN)

$(NS3_BIN): eval/ns3/calibrate.cc eval/ns3/build.sh
	eval/ns3/build.sh $@

# The calibrate-tcp grid through ns-3 (16 conditions x 5 schemes x 2 seeds), into results/ctcp-ns3;
# compare it with the kernel runs as the simulator's run is compared:
#   ccp-eval agree --sim results/ctcp-ns3 --kernel results/ctcp-kernel-s1 results/ctcp-kernel-s2
ns3-calibrate: ns3
	python3 eval/ns3/run.py --out results/ctcp-ns3
