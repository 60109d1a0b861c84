"""Estimators for profiling and evaluation: unbiased pass@k, Wilson intervals, difficulty bands.

Pure standard library, so ``crl compose --from-profile`` and the tests never pay for numpy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from statistics import NormalDist

__all__ = ["BANDS", "GROUP_KIND_OF_BAND", "band", "mean", "mean_interval", "pass_at_k", "mean_pass_at_k", "t_quantile",
           "wilson_interval"]

#: The three difficulty classes of a prompt at a rollout budget (Composition-RL, Figure 2; MagicBeanStalk).
#: "goldilocks" is the class :func:`composition_rl.verify.groups.classify_group` calls
#: "informative" (0 < correct < n): the same partition, named for a prompt (its difficulty
#: band) there and for a rollout group (what dynamic sampling keeps) here. The names are kept
#: because profile.jsonl rows, ``crl compose --select`` and the reports are written with them;
#: :data:`GROUP_KIND_OF_BAND` maps one onto the other.
BANDS = ("solve_none", "goldilocks", "solve_all")
GROUP_KIND_OF_BAND = {"solve_none": "solve_none", "goldilocks": "informative", "solve_all": "solve_all"}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem from ``c`` correct out of ``n`` samples.

    The Chen et al. (2021, "Evaluating Large Language Models Trained on Code", Eq. 1)
    estimator ``1 - C(n-c, k) / C(n, k)``: the probability that a random size-``k`` subset of
    the ``n`` samples holds at least one correct one. Computed with exact integers.

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 4), pass_at_k(4, 0, 2)
    (0.25, 1.0, 0.0)
    """
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """Mean pass@k over problems given ``(n, c)`` pairs (each problem may have its own ``n``)."""
    vals = [pass_at_k(n, c, k) for n, c in counts]
    return mean(vals)


def mean(values: Sequence[float] | Iterable[float]) -> float:
    """Arithmetic mean; ``nan`` for no values (an empty benchmark has no accuracy)."""
    vals = list(values)
    return math.fsum(vals) / len(vals) if vals else float("nan")


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (Wilson 1927; Newcombe 1998, method 3).

    Unlike the normal approximation it stays inside [0, 1] and is informative at 0/n and n/n,
    which is where solve_none and solve_all prompts sit.

    >>> lo, hi = wilson_interval(0, 20)
    >>> (round(lo, 4), round(hi, 4))
    (0.0, 0.1611)
    """
    if n <= 0 or not (0 <= successes <= n):
        raise ValueError(f"wilson_interval needs 0 <= successes <= n and n > 0; got {successes}/{n}")
    if not (0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be in (0, 1); got {confidence}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # Clamp only float noise: the exact bounds are 0 at 0/n and 1 at n/n.
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


def band(correct: int, n: int) -> str:
    """Difficulty class of one prompt: ``solve_none`` (0/n), ``solve_all`` (n/n), else ``goldilocks``
    (the band of ``classify_group``'s ``informative`` groups; see :data:`GROUP_KIND_OF_BAND`).

    >>> band(0, 8), band(3, 8), band(8, 8), GROUP_KIND_OF_BAND[band(3, 8)]
    ('solve_none', 'goldilocks', 'solve_all', 'informative')
    """
    if n <= 0 or not (0 <= correct <= n):
        raise ValueError(f"band needs 0 <= correct <= n and n > 0; got {correct}/{n}")
    if correct == 0:
        return "solve_none"
    if correct == n:
        return "solve_all"
    return "goldilocks"


def _t_cdf(t: float, df: int) -> float:
    """CDF of Student's t with ``df`` degrees of freedom (regularized incomplete beta)."""
    import mpmath  # a dependency of sympy, which the core already needs

    x = df / (df + t * t)
    tail = 0.5 * float(mpmath.betainc(df / 2.0, 0.5, 0, x, regularized=True))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (bisection on the CDF).

    >>> round(t_quantile(0.975, 2), 3), round(t_quantile(0.975, 10), 3)
    (4.303, 2.228)
    """
    if df < 1 or not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile needs df >= 1 and 0 < p < 1; got df={df}, p={p}")
    lo, hi = -1e6, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10:
            break
    return (lo + hi) / 2


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, tuple[float, float] | None]:
    """Mean and two-sided Student-t interval of independent replicates (e.g. one value per seed).

    The interval is ``mean +- t_{(1+c)/2, n-1} * s / sqrt(n)`` with ``s`` the sample standard
    deviation; with one value there is no interval (``None``). Across 3 seeds the t factor is
    4.30, so only effects that are large relative to the seed spread exclude zero.

    >>> m, (lo, hi) = mean_interval([0.10, 0.12, 0.14])
    >>> round(m, 3), round(lo, 4), round(hi, 4)
    (0.12, 0.0703, 0.1697)
    """
    vals = [float(v) for v in values]
    if not vals:
        raise ValueError("mean_interval needs at least one value")
    if not (0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be in (0, 1); got {confidence}")
    m = math.fsum(vals) / len(vals)
    if len(vals) == 1:
        return m, None
    sd = math.sqrt(math.fsum((v - m) ** 2 for v in vals) / (len(vals) - 1))
    half = t_quantile(0.5 + confidence / 2.0, len(vals) - 1) * sd / math.sqrt(len(vals))
    return m, (m - half, m + half)
