# The two commands of this project: `make run` and `make test`. Both install what they need.
SHELL := /bin/bash
CARGO ?= cargo
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian packages: clang and libclang for bindgen (the libccp oracle in the conformance tests).
APT_PACKAGES := clang libclang-dev bpftool libbpf-dev libelf-dev zlib1g-dev pkg-config

.PHONY: run test deps bench demo models

deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

# The learned selectors' models (`selector-antelope`, `selector-outcome`): generated on the training scenario (disjoint
# from every evaluation scenario) and fitted, once; about 10 s.
MODELS := eval/models/antelope/manifest.json eval/models/outcome/manifest.json
$(MODELS):
	$(CARGO) run --release -q -p ccp-eval -- gen-data antelope-train --out results/antelope-train
	$(CARGO) run --release -q -p ccp-eval -- train antelope results/antelope-train --out eval/models/antelope
	$(CARGO) run --release -q -p ccp-eval -- train outcome results/antelope-train --out eval/models/outcome

models: deps $(MODELS)

run: deps models
	$(CARGO) run --release -q -p ccp-eval -- run quick --out results/quick

demo: deps
	$(CARGO) run --release -q -p ccp-eval -- demo

test: deps
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --features ccp-datapath/kernel -- -D warnings
	$(CARGO) test --workspace --features ccp-datapath/kernel

bench: deps
	$(CARGO) bench -p ccp-datapath
