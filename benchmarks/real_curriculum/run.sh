#!/usr/bin/env bash
# Issue 53 end to end, from a fresh clone (make real-curriculum): the curriculum run, the
# depth-1 arm branched from its switch, the three evaluations and the report. Every part resumes:
# rerun after a kill and finished work is kept. About 2.5 hours on 2 idle cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_WAIT_POLICY=PASSIVE
PY=.venv/bin/python
VLLM_PY=${VLLM_PY:-.venv-vllm/bin/python}

# summary.json is written when a run ends: a finished run is not resumed from its switch
[ -f runs/real-curriculum/summary.json ] || .venv/bin/crl train --config benchmarks/real_curriculum/curriculum.yaml
# the switch: the step of the depth1 -> depth2 transition, and its checkpoint
switch=$($PY -c "
import json
t = [json.loads(l) for l in open('runs/real-curriculum/transitions.jsonl')]
print(next(r['step'] for r in t if r['to_stage'] == 'depth2'))")
ckpt=runs/real-curriculum/checkpoints/checkpoint-$switch
$PY -c "
import json, sys
s = json.load(open('$ckpt/crl_state.json'))
sys.exit(0 if s['step'] == $switch and s['curriculum']['index'] == 1 else 'not the switch checkpoint: $ckpt')"
depth2_steps=$($PY -c "import json; print(sum(json.loads(l)['depth'] == 2 for l in open('runs/real-curriculum/metrics.jsonl')))")
echo "switch at step $switch; depth-2 steps: $depth2_steps"
[ -f runs/real-curriculum-arm-depth1/summary.json ] || \
    .venv/bin/crl train --config benchmarks/real_curriculum/arm_depth1.yaml --branch-from "$ckpt" \
        --max-steps $((switch + depth2_steps))
$PY benchmarks/real_curriculum/payoff.py eval switch "$ckpt" --python "$VLLM_PY"
$PY benchmarks/real_curriculum/payoff.py eval depth2 runs/real-curriculum/final --python "$VLLM_PY"
$PY benchmarks/real_curriculum/payoff.py eval depth1 runs/real-curriculum-arm-depth1/final --python "$VLLM_PY"
$PY benchmarks/real_curriculum/payoff.py report
