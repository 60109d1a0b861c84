"""Shortcut rules: where the rest of a problem reveals a literal's value.

A composed prompt teaches composition only if the later problem cannot be solved without
the earlier one's answer. A literal whose value the rest of the text gives away is a poor
variable: a reader recovers Y without solving q1, so the chain can be skipped and the reward
teaches nothing about composing. Each rule below names one class of such literals, with a
real MATH fragment; a literal it flags gets the rule's name as its flaw
(:data:`composition_rl.values.FLAWS`) and is never replaced. The table of real MATH cases is
``tests/test_shortcuts.py``.

* ``worked_example``: inside a worked example ("For example, if she rolls a 6 and a 3, she
  can form 36 or 63."), from the cue to the end of the example's sentences.
* ``figure``: the figure code (``[asy]``, TikZ) writes the value: a label, a coordinate, a
  radius. Style arguments (``linewidth(1)``, ``size(150)``) show nothing.
* ``sums_to_one``: shares that must sum to 1 (probabilities, fractions, percents to 100%),
  parts summing to the whole the sentence states ("20 members: 10 boys and 10 girls"), the
  count of what remains ("Nine people ... four ... three others ... the two remaining"), a
  count followed by the list it counts ("the six letters $A, B, C, D, E$ and $F$", "Two of
  the members, Penelope and Quentin,"), or a count that points back to what the text has
  introduced ("these two pieces of string").
* ``pattern``: a term its neighbours determine: an arithmetic or geometric run of three
  (``1, 2, Y, 4``; ``6075, 2025, Y``), or the opening terms before an ellipsis
  (``1 + 2 + \\cdots + 100``).
* ``default_value``: a value the context fixes by default (a deck of 52 cards, a 6-sided
  die, 60 minutes in an hour, 26 letters, $A$ for 10 in base 12, the size of a matrix the
  problem displays, the counts a named shape fixes: a triangle's three sides, a box's 12
  edges, a cylinder's 2 ends).
* ``standard_constant``: the constant of a well-known formula the problem states (the 2 of
  Euler's $V-E+F=2$, the 4 of a sphere's $4\\pi r^2$, the $\\frac{5}{9}$ and 32 of
  Fahrenheit to Celsius): a reader knows it without the earlier problem.
* ``answer_range``: in a question about residues, the modulus and the end of the range the
  answer must lie in ("Determine the residue of $-811\\pmod{24}$ ... an integer in the range
  $0,1,2,\\ldots,22,23$"): either one gives the other away; and the end of a full turn as
  an angle's range (the 360 of $0^\\circ \\le x < 360^\\circ$, the 2 of $0 \\le \\theta < 2\\pi$).
* ``grammar``: a count of 1 before a singular noun ("radius $1$ foot", "$1$ part lemon
  juice"): "$Y$ foot" tells Y = 1.
* ``zero``: a literal whose value is 0 (the right-hand side of ``=0``, a bound ``\\ge 0``):
  the value any reader guesses first.

:func:`shortcut_flaws` runs them in that order over the tokens of
:func:`composition_rl.values.find_constants` and returns each token's first rule ("" if none).
Every rule is a pure function of one question, so a problem's flags are computed once.
The weaker risks (a constant replaced only last) are :mod:`composition_rl.values.shortcut_risks`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from fractions import Fraction
from math import gcd

__all__ = ["SHORTCUT_RULES", "after_by", "has_figure", "shortcut_flaws", "singular_after"]

# -- worked_example --------------------------------------------------------------------
_EXAMPLE_WORDS = ("example", "instance", "such as", "e.g.")
_EXAMPLE_CUE = re.compile(r"\b(?:for example|for instance|such as|e\.g\.|as an example|an example is|example:)", re.I)
_SENT_END = re.compile(r"[.?!](?=[\s$)]|\Z)|\n")
_ASKS = re.compile(
    r"\s*(?:What|How|Find|Compute|Determine|Express|Enter|Give|Calculate|Evaluate|Simplify|Which|Show|Prove|"
    r"Suppose|Given|Now|Assume|Let|In how many|If)\b")


def _example_regions(q: str) -> list[tuple[int, int]]:
    """From each example cue to the end of its sentence, and on through the next sentences of
    its paragraph that do not ask the question ("However, ..." continues an example)."""
    out = []
    for m in _EXAMPLE_CUE.finditer(q):
        end = m.end()
        e = _SENT_END.search(q, end)
        end = e.end() if e else len(q)
        for _ in range(3):
            if end >= len(q) or q[end - 1] == "\n" or q[end : end + 2] == "\n\n":
                break
            nxt = _SENT_END.search(q, end)
            stop = nxt.end() if nxt else len(q)
            sentence = q[end:stop]
            if "?" in sentence or _ASKS.match(sentence) or sentence.strip() == "":
                break
            end = stop
        out.append((m.start(), end))
    return out


def _worked_example(q: str, toks, blocks: Sequence[tuple[int, int]], ends: Sequence[int]) -> set[int]:
    if not any(w in q.lower() for w in _EXAMPLE_WORDS):
        return set()
    regions = _example_regions(q)
    return {j for j, t in enumerate(toks) if any(a <= t.s < b for a, b in regions)}


# -- figure ---------------------------------------------------------------------------
_STYLE_CALL = re.compile(
    r"\b(?:linewidth|fontsize|unitsize|size|opacity|gray|grey|rgb|rgba|cmyk|arrowsize|dotsize|Arrows?|ArcArrows?|"
    r"EndArrow|BeginArrow|MidArrow|scale|xscale|yscale|markscalefactor|defaultpen|pathticks|dashpattern|"
    r"fill|filldraw|pen|currentpen|graph\.xaxis|graph\.yaxis)\s*\([^()]*\)")
_FIG_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")
_FIGURE_BLOCK = ("[asy]", "\\begin{asy}", "\\begin{tikzpicture}", "\\begin{picture}")


def has_figure(q: str, blocks: Sequence[tuple[int, int]]) -> bool:
    """Whether one of ``blocks`` (the question's code blocks) is figure code: ``[asy]``, TikZ, a
    ``picture``."""
    return any(q.startswith(_FIGURE_BLOCK, a) for a, _ in blocks)


def _figure_values(q: str, blocks: Sequence[tuple[int, int]]) -> set[int | Fraction]:
    found: set[str] = set()
    for a, b in blocks:
        if q.startswith(_FIGURE_BLOCK, a):
            found.update(_FIG_NUMBER.findall(_STYLE_CALL.sub(" ", q[a:b])))
    # ints where they can be (the tokens' keys are ints too: equal values hash alike)
    return {int(x) if x.isdigit() else Fraction(x) for x in found}


def _figure(q: str, toks, blocks: Sequence[tuple[int, int]], ends: Sequence[int]) -> set[int]:
    vals = _figure_values(q, blocks) if blocks else set()
    # a count written in words ("no two tiles", "three strips") is no figure coordinate
    return {j for j, t in enumerate(toks) if t.key in vals and t.lit[0].isdigit()}


# -- sums_to_one --------------------------------------------------------------------------
_SHARE_WORDS = ("probab", "chance", "likel", "percent", "%", "fraction", "pie", "spinner", "random", "portion")
_SHARES = re.compile(
    r"\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}"  # \frac{1}{3}
    r"|\\[dt]?frac\s*(\d)\s*(\d)"  # \frac13
    r"|(?<![\d.\w])(\d+)\s*/\s*(\d+)(?![\d.])"  # 1/3
    r"|(?<![\d.])(0?\.\d+)(?![\d])"  # 0.25
    r"|(?<![\d.])(\d+(?:\.\d+)?)\s*(?:\\%|%|\$?\s*percent\b)"  # 25\%, 25 percent
)
_PARTS_HINTS = (":", "of wh", "consist", "made up", "including", "divided into")
_PARTS_CUE = re.compile(
    r":(?=\s*(?:\$\s*)?\d)|\bof (?:whom|which)\b|\bconsists? of\b|\bconsisting of\b|\bmade up of\b|\bincluding\b"
    r"|\bdivided into\b")


def _shares(q: str) -> list[tuple[Fraction, int, int]]:
    out = []
    for m in _SHARES.finditer(q):
        g = m.groups()
        if g[0] is not None or g[2] is not None or g[4] is not None:
            num, den = (g[0], g[1]) if g[0] is not None else (g[2], g[3]) if g[2] is not None else (g[4], g[5])
            if int(den) == 0:
                continue
            v = Fraction(int(num), int(den))
        elif g[6] is not None:
            v = Fraction(g[6])
        else:
            v = Fraction(g[7]) / 100
        if 0 < v < 1:
            out.append((v, m.start(), m.end()))
    return out


def _in_a_subset_summing_to_one(vals: list[Fraction]) -> set[int]:
    """Indices of ``vals`` that belong to some subset of two or more summing to exactly 1: a
    subset sum over integers (the shares scaled to their common denominator)."""
    if len(vals) < 2 or sum(vals) < 1:
        return set()
    den = 1
    for v in vals:
        den = den * v.denominator // gcd(den, v.denominator)
    w = [int(v * den) for v in vals]
    out = set()
    for i, wi in enumerate(w):
        need = den - wi
        reach = {0}
        for j, wj in enumerate(w):
            if j != i:
                reach |= {r + wj for r in reach if r + wj <= need}
            if need in reach and need > 0:
                out.add(i)
                break
    return out


def _sums_to_one(q: str, toks, blocks: Sequence[tuple[int, int]], ends: Sequence[int]) -> set[int]:
    flagged: set[int] = set()
    low = q.lower()
    if any(w in low for w in _SHARE_WORDS) and any(c in q for c in ("frac", "/", ".", "%", "percent")):
        shares = _shares(q)[:16]
        for i in _in_a_subset_summing_to_one([v for v, _, _ in shares]):
            _, a, b = shares[i]
            flagged.update(j for j, t in enumerate(toks) if a <= t.s < b)
    # parts that add up to the whole the same sentence states: "20 members: 10 boys and 10 girls"
    cue_iter = list(_PARTS_CUE.finditer(q)) if len(toks) >= 3 and any(c in q for c in _PARTS_HINTS) else []
    for cue in cue_iter:
        i = bisect_right(ends, cue.start())
        a = ends[i - 1] + 1 if i else 0
        b = ends[i] if i < len(ends) else len(q)
        before = [j for j, t in enumerate(toks) if a <= t.s < cue.start() and t.role != "exponent"]
        after = [j for j, t in enumerate(toks) if cue.end() <= t.s < b and t.role != "exponent"]
        if len(after) < 2 or not before:
            continue
        total = sum(Fraction(toks[j].key) for j in after)
        for j in before:
            if Fraction(toks[j].key) == total:
                flagged.add(j)
                flagged.update(after)
    low = q.lower()
    if "remain" in low or "rest" in low or "other" in low:
        flagged.update(_remainders(q, toks))
    flagged.update(_listed_counts(q, toks, ends))
    return flagged


_REMAINDER = re.compile(r"\b(?:remaining|the rest|others?)\b", re.I)


def _remainders(q: str, toks) -> set[int]:
    """A count the earlier counts of its paragraph determine: "Nine people ... Four of them
    are math majors, three others are physics majors, and the two remaining people are ..."
    (9 = 4 + 3 + 2): the count next to "remaining"/"rest"/"others" and the whole are flagged."""
    flagged: set[int] = set()
    prose = [j for j, t in enumerate(toks) if t.role == "prose" and isinstance(t.key, int)]
    for n, j in enumerate(prose):
        t = toks[j]
        if not _REMAINDER.search(q, t.s, min(len(q), t.s + len(t.lit) + 25)) and not _REMAINDER.search(
                q, max(0, t.s - 12), t.s):
            continue
        para = q.rfind("\n\n", 0, t.s)
        for m in range(n - 1, -1, -1):  # a whole before it, the parts in between
            whole = prose[m]
            if toks[whole].s < para:
                break
            parts = [toks[i].key for i in prose[m + 1 : n]]
            if parts and toks[whole].key == sum(parts) + t.key:
                flagged.update((whole, j, *prose[m + 1 : n]))
                break
    return flagged


# an item: a quoted string, a short math span, a name, or a plain number ("the six digits 2,
# 2, 2, 3, 7, and 9")
_LIST_ITEM = re.compile(r"\s*(,\s*(?:(?:and|or)\s+)?|(?:and|or)\s+)?(?:``[^`']{1,20}''|\$[^$]{1,12}\$|\"[^\"]{1,20}\"|[A-Z][a-z]{0,12}"
                        r"|\d+(?:\.\d+)?(?![\d.]))")


# a count that points back to things the text has introduced: "these two pieces of string"
_BACK_REFERENCE = re.compile(r"\b(?:these|those)\s*\$?\s*$", re.I)


# after a colon, items may be plain words: one to three lowercase words each, the last after
# "and" or "or"
_WORD_ITEM = r"[a-z][a-z-]*(?:\s+[a-z][a-z-]*){0,2}"
_WORD_LIST = re.compile(r"\s*" + _WORD_ITEM + r"(?:\s*,\s*" + _WORD_ITEM + r")*\s*,?\s+(?:and|or)\s+" + _WORD_ITEM
                        + r"(?=\s*[.,;?)]|\s*$)")
_WORD_LIST_SEP = re.compile(r"\s*,\s*(?:(?:and|or)\s+)?|\s+(?:and|or)\s+")


def _listed_counts(q: str, toks, ends: Sequence[int]) -> set[int]:
    """A count followed by the list it counts: "consists of 3 words, ``splargh,'' ``glumph,''
    and ``amr''", "using the six letters $A, B, C, D, E$ and $F$", "Two of the members,
    Penelope and Quentin, ..." (up to three words between the count and its list); and a
    count after "these" or "those", which counts what the text has already introduced ("One
    piece of string ... another piece ... these two pieces")."""
    flagged: set[int] = set()
    for j, t in enumerate(toks):
        if t.role != "prose" or not isinstance(t.key, int) or t.key < 2:
            continue
        if _BACK_REFERENCE.search(q, max(0, t.s - 8), t.s):
            flagged.add(j)
            continue
        if t.key > 12:
            continue
        i = bisect_right(ends, t.s)
        b = ends[i] if i < len(ends) else len(q)
        m = re.match(r"(?:\s+[a-z]+){1,3}\s*(?:,|:|\(|\$)?", q[t.s + len(t.lit) : b])
        if m is None:
            continue
        pos = t.s + len(t.lit) + m.end()
        if q[pos - 1] == "$":
            pos -= 1
        rest = q[pos:b]
        # the items inside one math span ($A, B, C, D, E$) or one by one
        span = re.match(r"\s*\$([^$]*)\$", rest)
        items = 0
        top = re.sub(r"\([^()]*\)", "()", span.group(1)) if span is not None else ""  # a point is one item
        if span is not None and "," in top:
            items = len([x for x in top.split(",") if x.strip()])
            tail = rest[span.end() :]
            more = re.match(r"\s*,?\s*(?:and|or)\s+\$[^$]{1,12}\$", tail)
            items += more is not None
        else:
            at, sep = 0, True
            while True:
                it = _LIST_ITEM.match(rest, at)
                if it is None or it.end() == at or not (sep or it.group(1)):
                    break  # every item after the first follows a comma, "and" or "or"
                items += 1
                at = it.end()
                sep = rest[at - 3 : at] in (",''", ',"')  # ``splargh,'' carries its comma inside
        if items != t.key and q[pos - 1] == ":":  # "3 officers: chairman, vice-chairman, and sergeant-at-arms"
            words = _WORD_LIST.match(rest)
            items = len(_WORD_LIST_SEP.split(words.group())) if words is not None else 0
        if items == t.key:
            flagged.add(j)
    return flagged


# -- pattern -----------------------------------------------------------------------------
_SUPERSCRIPT = re.compile(r"\^\s*(?:\{[^{}]*\}|\\?\w)")


def _strip_powers(text: str) -> str:
    """``text`` without its superscripts, nested braces included (``^{\\frac{1}{2}}``)."""
    out, i, n = [], 0, len(text)
    while i < n:
        j = text.find("^", i)
        if j < 0:
            out.append(text[i:])
            break
        out.append(text[i:j])
        k = j + 1
        while k < n and text[k] == " ":
            k += 1
        if k < n and text[k] == "{":
            depth = 0
            while k < n:
                depth += {"{": 1, "}": -1}.get(text[k], 0)
                k += 1
                if depth == 0:
                    break
        elif k < n and text[k] == "\\":
            k += 1
            while k < n and text[k].isalpha():
                k += 1
        else:
            k += 1
        i = k
    return "".join(out)
_ELLIPSIS = re.compile(r"\\[lc]?dots[bc]?|\.\.\.|…")
_GAP_NOISE = re.compile(
    r"\s|\$|,|;|\+|-|\\[,;!: ]|\\(?:cdot|times|quad|qquad|left|right|[dt]?frac|[dt]?binom|choose)(?![A-Za-z])|\\\{|\\\}|[()\[\]{}&]|\\\\"
    r"|\band\b|\bor\b")


def _ellipsis_after(q: str, toks, seq, r: int) -> bool:
    """Whether an ellipsis follows term ``r`` of ``seq`` with only separators between."""
    t = toks[seq[r]]
    end = toks[seq[r + 1]].s if r + 1 < len(seq) else len(q)
    text = q[t.s + len(t.lit) : end]
    m = _ELLIPSIS.search(text)
    return m is not None and _GAP_NOISE.sub("", _strip_powers(text[: m.start()])) == ""


def _ellipsis_before(q: str, toks, seq, r: int) -> bool:
    """Whether an ellipsis precedes term ``r`` of ``seq`` with only separators between."""
    start = toks[seq[r - 1]].s + len(toks[seq[r - 1]].lit) if r else 0
    text = q[start : toks[seq[r]].s]
    last = ([None, *_ELLIPSIS.finditer(text)])[-1]
    return last is not None and _GAP_NOISE.sub("", text[last.end() :]) == ""


def _pattern(q: str, toks, blocks: Sequence[tuple[int, int]], ends: Sequence[int]) -> set[int]:
    # the terms a reader could continue: not powers or radices, and not the coordinates of
    # points, which are data ((9, -5) and (-3, -1) make no sequence)
    seq = [j for j, t in enumerate(toks) if t.role not in ("exponent", "radix", "notation", "coordinate")]
    if len(seq) < 2:
        return set()
    gaps, norms, ellipsis = [], [], []
    for x, y in zip(seq, seq[1:]):
        a = toks[x].s + len(toks[x].lit)
        raw = q[a : toks[y].s]
        raw = _strip_powers(raw) if "^" in raw else raw
        has_ell = bool(_ELLIPSIS.search(raw))
        raw = _ELLIPSIS.sub(",", raw)
        gaps.append(raw)
        ellipsis.append(has_ell)
        norms.append(_GAP_NOISE.sub("", raw))
    linked = []
    for i, raw in enumerate(gaps):
        ok = len(raw) <= 30 and not re.search(r"[.?!]\s|\n\s*\n", raw)
        n = norms[i]
        # a separator, or the template of its neighbours (every gap, or every other one)
        same = n == "" or any(0 <= i + d < len(norms) and norms[i + d] == n for d in (-2, -1, 1, 2))
        linked.append(ok and bool(same))
    flagged: set[int] = set()
    run = [0]
    for i in range(len(gaps) + 1):
        if i < len(gaps) and linked[i]:
            run.append(i + 1)
            continue
        vals = [Fraction(toks[seq[r]].key) for r in run]
        # three terms in arithmetic or geometric progression, next to each other or every
        # other one (2 \cdot 2^2 + 3 \cdot 2^3 + 4 \cdot 2^4: the 2, 3, 4)
        for stride in (1, 2):
            for k in range(len(run) - 2 * stride):
                a, b, c = vals[k], vals[k + stride], vals[k + 2 * stride]
                if a == b == c:
                    continue  # one value repeated (the 1s of y + 1): a repeat, not a sequence
                if b - a == c - b or (a and b and c and b * b == a * c):
                    flagged.update(seq[run[m]] for m in (k, k + stride, k + 2 * stride))
        if len(set(vals)) == 1:
            # one value repeated before or around an ellipsis (27 + \log_2 (27 + \cdots)): a
            # repeat, replaced at every place or not at all, not a run that shows a term
            run = [i + 1]
            continue
        # the opening terms before an ellipsis set the pattern (1 + 2 + \cdots + 100), and so
        # do the closing ones after it (\ldots \times 72 \times 82 \times 92)
        for k in range(len(run) - 1):
            if ellipsis[run[k]]:
                if k + 1 >= 2:
                    flagged.update(seq[r] for r in run[: k + 1])
                rest = run[k + 1 :]
                if len(rest) >= 2 and not any(ellipsis[r] for r in rest[:-1]):
                    flagged.update(seq[r] for r in rest)
        if len(run) >= 2 and (_ellipsis_after(q, toks, seq, run[-1]) or _ellipsis_before(q, toks, seq, run[0])):
            flagged.update(seq[r] for r in run)  # "1 + 2 + \\cdots + n", "\\dots - \\binom{99}{98}"
        run = [i + 1]
    return flagged


# -- default_value ---------------------------------------------------------------------
# (value, what must stand around it); each entry has a real MATH case in tests/test_shortcuts.py
_UNIT = r"\s*\$?\s*(?:\\text\{\s*)?"
_DEFAULTS: tuple[tuple[int, re.Pattern[str]], ...] = tuple((v, re.compile(p, re.I)) for v, p in (
    (52, r"^\$?\s*-?\s*cards?\b"),  # a deck of 52 cards, a 52-card deck
    (13, r"^\s*(?:cards?\s+(?:of|in)\s+each\s+suit|ranks?)\b"),
    (4, r"^\s*suits\b"),
    (6, r"^\$?\s*-?\s*(?:sided|faced|sides|faces)\b.{0,40}\b(?:die|dice|cube)\b"),  # a 6-sided die
    (60, r"^" + _UNIT + r"(?:minutes?|seconds?)\s+(?:in|per)\s+(?:an?|one|each)\s+(?:hour|minute)\b"),
    (24, r"^" + _UNIT + r"hours?\s+(?:in|per)\s+(?:an?|one|each)\s+day\b"),
    (7, r"^" + _UNIT + r"days?\s+(?:in|per)\s+(?:an?|one|each)\s+week\b"),
    (12, r"^" + _UNIT + r"(?:months?\s+(?:in|per)\s+(?:an?|one|each)\s+year|inch(?:es)?\s+(?:in|per)\s+(?:an?|one|each)\s+foot)\b"),
    (365, r"^" + _UNIT + r"days?\s+(?:in|per)\s+(?:an?|one|each)\s+year\b"),
    (3, r"^" + _UNIT + r"feet\s+(?:in|per)\s+(?:an?|one|each)\s+yard\b"),
    (100, r"^" + _UNIT + r"(?:centimeters?|cents?)\s+(?:in|per)\s+(?:an?|one|each)\s+(?:meter|dollar)\b"),
    (1000, r"^" + _UNIT + r"(?:meters?|grams?|milliliters?)\s+(?:in|per)\s+(?:an?|one|each)\s+(?:kilometer|kilogram|liter)\b"),
    (16, r"^" + _UNIT + r"ounces?\s+(?:in|per)\s+(?:an?|one|each)\s+pound\b"),
    (5280, r"^" + _UNIT + r"feet\s+(?:in|per)\s+(?:an?|one|each)\s+mile\b"),
    (26, r"^\s*letters\b.{0,30}\balphabet\b"),
    (360, r"^\s*(?:\^\s*\{?\s*\\circ\s*\}?|degrees?)\s+(?:in|of)\s+a\s+(?:circle|full)"),
    # digits above 9 named by letters in a base above ten: "using $A$ for $10$ and $B$ for $11$"
    *((v, r"\b[A-F]\$?\s+(?:for|to represent|to denote)\s*\$?\s*$") for v in range(10, 16)),
))
_DEFAULT_VALUES = {v for v, _ in _DEFAULTS}
# words one of the contexts above needs (a cheap test before the patterns run)
_DEFAULT_WORDS = ("card", "suit", "rank", "sided", "faced", "sides", "faces", "minute", "second", "hour", "day",
                  "week", "month", "year", "inch", "feet", "foot", "yard", "cent", "meter", "gram", "liter",
                  "ounce", "pound", "mile", "letter", "degree", "circ", "base")


# the size of a matrix the problem displays: "the $3 \times 3$ identity matrix" beside a 3x3 one
_MATRIX_SIZE = re.compile(r"(\d+)\s*\\times\s*(\d+)\s*\$?\s*(?:\w+\s+){0,2}matri")


def _default_value(q: str, toks, blocks: Sequence[tuple[int, int]], ends: Sequence[int]) -> set[int]:
    flagged: set[int] = set()
    counts = shape_count_offsets(q, [(t.s, t.lit, t.key) for t in toks if isinstance(t.key, int) and 2 <= t.key <= 12])
    flagged.update(j for j, t in enumerate(toks) if t.s in counts)
    if "matri" in q and "\\times" in q and re.search(r"\\begin\{[pbvBV]?matrix\}", q):
        for m in _MATRIX_SIZE.finditer(q):
            flagged.update(j for j, t in enumerate(toks) if t.s in (m.start(1), m.start(2)))
    low = q.lower()
    if not any(w in low for w in _DEFAULT_WORDS):
        return flagged
    for j, t in enumerate(toks):
        if t.key not in _DEFAULT_VALUES:
            continue
        i = bisect_right(ends, t.s)
        a = ends[i - 1] + 1 if i else 0
        b = ends[i] if i < len(ends) else len(q)
        after = q[t.s + len(t.lit) : b]
        for v, pat in _DEFAULTS:
            if v != t.key:
                continue
            target = after if pat.pattern.startswith("^") else q[a : t.s]
            if pat.search(target):
                flagged.add(j)
                break
    return flagged


# the counts a named shape fixes: "A triangle has three sides", "the four vertices of a
# rectangle", "its 12 edges" of a box, "a cylinder's 2 ends"; the count is written before its
# noun and the shape anywhere in the problem
_SHAPE_COUNTS: tuple[tuple[re.Pattern[str], dict[str, int]], ...] = tuple((re.compile(p, re.I), c) for p, c in (
    (r"\btriangle", {"sides": 3, "vertices": 3, "angles": 3, "corners": 3}),
    (r"\b(?:quadrilateral|rectangle|square|parallelogram|rhombus|trapezoid|kite)\b",
     {"sides": 4, "vertices": 4, "angles": 4, "corners": 4}),
    *((r"\b" + name + r"\b", {"sides": n, "vertices": n, "angles": n, "corners": n}) for name, n in (
        ("pentagon", 5), ("hexagon", 6), ("heptagon", 7), ("octagon", 8), ("nonagon", 9), ("decagon", 10),
        ("dodecagon", 12))),
    (r"\b(?:cube|box|rectangular (?:prism|solid|box)|cuboid)\b",
     {"faces": 6, "sides": 6, "edges": 12, "vertices": 8, "corners": 8}),
    (r"\btetrahedr", {"faces": 4, "edges": 6, "vertices": 4, "corners": 4}),
    (r"\boctahedr", {"faces": 8, "edges": 12, "vertices": 6, "corners": 6}),
    (r"\b(?:cylinder|cylindrical)", {"ends": 2, "bases": 2}),
    (r"\bsegment", {"endpoints": 2, "ends": 2}),
))
_COUNTED_NOUN = re.compile(r"\s*\$?\s*(?:[a-z]+\s+){0,1}(sides|vertices|faces|edges|corners|angles|ends|bases|endpoints)\b"
                           r"|\$?\s*-\s*(sided)\b", re.I)  # "a heptagon (7-sided polygon)"


def shape_count_offsets(q: str, toks) -> set[int]:
    """Offsets of the counts a shape the problem names fixes (a triangle's three sides, a
    box's 12 edges; read by the rule and by the scanner of ``crl audit``). ``toks`` are
    (offset, literal, value) of the candidate literals."""
    counted = [(s, v, "sides" if m.group(2) else m.group(1).lower())
               for s, lit, v in toks if (m := _COUNTED_NOUN.match(q, s + len(lit)))]
    if not counted:
        return set()  # the common case: no count stands before a side, a face, an edge ...
    shapes = [c for pat, c in _SHAPE_COUNTS if pat.search(q)]
    return {s for s, v, noun in counted if any(c.get(noun) == v for c in shapes)}


# -- standard_constant -----------------------------------------------------------------
# The constants of well-known formulas, where the problem states the formula (each has a real
# MATH case in tests/test_shortcuts.py); a group of the pattern holds each such constant.
_STANDARD: tuple[tuple[str, re.Pattern[str]], ...] = tuple((gate, re.compile(p)) for gate, p in (
    # Euler's formula for polyhedra, V - E + F = 2 (each letter once, in any order)
    ("F", r"(?<![A-Za-z\\])([VEF])\s*[-+]\s*(?!\1)([VEF])\s*[-+]\s*(?!\1|\2)[VEF]\s*=\s*(?P<c>2)(?![\d.])"),
    # the 2 of 2\pi r (circumference, 2\pi r^2 + 2\pi rh of a cylinder), the 4 of a sphere's 4\pi r^2
    ("\\pi", r"(?<![\d.{])(?P<c>[24])\s*\\pi\s*r(?![a-gi-z])"),
    # Fahrenheit to Celsius and back: C = \frac{5}{9}(F - 32), F = \frac{9}{5}C + 32
    ("Celsius", r"\\[dt]?frac\s*\{\s*(?P<c>[59])\s*\}\s*\{\s*(?P<d>[59])\s*\}\s*"
                r"(?:\(\s*[FC]\s*-\s*(?P<e>32)\b|[FC]\s*\+\s*(?P<f>32)\b)"),
))
# vertices, edges and faces of one polyhedron that satisfy V - E + F = 2: each one is forced
_POLYHEDRON_COUNT = re.compile(r"(\d+)\$?\s+(vertices|edges|faces)\b")


def standard_constant_offsets(q: str) -> set[int]:
    """Offsets in ``q`` of the literals that are constants of a well-known formula it states
    (read by the rule and by the scanner of ``crl audit``)."""
    at: set[int] = set()
    for gate, pat in _STANDARD:
        if gate in q:
            for m in pat.finditer(q):
                at.update(m.start(g) for g in "cdef" if g in pat.groupindex and m.group(g) is not None)
    if "polyhedr" in q:
        counts: dict[str, list[re.Match[str]]] = {}
        for m in _POLYHEDRON_COUNT.finditer(q):
            counts.setdefault(m.group(2), []).append(m)
        if all(len(counts.get(w, ())) == 1 for w in ("vertices", "edges", "faces")):
            (v,), (e,), (f,) = counts["vertices"], counts["edges"], counts["faces"]
            if int(v.group(1)) - int(e.group(1)) + int(f.group(1)) == 2:
                at.update(m.start(1) for m in (v, e, f))
    return at


def _standard_constant(q: str, toks, blocks: Sequence[tuple[int, int]], ends: Sequence[int]) -> set[int]:
    at = standard_constant_offsets(q)
    return {j for j, t in enumerate(toks) if t.s in at} if at else set()


# -- answer_range ----------------------------------------------------------------------
# the range a residue must lie in, stated from 0 to its last value N (inclusive): "from $0$ to
# $55$", "between 0 and 34", "in the range $0,1,2,\ldots,22,23$", "$0 \le n \le 5$"
_RANGE = re.compile(
    r"(?:\bfrom|\bbetween)\s*\$?\s*0\s*\$?\s*(?:to|and)\s*\$?\s*(?P<a>\d+)(?![\d.])"
    r"|\brange\s*\$?\s*0\s*,\s*1\s*,[^$]{0,60}?,\s*(?P<b>\d+)\s*\$"
    r"|(?<![\d.])0\s*\\leq?\s*[a-z]\s*\\leq?\s*(?P<c>\d+)(?![\d.])")
_RESIDUE_WORDS = re.compile(r"\\p?mod\b|\\bmod\b|\bmodul|\bresidue|\bcongruen", re.I)
# a full turn as the range of an angle: $0^\circ \le x < 360^\circ$, $0 \le \theta < 2 \pi$
_FULL_TURN = re.compile(
    r"(?<![\d.])0\s*(?:\^\s*\{?\s*\\circ\s*\}?)?\s*(?:\\leq?|<|\\lt)\s*\\?[A-Za-z]+\s*(?:\\leq?|<|\\lt)\s*"
    r"(?:(?P<deg>360)\s*\^\s*\{?\s*\\circ|(?P<two>2)\s*\\pi)")


def answer_range_ends(q: str) -> set[int]:
    """The last values N of the ranges ``0..N`` a question about residues states for its answer
    (read by the rule and by the scanner of ``crl audit``); empty for any other question."""
    if "0" not in q or not _RESIDUE_WORDS.search(q):
        return set()
    return {int(next(g for g in m.groups() if g is not None)) for m in _RANGE.finditer(q)}


def full_turn_offsets(q: str) -> set[int]:
    """Offsets of the 360 of ``0^\\circ \\le x < 360^\\circ`` and the 2 of ``0 \\le \\theta <
    2\\pi``: a full turn, which every reader knows."""
    if "0" not in q or ("360" not in q and "pi" not in q):
        return set()
    return {m.start(g) for m in _FULL_TURN.finditer(q) for g in ("deg", "two") if m.group(g) is not None}


def _answer_range(q: str, toks, blocks: Sequence[tuple[int, int]], ends: Sequence[int]) -> set[int]:
    """The modulus N + 1 and the range's end N, wherever they are written: with a residue's
    range ``0..N`` stated, one shows the other (a strict bound, ``0 \\le n < 31`` beside
    ``\\pmod{31}``, is the modulus itself and is replaced with it); and the end of a full
    turn, the range of an angle."""
    ends = answer_range_ends(q)
    turn = full_turn_offsets(q)
    if not ends and not turn:
        return set()
    hit = ends | {n + 1 for n in ends}
    return {j for j, t in enumerate(toks) if (isinstance(t.key, int) and t.key in hit) or t.s in turn}


# -- grammar ---------------------------------------------------------------------------
# "a $1$ by $1$ by $1$ cube", "a 4 by 4 grid": a literal after "by" is a dimension
_BY_BEFORE = re.compile(r"\bby\s*\$?\s*$")
# A count of 1 before a singular noun: "radius $1$ foot", "$1$ part lemon juice", "at least 1
# boy": with Y in its place ("$Y$ foot") the grammar tells Y = 1. Function words, verbs and
# comparatives after the 1 carry no number ("from 1 to 50", "1 and 2", "1 more than"), nor
# do abbreviated units ("1 cm", "1 km", "1 hr": 2 letters or fewer), nor a dimension ("a 1 by
# 1 by 1 cube").
_AFTER_ONE = re.compile(r"\s*\$?\s*(?:\\text\s*\{\s*)?([a-z][a-z-]*)")
_NOT_A_NOUN = frozenset("""
a an the and or nor but to through thru from into onto of on in at by for with than then as if when where while that which
who whom whose such so yet is are was were be been being has have had do does did can could will would shall should may
might must not no exactly only just more less fewer larger smaller greater bigger higher lower longer shorter further
left over apart each every other another either neither both all any some per times time plus minus modulo mod inclusive
exclusive respectively above below after before up down out off again also too very she he it they we you i its their his
her this these those there here what why how sits lies stands contains equals divides gives makes
""".split())


def after_by(q: str, s: int) -> bool:
    """Whether "by" comes right before the literal at ``s``: a dimension ("a 4 by 4 grid")."""
    return _BY_BEFORE.search(q, max(0, s - 8), s) is not None


def singular_after(q: str, s: int, e: int) -> bool:
    """Whether the count of 1 written at ``q[s:e]`` stands before a singular noun (read by the
    rule and by the scanner of ``crl audit``)."""
    m = _AFTER_ONE.match(q, e)
    if m is None or q[max(0, s - 3) : s].rstrip("$ ").endswith(("\\$", "$\\")):
        return False  # no noun, or a price ("a $\\$1$ burger" reads the same for any price)
    w = m.group(1).lower()
    if len(w) <= 2 or w in _NOT_A_NOUN or (w.endswith("s") and not w.endswith("ss")) or w.endswith("-"):
        return False
    # "a $1$ by $1$ by $1$ cube": the last 1 is a dimension, not a count of cubes
    return not after_by(q, s)


def _grammar(q: str, toks, blocks: Sequence[tuple[int, int]], ends: Sequence[int]) -> set[int]:
    return {j for j, t in enumerate(toks) if t.key == 1 and t.role == "prose" and singular_after(q, t.s, t.s + len(t.lit))}


def _zero(q: str, toks, blocks: Sequence[tuple[int, int]], ends: Sequence[int]) -> set[int]:
    # the value any reader guesses first (x^2 - 5x + 6 = 0, x, y, z \ge 0)
    return {j for j, t in enumerate(toks) if t.key == 0}


# The rules by name, in the order they are tried: a token takes the name of the first that
# flags it. Each reads (question, tokens, figure/code blocks, sentence ends) and returns the
# indices of the tokens it flags.
_RULES = {
    "worked_example": _worked_example,
    "figure": _figure,
    "sums_to_one": _sums_to_one,
    "pattern": _pattern,
    "default_value": _default_value,
    "standard_constant": _standard_constant,
    "answer_range": _answer_range,
    "grammar": _grammar,
    "zero": _zero,
}
SHORTCUT_RULES = tuple(_RULES)


def shortcut_flaws(q: str, toks, blocks: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]],
                   ends: Sequence[int]) -> list[str]:
    """Per token of ``q`` (``find_constants``' tokens: ``s``, ``lit``, ``key``, ``role``), the
    first :data:`SHORTCUT_RULES` rule that flags it, or ""."""
    out = [""] * len(toks)
    for name, rule in _RULES.items():
        for j in rule(q, toks, blocks, ends):
            if not out[j]:
                out[j] = name
    return out
