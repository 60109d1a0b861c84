"""The one reader of plain numbers (``values.numbers``) and the one reader of number words
(``values.numwords.word_number``): the strings the old readers read differently, and the one
answer each gets now.

The rows come from ``scripts/number_readers_survey.py`` run over MATH train (answers and the
number-like runs of the problems) at f984cfa, plus hand cases; "MATH" says where a string
was seen. The old readings are the verifier's ``plain_rational`` (verify), the LaTeX reader's
``parse_number`` (latex) and ``constant_value`` (constants). The same table is in
docs/verification.md ("Plain numbers").
"""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction as F

import pytest

from composition_rl.grading.extract import decimal_comma, normalize
from composition_rl.values import constant_value, parse_number
from composition_rl.values.numbers import clean, grouped, plain_number
from composition_rl.values.numwords import word_number

# (string, where seen, old verify, old latex, old constants, the one answer now)
DIFFERED = [
    # a point after the digits is a full stop (MATH problems end sentences so: 185 strings)
    ("5.", "MATH, 49 times", F(5), None, F(5), F(5)),
    ("0.", "MATH, 171 times", F(0), None, F(0), F(0)),
    ("-1.", "MATH, 13 times", F(-1), None, F(-1), F(-1)),
    ("+2.", "MATH, 3 times", F(2), None, F(2), F(2)),
    ("1,000,000.", "MATH", None, None, F(1000000), F(1000000)),
    ("436,995.", "MATH", None, None, F(436995), F(436995)),
    # a first group that starts with 0 groups nothing: a list, or a decimal comma
    ("0,180", "MATH, 5 times", None, F(180), F(180), None),
    ("0,125", "MATH, 3 times", None, F(125), F(125), None),
    ("0,500", "hand", None, F(500), F(500), None),
    ("00,500", "hand", None, F(500), F(500), None),
    ("0,111", "hand", None, F(111), F(111), None),
    # commas that are no thousands separators: a list of numbers, not their digits joined
    ("0,0", "MATH, 929 times", None, None, F(0), None),
    ("1,2,3", "MATH, 18 times", None, None, F(123), None),
    ("1.5,0", "MATH, 19 times", None, None, F(3, 2), None),
    ("1,00", "hand", None, None, F(100), None),
    ("3,14", "hand", None, None, F(314), None),
    ("5,\\!22", "MATH", None, None, F(522), None),
    # a thousands separator inside a fraction
    ("\\dfrac{1}{29,\\!322,\\!216}", "MATH answer", None, F(1, 29322216), None, F(1, 29322216)),
    ("\\dfrac{2469}{20,\\!000}", "MATH answer", None, F(2469, 20000), None, F(2469, 20000)),
    # a plus sign before a grouped number
    ("+1,000", "hand", None, F(1000), F(1000), F(1000)),
    # spaces: a thousands separator between groups of three only
    ("1 000", "hand", F(1000), None, None, F(1000)),
    ("12 34", "hand", F(1234), None, None, None),
    # Python's own number syntax is no written number: an underscore, a base subscript
    ("1_000", "hand", None, None, F(1000), None),
    ("10001_2", "MATH, 2 times", None, None, F(100012), None),
]


@pytest.mark.parametrize(("s", "seen", "verify", "latex", "constants", "now"), DIFFERED,
                         ids=[r[0] for r in DIFFERED])
def test_strings_the_old_readers_read_differently_have_one_answer(s, seen, verify, latex, constants, now):
    assert len({verify, latex, constants}) > 1  # a row of the table is a real disagreement
    got = plain_number(s)
    assert (None if got is None else got.value) == now
    if "frac" not in s:  # a literal of a problem is digits or a mixed number, never a fraction
        assert constant_value(s) == now  # the constants' reader is the same reader
    v = parse_number(s)
    assert (None if v is None else F(int(v.p), int(v.q))) == now  # and the LaTeX reader's fast path


def test_what_only_the_latex_reader_reads():
    """Not plain numbers, read by the LaTeX arithmetic reader on purpose: an exponent of ten,
    and a pair whose comma group is read as thousands. The pair is kept as it was read so that
    MATH depth 2 stays byte-identical: three MATH answers, (100,101), (20,100) and (4,112), are
    points, and reading them as such (v1 from a tuple entry) changes which problems may lead a
    chain and so the whole seeded sample (106,283 of 124,742 lines)."""
    assert plain_number("1e3") is None and parse_number("1e3") == 1000
    assert plain_number("(4,112)") is None and clean("(4,112)") == "(4112)" and parse_number("(4,112)") == 4112


@pytest.mark.parametrize(("s", "value", "decimal"), [
    ("-12", F(-12), False), ("3.25", F(13, 4), True), (".5", F(1, 2), True), ("-.5", F(-1, 2), True),
    ("-0", F(0), False), ("+3", F(3), False), ("007", F(7), False), ("1,000,000", F(10**6), False),
    ("64,\\!328", F(64328), False), ("1{,}000", F(1000), False), ("14 {, }916", F(14916), False),
    ("1\\,000", F(1000), False), ("12,345.5", F(24691, 2), True), ("3/4", F(3, 4), False),
    ("\\frac34", F(3, 4), False), ("-\\dfrac{3}{4}", F(-3, 4), False), ("\\frac{-3}{4}", F(-3, 4), False),
    ("$7$", F(7), False),
])
def test_plain_numbers_agreed_on_before_are_read_as_before(s, value, decimal):
    assert plain_number(s) == (value, decimal)


@pytest.mark.parametrize("s", ["17\\%", "30^\\circ", "\\frac{1}{0}", "2^3", "\\$5", "x", "", ".", "1/0", "1" * 81,
                               "2\\frac{1}{4}"])
def test_what_is_no_plain_number(s):
    assert plain_number(s) is None


def test_the_verifier_uses_the_same_thousands_rule():
    for s in ("1,000", "12,345.5", "-1,234"):
        assert grouped(s) and "," not in normalize(s) and decimal_comma(s) is None
    for s in ("0,500", "1,00", "3,14", "1000,99"):
        assert not grouped(s) and "," in normalize(s) and decimal_comma(s) is not None


def test_reading_numbers_in_the_verifier_process_loads_no_sympy():
    code = ("import sys; from composition_rl.grading.extract import normalize; "
            "from composition_rl.values.numbers import plain_number; plain_number('1,000'); "
            "print('sympy' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "False", r.stderr


# ------------------------------------------------------------------- number words
# Runs of two or more number words in MATH train problems (scripts: see docs/verification.md),
# with what the old word_number gave: the ill-formed ones are lists or pairs of numbers
WORD_RUNS = [
    ("two six", 8, None),  # "of two six-sided dice"
    ("four two", 6, None),
    ("two four", 6, None),
    ("two three", 5, None),
    ("two two", 4, None),  # "a product of two two-digit numbers"
    ("one four", 5, None),
    ("one zero", 1, None),
    ("One and one", 2, None),
    ("four and six", 10, None),  # "sides of lengths two, four and six units"
    ("two and nine", 11, None),
    ("one hundred three", 103, 103),
    ("Twenty five", 25, 25),
    ("Ninety-four", 94, 94),
    ("one million", 1_000_000, 1_000_000),
    # the cases
    ("five five", 10, None),
    ("nineteen ninety", 109, None),
    ("one hundred hundred", 10000, None),
    ("twenty twenty", 40, None),
    ("thousand thousand", None, None),
    ("two thousand thousand", 2000000, None),
    ("one thousand two million", 2001000, None),
]


@pytest.mark.parametrize(("words", "old", "now"), WORD_RUNS, ids=[w for w, _, _ in WORD_RUNS])
def test_word_number_refuses_ill_formed_words(words, old, now):
    assert word_number(words) == now


@pytest.mark.parametrize(("words", "value"), [
    ("zero", 0), ("five", 5), ("Twenty-three", 23), ("twenty one", 21), ("one hundred and five", 105),
    ("two hundred five", 205), ("three thousand four hundred", 3400), ("one thousand and five", 1005),
    ("one million two hundred thousand", 1_200_000), ("one-hundred", 100),
    ("a hundred", None), ("eleven hundred", None), ("hundred", None), ("zero five", None), ("one and", None),
    ("one hundred and", None), ("", None), ("lots", None),
])
def test_word_number_reads_well_formed_words(words, value):
    assert word_number(words) == value
