"""Scan a composed run for the defect classes of issue 16 and summarise its offsets.

    PYTHONPATH=src .venv/bin/python benchmarks/scan_composition.py RUN_DIR [RUN_DIR ...] [--json OUT]

For each run directory (the output of ``crl compose``) it reads ``composed.jsonl`` and
prints: records, the count of each defect class of
:mod:`composition_rl.spc.quality` (broken LaTeX, notation, repeated value), the share
of each offset kind (zero / integer / rational / irrational), and percentiles of ``|d|``.
Give two runs (before, after) to see them side by side. Figures go in docs/composition.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path

from composition_rl.io.files import read_jsonl
from composition_rl.records import Problem
from composition_rl.spc.natural import OFFSET_KINDS, offset_kind
from composition_rl.spc.quality import DEFECTS, NOTES, scan_records


def summarise(run: Path, every: int = 1) -> dict:
    kinds: Counter[str] = Counter()
    mags: list[Fraction] = []
    multi = 0

    def records():
        nonlocal multi
        for i, row in enumerate(read_jsonl(run / "composed.jsonl")):
            if i % every:
                continue
            rec = Problem.from_dict(row)
            for lk in rec.links:
                try:
                    d = Fraction(lk.d_expr)
                except ValueError:
                    d = None
                kinds[offset_kind(d)] += 1
                if d is not None:
                    mags.append(abs(d))
                multi += bool(lk.v2_also)
            yield rec

    n, defects, examples = scan_records(records())
    links = sum(kinds.values()) or 1
    mags.sort()

    def pct(q: float) -> float | None:
        return float(mags[min(len(mags) - 1, int(q * len(mags)))]) if mags else None

    return {
        "run": str(run),
        "every": every,
        "records": n,
        "defects": {c: defects.get(c, 0) for c in (*DEFECTS, "unreadable", *NOTES)},
        "examples": examples,
        "offset_kinds": {k: round(kinds[k] / links, 4) for k in OFFSET_KINDS},
        "abs_d_percentiles": {str(q): pct(q) for q in (0.5, 0.9, 0.99, 1.0)},
        "links_replacing_several": multi,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--json", type=Path, help="also write the summaries here")
    ap.add_argument("--every", type=int, default=1, help="scan every N-th record only (a quick look at a big run)")
    args = ap.parse_args(argv)
    out = []
    for run in args.runs:
        s = summarise(run, args.every)
        out.append(s)
        print(f"{run}: {s['records']:,} records" + (f" (every {args.every}th)" if args.every > 1 else ""))
        for c, v in s["defects"].items():
            print(f"  {c:24s} {v:>8,}")
        print("  offset kinds      ", "  ".join(f"{k} {v:.1%}" for k, v in s["offset_kinds"].items()))
        print("  |d| percentiles   ", "  ".join(f"p{float(q) * 100:g} {v:g}" for q, v in s["abs_d_percentiles"].items() if v is not None))
        print(f"  links replacing several occurrences: {s['links_replacing_several']:,}")
        for c, ex in s["examples"].items():
            for rid, detail in ex[:2]:
                print(f"    e.g. {c}: {rid} {detail}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
