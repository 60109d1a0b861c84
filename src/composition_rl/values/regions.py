"""Where a problem's text is math, figure code, or prose inside math: the regions that decide
how a literal there is read and how a variable is written in its place.

* :func:`math_spans` and :func:`in_math`: math mode (``$..$``, ``\\[..\\]``, the math
  environments of :data:`MATH_ENVIRONMENTS`);
* :func:`text_in_math`: ``\\text{..}`` groups inside math, prose again;
* :func:`masked_blocks`: figure code, tables, code, labels and references, whose numbers are
  no quantities of the problem;
* :func:`group_spans`: the braced groups of superscripts and subscripts.

:mod:`.constants` and :mod:`.literals` read a text through these; :mod:`.derive` and check 5
(:mod:`composition_rl.spc.dependence`) use :func:`math_spans` as well.
"""

from __future__ import annotations

import re

__all__ = ["MATH_ENVIRONMENTS", "group_spans", "in_math", "inside", "masked_blocks", "math_spans",
           "text_in_math"]

_BLOCKS = re.compile(
    r"\[asy\].*?(?:\[/asy\]|\Z)"
    r"|\\begin\{(asy|tabular|verbatim|lstlisting|tikzpicture|picture)\}.*?(?:\\end\{\1\}|\Z)"
    r"|```.*?(?:```|\Z)"
    r"|<code>.*?(?:</code>|\Z)"
    r"|\\(?:label|ref|eqref|url|href|includegraphics|overline|underline|underbrace|text(?:bf|it|tt)?\s*\{\s*\()\s*\{[^{}]*\}"
    r"|\\(?:overline|underline)\s*\{(?:[^{}]|\{[^{}]*\})*\}",
    re.S,
)


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


def text_in_math(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
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


def masked_blocks(text: str) -> list[tuple[int, int]]:
    """Spans of figure code (``[asy]``), tables, verbatim and code blocks, labels, references
    and over/underlines: their numbers are no quantities a variable may replace."""
    return [(m.start(), m.end()) for m in _BLOCKS.finditer(text)]


def group_spans(text: str, opener: str) -> list[tuple[int, int]]:
    """Content spans of the braced groups ``^{...}`` (``opener`` "^") or ``_{...}`` ("_"),
    nested groups included, and of an unbraced fraction as a superscript, ``^\\frac{Z}{4}``
    (both of its arguments).

    >>> q = "$(576)^\\\\frac{1}{4}(216)^{2}$"
    >>> [q[a:b] for a, b in group_spans(q, "^")]
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


def inside(spans: list[tuple[int, int]], s: int) -> bool:
    """Whether offset ``s`` lies in one of ``spans``."""
    for a, b in spans:
        if a <= s < b:
            return True
    return False
