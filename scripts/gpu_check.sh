#!/usr/bin/env bash
# The GPU check: on a machine with one NVIDIA GPU, set up what composition-rl's GPU paths need
# from the package index (or --wheels DIR), then run and time `crl profile --backend vllm` on 64
# MATH problems with the bundled qwen-0.5b, `crl verl-recipe` launched for 5 GRPO steps plain and
# 5 with --online, and `crl train` (TRL) for 5 steps; one PASS/FAIL line per part, a summary, and
# exit 1 if any part failed (2: the run could not start). Logs, data and outputs: runs/gpu-check/.
#
#   bash scripts/gpu_check.sh --help
#   bash scripts/gpu_check.sh --dry-run          # every command it would run; runs nothing
#
# Run from a clone with ../shared/data beside it; relative paths are read from the repository
# root. The work is done by scripts/gpu_check.py (standard library only, so it runs before any
# venv exists); docs/gpu_check.md says what each part shows. Not yet run on a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
command -v "$PY" >/dev/null 2>&1 || { echo "gpu_check: error: no $PY on PATH (set PY=/path/to/python3)" >&2; exit 2; }
exec "$PY" scripts/gpu_check.py "$@"
