"""The one LaTeX arithmetic reader (values/latex.py) and the one number-word table
(values/numwords.py): tables of real cases, each read the same way by its three users (an
answer's value, an answer in letters, check 5's statements)."""

from __future__ import annotations

import doctest
from fractions import Fraction

import pytest
import sympy

from composition_rl.spc.dependence import decide
from composition_rl.values import latex, literals, numwords, parse_answer_value
from composition_rl.values.derive import derivations
from composition_rl.values.latex import Domain, LatexError, evaluate, read


@pytest.mark.parametrize("module", [latex, numwords])
def test_doctests(module):
    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize(
    "text, value",
    [
        # MATH train answers written as mixed numbers: a whole part and a fraction of wholes
        (r"2\frac{1}{4}", Fraction(9, 4)),
        (r"10\frac{1}{12}", Fraction(121, 12)),
        (r"-15\frac{3}{5}", Fraction(-78, 5)),  # the sign takes the whole mixed number
        (r"4\frac 12", Fraction(9, 2)),  # shorthand arguments, as TeX reads them
        (r"\sqrt{6\frac{1}{4}}", Fraction(5, 2)),  # a mixed number inside a root (MATH 6333)
        (r"6 \cdot 8\frac{1}{3}", Fraction(50)),
        (r"\frac47", Fraction(4, 7)),
        (r"\displaystyle\frac{235^2-221^2}{14}", Fraction(456)),  # sizing commands are no values
        (r"5\ast2", Fraction(10)),
        (r"2^{-1} + 2^-1", Fraction(1)),
        (r"(2)(3) + 2(3)", Fraction(12)),
    ],
)
def test_arithmetic_reads_as_a_school_reader_does(text, value):
    assert evaluate(read(text), Domain()) == value


@pytest.mark.parametrize(
    "text, why",
    [
        ("2^23", "ambiguous exponent"),  # TeX sets 2^2 3; the writer means 2^{23}
        ("2 3", "left over"),  # two numbers side by side: a digit group or a list, no product
        ("x + 1", "unexpected"),  # a letter, where only numbers are read
        (r"\frac{1}{2", "unexpected end"),
        ("1 = 1", "left over"),  # a relation is no expression
    ],
)
def test_arithmetic_refuses_what_it_would_have_to_guess(text, why):
    with pytest.raises(LatexError, match=why):
        read(text)


def test_in_algebra_numbers_and_letters_multiply_and_a_letter_before_a_bracket_is_a_call():
    assert read("2x", letters=True) == ("*", ("n", Fraction(2)), ("v", "x"))
    assert read("x(x+1)", letters=True)[0] == "call"
    assert read("2 3", letters=True) == ("*", ("n", Fraction(2)), ("n", Fraction(3)))
    assert read(r"\frac x2", letters=True) == ("/", ("v", "x"), ("n", Fraction(2)))
    with pytest.raises(LatexError):
        read("2x", letters=False)


def test_the_three_users_read_a_mixed_number_alike():
    # an answer's value, an answer's derived numbers and check 5 all read 2 1/4 as 9/4
    assert parse_answer_value(r"2\frac{1}{4}").value == sympy.Rational(9, 4)
    menu = dict(derivations(r"\left(2\frac{1}{4}, 3\right)", "Enter the ordered pair $(p,q)$."))
    assert sympy.Rational(9, 4) in menu.values()
    # and check 5 reads the same statement: "2 1/4 - Y + Y" is constant in Y, "2 1/4 - Y + 5" is not
    q = r"Compute $2\frac{1}{4} - 5 + 5$."
    fives = tuple(i for i, ch in enumerate(q) if ch == "5")
    assert decide(q, fives, "5") == "independent" and decide(q, fives[:1], "5") == "dependent"


def test_one_number_word_table():
    # the prose words the constant finder may replace, the words of an answer and of a reply
    # all come from numwords.CARDINALS
    assert literals.WORD_NUMBERS == {w: v for w, v in numwords.CARDINALS.items() if v >= 2}
    assert literals.constant_value("Seventeen") == 17
    assert parse_answer_value(r"\mbox{nineteen}").value == 19
    assert numwords.word_number("ninety-nine") == 99 and numwords.word_number("one hundred twelve") == 112
