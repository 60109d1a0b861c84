"""The constants in a problem's text that may become a variable (sub-step 2).

:func:`find_constants` lists the literals in a question that may be replaced by a variable,
skipping figure/code blocks, numbers glued to letters, subscripts and label indices, years,
digit concatenations and parts of larger numbers, and ranks them. Also math mode
(:func:`in_math`) and the symbols a text already uses (:func:`symbols_used`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

_BLOCKS = re.compile(
    r"\[asy\].*?(?:\[/asy\]|\Z)"
    r"|\\begin\{(asy|tabular|verbatim|lstlisting|tikzpicture|picture)\}.*?(?:\\end\{\1\}|\Z)"
    r"|```.*?(?:```|\Z)"
    r"|<code>.*?(?:</code>|\Z)"
    r"|\\(?:label|ref|eqref|url|href|includegraphics|overline|underline|underbrace|text(?:bf|it|tt)?\s*\{\s*\()\s*\{[^{}]*\}"
    r"|\\(?:overline|underline)\s*\{(?:[^{}]|\{[^{}]*\})*\}",
    re.S,
)
_NUMBER = re.compile(r"\d{1,3}(?:(?:,|\{,\}|,\\!)\d{3})+(?!\d)|\d+(?:\.\d+)?")
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
    :data:`FLAWS`), or is "" for a safe one.
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

    @property
    def rank(self) -> tuple[int, int]:
        tier = 0 if (self.math_mode and self.arithmetic) else 1 if self.math_mode else 2
        return (tier, 0 if self.unique else 1)


_CHOICE_ANSWER = re.compile(r"\s*(?:\\text\{\s*)?\(?[A-E]\)?\s*\}?\s*")
_SUBSCRIPT_TAIL = re.compile(r"_\s*\{[^{}]*$")
_SHORTHAND_TAIL = re.compile(r"\\(?:frac|dfrac|tfrac|sqrt)$")
_CMD_TAIL = re.compile(r"\\[a-zA-Z]+\s*$")
_KNOWN_CMD_TAIL = re.compile(r"\\(?:pi|circ|cdot|times|div|left|right|quad|qquad|le|ge|leq|geq|pm|neq|approx)\s*$")
_SEPARATORS = re.compile(r"\{,\}|,\\!|,")
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
    """Whether offset ``pos`` of ``text`` lies in math mode (see :func:`_math_spans`).

    >>> in_math("Let $x = 3$ and 4 apples.", 9), in_math("Let $x = 3$ and 4 apples.", 16)
    (True, False)
    """
    return any(a <= pos < b for a, b in _math_spans(text))


def _math_spans(text: str) -> list[tuple[int, int]]:
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


@lru_cache(maxsize=32768)
def find_constants(question: str, answer: str = "") -> tuple[Constant, ...]:
    """The replaceable literals of ``question``, in text order.

    Args:
        question: the problem text.
        answer: its answer; when the answer is a choice letter, numbers from the first
            answer choice on are skipped (replacing them would change the options).
    """
    blocks = _masked_blocks(question)
    spans = _math_spans(question)
    span_starts = [a for a, _ in spans]
    end = len(question)
    if _CHOICE_ANSWER.fullmatch(answer or ""):
        m = _CHOICE.search(question)
        if m:
            end = m.start()
    found: list[tuple[int, str, Fraction, bool, bool]] = []
    bi = 0
    for m in _NUMBER.finditer(question, 0, end):
        s, e, lit = m.start(), m.end(), m.group()
        while bi < len(blocks) and blocks[bi][1] <= s:
            bi += 1
        if bi < len(blocks) and blocks[bi][0] <= s < blocks[bi][1]:
            continue
        before = question[s - 1] if s else " "
        after = question[e] if e < len(question) else " "
        # glued to letters / commands (14n, 3rd, x2, \frac12), subscripts, parts of numbers
        if before.isalpha() or before in "_.'" or before.isdigit():
            continue
        if after.isalpha() or after in "_'" or after.isdigit():
            continue
        if after == "." and e + 1 < len(question) and (question[e + 1].isdigit() or question[e + 1] == "\\"):
            continue  # the integer part of a decimal, or of 0.\overline{6}
        if after == "," and e + 1 < len(question) and question[e + 1].isdigit():
            continue
        if before == "," and s >= 2 and question[s - 2].isdigit():
            continue
        pre = question[max(0, s - 12) : s]
        if _SUBSCRIPT_TAIL.search(pre) or _SHORTHAND_TAIL.search(pre):
            continue  # subscript index or \frac12-style shorthand
        if _SUBSCRIPT_TAIL.search(question[max(0, s - 40) : s]):
            continue  # deeper in a subscript: the bound of \sum_{1 \le i < j \le 95}, an index
        if _CMD_TAIL.search(pre) and not _ARITH_CMDS.search(pre):
            if _KNOWN_CMD_TAIL.search(pre) is None:
                continue  # argument of an unknown command
        if len(lit) > 1 and lit[0] == "0" and lit[1] != ".":
            continue  # leading zeros: a digit string, not a quantity
        plain = _SEPARATORS.sub("", lit) if "," in lit else lit
        if plain.isdigit() and len(plain) == 4 and 1000 <= int(plain) <= 2099 and "," not in lit:
            continue  # a year
        if _LABEL_WORDS.search(question[max(0, s - 14) : s]):
            continue
        i = bisect_right(span_starts, s) - 1
        in_math = i >= 0 and s < spans[i][1]  # inside $...$ and the like
        if not in_math and before == "(" and after == ")":
            continue  # an enumeration label such as (1) in text
        left = question[max(0, s - 8) : s].rstrip()
        right = question[e : e + 8].lstrip()
        arithmetic = in_math and (
            (left[-1:] in _ARITH)
            or (right[:1] in _ARITH)
            or bool(_ARITH_CMDS.search(left))
            or bool(_ARITH_CMDS_AFTER.match(question[e : e + 10]))
        )
        # an int counts as the equal Fraction (same hash, equal), and hashes far faster
        key = int(plain) if plain.isdigit() else Fraction(plain)
        found.append((s, lit, key, in_math, arithmetic))
    counts: dict[int | Fraction, int] = {}
    for f in found:
        counts[f[2]] = counts.get(f[2], 0) + 1
    if not found:
        return ()
    flaws = _Flaws(question, spans, blocks)
    own = [flaws.of(s, k) for s, _, k, _, _ in found]
    groups: dict[int | Fraction, list[int]] = {}
    for i, f in enumerate(found):
        groups.setdefault(f[2], []).append(i)
    out = []
    for i, (s, lit, k, mm, ar) in enumerate(found):
        g = groups[k]
        flaw, also = own[i], ()
        if not flaw and (k in flaws.labels or len(g) > 1):
            # a repeated value: replace every occurrence (all the same literal, none flawed,
            # none in a figure label), or none
            if k in flaws.labels or any(own[j] or found[j][1] != lit for j in g):
                flaw = "repeated"
            else:
                also = tuple((found[j][0], found[j][3]) for j in g if j != i)
        out.append(Constant(s, lit, Fraction(k), mm, ar, len(g) == 1, flaw, also))
    return tuple(out)


# Why a literal that is a quantity still must not become the variable (issue 16: a prompt
# whose chain can be skipped, or that reads badly, is correct but teaches no composition).
FLAWS = (
    "repeated",  # the value is written again elsewhere (text, figure, label): Y is visible anyway
    "choice",  # inside the answer options: replacing it changes what is asked
    "fact",  # in a stated fact with no unknowns (5!=...=120, 7^{400}\equiv 1): it fixes nothing
    "answer_form",  # in an answer-format instruction ("in the form Ax+By+C=0")
    "hint",  # in a hint or reminder ("Note that ...", "Recall that ...")
    "notation",  # part of notation, not a quantity: f^{-1}, \sqrt[3], f^{(4)}, \mathbb{R}^3
    "text_in_math",  # inside \text{} in math mode: neither Y nor $Y$ is safe there
)
_INVERSE_TAIL = re.compile(r"\^\s*\{?\s*-\s*$")
_NOTATION_TAIL = re.compile(
    r"\\sqrt\s*\[\s*$"  # root index
    r"|\^\s*\{\s*\(\s*$"  # derivative order f^{(4)}
    r"|\\mathbb\s*\{?\s*[A-Z]\s*\}?\s*\^\s*\{?\s*$"  # dimension R^3
    r"|\\begin\s*\{[a-zA-Z*]+\}\s*\{\s*$"  # environment argument \begin{alignat}{2}
)
_RELATION = re.compile(r"[=<>]|\\(?:equiv|leq?|geq?|neq?|approx|cong|lt|gt)(?![a-zA-Z])")
_SENTENCE_END = re.compile(r"[.?!](?=\s)|\n\s*\n")
# an answer template follows these ("in the form $Ax+By+C=0$"); "express your answer in base
# $12$" is no template: a radix is a real parameter of the problem
_FORM_WORDS = re.compile(r"in the form|of the form", re.I)
_HINT_WORDS = re.compile(
    r"\bhint\b|\bnote that\b|\bnote:|\brecall that\b|\byou may use\b|\buse the fact|\bfor example\b|\be\.g\.", re.I
)
_FIGURE_STRING = re.compile(r'"[^"\n]*"')
# Greek letters name unknowns (\theta = \frac{\pi}{3} is no fact); \pi is a number
_GREEK = re.compile(
    r"\\(?:alpha|beta|gamma|delta|epsilon|varepsilon|zeta|eta|theta|vartheta|iota|kappa|lambda|mu|nu|xi"
    r"|rho|sigma|tau|upsilon|phi|varphi|chi|psi|omega|Gamma|Delta|Theta|Lambda|Xi|Sigma|Phi|Psi|Omega)(?![a-zA-Z])"
)


class _Flaws:
    """The context of one question that decides :data:`FLAWS` for its literals."""

    def __init__(self, q: str, spans: list[tuple[int, int]], blocks: list[tuple[int, int]]) -> None:
        self.q = q
        self.spans = spans
        self.text_spans = _text_in_math(q, spans)
        # values a figure label shows (a string in figure code: label("$4''$", ...)); those
        # cannot be replaced, so a literal with such a value would leave Y visible. Indices,
        # exponents and coordinates are other quantities that happen to be equal.
        self.labels: dict[int | Fraction, int] = {}
        for a, b in blocks:
            for lab in _FIGURE_STRING.finditer(q, a, b):
                for m in _NUMBER.finditer(lab.group()):
                    lit = m.group()
                    plain = _SEPARATORS.sub("", lit) if "," in lit else lit
                    k = int(plain) if plain.isdigit() else Fraction(plain)
                    self.labels[k] = self.labels.get(k, 0) + 1
        ch = _CHOICE.search(q)
        self.choice_start = ch.start() if ch else len(q)
        self.ends = [m.start() for m in _SENTENCE_END.finditer(q)]

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
        if (key == 1 and _INVERSE_TAIL.search(pre)) or _NOTATION_TAIL.search(pre):
            return "notation"
        if any(a <= s < b for a, b in self.text_spans):
            return "text_in_math"
        span = self._span(s)
        if span is not None:
            body = q[span[0] : span[1]]
            if _RELATION.search(body) and not re.search(r"[A-Za-z]", _CMD.sub(" ", _GREEK.sub("x", _TEXTCMD.sub(" ", body)))):
                return "fact"
        a, sentence = self._sentence(s)
        form = _FORM_WORDS.search(sentence)
        if form is not None and a + form.start() < s:  # a template follows its keyword
            return "answer_form"
        if _HINT_WORDS.search(sentence):
            return "hint"
        return ""


_CMD = re.compile(r"\\[a-zA-Z]+")
_TEXTCMD = re.compile(r"\\(?:text|mathrm|textbf|textit|mbox|operatorname)\s*\{[^{}]*\}")


@lru_cache(maxsize=32768)
def symbols_used(text: str) -> frozenset[str]:
    """Upper-cased single letters used as symbols: in math mode, in figure code, or a lone
    capital letter in prose ("point A"). Case is folded so that X never sits beside x."""
    used: set[str] = set()
    blocks = _masked_blocks(text)
    spans = [text[a:b] for a, b in _math_spans(text)]
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
