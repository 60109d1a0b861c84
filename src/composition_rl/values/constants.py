"""The constants in a problem's text that may become a variable (sub-step 2).

:func:`find_constants` lists the literals in a question that may be replaced by a variable,
and ranks them; the literals themselves (figure/code blocks, numbers glued to letters,
subscripts and label indices, years, digit concatenations and parts of larger numbers
skipped) come from the scanner of :mod:`composition_rl.values.literals`, and math mode from
:mod:`composition_rl.values.regions`. Also the symbols a text already uses
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

from composition_rl.values.literals import scan_literals
from composition_rl.values.regions import masked_blocks, math_spans, text_in_math

_CHOICE = re.compile(r"\\(?:text|textbf|mathrm)\s*\{\s*\(A\)|\(A\)\s*\$?\s*[-\d\\]|^\s*A\.\s", re.M)


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
    # a soft flaw (:data:`composition_rl.values.shortcut_risks.RISKS`): replaced only when no
    # constant without one allows a natural offset; "" for none
    risk: str = ""

    @property
    def rank(self) -> tuple[int, int]:
        """Sort key, lower first: math mode in arithmetic, then other math mode, then prose; a
        unique literal before a repeated one of the same tier."""
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


@lru_cache(maxsize=32768)
def find_constants(question: str, answer: str = "") -> tuple[Constant, ...]:
    """The literals of ``question`` that are quantities, in text order, each with its flaw
    (:data:`FLAWS`, "" when it may be replaced) and role (:data:`ROLES`).

    Args:
        question: the problem text.
        answer: its answer; when the answer is a choice letter, numbers from the first
            answer choice on are skipped (replacing them would change the options).
    """
    blocks = masked_blocks(question)
    spans = math_spans(question)
    end = len(question)
    if _CHOICE_ANSWER.fullmatch(answer or ""):
        m = _CHOICE.search(question)
        if m:
            end = m.start()
    toks = scan_literals(question, end, blocks, spans)
    if not toks:
        return ()
    flaws = _Flaws(question, spans)
    own = []
    for t in toks:
        f = flaws.of(t.s, t.key)
        own.append(f if f in ("choice", "notation") else t.flaw or f)
    roles = [("notation" if own[i] == "notation" else t.role) for i, t in enumerate(toks)]
    # the rules use this module's tokens
    from composition_rl.values.shortcut_risks import shortcut_risks
    from composition_rl.values.shortcuts import shortcut_flaws

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
        self.text_spans = text_in_math(q, spans)
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


_CMD = re.compile(r"\\[a-zA-Z]+")
_TEXTCMD = re.compile(r"\\(?:text|mathrm|textbf|textit|mbox|operatorname)\s*\{[^{}]*\}")


@lru_cache(maxsize=32768)
def symbols_used(text: str) -> frozenset[str]:
    """Upper-cased single letters used as symbols: in math mode, in figure code, or a lone
    capital letter in prose ("point A"). Case is folded so that X never sits beside x."""
    used: set[str] = set()
    blocks = masked_blocks(text)
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
