"""The shortcut classes of the defect scan (:mod:`composition_rl.spc.quality`): the ways
a composed prompt shows the replaced value anyway, each read from the original later problem
and the replaced places by code of its own (the finder's rules, which keep such literals out,
live in values/constants.py and values/shortcuts.py; a count here is a second opinion on them).
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from fractions import Fraction

from composition_rl.spc.quality_text import (
    NUMBER,
    POINT,
    in_figure,
    in_subscript,
    in_superscript,
    math_at,
    no_powers,
    number_value,
)

__all__ = ["revealed"]

_CUE = re.compile(r"\b(?:for example|for instance|such as|e\.g\.|as an example|an example is|example:)", re.I)
_SHARE = re.compile(r"\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}|(?<![\w.])(\d+)\s*/\s*(\d+)(?![\d.])"
                    r"|(?<![\d.])(0?\.\d+)(?!\d)|(?<![\d.])(\d+(?:\.\d+)?)\s*(?:\\%|%)")
_SHARE_WORDS = re.compile(r"probab|chance|likel|percent|%|fraction|pie|spinner|random|portion", re.I)
_SEPARATOR = re.compile(r"\s|\$|,|;|\+|-|\\[,;!: ]|\\(?:cdot|times|quad|qquad|left|right|[dt]?frac|[dt]?binom|choose)(?![A-Za-z])"
                        r"|\\\{|\\\}|[()\[\]{}&]|\band\b|\bor\b")
_DOTS = re.compile(r"\\[lc]?dots[bc]?|\.\.\.|…")

# the argument of a command that is no arithmetic (\\choose 2, \\sin 30): not a term of a sum
_ARGUMENT_OF = re.compile(r"\\(?!(?:cdot|times|div|pm|mp|le|ge|leq|geq|neq|approx|left|right|quad|qquad|[lc]?dots[bc]?"
                          r"|[dt]?frac|sqrt)\b)[A-Za-z]+\s*$")
_GLUED_OPERATOR = re.compile(r"\\(?:cdot|times|div|pm|[lc]?dots)$")


_SENTENCE = re.compile(r"[.?!](?=[\s$)]|\Z)|\n")
_ASKING = re.compile(r"\s*(?:What|How|Find|Compute|Determine|Express|Enter|Give|Calculate|Evaluate|Simplify|Which|"
                     r"Show|Prove|Suppose|Given|Now|Assume|Let|In how many|If)\b")


def _in_example(q: str, off: int) -> bool:
    """Whether ``off`` is inside a worked example: a cue earlier in its sentence, or in one
    of the three sentences before it in its paragraph, with no sentence from the cue's on
    asking the question."""
    para = q.rfind("\n", 0, off) + 1
    ends = [m.end() for m in _SENTENCE.finditer(q, para)]
    starts = [para, *ends]
    i = max(j for j, st in enumerate(starts) if st <= off)
    own_end = ends[i] if i < len(ends) else len(q)
    if _CUE.search(q, starts[i], off):
        return True
    if "?" in q[starts[i] : own_end] or _ASKING.match(q, starts[i]):
        return False
    for j in range(i - 1, max(-1, i - 4), -1):
        if _CUE.search(q, starts[j], ends[j]):
            return True
        if "?" in q[starts[j] : ends[j]] or _ASKING.match(q, starts[j]):
            return False
    return False


_THESE = re.compile(r"\b(?:these|those)\s*\$?\s*$", re.I)
# up to three words between a count and its list ("of the members,"), then the items: names,
# quoted strings or math spans, each after the first behind a comma, "and" or "or"
_COUNTED = re.compile(r"\$?(?:\s+[a-z]+){1,3}\s*[,:(]?")
_ITEM = re.compile(r"\s*(?:``[^`']{1,20}''|\"[^\"]{1,20}\"|\$[^$]{1,12}\$|[A-Z][a-z]{0,12}\b|\d+(?:\.\d+)?(?![\d.]))")
_ITEM_SEP = re.compile(r"\s*(?:,\s*(?:and|or)\b|,|and\b|or\b)")


def _count_items(q: str, pos: int) -> int:
    """How many items a list starting at ``pos`` holds (0 when none starts there)."""
    n = 0
    while True:
        it = _ITEM.match(q, pos)
        if it is None:
            return n
        n += 1
        pos = it.end()
        if it.group().rstrip().endswith((",''", ',"')):  # ``splargh,'' holds its comma
            sep = re.match(r"\s*(?:and|or)?", q[pos:])
            pos += sep.end()
            continue
        sep = _ITEM_SEP.match(q, pos)
        if sep is None:
            return n
        pos = sep.end()


Found = Iterator[tuple[str, str]]  # (class, why)


def revealed(q: str, places: list[int], lit: str, v2: Fraction) -> Found:
    """(class, why) for each shortcut class the replaced places fall in (after a ``pattern``,
    none is read further)."""
    # worked_example: an example cue before the place in its sentence, or in an earlier
    # sentence of its paragraph when no sentence from there on asks the question
    for off in places:
        if _in_example(q, off):
            yield "worked_example", f"{lit!r} at {off} is inside a worked example"
            break
    yield from _sums_to_one(q, places, lit, v2)
    if (yield from _pattern(q, places, lit)):
        return
    yield from _by_tables(q, places, lit, v2)


def _sums_to_one(q: str, places: list[int], lit: str, v2: Fraction) -> Found:
    """A share holding a place, in shares of which some sum to exactly 1; or a listed count."""
    shares = []
    for m in _SHARE.finditer(q):
        g = m.groups()
        if g[0] or g[2]:
            num, den = (g[0], g[1]) if g[0] else (g[2], g[3])
            v = Fraction(int(num), int(den)) if int(den) else None
        else:
            v = Fraction(g[4]) if g[4] else Fraction(g[5]) / 100
        if v is not None and 0 < v < 1:
            shares.append((v, m.start(), m.end()))
    mine = [i for i, (_, a, b) in enumerate(shares) if any(a <= off < b for off in places)]
    if mine and len(shares) <= 12 and _SHARE_WORDS.search(q):
        others = [v for i, (v, _, _) in enumerate(shares) if i not in mine]
        for i in mine:
            need = 1 - shares[i][0]
            reach = {Fraction(0)}
            for v in others:
                reach |= {r + v for r in reach if r + v <= need}
            if need > 0 and need in reach:
                yield "sums_to_one", f"{lit!r} is a share of shares summing to 1"
                break
    # sums_to_one, a listed count: a count after "these"/"those", or one a few words before
    # the list of exactly that many items it counts
    if v2.denominator == 1 and v2 >= 2:
        for off in places:
            end = off + len(lit)
            if math_at(q, off) and not (q[off - 1 : off] == "$" and q[end : end + 1] == "$"):
                continue  # a term of a formula, not a count in prose
            if _THESE.search(q, max(0, off - 8), off):
                yield "sums_to_one", f"{lit!r} at {off} counts what 'these'/'those' points back to"
                break
            m = _COUNTED.match(q, off + len(lit))
            if m is not None and v2 <= 12 and _count_items(q, m.end()) == v2:
                yield "sums_to_one", f"{lit!r} at {off} counts the list that follows it"
                break


def _pattern(q: str, places: list[int], lit: str) -> Generator[tuple[str, str], None, bool]:
    """A place whose neighbours (joined by separators only) form a sequence with it; returns
    (as the generator's value) whether it found one."""
    pairs = [(m.start(), m.end()) for m in POINT.finditer(q)]  # points are data, not sequences
    nums = [m for m in NUMBER.finditer(q) if not in_superscript(q, m.start()) and not in_figure(q, m.start())
            and not any(a < m.start() < b for a, b in pairs) and not in_subscript(q, m.start())
            and not _ARGUMENT_OF.search(q, max(0, m.start() - 12), m.start())
            and not q[m.end() : m.end() + 1].isalpha() and not (m.start() and q[m.start() - 1].isalpha()
                                                                   and not _GLUED_OPERATOR.search(q, 0, m.start()))]
    starts = [m.start() for m in nums]
    for off in places:
        if off not in starts:
            continue
        i = starts.index(off)

        def joined(a: int, b: int) -> bool:
            gap = no_powers(q[nums[a].end() : nums[b].start()])
            return len(gap) <= 30 and not re.search(r"[.?!]\s|\n\s*\n", _DOTS.sub(",", gap)) and \
                _SEPARATOR.sub("", _DOTS.sub("", gap)) == ""

        vals = [Fraction(number_value(m.group())) for m in nums]
        for step in (1, 2):  # neighbours, or every other number (2 \cdot 2^2 + 3 \cdot 2^3 + ...)
            for lo in (i - 2 * step, i - step, i):
                hi = lo + 2 * step
                if lo < 0 or hi >= len(nums) or not all(joined(x, x + 1) for x in range(lo, hi)):
                    continue
                x, y, z = vals[lo], vals[lo + step], vals[hi]
                if not (x == y == z) and (y - x == z - y or (x and y and z and y * y == x * z)):
                    yield "pattern", f"{lit!r} is in the progression {nums[lo].group()}, {nums[lo + step].group()}, {nums[hi].group()}"
                    return True
        # two joined terms with an ellipsis right after or right before them (only separators
        # between): the opening or closing terms of a run
        for a, b in ((i, i + 1), (i - 1, i)):
            if 0 <= a and b < len(nums) and joined(a, b) and vals[a] != vals[b]:  # equal terms: a repeat
                after = q[nums[b].end() : nums[b + 1].start() if b + 1 < len(nums) else len(q)]
                before = q[nums[a - 1].end() if a >= 1 else 0 : nums[a].start()]
                m = _DOTS.search(after)
                if m is not None and _SEPARATOR.sub("", no_powers(after[: m.start()])) == "":
                    yield "pattern", f"{lit!r} is one of the terms {nums[a].group()}, {nums[b].group()} before an ellipsis"
                    return True
                last = ([None, *_DOTS.finditer(before)])[-1]
                if last is not None and _SEPARATOR.sub("", before[last.end() :]) == "":
                    yield "pattern", f"{lit!r} is one of the terms {nums[a].group()}, {nums[b].group()} after an ellipsis"
                    return True
    return False


def _by_tables(q: str, places: list[int], lit: str, v2: Fraction) -> Found:
    """zero, standard_constant, answer_range, grammar, default_value: each by the tables and
    tests below, written apart from the rules in values/shortcuts.py that keep such literals
    out, so that a count here is a second opinion on those rules."""
    if v2 == 0:
        yield "zero", f"{lit!r} is 0"
    if any(_formula_constant(q, off, lit) or _forced_polyhedron_count(q, off) for off in places):
        yield "standard_constant", f"{lit!r} is the constant of a formula the problem states"
    if _range_end_or_modulus(q, v2) or any(_full_turn(q, off, lit) for off in places):
        yield "answer_range", f"{lit!r} is a modulus, the end of the range 0..N its residue must lie in, or a full turn"
    if v2 == 1 and any(_count_of_one(q, off, lit) for off in places):
        yield "grammar", f"{lit!r} is a count of 1 before a singular noun"
    if v2.denominator == 1 and any(_default_of_context(q, off, lit, int(v2)) for off in places):
        yield "default_value", f"{v2} is a value its context fixes"


# -- standard_constant: well-known formulas written out, each as (text before, the constant,
# text after), compared with the problem's text with blanks and dollars taken out
_FORMULAS: tuple[tuple[str, str, str], ...] = (
    *((f"{lhs}=", "2", "") for lhs in ("V-E+F", "V+F-E", "F-E+V", "F+V-E", "-E+V+F", "-E+F+V")),  # Euler's
    ("", "2", "\\pir"), ("", "4", "\\pir^2"),  # a circle's 2 pi r, a sphere's 4 pi r^2
    ("\\frac{", "5", "}{9}(F-32)"), ("\\frac{5}{9}(F-", "32", ")"),  # Fahrenheit to Celsius and back
    ("\\frac{", "9", "}{5}C+32"), ("\\frac{9}{5}C+", "32", ""),
)
_BLANKS = re.compile(r"[\s$]+")


def _formula_constant(q: str, off: int, lit: str) -> bool:
    """Whether the literal at ``off`` is the constant of a formula of :data:`_FORMULAS`."""
    for before, const, after in _FORMULAS:
        if const != lit:
            continue
        left = _BLANKS.sub("", q[max(0, off - 3 * len(before) - 8) : off])
        right = _BLANKS.sub("", q[off + len(lit) : off + len(lit) + 3 * len(after) + 8])
        rest = left[: len(left) - len(before)]
        if left.endswith(before) and right.startswith(after) and not rest[-1:].isdigit() and rest[-1:] != "." \
                and not _letter_follows(q, off + len(lit), len(after)):  # 2\pi r, not 2\pi radians
            return True
    return False


def _letter_follows(q: str, pos: int, n: int) -> bool:
    """Whether a letter directly follows the first ``n`` characters of ``q[pos:]`` that are not
    blanks or dollars (the formula's text ends inside a word)."""
    while n and pos < len(q):
        n -= not _BLANKS.fullmatch(q[pos])
        pos += 1
    return bool(n == 0 and q[pos : pos + 1].isalpha() and q[pos - 1 : pos].isalpha())


_SOLID_COUNT = re.compile(r"(?<![\d.])(\d+)\$?\s*(vertices|edges|faces)\b")


def _forced_polyhedron_count(q: str, off: int) -> bool:
    """Whether ``off`` holds one of a solid's stated vertex, edge and face counts, which
    Euler's V - E + F = 2 ties together: any two give the third."""
    found: dict[str, list[tuple[int, int]]] = {}
    for m in _SOLID_COUNT.finditer(q):
        found.setdefault(m.group(2), []).append((m.start(1), int(m.group(1))))
    if sorted(found) != ["edges", "faces", "vertices"] or any(len(v) != 1 for v in found.values()):
        return False
    (v_at, v), (e_at, e), (f_at, f) = found["vertices"][0], found["edges"][0], found["faces"][0]
    return v - e + f == 2 and off in (v_at, e_at, f_at)


# -- answer_range: a residue question that states its answer's range 0..N shows the modulus
# N + 1 (N itself for a strict bound); a full turn bounds an angle
_ABOUT_RESIDUES = re.compile(r"\bmod|\bresidue|\\equiv", re.I)  # not "congruent rectangles"
_ZERO = re.compile(r"(?<![\d.,])0(?![\d.])")
_RANGE_GAP = re.compile(r"(?:\s|\$|,|\\[lc]?dots|\.\.\.|\\leq?|\\lt|<|\bto\b|\band\b|\b[a-z]\b|(?<![\d.])\d+(?![\d.]))*")
_RANGE_WORD = re.compile(r",|\\le|<|\\lt|\bto\b|\band\b")


def _range_end_or_modulus(q: str, v2: Fraction) -> bool:
    """Whether ``v2`` is N or N + 1 for a range 0..N a residue question states ("from 0 to
    55", ``0 \\le n \\le 5``, ``0,1,2,\\ldots,22,23``)."""
    if v2.denominator != 1 or not _ABOUT_RESIDUES.search(q):
        return False
    for z in _ZERO.finditer(q):
        gap = _RANGE_GAP.match(q, z.end(), min(len(q), z.end() + 60)).group()
        ends = [int(n) for n in re.findall(r"(?<![\d.])\d+(?![\d.])", gap)]
        if ends and _RANGE_WORD.search(gap) and v2 in (ends[-1], ends[-1] + 1):
            return True
    return False


_TURN_AFTER = {"360": re.compile(r"\s*(?:\^\s*\{?\s*\\circ|degrees)"), "2": re.compile(r"\s*\\pi\b")}
_FROM_ZERO_BELOW = re.compile(r"(?<![\d.])0\s*(?:\^\s*\{?\s*\\circ\s*\}?)?\s*(?:\\leq?|<|\\lt)[^$<]{1,20}(?:\\leq?|<|\\lt)\s*$")


def _full_turn(q: str, off: int, lit: str) -> bool:
    """Whether the literal at ``off`` is the upper end of ``0 \\le x < 360^\\circ`` or ``0 \\le
    \\theta < 2\\pi``: the range of an angle, which every reader knows."""
    after = _TURN_AFTER.get(lit)
    return bool(after and after.match(q, off + len(lit)) and _FROM_ZERO_BELOW.search(q[max(0, off - 40) : off]))


# -- grammar: "radius $Y$ foot" says Y = 1: a count of 1 in prose right before a singular noun
_NEXT_WORD = re.compile(r"\s*\$?\s*(?:\\text\s*\{\s*)?([A-Za-z]+)(-?)")
_NO_NOUN = frozenset("""
a an the and or but nor to from into onto of on in at by for with than as if when where while that which who whose
so is are was were be been has have had do does did can could will would shall should may might must not no only
more less fewer larger smaller greater higher lower other another each every per times plus minus mod modulo
through over under between after before above below also then there this these those what how
exactly just about nearly almost approximately twice
""".split())


def _count_of_one(q: str, off: int, lit: str) -> bool:
    """Whether the 1 at ``off`` is a count in prose right before a singular noun (``1 foot``,
    ``1 boy``); not a dimension (``1 by 1``), a price, a unit of two letters (``1 cm``) or a
    word such as "to" or "more"."""
    end = off + len(lit)
    if math_at(q, off) and not (q[off - 1 : off] == "$" and q[end : end + 1] == "$"):
        return False  # a term of a formula
    if q[max(0, off - 3) : off].rstrip("$ ").endswith("\\$") or re.search(r"\bby\s*\$?\s*$", q[max(0, off - 8) : off]):
        return False
    m = _NEXT_WORD.match(q, end)
    if m is None or m.group(2):
        return False
    w = m.group(1).lower()
    return len(w) > 2 and w not in _NO_NOUN and not (w.endswith("s") and not w.endswith("ss"))


# -- default_value: (value, how the word right after it starts, words one of which its
# sentence holds besides; none: the word is enough): the units and sets whose size every
# reader knows. _SHAPES: the counts a shape the problem names fixes.
_DEFAULT_CONTEXTS: tuple[tuple[int, tuple[str, ...], tuple[str, ...]], ...] = (
    (52, ("card",), ("deck", "standard")), (13, ("card",), ("suit",)), (13, ("rank",), ()), (4, ("suit",), ()),
    (6, ("sided", "faced", "side", "face"), ("die", "dice", "cube")), (60, ("minute",), ("hour",)),
    (60, ("second",), ("minute",)), (24, ("hour",), ("day",)), (7, ("day",), ("week",)), (12, ("month",), ("year",)),
    (12, ("inch",), ("foot",)), (365, ("day",), ("year",)), (3, ("feet",), ("yard",)), (100, ("centimeter",), ("meter",)),
    (100, ("cent",), ("dollar",)), (1000, ("meter",), ("kilometer",)), (1000, ("gram",), ("kilogram",)),
    (1000, ("milliliter",), ("liter",)), (16, ("ounce",), ("pound",)), (5280, ("feet",), ("mile",)),
    (26, ("letter",), ("alphabet",)), (360, ("degree", "circ"), ("circle", "full")),
)
_SHAPES: tuple[tuple[str, dict[str, int]], ...] = (
    *((name, dict.fromkeys(("side", "sided", "vertice", "vertex", "angle", "corner"), n)) for name, n in (
        ("triangle", 3), ("quadrilateral", 4), ("rectangle", 4), ("square", 4), ("parallelogram", 4), ("rhombus", 4),
        ("trapezoid", 4), ("kite", 4), ("pentagon", 5), ("hexagon", 6), ("heptagon", 7), ("octagon", 8),
        ("nonagon", 9), ("decagon", 10), ("dodecagon", 12))),
    *((name, {"face": 6, "side": 6, "edge": 12, "vertice": 8, "corner": 8}) for name in ("cube", "box", "cuboid")),
    ("tetrahedr", {"face": 4, "edge": 6, "vertice": 4, "corner": 4}),
    ("octahedr", {"face": 8, "edge": 12, "vertice": 6, "corner": 6}),
    ("cylind", {"end": 2, "base": 2}), ("segment", {"endpoint": 2, "end": 2}),
)
_AFTER_VALUE = re.compile(r"(?:\s|\$|-|\\text\s*\{|\^\s*\{?\s*\\)*([A-Za-z]+)")
_LETTER_FOR = re.compile(r"\b[A-F]\$?\s+(?:for|to represent|to denote)\s*\$?\s*$")


def _default_of_context(q: str, off: int, lit: str, v: int) -> bool:
    """Whether the value ``v`` at ``off`` is fixed by its context: a unit or set of
    :data:`_DEFAULT_CONTEXTS`, a count a shape of :data:`_SHAPES` the problem names fixes
    (with the count's noun right after it), or a digit a letter names (``A`` for 10)."""
    if 10 <= v <= 15 and _LETTER_FOR.search(q, max(0, off - 40), off):
        return True
    m = _AFTER_VALUE.match(q, off + len(lit))
    if m is None:
        return False
    word = m.group(1).lower()
    noun = word[:-1] if word.endswith("s") and not word.endswith("ss") else word
    start = max(q.rfind(". ", 0, off), q.rfind("\n", 0, off), 0)
    stops = [x for x in (q.find(". ", m.end()), q.find("?", m.end()), q.find("\n", m.end())) if x >= 0]
    rest = (q[start:off] + " " + q[m.end() : min(stops, default=len(q))]).lower()  # the sentence, but the value
    for value, after, around in _DEFAULT_CONTEXTS:
        if value == v and word.startswith(after) and (not around or any(w in rest for w in around)):
            return True
    low = q.lower()
    return any(counts.get(noun) == v and shape in low for shape, counts in _SHAPES)
