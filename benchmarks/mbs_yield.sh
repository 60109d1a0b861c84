#!/usr/bin/env bash
# MBS vs. direct synthesis on the toy arithmetic domain, side by side, at equal teacher budget
# (docs/mbs.md, "Measured"). Needs two tiny checkpoints: the target policy and a second student.
#   crl tiny-model --out runs/tiny_policy                              # seed 0, 300 SFT steps
#   crl tiny-model --out runs/tiny_student --seed 1 --sft-steps 150
#   benchmarks/mbs_yield.sh runs/tiny_policy runs/tiny_student runs/mbs_exp [N_SEEDS]
set -euo pipefail
POLICY=$1; STUDENT=$2; OUT=$3; N=${4:-24}
PY=${PY:-python}; CRL=${CRL:-crl}
ROLL=(--template plain --max-tokens 64 -n 8)
mkdir -p "$OUT"
# seeds: depth-3 chains of jobs/train/arithmetic.py with a seed the tiny models never trained on
$PY - "$OUT/seeds.jsonl" "$N" <<'PY'
import json, sys
from composition_rl.jobs.train.arithmetic import make_problem
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        f.write(json.dumps(make_problem(3, seed=500, index=i, digits=1)[0].to_dict()) + "\n")
PY
$CRL profile --model "$POLICY" --input "$OUT/seeds.jsonl" --out "$OUT/profile" "${ROLL[@]}" --no-progress
$CRL grow --input "$OUT/seeds.jsonl" --policy "$POLICY" --students "$POLICY" --students "$STUDENT" \
    --teacher program --from-profile "$OUT/profile" --out "$OUT/mbs" "${ROLL[@]}" --no-progress
# equal teacher budget: the baseline gets MBS's teacher calls per hard seed as its variations
TRIALS=$($PY -c "import json,math,sys; s=json.load(open(sys.argv[1])); print(max(1, math.ceil(s['cost']['teacher_calls']/max(1,s['hard_seeds']))))" "$OUT/mbs/stats.json")
$CRL grow --input "$OUT/seeds.jsonl" --policy "$POLICY" --students "$POLICY" --students "$STUDENT" \
    --teacher program --from-profile "$OUT/profile" --out "$OUT/direct" --method direct --direct-trials "$TRIALS" \
    "${ROLL[@]}" --no-progress
# MBS again with the effectivity test's copyable example left out (docs/mbs.md explains why)
$CRL grow --input "$OUT/seeds.jsonl" --policy "$POLICY" --students "$POLICY" --students "$STUDENT" \
    --teacher program --from-profile "$OUT/profile" --out "$OUT/mbs_hidden" --hide-parent-answer true \
    "${ROLL[@]}" --no-progress
# an independent re-profile of the qualified problems: another rollout seed
for M in mbs direct mbs_hidden; do
  if [ -s "$OUT/$M/qualified.jsonl" ]; then
    $CRL profile --model "$POLICY" --input "$OUT/$M/qualified.jsonl" --out "$OUT/$M/reprofile" "${ROLL[@]}" \
        --seed 1 --no-progress
  fi
done
$PY - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
for m in ("mbs", "direct", "mbs_hidden"):
    s = json.load(open(f"{out}/{m}/stats.json"))
    rp = f"{out}/{m}/reprofile/summary.json"
    still = json.load(open(rp))["goldilocks"] if os.path.exists(rp) else None
    print(json.dumps({"method": m, "hard_seeds": s["hard_seeds"], "qualified_seeds": s["qualified_seeds"],
                      "qualified_yield": s["qualified_yield"], "qualified_problems": s["qualified_problems"],
                      "teacher_calls": s["cost"].get("teacher_calls"), "student_rollouts": s["cost"].get("student_rollouts"),
                      "still_in_band_on_reprofile": still, "effectivity": s["effectivity"],
                      "dropped_by_reason": s["dropped_by_reason"]}))
PY
