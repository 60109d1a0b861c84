"""Exact values from answers and constants in problem text: tables of real MATH cases."""

from __future__ import annotations

from fractions import Fraction

import pytest
import sympy

from composition_rl.values import (
    constants,
    exact_equal,
    exact_sub,
    exact_value,
    find_constants,
    parse_answer_value,
    parse_number,
    render_offset,
    symbols_used,
)
from composition_rl.values.latex import evaluate, read
from composition_rl.values.numbers import clean
from composition_rl.values.parse import SYMPY

sqrt, pi, R = sympy.sqrt, sympy.pi, sympy.Rational

# (answer as written in MATH train / Minerva, exact value, unit)
ANSWERS = [
    ("-27", -27, ""),
    (r"\frac{12}{13}", R(12, 13), ""),
    (r"-\frac{53}{55}", R(-53, 55), ""),
    (r"\dfrac{5}{3}", R(5, 3), ""),
    (r"\tfrac{1}{4}", R(1, 4), ""),
    (r"\frac45", R(4, 5), ""),  # shorthand \frac45
    (r"\frac 59", R(5, 9), ""),
    ("2/15", R(2, 15), ""),
    ("0.5", R(1, 2), ""),
    ("64,\\!328", 64328, ""),  # thousands separator as written in MATH
    ("1,000", 1000, ""),
    ("1{,}000", 1000, ""),
    (r"7\sqrt{2}", 7 * sqrt(2), ""),
    (r"\frac{\sqrt{3}}{2}", sqrt(3) / 2, ""),
    (r"2\sqrt{3}+4", 2 * sqrt(3) + 4, ""),
    (r"14\pi", 14 * pi, ""),
    (r"\frac{\pi}{4}", pi / 4, ""),
    (r"\$3.50", R(7, 2), "dollars"),
    (r"\$42409", 42409, "dollars"),
    (r"25\%", 25, "percent"),
    (r"30^\circ", 30, "degrees"),
    (r"120^{\circ}", 120, "degrees"),
    (r"8.7 \times 10^{8}", 870000000, ""),  # Minerva
    ("4.5e33", 45 * 10**32, ""),  # Minerva
    ("0.022\n", R(22, 1000), ""),  # Minerva, trailing newline
    ("x=5", 5, ""),
    (r"5\text{ cm}", 5, "cm"),
    # MATH train answers (row = index in math_train.json) in shapes the reader once missed
    (r"-\frac{5}{3}.", R(-5, 3), ""),  # row 1645: the full stop of a sentence
    (r"30^\circ.", 30, "degrees"),  # row 2861
    (r"7\text{ hours}.", 7, "hours"),  # row 6455
    (r"\mbox{four}", 4, ""),  # row 6605: a count written as a word
    (r"\text{twenty-one}", 21, ""),  # a hyphenated cardinal: the same reader as the LLM engine's word_number
    (r"2400 \mbox{ cm}^2", 2400, "square cm"),  # row 5680: a squared unit, as prose writes it
    (r"1.85\ \text{USD}", R(37, 20), "USD"),  # row 5862: spacing before the unit
    ("24_{10}", 24, ""),  # row 5129: a decimal numeral marked as one
    (r"AB=12+12\sqrt{3}", 12 + 12 * sqrt(3), ""),  # row 2623: the segment asked for
    (r"\overline{AB} = 5", 5, ""),
]

NOT_NUMBERS = [
    r"\text{(E)}",  # a choice
    "(1,8)",  # a tuple
    "-330,90",  # a list
    "1:4",  # a ratio
    "6p",  # an expression
    r"\frac{8-7x}{6}",
    r"4x^2 -2x + \frac{3}{2}",
    r"[0,3)",  # an interval
    r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}",
    r"10^{10^{10^{10}}}",  # refused, never evaluated
    r"\infty",
    "3+2i",
    "",
    r"\text{Sunday}",  # a word that is no number
    r"\text{A5}_{11}",  # a numeral in base 11 (derive's, not a number as written)
    r"0.56 = 56\%",  # MATH row 2219: 0.56 or 56 (percent)?
    "AB=9, CD=4",  # MATH row 3101: two quantities
    "5..",  # one full stop only
]


@pytest.mark.parametrize("answer,value,unit", ANSWERS, ids=[a[0] for a in ANSWERS])
def test_answer_values_are_exact(answer, value, unit):
    av = parse_answer_value(answer)
    assert av is not None
    assert sympy.simplify(av.value - value) == 0
    assert av.unit == unit
    assert not av.value.has(sympy.Float)


@pytest.mark.parametrize("answer", NOT_NUMBERS)
def test_non_numeric_answers_cannot_be_q1(answer):
    assert parse_answer_value(answer) is None


def _lits(question: str, answer: str = "") -> list[str]:
    """The literals read as quantities (TeX tokens, exponents and radices are values the
    finder reads but never offers as a place for the variable)."""
    notation = ("tex_token", "exponent", "base_notation", "notation")
    return [c.literal for c in find_constants(question, answer) if c.flaw not in notation]


# (what it guards, question fragment from MATH train, literals that may be replaced)
CONSTANTS = [
    ("asy block (the coefficient 10 of 10a is a constant)",
     "What is $10a+b$?\n\n[asy]\nsize(150);\nreal ticklen=3;\ndraw((0,0)--(5,5));\n[/asy]", ["10"]),
    ("subscripts", r"Let $a_1, a_2, a_3,\dots$ be an increasing arithmetic sequence of integers. If $a_4a_5 = 13$, what is $a_3a_6$?", ["13"]),
    ("subscript in braces", r"If $x_{10}=2$, find $x_{11}$.", ["2"]),
    ("ordinals", "If the first term is 2 and the second term is 5, what is the 12th term?", ["2", "5"]),
    ("a year-like number in arithmetic is a quantity; two exponents", r"What is the value of $x$ for which $(2008+x)^2=x^2$?", ["2008"]),
    ("glued to letters in prose (3rd, 14n), an exponent; a coefficient of one letter in math is a constant",
     r"what is $10a+b$ and $3x^2$, the 3rd of 14n?", ["10", "3"]),
    ("base subscript (digit concatenation)", r"Find the largest prime divisor of $100111011_6$.", []),
    ("repeating decimal", r"Express $\frac{0.\overline{666}}{1.\overline{333}}$ as a common fraction.", []),
    ("overline digits", r"The number $\overline{2A}$ is divisible by $7$.", ["7"]),
    ("decimal kept whole", r"Find $0.4 \cdot 0.6$.", ["0.4", "0.6"]),
    ("thousands kept whole", r"A bank holds $\$1,000$ and $64,\!328$ coins.", ["1,000", "64,\\!328"]),
    ("frac shorthand: 1 glued to \\frac, 2 its own token", r"Compute $\frac12 + 3$.", ["2", "3"]),
    ("label index", "Problem 3 says that (1) holds. Now add 4 apples.", ["4"]),
    ("leading zero code", "The lock code is 007 and it has 3 wheels.", ["3"]),
]


@pytest.mark.parametrize("why,question,expected", CONSTANTS, ids=[c[0] for c in CONSTANTS])
def test_constants_skip_what_is_not_a_quantity(why, question, expected):
    assert _lits(question) == expected


def test_repeated_numbers_are_ranked_below_unique_ones():
    q = r"Let $n = 2^4 \cdot 3^5 \cdot 4^6\cdot 6^7 + 4 + 6$. How many factors does $n$ have?"
    cs = find_constants(q)
    unique = {c.literal: c.unique for c in cs if c.role != "exponent"}
    # the exponents 4 and 6 are notation: they do not make the bases 4 and 6 repeats
    assert unique["2"] is True and unique["4"] is False and unique["6"] is False
    best = min(c.rank for c in cs)
    assert all(c.unique for c in cs if c.rank == best)


def test_choice_options_are_never_replaced():
    q = r"Which is largest? $\textbf{(A)}\ 5 \qquad \textbf{(B)}\ 6$ when $x = 3$ is given first"
    assert _lits(q, r"\text{(B)}") == []
    q2 = r"When $x = 3$, which is largest? $\textbf{(A)}\ 5 \qquad \textbf{(B)}\ 6$"
    assert _lits(q2, r"\text{(B)}") == ["3"]


@pytest.mark.parametrize("what,pattern,example", constants._NOTATION_CONTEXTS,
                         ids=[row[0] for row in constants._NOTATION_CONTEXTS])
def test_each_notation_context_keeps_its_example_literal(what, pattern, example):
    # each row's example holds one literal that is notation: a row left out of the joined
    # pattern would let that literal become the variable
    flaws = [c.flaw for c in find_constants(f"Evaluate ${example}$ now.")]
    assert "notation" in flaws, (what, flaws)


def test_constant_values_are_exact_fractions():
    (c,) = find_constants(r"Compute $2.25 + y$.")
    assert c.value == Fraction(9, 4) and c.math_mode and c.arithmetic


def test_symbols_used_folds_case_and_sees_figures_and_prose():
    q = "Point A lies on $\\overline{BC}$ with $x_1 = 2$.\n[asy]label(\"$D$\", (0,0));[/asy] A cat sat."
    used = symbols_used(q)
    assert {"A", "B", "C", "D", "X"} <= used
    assert "Y" not in used and "T" not in used


@pytest.mark.parametrize(
    "v1,v2,direction,mag",
    [
        (sympy.Integer(7), Fraction(1), "less", "6"),
        (sympy.Integer(1), Fraction(7), "more", "6"),
        (sympy.Integer(3), Fraction(3), "equal", "0"),
        (R(7, 2), Fraction(1, 3), "less", r"\frac{19}{6}"),
        (7 * sqrt(2), Fraction(3), "less", r"7 \sqrt{2} - 3"),
        (sqrt(5), Fraction(7), "more", r"7 - \sqrt{5}"),
        (14 * pi, Fraction(50), "more", r"50 - 14 \pi"),
    ],
)
def test_offsets_render_and_parse_back_exactly(v1, v2, direction, mag):
    got_dir, got_mag, signed = render_offset(v1, v2)
    assert (got_dir, got_mag) == (direction, mag)
    d = exact_sub(exact_value(sympy.latex(v1)), v2)
    assert exact_equal(exact_value(signed), d)


@pytest.mark.parametrize(
    "text",
    [
        r"\frac{\sqrt{3}}{2}", r"2\sqrt{8}", r"\sqrt{2}\sqrt{3}", r"\sqrt{\frac{1}{2}}", r"3 - 2\sqrt{2}",
        r"\frac{10613}{2} - \frac{\sqrt{13}}{2}", r"14\pi", r"\frac{\pi}{4} - 281", r"-\frac{1}{\sqrt{5}}",
        r"(1+\sqrt{2})^2", r"\sqrt[3]{16}", r"\pi^2", r"\sqrt{2}+\sqrt{3}", r"0.5\sqrt{7}", r"1e3\sqrt{2}",
    ],
)
def test_fast_exact_parse_gives_the_same_sympy_value(text):
    # parse_number tries exact Q-linear arithmetic first; it must return the very expression
    # (same tree, same LaTeX) the general sympy parse gives, or defer to it
    general = evaluate(read(clean(text)), SYMPY)
    assert sympy.srepr(parse_number(text)) == sympy.srepr(general)


@pytest.mark.parametrize(
    "text, value",
    [
        (r"486 \sqrt{3} - 546", 486 * sqrt(3) - 546),
        (r"-\frac{305}{2} + \frac{\sqrt{13}}{2}", R(-305, 2) + sqrt(13) / 2),
        (r"\frac{\pi}{4} - 281", pi / 4 - 281),
        ("1 - 3-4", -6),  # an unspaced minus inside a piece: not a sum of single terms
        ("1 - 2 - 3", -4),
        ("1 + - 3", -2),
        (r"2^{3} - 1", 7),
        (r"\frac{1 - 2}{3} - 1", R(-4, 3)),
        ("(1 - 2) - 3", -4),
        (r"1 + 2 \times 3 - 4", 3),
        (r"\sqrt{2} - \sqrt{2}", 0),
        (r"1 - \sqrt[3]{2}", 1 - sympy.root(2, 3)),
        ("2^ - 3", R(1, 8)),  # the exponent is -3: never split into "2^" and "3"
        ("1e-5 + 2", R(200001, 100000)),
        (r"2 \cdot - 3", -6),
        (r"1 - \frac{1}{0}", None),
    ],
)
def test_relation_values_split_at_spaced_signs_equal_the_full_parse(text, value):
    # the checks read d's like "486 \sqrt{3} - 546" term by term (each term parsed once);
    # every shape must give what the whole-string parser gives
    got = exact_value(text)
    if value is None:
        assert got is None
        return
    assert sympy.simplify(evaluate(read(clean(text)), SYMPY) - value) == 0
    if isinstance(got, Fraction):
        got_sym = sympy.Rational(got.numerator, got.denominator)
    else:  # Lin (Q-linear radicals and pi) or, beyond that, sympy itself
        got_sym = got.to_sympy() if hasattr(got, "to_sympy") else got
    assert sympy.simplify(got_sym - value) == 0


def test_a_sum_never_reads_a_number_the_full_parse_refuses():
    # the parser refuses numbers over 80 digits; reading a sum term by term must not let one in
    big = r"\frac{" + "1" * 81 + "}{3}"
    assert exact_value(big + " + 1") is None
    assert exact_value(r"1 - \frac{" + "2" * 81 + "}{7}") is None


@pytest.mark.parametrize("answers,solution,why", [
    (["0.01", "0.02"], "", "answers_disagree"),  # Minerva: two accepted values
    (["6630.65", "6630"], "", "answers_disagree"),
    (["4.4e7", "4.4 \\times 10^7"], "", "significant_figures"),
    (["8.7 \\times 10^{8}"], "", "significant_figures"),
    (["20.39"], "m=-7+5 \\log \\left[\\frac{3 \\times 10^{6}}{10}\\right]=\\boxed{20.39}", "rounded_result"),
    (["50.7"], "t_{x}=\\frac{\\ln 0.06}{\\frac{0.693}{12.5}}= \\boxed{50.7}", "rounded_result"),
    (["0.033"], "v/c \\simeq \\boxed{0.033}", "rounded_result"),
    (["8.75"], "", ""),  # MATH: a decimal that is exact
    (["8.75"], "$\\frac{35}{4} = \\boxed{8.75}$", ""),
    (["-\\frac{1}{3}", "-1/3"], "", ""),  # two spellings of one value
    (["720"], "$\\sqrt{720^2}$ is \\boxed{720}", ""),  # an integer is exact whatever the working
])
def test_which_answers_can_stand_as_an_exact_v1(answers, solution, why):
    from composition_rl.values.parse import inexact_answer

    assert inexact_answer(answers, solution) == why
