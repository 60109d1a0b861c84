"""The estimators behind profile and eval: pass@k against brute force, Wilson against
published reference intervals, and the band classes."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from composition_rl.stats import band, mean_pass_at_k, pass_at_k, wilson_interval


def brute_force_pass_at_k(n: int, c: int, k: int) -> Fraction:
    """Share of all size-k subsets of n samples (the first c correct) holding a correct one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    hits = sum(1 for s in subsets if any(samples[i] for i in s))
    return Fraction(hits, len(subsets))


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_matches_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(float(brute_force_pass_at_k(n, c, k)), abs=1e-12)


def test_pass_at_1_is_the_plain_accuracy_and_pass_at_n_is_any_correct():
    assert pass_at_k(16, 5, 1) == pytest.approx(5 / 16)
    assert pass_at_k(16, 1, 16) == 1.0
    assert pass_at_k(16, 0, 16) == 0.0


def test_mean_pass_at_k_averages_problems_with_their_own_n():
    counts = [(4, 1), (2, 2), (3, 0)]
    expected = (float(brute_force_pass_at_k(4, 1, 2)) + 1.0 + 0.0) / 3
    assert mean_pass_at_k(counts, 2) == pytest.approx(expected)


@pytest.mark.parametrize("n,c,k", [(4, 5, 1), (4, 1, 0), (4, 1, 5), (4, -1, 1)])
def test_pass_at_k_rejects_impossible_arguments(n, c, k):
    with pytest.raises(ValueError, match=f"n={n}, c={c}, k={k}"):
        pass_at_k(n, c, k)


# Newcombe (1998), "Two-sided confidence intervals for the single proportion", Stat. Med.
# 17:857-872: the worked examples, method 3 (Wilson score, no continuity correction), 95%.
NEWCOMBE_TABLE_II = [
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0000, 0.1611),
    (1, 29, 0.0061, 0.1718),
]


@pytest.mark.parametrize("x,n,lo,hi", NEWCOMBE_TABLE_II)
def test_wilson_matches_newcombe_reference_values(x, n, lo, hi):
    got = wilson_interval(x, n, 0.95)
    assert got[0] == pytest.approx(lo, abs=5e-5)
    assert got[1] == pytest.approx(hi, abs=5e-5)


@pytest.mark.parametrize("n", [1, 8, 16, 100])
def test_wilson_at_zero_and_all_has_the_closed_form(n):
    # For x = 0 the upper bound solves p = z^2 / (n + z^2) exactly; x = n mirrors it.
    z = 1.959963984540054
    bound = z * z / (n + z * z)
    assert wilson_interval(0, n) == pytest.approx((0.0, bound))
    assert wilson_interval(n, n) == pytest.approx((1 - bound, 1.0))


def test_wilson_is_symmetric_and_narrows_with_lower_confidence():
    lo, hi = wilson_interval(3, 8)
    lo2, hi2 = wilson_interval(5, 8)
    assert (lo, hi) == pytest.approx((1 - hi2, 1 - lo2))
    lo90, hi90 = wilson_interval(3, 8, 0.90)
    assert lo < lo90 < 3 / 8 < hi90 < hi
    assert math.isclose(wilson_interval(4, 8)[0] + wilson_interval(4, 8)[1], 1.0)


@pytest.mark.parametrize("args", [(1, 0), (9, 8), (-1, 8)])
def test_wilson_rejects_bad_counts(args):
    with pytest.raises(ValueError):
        wilson_interval(*args)


@pytest.mark.parametrize(
    "correct,n,expected",
    [(0, 8, "solve_none"), (1, 8, "goldilocks"), (7, 8, "goldilocks"), (8, 8, "solve_all"), (1, 1, "solve_all")],
)
def test_band(correct, n, expected):
    assert band(correct, n) == expected
