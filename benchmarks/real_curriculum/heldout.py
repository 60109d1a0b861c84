"""Write the payoff's held-out sets (issue 53), before any arm runs; committed beside this file.

- ``heldout_basic_arithmetic.jsonl``: every two-term one-digit ``+``/``-`` problem that
  reasoning-gym's ``basic_arithmetic`` (the training family, the preset's config) produces
  over seeds 1-4 x 2,000 draws, minus every problem whose expression is among the 64 training
  prompts (seed 0): the training family, never trained on by any arm.
- ``heldout_chain_sum3.jsonl``: 150 distinct ``chain_sum`` problems of exactly three one-digit
  terms (seed 0): another reasoning-gym family, another wording and one more term.

    .venv/bin/python benchmarks/real_curriculum/heldout.py   # rewrites both; a rerun gives the same bytes
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import reasoning_gym as rg

HERE = Path(__file__).resolve().parent
TRAIN = dict(min_terms=2, max_terms=2, min_digits=1, max_digits=1, operators=["+", "-"],
             allow_parentheses=False, allow_negation=False)


def expression(question: str) -> str:
    """The arithmetic in a question, spaces dropped: '4 - 1' of 'Calculate 4 - 1.'."""
    found = re.findall(r"-?\d+(?:\s*[-+]\s*-?\d+)+", question)
    if not found:
        raise ValueError(f"no expression in {question!r}")
    return found[-1].replace(" ", "")


def main() -> None:
    seen = {expression(x["question"]) for x in rg.create_dataset("basic_arithmetic", size=64, seed=0, **TRAIN)}
    rows, kept = [], set()
    for seed in range(1, 5):
        for x in rg.create_dataset("basic_arithmetic", size=2000, seed=seed, **TRAIN):
            e = expression(x["question"])
            if e in seen or e in kept:
                continue
            kept.add(e)
            rows.append({"id": f"ba-heldout-{len(rows)}", "question": x["question"], "answer": str(x["answer"])})
    _write(HERE / "heldout_basic_arithmetic.jsonl", rows)
    other, kept = [], set()
    for x in rg.create_dataset("chain_sum", size=2000, seed=0, min_terms=3, max_terms=3, min_digits=1, max_digits=1):
        if x["question"] in kept:
            continue
        kept.add(x["question"])
        other.append({"id": f"chain3-{len(other)}", "question": x["question"], "answer": str(x["answer"])})
        if len(other) == 150:
            break
    _write(HERE / "heldout_chain_sum3.jsonl", other)
    print(f"{len(rows)} held-out basic_arithmetic problems ({len(seen)} training expressions excluded); "
          f"{len(other)} chain_sum problems")


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")


if __name__ == "__main__":
    main()
