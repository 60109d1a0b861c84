"""Where a place sits in a problem's text, by the defect scanners' own reading (math mode, a
figure, a sub- or superscript) and the numbers written there: shared by the scan of a record
(:mod:`composition_rl.spc.quality`) and its shortcut classes
(:mod:`composition_rl.spc.quality_shortcuts`). Written apart from the code that chose
the constants, so the scanners can catch that code's mistakes."""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["FIGURE", "NUMBER", "POINT", "in_figure", "in_group", "in_subscript", "in_superscript", "math_at",
           "no_powers", "number_value"]

_ENVS = (
    "equation", "align", "alignat", "eqnarray", "gather", "multline", "flalign", "displaymath", "math",
    "cases", "dcases", "rcases", "matrix", "pmatrix", "bmatrix", "Bmatrix", "vmatrix", "Vmatrix",
    "smallmatrix", "array", "split", "aligned", "gathered", "alignedat", "subarray",
)
_OPEN_ENV = re.compile(r"\\begin\s*\{(" + "|".join(_ENVS) + r")\*?\}")
_TEXT_CMD = re.compile(r"\\(?:text|textrm|textbf|textit|textsf|texttt|textnormal|mbox|hbox)\s*\{$")
NUMBER = re.compile(r"(?<![\d.,])(?:\d{1,3}(?:(?:,|\{,\}|,\\!)\d{3})+|\d+(?:\.\d+)?)(?![\d])")
FIGURE = re.compile(r"\[asy\].*?(?:\[/asy\]|\Z)", re.S)
POINT = re.compile(r"(?<![A-Za-z\\])\(\s*-?\s*[\d.]+\s*,\s*-?\s*[\d.]+\s*(?:,\s*-?\s*[\d.]+\s*)?\)")
_POWER = re.compile(r"\^\s*(?:\{[^{}]*\}|\\?\w)")


def math_at(text: str, pos: int) -> bool:
    """Whether ``text[pos]`` is in math mode (and not in a ``\\text{}`` inside math): a scan
    of the delimiters before it, innermost first."""
    stack: list[str] = []  # "$", "$$", "\\]", "\\)", "env:<name>", "text:<depth>"
    i = 0
    while i < pos:
        ch = text[i]
        if ch == "\\":
            m = _OPEN_ENV.match(text, i)
            if m and not (stack and not stack[-1].startswith("text")):
                stack.append("env:" + m.group(1))
                i = m.end()
                continue
            if stack and stack[-1].startswith("env:") and text.startswith("\\end", i):
                m = re.match(r"\\end\s*\{([a-zA-Z]+)\*?\}", text[i:])
                if m and "env:" + m.group(1) == stack[-1]:
                    stack.pop()
                    i += m.end()
                    continue
            two = text[i : i + 2]
            if two in ("\\[", "\\(") and not stack:
                stack.append("\\]" if two == "\\[" else "\\)")
            elif stack and two == stack[-1]:
                stack.pop()
            i += 2
            continue
        if ch == "$":
            tok = "$$" if text.startswith("$$", i) else "$"
            if stack and stack[-1] == tok:
                stack.pop()
            elif not stack or stack[-1].startswith("text"):
                stack.append(tok)
            i += len(tok)
            continue
        if ch == "{" and stack and not stack[-1].startswith("text") and _TEXT_CMD.search(text[max(0, i - 12) : i + 1]):
            stack.append("text:1")
        elif stack and stack[-1].startswith("text"):
            depth = int(stack[-1][5:]) + (ch == "{") - (ch == "}")
            stack[-1] = f"text:{depth}"
            if depth == 0:
                stack.pop()
        i += 1
    return bool(stack) and not stack[-1].startswith("text")


def number_value(s: str) -> Fraction:
    """The value of a number literal, thousands separators (``,``, ``{,}``, ``,\\!``) dropped;
    raises ``ValueError`` for text that is not a decimal or ``p/q`` number."""
    return Fraction(re.sub(r"\{,\}|,\\!|,", "", s))


def in_figure(text: str, pos: int) -> bool:
    """Whether ``pos`` lies inside an ``[asy]`` figure of ``text``."""
    return any(m.start() <= pos < m.end() for m in FIGURE.finditer(text))


def no_powers(text: str) -> str:
    """``text`` without superscripts: innermost braces first, so ``^{\\frac{1}{2}}`` goes too."""
    prev = None
    while prev != text and "^" in text:
        prev = text
        text = _POWER.sub("", text)
        if "^{" in text:  # a nested group: flatten one level and try again
            text = re.sub(r"\^\s*\{((?:[^{}]|\{[^{}]*\})*)\}", "", text)
    return text


def in_group(q: str, off: int, mark: str, reach: int = 200) -> bool:
    """Whether ``off`` is right after ``mark`` (``^`` or ``_``) or inside a braced group that
    one opens, at any depth (``^{\\frac{1}{2}}``); the scan stops at a ``$``."""
    if re.search(re.escape(mark) + r"\s*$", q[max(0, off - 4) : off]):
        return True
    depth, i = 0, off - 1
    while i >= 0 and off - i < reach:
        c = q[i]
        if c == "}":
            depth += 1
        elif c == "{":
            if depth == 0:
                if re.search(re.escape(mark) + r"\s*$", q[max(0, i - 4) : i]):
                    return True
            else:
                depth -= 1
        elif c == "$":
            return False
        i -= 1
    return False


def in_subscript(q: str, off: int) -> bool:
    """Whether ``off`` is in a subscript of ``q`` (:func:`in_group` with ``_``, looking 60
    characters back)."""
    return in_group(q, off, "_", 60)


def in_superscript(q: str, off: int) -> bool:
    """Whether ``off`` is in a superscript of ``q`` (:func:`in_group` with ``^``)."""
    return in_group(q, off, "^")
