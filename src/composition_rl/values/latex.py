"""The one reader of LaTeX arithmetic: text to tokens to a tree, and the tree to a value.

Three jobs read the small arithmetic problems and answers are written in: the value of an
answer (``\\frac47``, ``7\\sqrt{2}``, ``2\\frac{1}{4}``; :mod:`.parse`), an answer that is an
expression in letters (``3x^2 - 2x``, ``2 - 9i``; :mod:`.derive`), and whether a statement of
a problem is constant in a variable (:mod:`composition_rl.spc.dependence`). They read one
grammar, so a form one of them reads is read the same way by the others:

* :func:`tokenize` -- the tokens of a text; ``letters=True`` reads single letters as names
  (algebra), else a letter is refused and ``1.5e3`` is a number (arithmetic);
* :func:`read` -- a tree of tuples (:data:`Node`), the grammar below;
* :func:`evaluate` -- the value of a tree in a :class:`Domain`, which says what each operation
  means (exact sympy numbers, :class:`~composition_rl.values.parse.Lin`, ``Fraction`` at test
  points) and refuses what it does not evaluate;
* the normal form of a written number (:func:`~composition_rl.values.numbers.clean`) and the
  fast path for plain integers, decimals and fractions
  (:func:`~composition_rl.values.numbers.plain_number`) live in :mod:`.numbers`, the one
  reader of plain numbers, which the verifier shares.

The grammar, as TeX and school arithmetic read it::

    expr    := term (("+" | "-") term)*
    term    := unary (("*" | "/" | \\cdot | \\times | \\div) unary | implicit factor)*
    unary   := ("+" | "-") unary | power
    power   := postfix ["^" (signed unary | atom)]
    postfix := atom "!"*
    atom    := number | mixed number | name | (expr) | [expr] | {expr}
             | \\frac arg arg | \\binom arg arg | \\sqrt[expr] arg | \\sqrt arg
    arg     := {expr} | one digit | one name            (TeX: \\frac47 is 4/7)

Two readings are refused rather than guessed: ``x^23`` (TeX sets x^2 3; a writer means
x^{23}) and, in arithmetic, a number right after a factor (``2 3``: a digit group or a
list, not a product). A whole number before a fraction of whole numbers is a mixed number
(``2\\frac{1}{4}`` is 9/4, as a school answer means, not 2 times 1/4). A letter before a
bracket (``f(x)``, ``x(x+1)``) is a ``call`` node: a product to an answer's reader, a
function applied to the dependence reader, which then decides nothing.

Nothing is executed; exponents, digits and radicands are bounded so no input can hang.

>>> evaluate(read("2\\\\frac{1}{4} + \\\\sqrt{9}"), Domain())
Fraction(21, 4)
>>> read("x(x+1)", letters=True)[0]
'call'
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from composition_rl.values.numbers import MAX_DIGITS

__all__ = ["MAX_EXPONENT", "Domain", "LatexError", "Node", "ends_in_name", "evaluate", "ops", "read",
           "tokenize"]

MAX_EXPONENT = 64  # 2^64 is fine, 10^{10^{10}} is not: refuse rather than hang

Node = tuple
"""A tree of tuples: ``("n", Fraction)`` a number, ``("v", name)`` a letter, a Greek letter
(``"\\pi"``) or a placeholder character; ``("neg", a)``; ``("+" | "-" | "*" | "/" | "^",
a, b)``; ``("!", a)``; ``("C", n, k)`` a binomial; ``("sqrt", a)``; ``("root", index, a)``;
``("call", f, a)`` a letter before a bracket."""


class LatexError(ValueError):
    """Text this reader does not read, or a value a :class:`Domain` does not evaluate."""


# -- tokens -------------------------------------------------------------------------------
_NUM_ARITH = r"(?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\.\d+)"
_NUM_ALGEBRA = r"(?P<num>\d+(?:\.\d+)?|\.\d+)"  # 2e5 is 2 e 5 where e may be a letter
_REST = (r"|(?P<var>[\uE000-\uF8FF])"  # a placeholder a caller put in the text (private use)
         r"|(?P<cmd>\\[A-Za-z]+|\\.)|(?P<let>[A-Za-z])|(?P<op>[-+*/^()\[\]{}!=<>,;|])")
_TOKEN = {False: re.compile(r"\s+|" + _NUM_ARITH + _REST), True: re.compile(r"\s+|" + _NUM_ALGEBRA + _REST)}
_SKIP = frozenset({"\\,", "\\;", "\\!", "\\ ", "\\:", "\\left", "\\right", "\\quad", "\\qquad", "\\displaystyle",
                   "\\big", "\\Big", "\\bigl", "\\bigr", "\\Bigl", "\\Bigr"})
_TIMES = frozenset({"\\cdot", "\\times", "\\ast"})
_REL = frozenset({"=", "<", ">", "\\le", "\\leq", "\\ge", "\\geq", "\\ne", "\\neq", "\\lt", "\\gt", "\\approx",
                  "\\equiv"})
GREEK = frozenset({"\\pi", "\\alpha", "\\beta", "\\gamma", "\\theta", "\\lambda", "\\mu", "\\omega", "\\phi",
                   "\\varphi", "\\rho", "\\sigma", "\\tau", "\\epsilon", "\\delta"})
_FRAC = frozenset({"\\frac", "\\dfrac", "\\tfrac"})
_BINOM = frozenset({"\\binom", "\\dbinom", "\\tbinom"})

Token = tuple[str, str]  # (kind, text); kinds: num, var, let, cmd, op, rel


def tokenize(text: str, letters: bool = False) -> list[Token]:
    """The tokens of ``text``: numbers, names, commands, operators and relations, with
    spacing and sizing commands dropped, ``\\cdot``/``\\times`` as ``*``, ``\\div`` as ``/``,
    ``\\{ \\}`` as brackets. Raises :class:`LatexError` at a character it does not know
    (a letter when ``letters`` is false).

    >>> tokenize("2\\\\cdot x \\\\le 3", letters=True)
    [('num', '2'), ('op', '*'), ('let', 'x'), ('rel', '\\\\le'), ('num', '3')]
    """
    pattern = _TOKEN[letters]
    out: list[Token] = []
    pos, n = 0, len(text)
    while pos < n:
        m = pattern.match(text, pos)
        if m is None or (m.lastgroup == "let" and not letters):
            raise LatexError(f"unexpected {text[pos : pos + 10]!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind is None:
            continue
        tok = m.group()
        if kind == "cmd":
            if tok in _SKIP:
                continue
            if tok in _TIMES:
                kind, tok = "op", "*"
            elif tok == "\\div":
                kind, tok = "op", "/"
            elif tok in _REL:
                kind = "rel"
            elif tok in ("\\{", "\\}"):
                kind, tok = "op", "(" if tok == "\\{" else ")"
        elif kind == "op" and tok in "=<>":
            kind = "rel"
        out.append((kind, tok))
    return out


# -- the tree -------------------------------------------------------------------------------
def _number(s: str) -> Fraction:
    if len(s) - s.count(".") > MAX_DIGITS:
        raise LatexError("number too long")
    if s.isdigit():
        return Fraction(int(s))
    if "e" in s or "E" in s:
        mant, _, exp = s.lower().partition("e")
        if abs(int(exp)) > MAX_EXPONENT:
            raise LatexError("exponent too large")
        return Fraction(mant) * Fraction(10) ** int(exp)
    return Fraction(s)


def ends_in_name(node: Node) -> bool:
    """Whether ``node`` ends in a name (``f``, ``f^{-1}``, ``2g``): a bracket after it may be
    a function's argument."""
    while node[0] in ("*", "^"):
        node = node[2] if node[0] == "*" else node[1]
    return node[0] == "v"


class _Reader:
    """Recursive descent over one list of tokens (the grammar of the module docstring)."""

    def __init__(self, toks: list[Token], letters: bool) -> None:
        self.t = list(toks)  # digits of a shorthand argument are split in place
        self.i = 0
        self.letters = letters

    def peek(self, k: int = 0) -> Token | None:
        return self.t[self.i + k] if self.i + k < len(self.t) else None

    def take(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise LatexError("unexpected end")
        self.i += 1
        return tok

    def expect(self, op: str) -> None:
        if self.take() != ("op", op):
            raise LatexError(f"expected {op}")

    def read(self) -> Node:
        node = self.expr()
        if self.peek() is not None:
            raise LatexError(f"left over {self.peek()}")
        return node

    def expr(self) -> Node:
        node = self.term()
        while (tok := self.peek()) is not None and tok[0] == "op" and tok[1] in "+-":
            self.i += 1
            node = (tok[1], node, self.term())
        return node

    def term(self) -> Node:
        node = self.unary()
        while (tok := self.peek()) is not None:
            if tok[0] == "op" and tok[1] in "*/":
                self.i += 1
                node = (tok[1], node, self.unary())
            elif tok == ("op", "(") and ends_in_name(node):
                self.i += 1
                arg = self.expr()
                self.expect(")")
                node = ("call", node, arg)
            elif self._starts_factor(tok):
                node = ("*", node, self.power())
            else:
                break
        return node

    def _starts_factor(self, tok: Token) -> bool:
        kind, v = tok
        if kind == "op":
            return v in "({" or (self.letters and v == "[")
        if kind == "cmd":
            return v in _FRAC or v in _BINOM or v == "\\sqrt" or v in GREEK
        return self.letters and kind in ("num", "var", "let")

    def unary(self) -> Node:
        tok = self.peek()
        if tok is not None and tok[0] == "op" and tok[1] in "+-":
            self.i += 1
            node = self.unary()
            return ("neg", node) if tok[1] == "-" else node
        return self.power()

    def power(self) -> Node:
        base = self.postfix()
        if self.peek() != ("op", "^"):
            return base
        self.i += 1
        tok = self.peek()
        if tok is not None and tok[0] == "num" and len(tok[1]) > 1 and tok[1].isdigit():
            # x^23 in TeX is x^2 followed by 3, where a writer means x^{23}: refuse the guess
            raise LatexError("ambiguous exponent")
        if tok is not None and tok[0] == "op" and tok[1] in "+-":
            return ("^", base, self.unary())
        return ("^", base, self.atom(mixed=False))

    def postfix(self) -> Node:
        node = self.atom()
        while self.peek() == ("op", "!"):
            self.i += 1
            node = ("!", node)
        return node

    def arg(self) -> Node:
        """A macro argument: a braced group, or one token (one digit of a number)."""
        tok = self.take()
        if tok == ("op", "{"):
            node = self.expr()
            self.expect("}")
            return node
        kind, v = tok
        if kind == "num":
            if not v.isdigit():
                raise LatexError("shorthand argument")
            if len(v) > 1:  # \frac 49: the first digit is the argument, the rest follows
                self.t.insert(self.i, ("num", v[1:]))
            return ("n", Fraction(int(v[0])))
        if kind in ("var", "let") or (kind == "cmd" and v in GREEK):
            return ("v", v)
        raise LatexError(f"argument {tok}")

    def _fraction_of_wholes(self) -> Node | None:
        """``\\frac{1}{4}`` (or ``\\frac14``) next, both arguments whole numbers: its tree, taken;
        else None, nothing taken."""
        tok = self.peek()
        if tok is None or tok[0] != "cmd" or tok[1] not in _FRAC:
            return None
        i, toks = self.i, list(self.t)
        self.i += 1
        try:
            num, den = self.arg(), self.arg()
            if num[0] == "n" and den[0] == "n" and num[1].denominator == den[1].denominator == 1:
                return ("/", num, den)
        except LatexError:
            pass
        self.i, self.t = i, toks
        return None

    def atom(self, mixed: bool = True) -> Node:
        kind, v = self.take()
        if kind == "num":
            node = ("n", _number(v))
            if mixed and v.isdigit() and (frac := self._fraction_of_wholes()) is not None:
                return ("+", node, frac)  # 2\frac{1}{4}: two and a quarter
            return node
        if kind in ("var", "let"):
            return ("v", v)
        if kind == "op" and v in "([{":
            close = {"(": ")", "[": "]", "{": "}"}[v]
            node = self.expr()
            self.expect(close)
            return node
        if kind == "cmd":
            if v in _FRAC:
                return ("/", self.arg(), self.arg())
            if v in _BINOM:
                return ("C", self.arg(), self.arg())
            if v == "\\sqrt":
                if self.peek() == ("op", "["):
                    self.i += 1
                    index = self.expr()
                    self.expect("]")
                    return ("root", index, self.arg())
                return ("sqrt", self.arg())
            if v in GREEK:
                return ("v", v)
        raise LatexError(f"unexpected {v!r}")


def read(source: str | list[Token], letters: bool = False) -> Node:
    """The tree of one expression: ``source`` is a text (tokenized with ``letters``) or
    tokens from :func:`tokenize`. Raises :class:`LatexError` for anything else (relations,
    lists and unknown commands included; deep nesting raises ``RecursionError``).

    >>> read("\\\\frac47")
    ('/', ('n', Fraction(4, 1)), ('n', Fraction(7, 1)))
    """
    toks = tokenize(source, letters) if isinstance(source, str) else source
    return _Reader(toks, letters).read()


def ops(node: Node, out: set[str] | None = None) -> set[str]:
    """The node kinds of a tree (``{"+", "n", "v"}``): what a caller checks it evaluates."""
    out = set() if out is None else out
    out.add(node[0])
    if node[0] not in ("n", "v"):
        for child in node[1:]:
            ops(child, out)
    return out


# -- values ----------------------------------------------------------------------------------
class Domain:
    """What the operations of a tree mean: exact ``Fraction`` arithmetic by default, with
    names refused. A subclass changes the numbers (sympy, :class:`~composition_rl.values.
    parse.Lin`), gives names values, and bounds or refuses what it cannot do exactly; every
    refusal raises :class:`LatexError` (or ``ArithmeticError`` for a caller to fall back on)."""

    def number(self, q: Fraction):
        """A literal number as a value of this domain: the ``Fraction`` itself here."""
        return q

    def name(self, name: str):
        """The value of a name (``\\pi``, a letter); always raises :class:`LatexError` here."""
        raise LatexError(f"name {name}")

    def divide(self, a, b):
        """``a / b``; raises :class:`LatexError` when ``b`` is zero."""
        if b == 0:
            raise LatexError("division by zero")
        return a / b

    def power(self, a, b):
        """``a`` to a whole exponent of at most ``MAX_EXPONENT`` in size; raises :class:`LatexError`
        for any other exponent and for zero to a negative power."""
        if not (isinstance(b, Fraction) and b.denominator == 1 and abs(b) <= MAX_EXPONENT):
            raise LatexError("exponent not a small integer")
        if a == 0 and b < 0:
            raise LatexError("zero to a negative power")
        return a ** int(b)

    def root(self, a, index):
        """The exact square root of a rational square; raises :class:`LatexError` for another index,
        a negative or non-``Fraction`` radicand, or an irrational root."""
        if index != 2 or not isinstance(a, Fraction) or a < 0:
            raise LatexError("root")
        r = Fraction(math.isqrt(a.numerator), math.isqrt(a.denominator))
        if r * r != a:
            raise LatexError("irrational root")
        return r

    def factorial(self, a):
        """``a!``; always raises :class:`LatexError` here (a subclass that can evaluate it
        overrides this)."""
        raise LatexError("factorial")

    def binomial(self, n, k):
        """``\\binom{n}{k}``; always raises :class:`LatexError` here (a subclass may override)."""
        raise LatexError("binomial")

    def call(self, f, a):
        """``f(a)`` where f ends in a name: a product, as an answer's ``x(x+1)`` means."""
        return f * a


def evaluate(node: Node, domain: Domain):
    """The value of ``node`` in ``domain``.

    >>> evaluate(read("-3^2 + \\\\frac{1}{2}"), Domain())
    Fraction(-17, 2)
    """
    op = node[0]
    if op == "n":
        return domain.number(node[1])
    if op == "v":
        return domain.name(node[1])
    if op == "neg":
        return -evaluate(node[1], domain)
    if op in ("+", "-", "*", "/", "^", "call"):
        a, b = evaluate(node[1], domain), evaluate(node[2], domain)
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return domain.divide(a, b)
        if op == "^":
            return domain.power(a, b)
        return domain.call(a, b)
    if op == "!":
        return domain.factorial(evaluate(node[1], domain))
    if op == "C":
        return domain.binomial(evaluate(node[1], domain), evaluate(node[2], domain))
    if op == "sqrt":
        return domain.root(evaluate(node[1], domain), 2)
    if op == "root":
        return domain.root(evaluate(node[2], domain), _root_index(evaluate(node[1], domain)))
    raise LatexError(op)


def _root_index(v) -> int:
    """The index of ``\\sqrt[n]{}``: a whole number from 2 to 10."""
    try:
        n = int(v)
    except (TypeError, ValueError, ArithmeticError):
        raise LatexError("root index") from None
    if n != v or not 2 <= n <= 10:
        raise LatexError("root index")
    return n
