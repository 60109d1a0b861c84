"""The literals of a problem's text, as the constant finder reads them: every number or
number word that is a quantity or shows one, with its value, whether it is in math mode and
takes part in arithmetic, its role (:data:`composition_rl.values.constants.ROLES`), and what
the token itself forbids (a TeX argument, an exponent, a radix).

:func:`scan_literals` is the scanner, :func:`constant_value` and :func:`mixed_value` the
values of what it finds (plain numbers through :func:`composition_rl.values.numbers.plain_number`).
:mod:`.constants` decides the flaws and repeats of these literals, :mod:`.shortcuts` the
rules the rest of the text decides.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

from composition_rl.values.numbers import SEPARATOR, UNSIGNED, plain_number, ungroup
from composition_rl.values.numwords import CARDINALS
from composition_rl.values.regions import group_spans, inside

__all__ = ["WORD_NUMBERS", "LiteralToken", "constant_value", "mixed_value", "scan_literals"]

# a digit group is scanned whatever its first digit; a literal that starts with 0 is refused
# later, as a digit string (0,500 is no thousands number to values.numbers either)
_NUMBER = re.compile(r"\d{1,3}(?:" + SEPARATOR + r"\d{3})+(?!\d)|" + UNSIGNED)
_LABEL_PRE = re.compile(r"Fig|Problem|Exercise|Question|Chapter|Section|Table|Example|Lemma|Theorem|Step|Part|Round|Day|Game", re.I)
_LABEL_WORDS = re.compile(
    r"(?:Figure|Fig\.|Problem|Exercise|Question|Chapter|Section|Table|Example|Lemma|Theorem|Step|Part|Round|Day|Game)\s*$",
    re.I,
)
_ARITH = set("+-*/=<>^")
_ARITH_CMDS = re.compile(r"\\(?:cdot|times|div|le|ge|leq|geq|pm|frac|dfrac|tfrac|sqrt|neq|approx)\s*\{?\s*$")
_ARITH_CMDS_AFTER = re.compile(r"^\s*\\(?:cdot|times|div|le|ge|leq|geq|pm|neq|approx)\b")
_CMD_TAIL = re.compile(r"\\[a-zA-Z]+\s*$")
_KNOWN_CMD_TAIL = re.compile(
    r"\\(?:pi|circ|cdot|times|div|left|right|quad|qquad|le|ge|leq|geq|pm|neq|approx|sin|cos|tan|cot|sec|csc|ln|log|exp"
    r"|[lc]?dots[bc]?)\s*$")
_GLUED_OP = re.compile(r"\\(?:cdot|times|div|pm|cdots|ldots|dots)$")
_DIGIT_GROUP_AFTER = re.compile(r"\\,(?:\d|[A-Za-z](?![A-Za-z]))")
_DIGIT_GROUP_BEFORE = re.compile(r"(?:\d|(?<![\\A-Za-z])[A-Za-z])\\,$")
# A TeX macro argument is one token unless braced: in ``\frac 49`` the arguments are 4 and 9,
# in ``\sqrt2x`` the radicand is 2, in ``x^23`` the exponent is 2 and a 3 follows. A number
# starting in such a slot is read digit by digit, as TeX reads it.
_SLOT1 = re.compile(r"(\\[dt]?frac|\\[dt]?binom|\\sqrt|\^|_)\s*$")
_SLOT_ENDS = frozenset("^_ctlm")  # the last letter of ^, _, \\frac, \\sqrt, \\binom
_GLUED_SLOTS = ("frac", "sqrt", "binom")  # \\frac12, \\sqrt2: a digit glued to the control word
_SLOT_BEFORE = frozenset(" \t\n^_}")  # what may stand before a digit in an unbraced argument
_MIXED = re.compile(r"(?<![\w.}\\^_])(\d+)\s*\\[dt]?frac\s*(?:\{\s*(\d+)\s*\}|(\d))\s*(?:\{\s*(\d+)\s*\}|(\d))")
_SLOT2 = re.compile(r"(\\[dt]?frac|\\[dt]?binom)\s*(?:\{[^{}]*\}|[0-9A-Za-z]|\\[A-Za-z]+)\s*$")
_RADIX_TAIL = re.compile(r"\bbase[\s~-]*(?:\$\s*)?(?:\{\s*)?$", re.I)
_FRAC_NUM_TAIL = re.compile(r"\\[dt]?frac\s*\{\s*$")
_FRAC_DEN_TAIL = re.compile(r"\\[dt]?frac\s*(?:\{[^{}]*\}|\d)\s*\{\s*$")
_DIV_TAIL = re.compile(r"(?:/|\\div)\s*$")
_ARG_TAIL = re.compile(r"(?<![A-Za-z])[A-Za-z]\s*\(\s*-?\s*$")
# a number inside a pair or triple of numbers, (5, 4) or (1, -2, 3): a point, not a term
_COORD = re.compile(r"(?<![A-Za-z\\])\(\s*-?\s*[\d.]+\s*,\s*-?\s*[\d.]+\s*(?:,\s*-?\s*[\d.]+\s*)?\)")
_ANGLE_AFTER = re.compile(r"\s*(?:\^\s*\{?\s*\\circ|°|\\degree|\$?\s*degrees?\b)")
_PERCENT_AFTER = re.compile(r"\s*(?:\\%|%|\$?\s*percent\b)")
# English cardinals a problem writes in prose ("a bakery sells three kinds of rolls"); "one"
# is left out (a pronoun as often as a number), and so are compounds and fractions
# ("twenty-five", "two-thirds", "two hundred"), which are no single literal.
WORD_NUMBERS: dict[str, int] = {w: v for w, v in CARDINALS.items() if v >= 2}
_WORD = re.compile(r"(?<!\w)(?=[tTfFsSeEnN])(" + "|".join(
    f"[{w[0]}{w[0].upper()}]{w[1:]}" for w in sorted(WORD_NUMBERS, key=len, reverse=True)) + r")(?!\w)")
_ONES = {w: v for w, v in CARDINALS.items() if 1 <= v <= 9}  # the second word of "twenty-five"
_ONES_TAIL = re.compile(r"-(" + "|".join(_ONES) + r")\b", re.I)
_FRACTION_TAIL = re.compile(r"-(?:halve|half|halves|thirds?|fourths?|quarters?|fifths?|sixths?|sevenths?|eighths?|"
                            r"ninths?|tenths?)\b", re.I)
_WORD_NOT_AFTER = re.compile(
    r"\s+(?:hundred|thousand|million|billion|halve|half|halves|thirds?|fourths?|quarters?|fifths?|sixths?|"
    r"sevenths?|eighths?|ninths?|tenths?|and a half|point)\b|'s\b", re.I)
_WORD_NOT_BEFORE = re.compile(
    r"(?:hundred|thousand|million|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|point|minus|negative)\s+$", re.I)


def mixed_value(literal: str) -> Fraction | None:
    """The value of a mixed number written as TeX (``6\\frac{1}{4}`` is 25/4), or None.

    >>> mixed_value("6\\\\frac{1}{4}"), mixed_value("4\\\\frac 12"), mixed_value("\\\\frac{1}{4}")
    (Fraction(25, 4), Fraction(9, 2), None)
    """
    m = _MIXED.fullmatch(literal)
    if m is None:
        return None
    whole, n1, n2, d1, d2 = m.groups()
    den = int(d1 or d2)
    return Fraction(int(whole)) + Fraction(int(n1 or n2), den) if den else None


def constant_value(literal: str) -> Fraction | None:
    """The exact value of a literal :func:`find_constants` returns (digits with thousands
    separators, a decimal, or an English cardinal), or None.

    >>> constant_value("64,\\\\!328"), constant_value("2.5"), constant_value("Three"), constant_value("x")
    (Fraction(64328, 1), Fraction(5, 2), Fraction(3, 1), None)
    """
    if literal.isdigit():
        return Fraction(int(literal))
    if "frac" in literal:
        return mixed_value(literal)
    w = WORD_NUMBERS.get(literal.lower())
    if w is not None:
        return Fraction(w)
    got = plain_number(literal)
    return None if got is None else got.value


class LiteralToken(NamedTuple):
    """One literal as the finder reads it, before flaws and repeats are decided."""

    s: int
    lit: str
    key: int | Fraction
    math: bool
    arith: bool
    role: str
    flaw: str  # what the token itself forbids: tex_token, exponent, base_notation, notation


def _key(plain: str) -> int | Fraction:
    # an int counts as the equal Fraction (same hash, equal), and hashes far faster
    return int(plain) if plain.isdigit() else Fraction(plain)


def _slot_tokens(q: str, s: int, lit: str, kind: str, second: bool,
                 in_math: bool) -> list[LiteralToken]:
    """The tokens of a number that starts in an unbraced macro argument (``\\frac 49``,
    ``\\sqrt2``, ``x^23``): one digit per argument, then ordinary digits. A digit glued to
    the control word (``\\sqrt2``) cannot become a letter (``\\sqrtY`` is another command),
    nor can digits that follow the arguments (``x^23``: ``x^2Y``); both stay as values only."""
    first_role = {"^": "exponent", "\\sqrt": "root"}.get(kind, "denominator" if second else "numerator")
    if kind.endswith("binom"):
        first_role = "term"
    glued = q[s - 1].isalpha()
    flaw = "tex_token" if glued else "exponent" if kind == "^" else ""
    out = [LiteralToken(s, lit[0], int(lit[0]), in_math, True, first_role, flaw)]
    rest, at = lit[1:], s + 1
    if rest[:1].isdigit() and not second and kind not in ("^", "\\sqrt"):
        out.append(LiteralToken(at, rest[0], int(rest[0]), in_math, True, "term" if kind.endswith("binom") else "denominator", ""))
        rest, at = rest[1:], at + 1
    if rest[:1].isdigit():
        digits = re.match(r"\d+", rest).group()
        out.append(LiteralToken(at, digits, int(digits), in_math, True, "term", "tex_token"))
    return out


def _role(q: str, s: int, e: int, lit: str, in_math: bool, span: tuple[int, int] | None, sup: bool,
          radix: bool = True) -> str:
    if sup:
        return "exponent"
    if radix and _RADIX_TAIL.search(q, max(0, s - 16), s):
        return "radix"
    after = q[e : e + 16]
    if _ANGLE_AFTER.match(after):
        return "angle"
    if _PERCENT_AFTER.match(after):
        return "percent"
    if not in_math or (span is not None and q[span[0] : span[1]].strip() == lit):
        return "prose"
    if q[s - 1 : s] in _INDEX_TAILS or q[max(0, s - 2) : s].rstrip()[-1:] in _INDEX_TAILS:
        m = _INDEX_START.search(q, max(0, s - 24), s)
        if m is not None and _subscript(q, m.group(1)):
            return "index"
    nxt = after.lstrip()[:1]
    if nxt == "}":
        pre = q[max(0, s - 24) : s]
        if _FRAC_NUM_TAIL.search(pre):
            return "numerator"
        if _FRAC_DEN_TAIL.search(pre):
            return "denominator"
    last = q[max(0, s - 6) : s].rstrip()
    if last.endswith(("/", "\\div")):
        return "denominator"
    if nxt == "!":
        return "factorial"
    if nxt == ")" and last.endswith(("(", "-")) and _ARG_TAIL.search(q, max(0, s - 24), s):
        return "argument"
    if nxt in (",", ")") and any(m.start() < s < m.end() for m in _COORD.finditer(q, max(0, s - 24), min(len(q), e + 24))):
        return "coordinate"
    return "term"


class _Scan:
    """One question as the number scanner reads it: the math spans, the groups of its
    superscripts and subscripts, and the words that decide what a number in it is."""

    def __init__(self, q: str, spans: list[tuple[int, int]]) -> None:
        self.q, self.spans = q, spans
        self.span_starts = [a for a, _ in spans]
        self.labels = _LABEL_PRE.search(q) is not None
        self.radix = "base" in q or "Base" in q
        self.subs = group_spans(q, "_") if "_" in q else []
        self.sups = group_spans(q, "^") if "^" in q else []

    def span_of(self, s: int) -> tuple[int, int] | None:
        i = bisect_right(self.span_starts, s) - 1
        return self.spans[i] if i >= 0 and s < self.spans[i][1] else None

    def slot(self, pre: str, before: str) -> tuple[re.Match | None, bool]:
        """The unbraced macro argument a number starts in (``\\frac 49``, ``\\sqrt2``,
        ``x^23``), and whether it is a second argument; (None, False) for none."""
        slot = None
        second = False
        if before.isalpha():
            if pre.endswith(_GLUED_SLOTS):
                slot = _SLOT1.search(pre)
        elif before in _SLOT_BEFORE:
            if pre.rstrip()[-1:] in _SLOT_ENDS:
                slot = _SLOT1.search(pre)
            if slot is None and ("frac" in pre[-14:] or "binom" in pre[-14:]):
                slot = _SLOT2.search(pre)
                second = slot is not None
        return slot, second

    def number(self, m: re.Match) -> list[LiteralToken]:
        """The literals of the number ``m`` (one, the digits of a TeX argument, or none when
        it is glued to a word, an index, a label, a part of a larger number, ...)."""
        q, subs, sups = self.q, self.subs, self.sups
        s, e, lit = m.start(), m.end(), m.group()
        pre = q[max(0, s - 24) : s]
        before = q[s - 1] if s else " "
        slot, second = self.slot(pre, before)
        if slot is not None and slot.group(1) != "_" and not (subs and inside(subs, s)):
            if "," in lit or "\\" in lit:
                return []
            span = self.span_of(s)
            toks = _slot_tokens(q, s, lit.split(".")[0], slot.group(1), second, span is not None)
            if sups and inside(sups, s):  # (81)^{\frac12}: a power all the same
                toks = [t._replace(role="exponent", flaw=t.flaw or "exponent") for t in toks]
            return toks
        if slot is not None or pre.rstrip().endswith("_"):
            return []  # an index written with a space, F_ 2
        after = q[e] if e < len(q) else " "
        # glued to letters / commands (14n, 3rd, x2), subscripts, parts of numbers; a number
        # glued to an operator (\cdot3) is one all the same: its value shows, but Y cannot
        # stand there (\cdotY is another command)
        glued_op = before.isalpha() and _GLUED_OP.search(pre) is not None and not (after.isalpha() or after in "_'")
        if (before.isalpha() and not glued_op) or before in "_.'" or before.isdigit():
            return []
        # a coefficient glued to a one-letter variable in math mode (20x, 8a) is a constant
        # like any other: Y written there reads Yx; a unit or a word (2nd, 5cm), a hex digit
        # (3A_{12}) or a subscripted name stays out
        coef = after.islower() and not (q[e + 1 : e + 2].isalpha() or q[e + 1 : e + 2] in "_'") and \
            not glued_op and self.span_of(s) is not None
        if (after.isalpha() and not coef) or after in "_'" or after.isdigit():
            return []
        if after == "." and e + 1 < len(q) and (q[e + 1].isdigit() or q.startswith(("\\overline", "\\dot"), e + 1)):
            return []  # the integer part of a decimal, or of 0.\overline{6}
        if after == "," and len(lit) <= 3 and q[e + 1 : e + 4].isdigit():
            # part of a number written with a malformed thousands separator (12,3456); four
            # digits or more before the comma start no thousands group: an item of a list,
            # "(2009,2010)", "\{1000,1001,\ldots\}", a value a reader sees
            return []
        if before == "," and s >= 4 and q[s - 4 : s - 1].isdigit() and not q[s - 5 : s - 4].isdigit():
            return []
        if subs and inside(subs, s):
            return []  # an index, or deeper in a subscript: the bound of \sum_{1 \le i < j \le 95}
        if "\\" in pre[-12:] and _CMD_TAIL.search(pre[-12:]) and not _ARITH_CMDS.search(pre[-12:]):
            if _KNOWN_CMD_TAIL.search(pre[-12:]) is None:
                return []  # argument of an unknown command
        if len(lit) > 1 and lit[0] == "0" and lit[1] != ".":
            return []  # leading zeros: a digit string, not a quantity
        seps = "," in lit or "\\" in lit
        plain = ungroup(lit) if seps else lit
        if self.labels and _LABEL_WORDS.search(q, max(0, s - 14), s):
            return []
        span = self.span_of(s)
        in_math = span is not None
        if not in_math and before == "(" and after == ")":
            return []  # an enumeration label such as (1) in text
        left = pre[-8:].rstrip()
        right = q[e : e + 8].lstrip()
        arithmetic = in_math and (
            coef
            or (left[-1:] in _ARITH)
            or (right[:1] in _ARITH)
            or ("\\" in left and bool(_ARITH_CMDS.search(left)))
            or bool(_ARITH_CMDS_AFTER.match(q[e : e + 10]))
        )
        if glued_op:
            return [LiteralToken(s, lit, _key(plain), in_math, True, "term", "tex_token")]
        if len(plain) == 4 and plain.isdigit() and 1900 <= int(plain) <= 2099 and (
                not in_math or q[span[0] : span[1]].strip() == lit):
            # a year ("In 2004, ..."; 1300 in x^2+1300 is a quantity): never replaced, but it
            # shows its value, so another 2004 cannot become the variable
            return [LiteralToken(s, lit, int(plain), in_math, False, "prose", "named")]
        role = _role(q, s, e, lit, in_math, span, bool(sups) and inside(sups, s), self.radix)
        # a digit group of a number written with thin spaces (and unknown digits): 5\,41G\,507
        grouped = "\\," in lit or (q[e : e + 2] == "\\," and _DIGIT_GROUP_AFTER.match(q, e) is not None) or (
            q[s - 2 : s] == "\\," and _DIGIT_GROUP_BEFORE.search(q, max(0, s - 4), s) is not None)
        flaw = "tex_token" if grouped else "exponent" if role == "exponent" else "base_notation" if role == "radix" else ""
        return [LiteralToken(s, lit, _key(plain), in_math, arithmetic, role, flaw)]

    def mixed(self, found: list[LiteralToken], end: int) -> list[LiteralToken]:
        """``found`` with each mixed number of ``q[:end]`` made one literal, in text order."""
        q = self.q
        # a mixed number, 6\\frac{1}{4}, is one value (25/4) and one constant: Y in one of its digits
        # reads as another number (\\sqrt{W\\frac{1}{4}} is W/4 to TeX, where the text meant
        # \\sqrt{6\\frac{1}{4}}), so the whole of it is the literal the variable replaces
        for m in _MIXED.finditer(q, 0, end):
            parts = [t for t in found if m.start() <= t.s < m.end()]
            whole = next((t for t in parts if t.s == m.start()), None)
            lit = m.group()
            value = mixed_value(lit)
            pre = q[max(0, m.start() - 24) : m.start()]
            if whole is None or whole.flaw or value is None or _SLOT1.search(pre) or _SLOT2.search(pre):
                continue  # an exponent, a year, a zero denominator, a TeX argument (\\sqrt 2\\frac12)
            span = self.span_of(m.start())
            role = "prose" if span is not None and q[span[0] : span[1]].strip() == lit else whole.role
            found = [t for t in found if t not in parts]
            found.append(LiteralToken(m.start(), lit, value, whole.math, whole.arith, role, ""))
        found.sort()
        return found


def scan_literals(q: str, end: int, blocks: list[tuple[int, int]],
                  spans: list[tuple[int, int]]) -> list[LiteralToken]:
    """Every literal of ``q[:end]`` that is a quantity or shows one, in text order: numbers
    outside the ``blocks`` (:func:`~composition_rl.values.regions.masked_blocks`) and number
    words in prose; ``spans`` are the math spans of ``q``."""
    scan = _Scan(q, spans)
    found: list[LiteralToken] = []
    bi = 0
    for m in _NUMBER.finditer(q, 0, end):
        s = m.start()
        while bi < len(blocks) and blocks[bi][1] <= s:
            bi += 1
        if bi < len(blocks) and blocks[bi][0] <= s < blocks[bi][1]:
            continue
        found.extend(scan.number(m))
    if "frac" in q:
        found = scan.mixed(found, end)
    words = _word_tokens(q, end, blocks, spans)
    if words:
        found.extend(words)
        found.sort()
    return found


def _word_tokens(q: str, end: int, blocks: list[tuple[int, int]],
                 spans: list[tuple[int, int]]) -> list[LiteralToken]:
    out = []
    for m in _WORD.finditer(q, 0, end):
        s, e = m.start(), m.end()
        if inside(blocks, s) or inside(spans, s):
            continue
        if _WORD_NOT_AFTER.match(q, e) or _WORD_NOT_BEFORE.search(q, max(0, s - 12), s):
            continue
        if _LABEL_WORDS.search(q, max(0, s - 14), s):
            continue
        lit, value = m.group(), WORD_NUMBERS[m.group().lower()]
        if q[e : e + 1] == "-" or q[s - 1 : s] == "-":
            # part of a compound ("two-digit", "four-letter", "twenty-five"): it shows a value
            # but is no literal of its own
            if q[s - 1 : s] == "-" and s >= 2 and q[s - 2].isalpha():
                continue  # the tail of "twenty-five": read with its head
            tail = _ONES_TAIL.match(q, e) if value >= 20 else None
            if tail is not None:
                lit, value = q[s : tail.end()], value + _ONES[tail.group(1).lower()]
            elif _FRACTION_TAIL.match(q, e):
                continue  # "two-thirds" is 2/3
            out.append(LiteralToken(s, lit, value, False, False, "prose", "named"))
            continue
        role = "radix" if ("base" in q and _RADIX_TAIL.search(q, max(0, s - 16), s)) else "prose"
        out.append(LiteralToken(s, lit, value, False, False, role, "base_notation" if role == "radix" else ""))
    return out


# the start of an index range (role "index"): "for $n \\ge 2$", "for all $k > 1$" where the
# letter is a subscript of the problem (a_n, F_{n - 1})
_INDEX_START = re.compile(r"(?<![A-Za-z\\_])([nkijm])\s*(?:\\geq?|\\geqslant|>)\s*\{?$")  # not a_n > 3
_INDEX_TAILS = frozenset("eqt>{")


@lru_cache(maxsize=1024)
def _subscript(q: str, letter: str) -> bool:
    """Whether ``letter`` stands in a subscript of ``q`` (``a_n``, ``a_{n + 1}``; a logarithm's
    base, ``\\log_{m}``, is none)."""
    return re.search(rf"(?<!\\log)_(?:{letter}(?![A-Za-z])|\{{[^{{}}]*(?<![A-Za-z\\]){letter}(?![A-Za-z])[^{{}}]*\}})", q) is not None
