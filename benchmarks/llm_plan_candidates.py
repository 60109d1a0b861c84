"""What the LLM engine's program plan did with each candidate of a depth-2 ``crl compose --engine llm``
run, grouped by what the model had to do and by whether the symbolic engine takes the chain.

    .venv/bin/python benchmarks/llm_plan_candidates.py runs/plan_q05 [--input ../shared/data/train/math_train.json]

Reads ``OUT/llm_journal.jsonl`` (one line per finished candidate: its parents, outcome and the
requests it cost) and groups each candidate by the symbolic engine's own verdict on the same
chain and by what the plan asks of the model:

- ``define``: the finder has v1 and a constant: the model only writes X's definition (none
  for a derived v1);
- ``place``: v1 is the program's, but problem 2 has no constant the finder may replace: the
  model points at one (a number in words, an ordinal);
- ``propose``: q1's answer gives no program v1: the model's whole proposal.

Prints one markdown table (groups x outcomes), the calls per accepted record, and each
accepted record's definition, relation and later problem, for reading. The second group
(chains the symbolic engine rejects) is what the model adds.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from composition_rl.io.readers import load_problems  # noqa: E402
from composition_rl.spc.base import Rejection  # noqa: E402
from composition_rl.spc.symbolic import SymbolicComposer  # noqa: E402

# the link's paragraph: "Let $X$ be <definition>. $Y$ is d less than $X$."
RELATION = re.compile(r"(Let \$[A-Z]\$ be .*?\$[A-Z]\$ is .*? (?:less|more) than \$[A-Z]\$\.)\s*", re.S)


def plan_step(finder: SymbolicComposer, chain) -> str:
    if finder.lead(chain[0]) is None:
        return "propose"
    return "define" if finder.safe_constants(chain[1]) else "place"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="the crl compose --engine llm output folder")
    ap.add_argument("--input", type=Path, default=REPO.parent / "shared" / "data" / "train" / "math_train.json")
    ap.add_argument("--seed", type=int, default=0, help="the run's --seed (the symbolic engine's ties)")
    args = ap.parse_args(argv)
    by_id = {p.id: p for p in load_problems(args.input).problems}
    finder = SymbolicComposer(seed=args.seed)
    rows = [json.loads(line) for line in (args.out / "llm_journal.jsonl").read_text(encoding="utf-8").splitlines() if line]
    table: dict[tuple[bool, str], Counter] = defaultdict(Counter)
    accepted, requests = [], 0
    for r in rows:
        row = r["row"]
        chain = [by_id[i] for i in (row["parents"] if r["ok"] else row["candidates"])]
        sym = not isinstance(finder.compose(chain, r["cid"]), Rejection)
        outcome = "accepted" if r["ok"] else row["reason"]
        table[(sym, plan_step(finder, chain))][outcome] += 1
        requests += r["requests"]
        if r["ok"]:
            accepted.append((r["cid"], sym, row))
    print("| symbolic engine takes it | model's part | candidates | accepted | rejected (reason: count) |")
    print("|---|---|---|---|---|")
    for (sym, step), c in sorted(table.items(), key=lambda kv: (not kv[0][0], kv[0][1])):
        rej = ", ".join(f"{k} {v}" for k, v in c.most_common() if k != "accepted")
        print(f"| {'yes' if sym else 'no'} | {step} | {sum(c.values())} | {c['accepted']} | {rej or '-'} |")
    n = len(accepted)
    print(f"\n{n} of {len(rows)} accepted; {requests} requests, "
          f"{requests / n:.2f} per accepted" if n else f"\n0 of {len(rows)} accepted; {requests} requests")
    for cid, sym, rec in accepted:
        (link, *_) = rec["links"]
        m = RELATION.search(rec["question"])
        print(f"\n- `{cid[:8]}` ({'symbolic too' if sym else 'model only'}; v1 from {rec['metadata']['v1_from'][0]}):"
              f" X = {link['v1_expr']}, Y = {link['v2_expr']}; {m.group(1) if m else '?'!r}\n  problem 2: "
              f"{rec['question'][m.end():][:300] if m else ''!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
