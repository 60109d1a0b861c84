#!/usr/bin/env bash
# `make test`: the whole suite, set-ups included, as CI runs it on a fresh clone (.ci/run).
#
# The parts are test-main, test-verl, test-real-llm and test-vllm, in that order. On a
# fresh machine two set-ups spend most of their time off the CPU or can run beside the tests:
# .venv-verl (verl and vLLM's CPU build: pip downloads and unpacking; test-verl and test-vllm
# both run in it) and .venv-llm (llama.cpp compiled from source, niced so the tests keep
# priority). They run in the background, logs in runs/setup-logs/*.log (printed when they
# finish), while .venv is set up and the main suite runs; each part waits for its own set-up.
# With everything already set up this is those four make targets in a row. Each phase prints
# its wall time.
set -euo pipefail
cd "$(dirname "$0")/.."

LOGS=runs/setup-logs
mkdir -p "$LOGS"
t0=$(date +%s)
phase() { echo "make test: $1 at $(($(date +%s) - t0)) s"; }

# a background set-up in its own process group (job control on for that one launch, so the
# foreground parts stay in this script's group): its pid in $!, its output in $LOGS/NAME.log
background() {
    local name=$1
    shift
    set -m
    ("$@" >"$LOGS/$name.log" 2>&1) &
    set +m
}
# a failed part ends the run: its background set-ups go with it (each by its process group)
trap 'for p in $(jobs -p); do kill -- "-$p" 2>/dev/null || true; done' EXIT

finish() {  # wait for a background set-up, show its log; stop here if it failed
    local name=$1 pid=$2 rc=0
    wait "$pid" || rc=$?
    echo "---- $LOGS/$name.log"
    cat "$LOGS/$name.log"
    echo "---- end of $LOGS/$name.log (exit $rc)"
    if [ "$rc" -ne 0 ]; then
        phase "$name FAILED"
        return "$rc"
    fi
    phase "$name set up"
}

# the compile needs neither .venv nor the network after its download: it starts first
background llm-env nice -n 10 make llm-env
llm=$!
make setup
phase "setup"
background verl-env make verl-env  # after .venv: torch comes from pip's cache, not a second download
verl=$!
make test-main
phase "test-main"
finish verl-env "$verl"
make test-verl
phase "test-verl"
finish llm-env "$llm"
make test-real-llm
phase "test-real-llm"
make test-vllm  # in .venv-verl, set up above
phase "test-vllm"
