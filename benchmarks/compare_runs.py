"""Which composed records of two runs are byte-identical, and why the others differ.

    PYTHONPATH=src .venv/bin/python benchmarks/compare_runs.py BASE_RUN NEW_RUN

Records are matched by their candidate chain (``metadata.candidate``: the same ordered
parents). For each chain in both runs it reports whether the line is byte-identical, and
if not whether the rules chose another constant (other literal or offset), replaced more
places, or kept the choice and still changed (other variable names, the only other cause).
"""

from __future__ import annotations

import json
import sys
from collections import Counter


def _cand(line: str) -> str:
    i = line.index('"candidate":"') + 13
    return line[i : line.index('"', i)]


def main(argv: list[str]) -> int:
    base_dir, new_dir = argv
    base: dict[str, str] = {}
    with open(f"{base_dir}/composed.jsonl", encoding="utf-8") as f:
        for line in f:
            base[_cand(line)] = line
    why: Counter[str] = Counter()
    n_new = 0
    with open(f"{new_dir}/composed.jsonl", encoding="utf-8") as f:
        for line in f:
            n_new += 1
            old = base.pop(_cand(line), None)
            if old is None:
                why["only in new run"] += 1
            elif old == line:
                why["identical"] += 1
            else:
                a, b = json.loads(old)["links"], json.loads(line)["links"]
                if any(x.get("v2_also") for x in b):
                    why["differs: a repeated quantity replaced everywhere"] += 1
                elif [(x["v2"], x["v2_offset"]) for x in a] != [(x["v2"], x["v2_offset"]) for x in b]:
                    why["differs: another constant chosen"] += 1
                elif [(x["x"], x["y"]) for x in a] != [(x["x"], x["y"]) for x in b]:
                    why["differs: same constant, other variable names"] += 1
                else:
                    why["differs: same constant and names (unexpected)"] += 1
    why["only in base run"] = len(base)
    common = sum(v for k, v in why.items() if not k.startswith("only"))
    print(f"base {base_dir} vs new {new_dir}: {n_new:,} new records, {common:,} chains in both")
    for k, v in sorted(why.items(), key=lambda kv: -kv[1]):
        print(f"  {k:50s} {v:>9,}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
