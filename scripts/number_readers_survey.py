"""The plain-number readers side by side over real strings: where do they read differently?

    # the readers of the tree on PYTHONPATH, as JSON lines (one per string)
    MATH=../shared/data/train/math_train.json
    PYTHONPATH=src python scripts/number_readers_survey.py read $MATH > now.jsonl
    # the same with an older tree (git archive <commit> src | tar -x -C /tmp/old)
    PYTHONPATH=/tmp/old/src python scripts/number_readers_survey.py read $MATH > old.jsonl
    # the Markdown table of the strings the old readers read differently, old and now side by side
    python scripts/number_readers_survey.py table old.jsonl now.jsonl

The strings: every MATH answer, every number-like run in the problems (digits with thousands
separators, points and signs), and hand cases. The readers, whichever the tree has:

* ``verify``: the verifier's fast path (``values.numbers.plain_number``, before it
  ``verify.extract.plain_rational``);
* ``latex``: ``values.parse.parse_number`` (the LaTeX reader, whose fast path is the same);
* ``constants``: ``values.constant_value`` on the string as a literal;
* ``llm``: the numbers ``compose.llm.numbers.NUM_IN_TEXT`` finds inside the string.

The table that docs/verification.md ("Plain numbers") gives was made this way, from f984cfa.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter

HAND = ("0,500", "5.", "1,000,000", "1,00", ".5", "-0", "1.", "+3", "3,14", "1,000", "12,345.5",
        "1{,}000", "64,\\!328", "1\\,000", "007", "-.5", "1e3", "3/4", "\\frac34", "-\\frac{3}{4}",
        "1 000", "12 34", "0,111", "00,500", "1,000.", "+1,000", "14{, }916", "1_000", "(4,112)",
        "\\$1,000")
RUN = re.compile(r"[+-]?(?:\d|\.\d)(?:\d|,\\!|\{,\}|\\,|,|\.)*")


def _strings(path: str) -> Counter:
    counts: Counter = Counter()
    for r in json.load(open(path)):
        counts[(r.get("answer") or "").strip()] += 1
        for m in RUN.finditer(r.get("problem") or ""):
            counts[m.group().rstrip(",")] += 1
    for h in HAND:
        counts[h] += 0
    return counts


def _readers():
    try:
        from composition_rl.spc.llm.answer_numbers import NUM_IN_TEXT
    except ImportError:  # a tree before the layout of issue 55
        from composition_rl.compose.llm.numbers import NUM_IN_TEXT
    from composition_rl.values import constant_value
    from composition_rl.values.parse import parse_number

    try:
        from composition_rl.values.numbers import plain_number as verify
    except ImportError:  # before the one reader
        from composition_rl.verify.extract import plain_rational as verify

    def show(x) -> str | None:
        return None if x is None else str(x)

    def read(s: str) -> dict:
        v = verify(s)
        return {
            "verify": show(None if v is None else v[0]),
            "latex": show(parse_number(s)),
            "constants": show(constant_value(s)),
            "llm": [show(parse_number(m.group())) for m in NUM_IN_TEXT.finditer(s)],
        }

    return read


def read_all(path: str) -> None:
    read = _readers()
    for s, n in sorted(_strings(path).items(), key=lambda kv: (-kv[1], kv[0])):
        print(json.dumps({"s": s, "n": n, **read(s)}))


def _plain_shape(s: str) -> bool:
    """Whether ``s`` is written like a plain number (digits, signs, separators, a fraction):
    a power or a mixed number that only the LaTeX reader reads is no disagreement."""
    t = re.sub(r"\\[dt]?frac|\\[!,]|\\?\$", "", s)
    return re.fullmatch(r"[-+\d.,{}/ _e]*", t) is not None and not re.search(r"\d\s*\{", t)


def table(old_path: str, now_path: str) -> None:
    now = {r["s"]: r for r in map(json.loads, open(now_path))}
    rows = []
    for r in map(json.loads, open(old_path)):
        plain = r["verify"] if r["verify"] is not None else r["latex"]
        if r["verify"] != r["latex"] and _plain_shape(r["s"]):
            rows.append(r)
        elif r["constants"] is not None and r["constants"] != plain:
            rows.append(r)
    print(f"{len(rows)} strings read differently (of {len(now)})")
    print("| string | times in MATH | verify | latex | constants | now: verify | now: latex "
          "| now: constants |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        n = now.get(r["s"], {})
        print(f"| `{r['s']}` | {r['n']} | {r['verify']} | {r['latex']} | {r['constants']} "
              f"| {n.get('verify')} | {n.get('latex')} | {n.get('constants')} |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["read"] and len(sys.argv) == 3:
        read_all(sys.argv[2])
    elif sys.argv[1:2] == ["table"] and len(sys.argv) == 4:
        table(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
