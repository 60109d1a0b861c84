"""How many problems can lead a link (stand as q1) with and without derived q1 values (issue 27).

For every problem of ``--input``, the symbolic engine's own tests: *eligible* (a q1 at all: an
exact v1, from the answer or derived from it) and *preferred* (eligible with no pool flaw: a
rational v1 of modest size, a question that asks for no rounding), once with
``derive_q1=False`` (the engine before issue 27) and once with the default. Prints both shares,
the derivation kinds chosen, and with ``--subset-out`` writes the problems that lead only
through a derivation (JSONL of problem/answer rows), the first pool of the derived-q1 audit
run (docs/composition.md, "Derived q1 values").

    .venv/bin/python benchmarks/derived_q1.py --input ../shared/data/train/math_train.json \\
        [--subset-out runs/derived_q1/first_pool.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from composition_rl.io.readers import load_problems
from composition_rl.spc.symbolic import SymbolicComposer


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", required=True)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--subset-out", help="write the problems that lead only through a derivation here (JSONL)")
    args = ap.parse_args(argv)
    problems = load_problems(args.input).problems
    n = len(problems)
    rows = {}
    derived_only = []
    for label, derive_q1 in (("without derivation", False), ("with derivation", True)):
        eng = SymbolicComposer(derive_q1=derive_q1)
        eligible = [p for p in problems if eng.eligible(p, 0, args.depth)]
        flaws = Counter(eng.pool_flaw(p, 0, args.depth) for p in eligible)
        rows[label] = (len(eligible), flaws[""], dict(sorted((k, v) for k, v in flaws.items() if k)))
        if derive_q1:
            kinds = Counter(eng.lead(p).derivation.kind for p in eligible if eng.lead(p).derivation is not None)
            derived_only = [p for p in eligible if eng.lead(p).derivation is not None]
    print(f"{n} problems of {args.input}")
    for label, (elig, pref, flaws) in rows.items():
        print(f"  {label:20} eligible as q1 {elig:5d} ({100 * elig / n:.1f}%)   preferred {pref:5d} "
              f"({100 * pref / n:.1f}%)   flawed: {flaws}")
    (e0, p0, _), (e1, p1, _) = rows.values()
    print(f"  change               eligible +{100 * (e1 - e0) / n:.1f} points, preferred +{100 * (p1 - p0) / n:.1f} points")
    print(f"  derivations chosen ({len(derived_only)} problems): {dict(kinds.most_common())}")
    if args.subset_out:
        out = Path(args.subset_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w", encoding="utf-8") as f:
            for p in derived_only:
                f.write(json.dumps({"problem": p.question, "answer": p.answer}, ensure_ascii=False) + "\n")
        print(f"  wrote {len(derived_only)} problems to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
