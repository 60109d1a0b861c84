"""Agreement of our verifier with the labels of Math-Verify's own test suite.

Scores every labelled case of ``tests/data/math_verify_cases.py`` (copied from
huggingface/Math-Verify's tests, with file and line) as (response = Math-Verify's
prediction, gold = its gold), with the options the case's test passes (``precision`` ->
``float_rounding``, ``strict``), and prints the agreement for predictions with one box,
with several boxes and with none, then every case where we differ from the label.

    .venv/bin/python benchmarks/math_verify_agreement.py                     # default fallbacks
    .venv/bin/python benchmarks/math_verify_agreement.py --fallback answer_line --fallback answer_is --fallback whole
    PYTHONPATH=/tmp/base/src .venv/bin/python benchmarks/math_verify_agreement.py   # another checkout's code

Cases whose test sets ``allow_set_relation_comp=True`` are skipped (our verifier has no such
option; the same pairs with the default are kept).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "data"))

from math_verify_cases import CASES  # noqa: E402

from composition_rl.verify import Verifier, VerifyConfig  # noqa: E402


def kind(pred: str) -> str:
    n = pred.count("\\boxed")
    return "single box" if n == 1 else "several boxes" if n > 1 else "no box"


def score(fallbacks: tuple[str, ...], workers: int | None = None) -> list[tuple[tuple, object]]:
    """(case, VerifyResult) for every case we can run, in table order."""
    cases = [c for c in CASES if not c[6].get("allow_set_relation_comp")]
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
    return list(zip(cases, out))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fallback", action="append", help="as crl score's --fallback (default: answer_line); 'none' for none")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)
    fallbacks = tuple(args.fallback or ("answer_line",))
    if fallbacks == ("none",):
        fallbacks = ()
    results = score(fallbacks)
    agree, total = Counter(), Counter()
    disagree = []
    for case, r in results:
        k = kind(case[4])
        total[k] += 1
        if int(r.correct) == case[5]:
            agree[k] += 1
        else:
            disagree.append((case, r))
    print(f"fallbacks {list(fallbacks)}; {len(results)} cases ({len(CASES) - len(results)} skipped)")
    boxed = agree["single box"] + agree["several boxes"], total["single box"] + total["several boxes"]
    for k in ("single box", "several boxes", "no box"):
        print(f"  {k:14} {agree[k]:4d} / {total[k]:4d}  ({100 * agree[k] / total[k]:.1f}%)")
    print(f"  {'boxed, all':14} {boxed[0]:4d} / {boxed[1]:4d}  ({100 * boxed[0] / boxed[1]:.1f}%)")
    print("disagreements (file:line, label, ours, extracted, gold):")
    for case, r in disagree:
        print(f"  {case[0]}:{case[1]}  label {case[5]}  {r.outcome.value:9}  {(r.extracted or '')[:40]!r:44} {case[3][:40]!r}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({
            "fallbacks": list(fallbacks), "agree": dict(agree), "total": dict(total),
            "disagreements": [f"{c[0]}:{c[1]}" for c, _ in disagree]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
