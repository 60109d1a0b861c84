"""The constants in a problem's text that may become a variable (sub-step 2).

:func:`find_constants` lists the literals in a question that may be replaced by a variable,
skipping figure/code blocks, numbers glued to letters, subscripts and label indices, years,
digit concatenations and parts of larger numbers, and ranks them. Also math mode
(:func:`in_math`, :func:`math_spans`) and the symbols a text already uses
(:func:`symbols_used`).

A literal that is a quantity may still be a poor variable. :data:`FLAWS` names each class of
mistake a replacement would make, and a literal with a flaw is never replaced. The classes
decided here, each with a real MATH fragment and what replacing its literal would do:

* ``repeated``: "If $f(3)=4$, $f(5)=1$, and $f(2)=5$": the 5 of ``f(5)`` must stay, so a Y
  for the 5 of ``f(2)=5`` sits beside its own value.
* ``choice``: "(A) $-2^{50}$ (B) $-2^{49}$ (C) 0": a Y in the options changes what is asked.
* ``fact``: "Given that $8!=40320$": a fact with no unknown; ``Y!=40320`` fixes Y by itself.
* ``answer_form``: "Express ... in the form $a+bi$": a template, not a quantity.
* ``hint``: "(Note that $i^2 = -1.$)": a reminder; a Y there contradicts what it recalls.
* ``notation``: "$(\\sqrt[6]{4})^9$", ``f^{-1}``: a root index or an inverse, not a number.
* ``text_in_math``: "\\text{if $x < 20$}" inside a display: neither ``Y`` nor ``$Y$`` renders.
* ``named``: "the number of five-digit palindromes": a number inside a word (or a year)
  names a kind of thing; "$Y$-digit" reads badly and shows its value.
* ``tex_token``: the 49 of ``\\frac 49`` is two TeX arguments, so ``\\frac W`` would read as
  W over nothing; likewise ``\\log_7\\sqrt7`` and the digit group of ``47\\,389``.
* ``exponent``, ``base_notation``: "Factor $t^2-49$", "base-$2$ representation": a power
  or a radix is notation; ``t^Y`` or "base-$Y$" asks another kind of problem.
* ``role_mix``: "$(x-5)(2x+9)$ ... the two distinct solutions": the 2s are a count and a
  coefficient, and one Y for both changes the problem twice.
* the shortcut classes (``worked_example`` to ``zero``): the rest of the text gives the value
  away, so the chain can be skipped; they are the rules of
  :mod:`composition_rl.values.shortcuts`, with their examples there.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

from composition_rl.values.numbers import SEPARATOR, UNSIGNED, plain_number, ungroup
from composition_rl.values.numwords import CARDINALS

_BLOCKS = re.compile(
    r"\[asy\].*?(?:\[/asy\]|\Z)"
    r"|\\begin\{(asy|tabular|verbatim|lstlisting|tikzpicture|picture)\}.*?(?:\\end\{\1\}|\Z)"
    r"|```.*?(?:```|\Z)"
    r"|<code>.*?(?:</code>|\Z)"
    r"|\\(?:label|ref|eqref|url|href|includegraphics|overline|underline|underbrace|text(?:bf|it|tt)?\s*\{\s*\()\s*\{[^{}]*\}"
    r"|\\(?:overline|underline)\s*\{(?:[^{}]|\{[^{}]*\})*\}",
    re.S,
)
# a digit group is scanned whatever its first digit; a literal that starts with 0 is refused
# later, as a digit string (0,500 is no thousands number to values.numbers either)
_NUMBER = re.compile(r"\d{1,3}(?:" + SEPARATOR + r"\d{3})+(?!\d)|" + UNSIGNED)
_LABEL_PRE = re.compile(r"Fig|Problem|Exercise|Question|Chapter|Section|Table|Example|Lemma|Theorem|Step|Part|Round|Day|Game", re.I)
_LABEL_WORDS = re.compile(
    r"(?:Figure|Fig\.|Problem|Exercise|Question|Chapter|Section|Table|Example|Lemma|Theorem|Step|Part|Round|Day|Game)\s*$",
    re.I,
)
_CHOICE = re.compile(r"\\(?:text|textbf|mathrm)\s*\{\s*\(A\)|\(A\)\s*\$?\s*[-\d\\]|^\s*A\.\s", re.M)
_ARITH = set("+-*/=<>^")
_ARITH_CMDS = re.compile(r"\\(?:cdot|times|div|le|ge|leq|geq|pm|frac|dfrac|tfrac|sqrt|neq|approx)\s*\{?\s*$")
_ARITH_CMDS_AFTER = re.compile(r"^\s*\\(?:cdot|times|div|le|ge|leq|geq|pm|neq|approx)\b")


@dataclass(frozen=True)
class Constant:
    """A literal in a question that may be replaced by a variable.

    ``offset`` and ``literal`` locate it exactly in the original text; ``value`` is exact.
    ``rank`` is lower for better candidates (math mode taking part in arithmetic first).
    ``flaw`` names why the literal must not be replaced even though it is a quantity (one of
    :data:`FLAWS`), or is "" for a safe one. ``role`` is what the literal is in its
    expression (:data:`ROLES`): only occurrences of one value in one role are one quantity.
    """

    offset: int
    literal: str
    value: Fraction
    math_mode: bool
    arithmetic: bool
    unique: bool
    flaw: str = ""  # why replacing it would make a poor prompt (see FLAWS); "" if none
    # the other occurrences of the same literal, (offset, math_mode), that must be replaced
    # with it (the text repeats the quantity); () when the value occurs once
    also: tuple[tuple[int, bool], ...] = ()
    role: str = "term"
    # a soft flaw (:data:`composition_rl.values.shortcuts.RISKS`): replaced only when no
    # constant without one allows a natural offset; "" for none
    risk: str = ""

    @property
    def rank(self) -> tuple[int, int]:
        tier = 0 if (self.math_mode and self.arithmetic) else 1 if self.math_mode else 2
        return (tier, 0 if self.unique else 1)


# What a literal is in its expression. Occurrences of one value are one quantity
# only in one role: the 2 of ``2x`` and the 2 of ``x^2`` are different things, so replacing
# both (``Yx + x^Y``) changes the problem in two ways at once.
ROLES = (
    "term",  # a number in a math expression (coefficient, addend, bound, ...)
    "prose",  # a quantity in prose (``5 apples``, ``$5$ apples``, ``five apples``)
    "numerator", "denominator",  # of a fraction, or a divisor after ``/`` and ``\div``
    "argument",  # of a function, ``f(3)``
    "factorial",  # ``5!``
    "root",  # under a radical written as one TeX token, ``\sqrt2``
    "angle", "percent",  # ``40^\circ``, ``40 degrees``, ``20\%``, ``20 percent``
    "coordinate",  # in a point, ``(5, 4)``
    "index",  # where an index range starts, ``for $n \\ge 2$`` beside ``a_n``: its own quantity
    "exponent",  # a superscript, ``x^2``, ``10^{12}``: notation of a power, never replaced
    "radix",  # a base of notation, ``in base $12$``: never replaced
    "notation",  # ``f^{-1}``, ``\sqrt[3]{}``, ``f^{(4)}``, an environment argument
)
# roles that are notation: never replaced, and an occurrence there shows no other quantity
NOTATION_ROLES = frozenset(("exponent", "radix", "notation"))
# roles whose occurrence is not the quantity of an equal value in another role: the start of an
# index range ("for $n \\ge 1$") is not the 1s of ``-\\frac{1}{u_n + 1}`` (replacing all three
# would change the series and its terms at once); index starts of one value group among themselves only
UNGROUPED_ROLES = NOTATION_ROLES | {"index"}
# which roles are one kind of quantity when a value repeats: the numbers of one expression
# (terms, a numerator, an argument) are replaced together; a divisor, an angle, a percent
# and a count in prose are each their own kind
_ROLE_KIND = {"numerator": "term", "argument": "term", "factorial": "term", "root": "term"}

_CHOICE_ANSWER = re.compile(r"\s*(?:\\text\{\s*)?\(?[A-E]\)?\s*\}?\s*")
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


# Environments that are math mode wherever they stand: LaTeX needs them in math or sets
# them as display math, and MathJax (which renders MATH) treats a bare \begin{align*} in
# prose as display math. Inside them a variable is written ``Y``, never ``$Y$``.
MATH_ENVIRONMENTS = frozenset(
    "equation align alignat eqnarray gather multline flalign displaymath math cases dcases "
    "rcases matrix pmatrix bmatrix Bmatrix vmatrix Vmatrix smallmatrix array split aligned "
    "gathered alignedat subarray".split()
)
_MATH_TOKENS = re.compile(r"\\(begin|end)\s*\{([a-zA-Z]+)\*?\}|\\.|\$\$|\$", re.S)
_TEXT_IN_MATH = re.compile(r"\\(?:text|textrm|textbf|textit|textsf|texttt|textnormal|mbox|hbox)\s*\{")


def in_math(text: str, pos: int) -> bool:
    """Whether offset ``pos`` of ``text`` lies in math mode (see :func:`math_spans`).

    >>> in_math("Let $x = 3$ and 4 apples.", 9), in_math("Let $x = 3$ and 4 apples.", 16)
    (True, False)
    """
    return any(a <= pos < b for a, b in math_spans(text))


def math_spans(text: str) -> list[tuple[int, int]]:
    """Spans in math mode: ``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]`` (escaped ``\\$``
    is not a delimiter) and every environment of :data:`MATH_ENVIRONMENTS` met in prose,
    ``\\begin{..}`` and its arguments included."""
    spans: list[tuple[int, int]] = []
    inside: str | None = None
    env = ""
    depth = 0
    start = 0
    for m in _MATH_TOKENS.finditer(text):
        kind = m.group(1)
        if kind is not None:  # \begin{..} / \end{..}
            if inside is None and kind == "begin" and m.group(2) in MATH_ENVIRONMENTS:
                inside, env, depth, start = "env", m.group(2), 1, m.start()
            elif inside == "env" and m.group(2) == env:
                depth += 1 if kind == "begin" else -1
                if depth == 0:
                    spans.append((start, m.start()))
                    inside = None
            continue
        tok = m.group()
        if inside == "env":
            continue
        if tok[0] == "\\":
            if inside is None and tok in ("\\(", "\\["):
                inside, start = ("\\)" if tok == "\\(" else "\\]"), m.end()
            elif inside is not None and tok == inside:
                spans.append((start, m.start()))
                inside = None
            continue
        if inside is None:
            inside, start = tok, m.end()
        elif inside == tok:
            spans.append((start, m.start()))
            inside = None
    if inside == "env":  # an environment left open runs to the end of the text
        spans.append((start, len(text)))
    return spans


def _text_in_math(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``\\text{...}`` (and the like) groups inside math spans: prose again, where neither
    ``Y`` (an upright letter) nor ``$Y$`` (nested dollars) is a safe way to write a variable."""
    out: list[tuple[int, int]] = []
    for a, b in spans:
        for m in _TEXT_IN_MATH.finditer(text, a, b):
            depth, i = 1, m.end()
            while i < b and depth:
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
            out.append((m.end(), i))
    return out


def _masked_blocks(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _BLOCKS.finditer(text)]


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


def _group_spans(text: str, opener: str) -> list[tuple[int, int]]:
    """Content spans of the braced groups ``^{...}`` (``opener`` "^") or ``_{...}`` ("_"),
    nested groups included, and of an unbraced fraction as a superscript, ``^\\frac{Z}{4}``
    (both of its arguments).

    >>> q = "$(576)^\\\\frac{1}{4}(216)^{2}$"
    >>> [q[a:b] for a, b in _group_spans(q, "^")]
    ['1}{4', '2']
    """
    out = []
    n = len(text)

    def close(i: int) -> int:  # the offset after the brace that closes the group opened before i
        depth = 1
        while i < n and depth:
            c = text[i]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            elif c == "\\":
                i += 1
            i += 1
        return i

    # only a superscript takes an unbraced fraction: a subscript one is a log's base (\log_\frac13)
    frac = r"(?P<frac>\\[dt]?frac\s*)?" if opener == "^" else ""
    for m in re.finditer(re.escape(opener) + r"\s*" + frac + r"\{", text):
        i = close(m.end())
        if frac and m.group("frac"):  # the fraction's second argument belongs to the group as well
            k = i
            while k < n and text[k].isspace():
                k += 1
            if k < n and text[k] == "{":
                i = close(k + 1)
        out.append((m.end(), i - 1))
    return out


def _inside(spans: list[tuple[int, int]], s: int) -> bool:
    for a, b in spans:
        if a <= s < b:
            return True
    return False


class _Tok(NamedTuple):
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


def _slot_tokens(q: str, s: int, lit: str, kind: str, second: bool, in_math: bool) -> list[_Tok]:
    """The tokens of a number that starts in an unbraced macro argument (``\\frac 49``,
    ``\\sqrt2``, ``x^23``): one digit per argument, then ordinary digits. A digit glued to
    the control word (``\\sqrt2``) cannot become a letter (``\\sqrtY`` is another command),
    nor can digits that follow the arguments (``x^23``: ``x^2Y``); both stay as values only."""
    first_role = {"^": "exponent", "\\sqrt": "root"}.get(kind, "denominator" if second else "numerator")
    if kind.endswith("binom"):
        first_role = "term"
    glued = q[s - 1].isalpha()
    flaw = "tex_token" if glued else "exponent" if kind == "^" else ""
    out = [_Tok(s, lit[0], int(lit[0]), in_math, True, first_role, flaw)]
    rest, at = lit[1:], s + 1
    if rest[:1].isdigit() and not second and kind not in ("^", "\\sqrt"):
        out.append(_Tok(at, rest[0], int(rest[0]), in_math, True, "term" if kind.endswith("binom") else "denominator", ""))
        rest, at = rest[1:], at + 1
    if rest[:1].isdigit():
        digits = re.match(r"\d+", rest).group()
        out.append(_Tok(at, digits, int(digits), in_math, True, "term", "tex_token"))
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


def _tokens(q: str, end: int, blocks: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[_Tok]:
    """Every literal of ``q[:end]`` that is a quantity or shows one, in text order."""
    span_starts = [a for a, _ in spans]
    labels = _LABEL_PRE.search(q) is not None
    radix = "base" in q or "Base" in q
    subs = _group_spans(q, "_") if "_" in q else []
    sups = _group_spans(q, "^") if "^" in q else []

    def span_of(s: int) -> tuple[int, int] | None:
        i = bisect_right(span_starts, s) - 1
        return spans[i] if i >= 0 and s < spans[i][1] else None

    found: list[_Tok] = []
    bi = 0
    for m in _NUMBER.finditer(q, 0, end):
        s, e, lit = m.start(), m.end(), m.group()
        while bi < len(blocks) and blocks[bi][1] <= s:
            bi += 1
        if bi < len(blocks) and blocks[bi][0] <= s < blocks[bi][1]:
            continue
        pre = q[max(0, s - 24) : s]
        before = q[s - 1] if s else " "
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
        if slot is not None and slot.group(1) != "_" and not (subs and _inside(subs, s)):
            if "," in lit or "\\" in lit:
                continue
            span = span_of(s)
            toks = _slot_tokens(q, s, lit.split(".")[0], slot.group(1), second, span is not None)
            if sups and _inside(sups, s):  # (81)^{\frac12}: a power all the same
                toks = [t._replace(role="exponent", flaw=t.flaw or "exponent") for t in toks]
            found.extend(toks)
            continue
        if slot is not None or pre.rstrip().endswith("_"):
            continue  # an index written with a space, F_ 2
        after = q[e] if e < len(q) else " "
        # glued to letters / commands (14n, 3rd, x2), subscripts, parts of numbers; a number
        # glued to an operator (\cdot3) is one all the same: its value shows, but Y cannot
        # stand there (\cdotY is another command)
        glued_op = before.isalpha() and _GLUED_OP.search(pre) is not None and not (after.isalpha() or after in "_'")
        if (before.isalpha() and not glued_op) or before in "_.'" or before.isdigit():
            continue
        # a coefficient glued to a one-letter variable in math mode (20x, 8a) is a constant
        # like any other: Y written there reads Yx; a unit or a word (2nd, 5cm), a hex digit
        # (3A_{12}) or a subscripted name stays out
        coef = after.islower() and not (q[e + 1 : e + 2].isalpha() or q[e + 1 : e + 2] in "_'") and \
            not glued_op and span_of(s) is not None
        if (after.isalpha() and not coef) or after in "_'" or after.isdigit():
            continue
        if after == "." and e + 1 < len(q) and (q[e + 1].isdigit() or q.startswith(("\\overline", "\\dot"), e + 1)):
            continue  # the integer part of a decimal, or of 0.\overline{6}
        if after == "," and len(lit) <= 3 and q[e + 1 : e + 4].isdigit():
            # part of a number written with a malformed thousands separator (12,3456); four
            # digits or more before the comma start no thousands group: an item of a list,
            # "(2009,2010)", "\{1000,1001,\ldots\}", a value a reader sees
            continue
        if before == "," and s >= 4 and q[s - 4 : s - 1].isdigit() and not q[s - 5 : s - 4].isdigit():
            continue
        if subs and _inside(subs, s):
            continue  # an index, or deeper in a subscript: the bound of \sum_{1 \le i < j \le 95}
        if "\\" in pre[-12:] and _CMD_TAIL.search(pre[-12:]) and not _ARITH_CMDS.search(pre[-12:]):
            if _KNOWN_CMD_TAIL.search(pre[-12:]) is None:
                continue  # argument of an unknown command
        if len(lit) > 1 and lit[0] == "0" and lit[1] != ".":
            continue  # leading zeros: a digit string, not a quantity
        seps = "," in lit or "\\" in lit
        plain = ungroup(lit) if seps else lit
        if labels and _LABEL_WORDS.search(q, max(0, s - 14), s):
            continue
        span = span_of(s)
        in_math = span is not None
        if not in_math and before == "(" and after == ")":
            continue  # an enumeration label such as (1) in text
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
            found.append(_Tok(s, lit, _key(plain), in_math, True, "term", "tex_token"))
            continue
        if len(plain) == 4 and plain.isdigit() and 1900 <= int(plain) <= 2099 and (
                not in_math or q[span[0] : span[1]].strip() == lit):
            # a year ("In 2004, ..."; 1300 in x^2+1300 is a quantity): never replaced, but it
            # shows its value, so another 2004 cannot become the variable
            found.append(_Tok(s, lit, int(plain), in_math, False, "prose", "named"))
            continue
        role = _role(q, s, e, lit, in_math, span, bool(sups) and _inside(sups, s), radix)
        # a digit group of a number written with thin spaces (and unknown digits): 5\,41G\,507
        grouped = "\\," in lit or (q[e : e + 2] == "\\," and _DIGIT_GROUP_AFTER.match(q, e) is not None) or (
            q[s - 2 : s] == "\\," and _DIGIT_GROUP_BEFORE.search(q, max(0, s - 4), s) is not None)
        flaw = "tex_token" if grouped else "exponent" if role == "exponent" else "base_notation" if role == "radix" else ""
        found.append(_Tok(s, lit, _key(plain), in_math, arithmetic, role, flaw))
    if "frac" in q:
        # a mixed number, 6\\frac{1}{4}, is one value (25/4) and one constant: Y in one of its digits
        # reads as another number (\\sqrt{W\\frac{1}{4}} is W/4 to TeX, where the text meant
        # \\sqrt{6\\frac{1}{4}}), so the whole of it is the literal the variable replaces
        for m in _MIXED.finditer(q, 0, end):
            inside = [t for t in found if m.start() <= t.s < m.end()]
            whole = next((t for t in inside if t.s == m.start()), None)
            lit = m.group()
            value = mixed_value(lit)
            pre = q[max(0, m.start() - 24) : m.start()]
            if whole is None or whole.flaw or value is None or _SLOT1.search(pre) or _SLOT2.search(pre):
                continue  # an exponent, a year, a zero denominator, a TeX argument (\\sqrt 2\\frac12)
            span = span_of(m.start())
            role = "prose" if span is not None and q[span[0] : span[1]].strip() == lit else whole.role
            found = [t for t in found if t not in inside]
            found.append(_Tok(m.start(), lit, value, whole.math, whole.arith, role, ""))
        found.sort()
    words = _word_tokens(q, end, blocks, spans)
    if words:
        found.extend(words)
        found.sort()
    return found


def _word_tokens(q: str, end: int, blocks: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[_Tok]:
    out = []
    for m in _WORD.finditer(q, 0, end):
        s, e = m.start(), m.end()
        if _inside(blocks, s) or _inside(spans, s):
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
            out.append(_Tok(s, lit, value, False, False, "prose", "named"))
            continue
        role = "radix" if ("base" in q and _RADIX_TAIL.search(q, max(0, s - 16), s)) else "prose"
        out.append(_Tok(s, lit, value, False, False, role, "base_notation" if role == "radix" else ""))
    return out


@lru_cache(maxsize=32768)
def find_constants(question: str, answer: str = "") -> tuple[Constant, ...]:
    """The literals of ``question`` that are quantities, in text order, each with its flaw
    (:data:`FLAWS`, "" when it may be replaced) and role (:data:`ROLES`).

    Args:
        question: the problem text.
        answer: its answer; when the answer is a choice letter, numbers from the first
            answer choice on are skipped (replacing them would change the options).
    """
    blocks = _masked_blocks(question)
    spans = math_spans(question)
    end = len(question)
    if _CHOICE_ANSWER.fullmatch(answer or ""):
        m = _CHOICE.search(question)
        if m:
            end = m.start()
    toks = _tokens(question, end, blocks, spans)
    if not toks:
        return ()
    flaws = _Flaws(question, spans)
    own = []
    for t in toks:
        f = flaws.of(t.s, t.key)
        own.append(f if f in ("choice", "notation") else t.flaw or f)
    roles = [("notation" if own[i] == "notation" else t.role) for i, t in enumerate(toks)]
    from composition_rl.values.shortcuts import (  # the rules use this module's tokens
        shortcut_flaws,
        shortcut_risks,
    )

    for i, rule in enumerate(shortcut_flaws(question, toks, blocks, spans, flaws.ends)):
        if rule and not own[i]:
            own[i] = rule
    risks = shortcut_risks(question, toks, blocks)
    groups: dict[int | Fraction, list[int]] = {}
    index: dict[int | Fraction, list[int]] = {}  # index starts, grouped apart ("n \\ge 3" twice)
    for i, t in enumerate(toks):
        if roles[i] == "index":
            index.setdefault(t.key, []).append(i)
        elif roles[i] not in NOTATION_ROLES:
            groups.setdefault(t.key, []).append(i)
    out = []
    for i, t in enumerate(toks):
        flaw, also = own[i], ()
        g = (index if roles[i] == "index" else groups).get(t.key, ()) if roles[i] not in NOTATION_ROLES else ()
        if not flaw and len(g) > 1:
            # a repeated value: every occurrence is replaced (the same literal, none flawed,
            # all in one role) or none; an occurrence in a notation role shows nothing
            kind = _ROLE_KIND.get(roles[i], roles[i])
            if any(_ROLE_KIND.get(roles[j], roles[j]) != kind for j in g):
                flaw = "role_mix"
            elif any(own[j] or toks[j].lit != t.lit for j in g):
                flaw = "repeated"
            else:
                also = tuple((toks[j].s, toks[j].math) for j in g if j != i)
        # a repeated value carries the risk of any of its places
        risk = (risks[i] or next((risks[j] for j in g if risks[j]), "")) if len(g) > 1 else risks[i]
        out.append(Constant(t.s, t.lit, Fraction(t.key), t.math, t.arith, len(g) <= 1, flaw, also, roles[i], risk))
    return tuple(out)


# Why a literal that is a quantity still must not become the variable (a
# prompt whose chain can be skipped, or that reads badly, is correct but teaches no
# composition). The order matters once: a chain whose later problem has constants but no
# safe one is rejected with the reason that comes last here among its constants' flaws
# (the rule that removed the last candidates).
FLAWS = (
    "repeated",  # the value is written again where it cannot be replaced: Y is visible anyway
    "choice",  # inside the answer options: replacing it changes what is asked
    "fact",  # in a stated fact with no unknowns (5!=...=120, 7^{400}\equiv 1): it fixes nothing
    "answer_form",  # in an answer-format instruction ("in the form Ax+By+C=0")
    "hint",  # in a hint or reminder ("Note that ...", "Recall that ...")
    "notation",  # part of notation, not a quantity: f^{-1}, \sqrt[3], f^{(4)}, \mathbb{R}^3
    "text_in_math",  # inside \text{} in math mode: neither Y nor $Y$ is safe there
    "named",  # a number used as a name or inside a word (a year, "two-digit"): it shows its value
    "tex_token",  # one TeX token of \frac 49, \sqrt2, x^23, or a digit group 47\,389: no literal
    "exponent",  # a superscript: the power of x^2 is notation, replacing it reads badly
    "base_notation",  # a radix, "in base $12$" (base 10 is the default a reader assumes)
    "role_mix",  # the value also stands in another role (a term and a divisor): not one quantity
    "worked_example",  # inside a worked example ("For example, ..."), which solves it for Y
    "figure",  # the figure code shows the value (a label, a coordinate, a radius)
    "sums_to_one",  # shares that must sum to 1 (or 100%), or parts that sum to the stated whole
    "pattern",  # a term of a sequence its neighbours determine (1, 2, Y, 4; 6075, 2025, Y)
    "default_value",  # a value the context fixes by default (a 52-card deck, 60 minutes in an hour)
    "standard_constant",  # the constant of a well-known formula the problem states (V-E+F=2)
    "answer_range",  # a residue's modulus or the end of the range 0..N its answer must lie in
    "grammar",  # a 1 before a singular noun ("radius 1 foot"): "Y foot" tells Y = 1
    "zero",  # the value 0 (=0, \ge 0): the value any reader guesses first
)
_INVERSE_TAIL = re.compile(r"\^\s*\{?\s*-\s*$")
# Where a literal is notation, not a quantity: (what it is, the text that ends right before it,
# an example). An inverse, ``f^{-1}``, is read apart: only a 1 there is notation.
_NOTATION_CONTEXTS: tuple[tuple[str, str, str], ...] = (
    ("root index", r"\\sqrt\s*\[\s*$", "(\\sqrt[6]{4})^9"),
    ("derivative order", r"\^\s*\{\s*\(\s*$", "f^{(4)}"),
    ("dimension", r"\\mathbb\s*\{?\s*[A-Z]\s*\}?\s*\^\s*\{?\s*$", "\\mathbb{R}^3"),
    ("environment argument", r"\\begin\s*\{[a-zA-Z*]+\}\s*\{\s*$", "\\begin{alignat}{2}"),
)
_NOTATION_TAIL = re.compile("|".join(p for _, p, _ in _NOTATION_CONTEXTS))
_RELATION = re.compile(r"[=<>]|\\(?:equiv|leq?|geq?|neq?|approx|cong|lt|gt)(?![a-zA-Z])")
_SENTENCE_END = re.compile(r"[.?!](?=\s)|\n\s*\n")
# an answer template follows these ("in the form $Ax+By+C=0$"); "express your answer in base
# $12$" is no template: a radix is a real parameter of the problem
_FORM_WORDS = re.compile(r"in the form|of the form", re.I)
_HINT_WORDS = re.compile(
    r"\bhint\b|\bnote that\b|\bnote:|\brecall that\b|\byou may use\b|\buse the fact|\bfor example\b|\be\.g\.", re.I
)
# Greek letters name unknowns (\theta = \frac{\pi}{3} is no fact); \pi is a number
_GREEK = re.compile(
    r"\\(?:alpha|beta|gamma|delta|epsilon|varepsilon|zeta|eta|theta|vartheta|iota|kappa|lambda|mu|nu|xi"
    r"|rho|sigma|tau|upsilon|phi|varphi|chi|psi|omega|Gamma|Delta|Theta|Lambda|Xi|Sigma|Phi|Psi|Omega)(?![a-zA-Z])"
)


class _Flaws:
    """The context of one question that decides :data:`FLAWS` for its literals."""

    def __init__(self, q: str, spans: list[tuple[int, int]]) -> None:
        self.q = q
        self.spans = spans
        self.text_spans = _text_in_math(q, spans)
        ch = _CHOICE.search(q)
        self.choice_start = ch.start() if ch else len(q)
        self.ends = [m.start() for m in _SENTENCE_END.finditer(q)]
        self._words: dict[int, tuple[int, bool]] = {}  # sentence -> (answer-form keyword at, hint)

    def _span(self, s: int) -> tuple[int, int] | None:
        for a, b in self.spans:
            if a <= s < b:
                return a, b
        return None

    def _sentence(self, s: int) -> tuple[int, str]:
        i = bisect_right(self.ends, s)
        a = self.ends[i - 1] + 1 if i else 0
        b = self.ends[i] if i < len(self.ends) else len(self.q)
        return a, self.q[a:b]

    def of(self, s: int, key: int | Fraction) -> str:
        """The flaw of the literal at ``s`` with value ``key``, "repeated" aside."""
        q = self.q
        if s >= self.choice_start:
            return "choice"
        pre = q[max(0, s - 24) : s]
        tail = pre.rstrip()[-1:]
        if tail in ("-", "[", "(", "^", "{") and (
                (key == 1 and _INVERSE_TAIL.search(pre)) or _NOTATION_TAIL.search(pre)):
            return "notation"
        if self.text_spans and any(a <= s < b for a, b in self.text_spans):
            return "text_in_math"
        span = self._span(s)
        if span is not None:
            body = q[span[0] : span[1]]
            if _RELATION.search(body) and not re.search(r"[A-Za-z]", _CMD.sub(" ", _GREEK.sub("x", _TEXTCMD.sub(" ", body)))):
                return "fact"
        i = bisect_right(self.ends, s)
        words = self._words.get(i)
        if words is None:
            a, sentence = self._sentence(s)
            form = _FORM_WORDS.search(sentence)
            words = self._words[i] = (a + form.start() if form is not None else -1, bool(_HINT_WORDS.search(sentence)))
        if 0 <= words[0] < s:  # a template follows its keyword
            return "answer_form"
        if words[1]:
            return "hint"
        return ""


# the start of an index range (role "index"): "for $n \\ge 2$", "for all $k > 1$" where the
# letter is a subscript of the problem (a_n, F_{n - 1})
_INDEX_START = re.compile(r"(?<![A-Za-z\\_])([nkijm])\s*(?:\\geq?|\\geqslant|>)\s*\{?$")  # not a_n > 3
_INDEX_TAILS = frozenset("eqt>{")


@lru_cache(maxsize=1024)
def _subscript(q: str, letter: str) -> bool:
    """Whether ``letter`` stands in a subscript of ``q`` (``a_n``, ``a_{n + 1}``; a logarithm's
    base, ``\\log_{m}``, is none)."""
    return re.search(rf"(?<!\\log)_(?:{letter}(?![A-Za-z])|\{{[^{{}}]*(?<![A-Za-z\\]){letter}(?![A-Za-z])[^{{}}]*\}})", q) is not None


_CMD = re.compile(r"\\[a-zA-Z]+")
_TEXTCMD = re.compile(r"\\(?:text|mathrm|textbf|textit|mbox|operatorname)\s*\{[^{}]*\}")


@lru_cache(maxsize=32768)
def symbols_used(text: str) -> frozenset[str]:
    """Upper-cased single letters used as symbols: in math mode, in figure code, or a lone
    capital letter in prose ("point A"). Case is folded so that X never sits beside x."""
    used: set[str] = set()
    blocks = _masked_blocks(text)
    spans = [text[a:b] for a, b in math_spans(text)]
    for a, b in blocks:  # figure code: single-letter names and labels only
        used.update(c.upper() for c in re.findall(r"(?<![A-Za-z\\])[A-Za-z](?![A-Za-z])", text[a:b]))
    for span in spans:
        # in math mode every letter is a symbol of its own ($BC$ is B and C)
        span = _CMD.sub(" ", _TEXTCMD.sub(" ", span))
        used.update(c.upper() for c in re.findall(r"[A-Za-z]", span))
    for m in re.finditer(r"(?<![A-Za-z$\\])([A-Z])(?![A-Za-z])", text):
        c, i = m.group(1), m.start()
        if c in ("A", "I") and text[m.end() : m.end() + 2][:1] == " " and text[m.end() + 1 : m.end() + 2].islower():
            # "A box ..." at the start of a sentence, or the pronoun "I": not symbols.
            # "Point A lies ..." stays a symbol (conservative: a false hit only costs a name).
            before = text[:i].rstrip()
            if c == "I" or not before or before[-1] in ".!?:\n":
                continue
        used.add(c)
    return frozenset(used)
