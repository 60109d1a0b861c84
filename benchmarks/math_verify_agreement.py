"""Agreement of our verifier with the labels of Math-Verify's own test suite.

Scores every labelled case of ``tests/fixtures/math_verify_cases.py`` (the tables of the
math-verify 0.9.0 tests, with file and line) as (response = Math-Verify's prediction,
gold = its gold), with the options the case's test passes (``precision`` ->
``float_rounding``, ``strict``), and prints the agreement for predictions with one box,
with several boxes and with none, for each set of fallbacks; with ``--baseline-src`` the
same cases are scored by another checkout's code in the same run, row beside row. Then it
prints every case where the last set of fallbacks differs from the label.

    .venv/bin/python benchmarks/math_verify_agreement.py                     # the default sets
    .venv/bin/python benchmarks/math_verify_agreement.py --fallbacks whole --fallbacks prose
    git worktree add /tmp/base main   # or: git archive main src | tar -x -C /tmp/base
    .venv/bin/python benchmarks/math_verify_agreement.py --baseline-src /tmp/base

Cases whose test sets ``allow_set_relation_comp=True`` are skipped (our verifier has no such
option; the same pairs with the default are kept). A set of fallbacks the baseline does not
know is shown as n/a for it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

from math_verify_cases import CASES  # noqa: E402

# The sets compared by default: today's default, the one-option command of the issue that
# asked for this (`crl score --fallback whole`), every reader before `prose`, and `prose`.
DEFAULT_SETS = ("answer_line", "whole", "answer_line,answer_is,whole", "prose")


def kind(pred: str) -> str:
    n = pred.count("\\boxed")
    return "single box" if n == 1 else "several boxes" if n > 1 else "no box"


def runnable_cases() -> list[tuple]:
    return [c for c in CASES if not c[6].get("allow_set_relation_comp")]


def score(fallbacks: tuple[str, ...], workers: int | None = None) -> list[tuple[bool, str, str]]:
    """(correct, outcome, extracted) for every runnable case, in table order, scored by the
    ``composition_rl`` on the path (this checkout's, or a baseline's in a subprocess)."""
    from composition_rl.grading import Verifier, VerifyConfig

    cases = runnable_cases()
    by_opts: dict[tuple, list[int]] = {}
    for i, c in enumerate(cases):
        by_opts.setdefault((c[6].get("precision", 6), c[6].get("strict", True)), []).append(i)
    out: list = [None] * len(cases)
    for (precision, strict), idx in by_opts.items():
        config = VerifyConfig(timeout_s=10.0, fallbacks=fallbacks, float_rounding=precision, strict=strict, workers=workers)
        with Verifier(config) as v:
            for i, r in zip(idx, v.score_batch([(cases[i][4], cases[i][3]) for i in idx])):
                out[i] = r
        # a timeout is no verdict (a loaded machine): score those again with a generous bound
        late = [i for i in idx if out[i].outcome.value == "timeout"]
        if late:
            print(f"  {len(late)} item(s) ran past 10 s; scored again with a 120 s bound", file=sys.stderr)
            with Verifier(dataclasses.replace(config, timeout_s=120.0, workers=1)) as v:
                for i in late:
                    out[i] = v.score(cases[i][4], cases[i][3])
    return [(r.correct, r.outcome.value, r.extracted or "") for r in out]


def score_elsewhere(src: Path, fallbacks: tuple[str, ...]) -> list[tuple[bool, str, str]] | None:
    """:func:`score` run by the code under ``src`` (a checkout, or its ``src`` folder); None when
    that code does not know one of the fallbacks."""
    path = src / "src" if (src / "src" / "composition_rl").is_dir() else src
    env = {**os.environ, "PYTHONPATH": str(path)}
    proc = subprocess.run([sys.executable, __file__, "--emit-json", "--fallbacks", ",".join(fallbacks) or "none"],
                          env=env, capture_output=True, text=True)
    if proc.returncode == 3:
        return None
    if proc.returncode != 0:
        raise SystemExit(f"baseline run failed:\n{proc.stderr[-2000:]}")
    return [tuple(x) for x in json.loads(proc.stdout)]


def _parse_set(s: str) -> tuple[str, ...]:
    return () if s == "none" else tuple(x.strip() for x in s.split(",") if x.strip())


def tally(results: list[tuple[bool, str, str]]) -> tuple[Counter, Counter]:
    agree, total = Counter(), Counter()
    for case, (correct, _, _) in zip(runnable_cases(), results):
        k = kind(case[4])
        total[k] += 1
        agree[k] += int(correct) == case[5]
    return agree, total


def _cell(a: int, n: int) -> str:
    return f"{a}/{n} ({100 * a / n:.1f}%)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fallbacks", action="append",
                    help="a set of fallbacks, comma-separated, as crl score's --fallback takes them ('none' for a box "
                         f"only); repeat to compare sets (default: {' '.join(DEFAULT_SETS)})")
    ap.add_argument("--baseline-src", type=Path, help="another checkout whose code scores the same cases beside this one")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--emit-json", action="store_true", help=argparse.SUPPRESS)  # the baseline's subprocess
    args = ap.parse_args(argv)
    sets = [_parse_set(s) for s in (args.fallbacks or DEFAULT_SETS)]
    if args.emit_json:
        try:
            print(json.dumps(score(sets[0])))
        except ValueError as e:  # an unknown fallback name: this code predates it
            print(e, file=sys.stderr)
            return 3
        return 0
    rows = []
    for fallbacks in sets:
        if args.baseline_src:
            rows.append((fallbacks, "before", score_elsewhere(args.baseline_src, fallbacks)))
        rows.append((fallbacks, "this checkout", score(fallbacks)))
    cases = runnable_cases()
    print(f"{len(cases)} cases of Math-Verify 0.9.0's tests ({len(CASES) - len(cases)} skipped: allow_set_relation_comp)")
    print(f"{'fallbacks':32} {'code':14} {'one box':>16} {'several boxes':>16} {'boxed, all':>16} {'no box':>18}")
    figures = []
    for fallbacks, code, results in rows:
        name = ",".join(fallbacks) or "none"
        if results is None:
            print(f"{name:32} {code:14} {'n/a (unknown to this code)':>16}")
            continue
        agree, total = tally(results)
        ba, bn = agree["single box"] + agree["several boxes"], total["single box"] + total["several boxes"]
        print(f"{name:32} {code:14} {_cell(agree['single box'], total['single box']):>16} "
              f"{_cell(agree['several boxes'], total['several boxes']):>16} {_cell(ba, bn):>16} "
              f"{_cell(agree['no box'], total['no box']):>18}")
        figures.append({"fallbacks": list(fallbacks), "code": code, "agree": dict(agree), "total": dict(total),
                        "disagreements": [f"{c[0]}:{c[1]}" for c, r in zip(cases, results) if int(r[0]) != c[5]]})
    last = rows[-1]
    print(f"disagreements of {','.join(last[0]) or 'none'} on {last[1]} (file:line, label, ours, extracted, gold):")
    for case, (correct, outcome, extracted) in zip(cases, last[2]):
        if int(correct) != case[5]:
            print(f"  {case[0]}:{case[1]}  label {case[5]}  {outcome:9}  {extracted[:40]!r:44} {case[3][:40]!r}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
