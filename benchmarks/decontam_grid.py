"""Decontamination: recall on planted duplicates vs false hits on MATH train, per (n, threshold).

Planted: 200 rows drawn (seed 0) from the six benchmarks of ../shared/data, each planted five
ways (exact; LaTeX spacing and case changed; one number changed; one word inserted in the
middle; wrapped in a depth-2 composition's glue after another problem). Hits on MATH train
against MATH500 are *candidates* for false positives (MATH train and MATH test share some
real duplicates): docs/refresh.md labels a sample of them by reading.

    PYTHONPATH=src .venv/bin/python benchmarks/decontam_grid.py
"""

from __future__ import annotations

import random
import re
import sys
import time
from pathlib import Path

from composition_rl.io.readers import load_problems
from composition_rl.jobs.decontaminate import BenchmarkIndex, DecontamConfig

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
BENCH = ["eval/math500.parquet", "eval/aime24.json", "eval/aime25.json", "eval/amc.json", "eval/minerva.json",
         "eval/olympiad_bench.json"]


def plants(q: str, rng: random.Random) -> dict[str, str]:
    words = q.split(" ")
    mid = len(words) // 2
    nums = list(re.finditer(r"(?<![\w.])\d+(?![\w.])", q))
    if nums:
        m = nums[rng.randrange(len(nums))]
        changed = q[: m.start()] + str(int(m.group()) + 1) + q[m.end():]
    else:
        changed = q
    return {
        "exact": q,
        "spacing": q.replace(" ", "  ").replace("\\frac", "\\dfrac").replace("$", "$\\,").upper(),
        "number": changed,
        "inserted": " ".join(words[:mid] + ["exactly"] + words[mid:]),
        "composed": "What is $2+3$?\n\nCall the answer to this problem $X$. $Y$ is $1$ more than $X$.\n\n" + q,
    }


def main() -> None:
    bench = [(b, load_problems(str(DATA / b)).problems) for b in BENCH]
    rows = [(b, i, p) for b, ps in bench for i, p in enumerate(ps)]
    rng = random.Random(0)
    sample = rng.sample(rows, 200)
    train = load_problems(str(DATA / "train/math_train.json")).problems
    math500 = [bp for bp in bench if bp[0] == "eval/math500.parquet"]
    print(f"{'n':>3} {'thr':>5} {'nums':>4} " + " ".join(f"{k:>9}" for k in ("exact", "spacing", "number", "inserted", "composed"))
          + "  train-vs-500 hits  s")
    for n, thr, numbers in [(n, t, num) for num in (False, True) for n in (5, 8, 13) for t in (0.3, 0.5, 0.7)]:
        if True:
            t0 = time.perf_counter()
            cfg = DecontamConfig(n=n, threshold=thr, numbers=numbers)
            idx = BenchmarkIndex(bench, cfg)
            found = {k: 0 for k in ("exact", "spacing", "number", "inserted", "composed")}
            for b, i, p in sample:
                for kind, text in plants(p.question, random.Random(i)).items():
                    m = idx.match(text)
                    found[kind] += m is not None and m.benchmark == b and m.row == i
            idx500 = BenchmarkIndex(math500, cfg)
            hits = sum(idx500.match(p.question) is not None for p in train)
            print(f"{n:>3} {thr:>5} {'yes' if numbers else 'no':>4} " + " ".join(f"{found[k] / len(sample):>9.1%}" for k in found)
                  + f"  {hits:>5} of {len(train)}  {time.perf_counter() - t0:.1f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
