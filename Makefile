# The two commands: `make build` (every sample and each -D variant that
# samples/library.toml names) and `make test`. Both start from a fresh clone
# with Python 3.11 and the package registries; nothing else is assumed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: build test fuzz mutate bench peer-sass gpu-test gpu-bench gpu-wheels gpu-check clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

build: $(STAMP)
	$(BIN)/hopperc build samples/library.toml --out-dir build

# worksteal: an idle worker takes queued tests from a busy one (the suite's
# longest tests otherwise leave one core idle at the end)
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --dist worksteal

# A long fuzz campaign (the suite runs about 2,000 inputs of the same kind):
# prints inputs, accepted kernels, errors by kind and one line per failure
# class, whose shortest reproducer it writes to $(FUZZ_OUT). Exit 1 on a failure.
FUZZ_INPUTS ?= 100000
FUZZ_SEED ?= 0
FUZZ_OUT ?= build/fuzz-failures

fuzz: $(STAMP)
	$(BIN)/python -m tests.fuzz.run --inputs $(FUZZ_INPUTS) --seed $(FUZZ_SEED) --out $(FUZZ_OUT)

# Every synchronization of every sample and test kernel removed or altered, one
# at a time: each mutant must be caught by `check` or argued equivalent in
# tests/mutation/equivalent.toml (`make test` scores the small kernels).
mutate: $(STAMP)
	$(BIN)/python -m tests.mutation.run

# On a machine with a Hopper GPU: PyTorch, the GPU tests (a skip is a failure
# here), then compute-sanitizer's racecheck and synccheck on every sample.
GPU_STAMP := $(VENV)/.gpu-stamp
SANITIZER ?= $(shell command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

$(GPU_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,gpu]'
	touch $(GPU_STAMP)

gpu-test: $(GPU_STAMP)
	HOPPERC_REQUIRE_GPU=1 $(BIN)/python -m pytest -q tests/gpu
	for f in samples/*.hk; do for tool in racecheck synccheck; do \
		echo "$$tool $$f"; \
		$(SANITIZER) --tool $$tool --error-exitcode 1 $(BIN)/hopperc run $$f || exit 1; \
	done; done

gpu-bench: $(GPU_STAMP)
	$(BIN)/python bench/gemm.py
	$(BIN)/python bench/gemm.py --sample gemm_persistent
	$(BIN)/python bench/gemm.py --sample gemm_pingpong
	$(BIN)/python bench/gemm.py --sample gemm_multicast
	$(BIN)/python bench/gemm.py --sample gemm_one_role
	$(BIN)/python bench/attention.py
	$(BIN)/python bench/attention.py --causal

# A bare Hopper machine without network (Python 3.12, PyTorch, CUDA 13): `make
# gpu-wheels` here fills wheels/ (git-ignored: bring it along), then `make
# gpu-check` there installs from it offline and writes build/gpu-report.md
# (docs/runtime.md). GPU_PYTHON is the machine's Python that holds PyTorch.
GPU_PYTHON ?= python3

gpu-wheels: $(STAMP)
	$(BIN)/python bench/gpu_wheels.py --out wheels

gpu-check:
	$(GPU_PYTHON) bench/gpu_check.py --wheels wheels --report build/gpu-report.md

bench: $(STAMP)
	$(BIN)/python bench/frontend.py
	$(BIN)/python bench/check.py

# The samples' SASS beside the kernels a user would pick (no GPU): FlashAttention-3's
# forward and backward, Liger's LayerNorm and cross-entropy compiled by Triton, CUTLASS's
# stream-K GEMM (nvcc and the CUTLASS headers of `make test`). Two wheels are read, not
# imported: installed without their torch and JAX dependencies.
PEER_FILES := liger-kernel==0.8.5 flash-attn3-jax==0.2.3

peer-sass: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[peers]'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps $(PEER_FILES)
	$(BIN)/python bench/attention_sass.py --head-dim 64 --head-dim 128 --head-dim 256
	$(BIN)/python bench/attention_sass.py --head-dim 64 --head-dim 128 --head-dim 256 --causal
	$(BIN)/python bench/attention_bwd_sass.py
	$(BIN)/python bench/attention_bwd_sass.py --causal
	$(BIN)/python bench/triton_sass.py
	$(BIN)/python bench/cutlass_sass.py --kernel streamk samples/gemm_splitk.hk samples/gemm_streamk.hk

clean:
	rm -rf build $(VENV)
