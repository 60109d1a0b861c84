#!/usr/bin/env bash
# Create .venv-verl: verl 0.9.1 next to composition-rl, for the verl interop tests
# (pytest -m verl, run with .venv-verl/bin/python). Kept apart from .venv because
# verl 0.9.1 requires transformers >=5.5.3,<5.11 while the TRL stack pins 5.24.0.
#
# torch is installed first and pinned through a constraints file, so nothing can pull a
# newer (CUDA, multi-GB) torch. verl's base requirements do not name torch itself.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
VENV=${VENV:-.venv-verl}
test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
CONSTRAINTS="$VENV/constraints.txt"
echo "torch==2.13.0" > "$CONSTRAINTS"
"$VENV/bin/pip" install -q -c "$CONSTRAINTS" torch==2.13.0
"$VENV/bin/pip" install -q -c "$CONSTRAINTS" "verl==0.9.1" "transformers>=5.5.3,<5.11,!=5.6.0" pytest
# Our package without its [train] extra (that one pins transformers 5.24 for TRL), and with
# math-verify on antlr 4.9.3: verl's hydra/omegaconf parser needs antlr4-python3-runtime 4.9.x,
# which math-verify supports through its antlr4_9_3 extra (our .venv uses 4.13.2).
"$VENV/bin/pip" install -q -c "$CONSTRAINTS" --no-deps -e .
"$VENV/bin/pip" install -q -c "$CONSTRAINTS" "sympy>=1.13" "pyarrow>=14" "rich>=13.7" "pyyaml>=6.0" \
    "reasoning-gym==0.1.25" "math-verify[antlr4_9_3]==0.9.0" "antlr4-python3-runtime==4.9.3"
# verl's V1 trainer (the default, trainer.use_v1=True) imports TransferQueue (verl's verl-core
# extra) and the rollout server's packages (on a GPU cluster they come with vLLM). --no-deps:
# their own requirements are already here, and none may replace torch. Without them
# verl.trainer.ppo.v1 cannot be imported, so the online sampler (tests/verl/test_verl_online.py)
# could not be tested.
"$VENV/bin/pip" install -q -c "$CONSTRAINTS" --no-deps "transferqueue==0.1.11" "pyzmq==27.3.0" \
    "msgspec==0.23.0" "cachetools==8.0.2" "uvicorn==0.55.0" "fastapi==0.165.0" "starlette==1.10.0" \
    "tyro==1.0.17" "docstring_parser==0.18.0" "spmd_types==0.3.1" "torchtitan==0.3.0"
"$VENV/bin/python" - <<'PY'
import torch, transformers, verl
import verl.trainer.ppo.v1.replay_buffer  # the V1 trainer imports
assert torch.__version__.startswith("2.13.0"), torch.__version__
print(f"verl {verl.__version__}, transformers {transformers.__version__}, torch {torch.__version__}")
PY
touch "$VENV/.installed"
