"""Estimators for profiling and evaluation: unbiased pass@k, Wilson intervals, difficulty bands.

Pure standard library, so ``crl compose --from-profile`` and the tests never pay for numpy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

__all__ = ["BANDS", "BAND_ALIASES", "GROUP_KIND_OF_BAND", "PassBand", "band", "parse_band", "mean", "mean_interval", "pass_at_k", "mean_pass_at_k", "t_quantile",
           "wilson_interval"]

#: The three difficulty classes of a prompt at a rollout budget (Composition-RL, Figure 2; MagicBeanStalk).
#: "goldilocks" is the class :func:`composition_rl.grading.groups.classify_group` calls
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


#: Band names and aliases a pass-rate band can be spelled with (``--keep``, ``--select``, ``--band``).
BAND_ALIASES = {"informative": ("goldilocks",), "stale": ("solve_all", "solve_none"), "all": BANDS}


@dataclass(frozen=True)
class PassBand:
    """A set of pass rates a prompt may fall in: named bands (``goldilocks``, ``solve_all``
    ...) or an interval of the pass rate ``correct / n``.

    One type behind ``crl refresh --band``, ``crl profile --keep`` and ``crl compose
    --select`` (:func:`parse_band` reads all their spellings). ``informative`` is the open
    interval ``(0, 1)``: the prompts a GRPO group of ``n`` gives a non-zero advantage.

    >>> b = parse_band("0.125,0.5"); b.admits(1, 8), b.admits(5, 8), str(b)
    (True, False, '[0.125,0.5]')
    >>> parse_band("informative").admits(8, 8), parse_band("(0,1)") == parse_band("informative")
    (False, True)
    """

    names: frozenset[str] = frozenset()
    lo: float = 0.0
    hi: float = 1.0
    lo_open: bool = False
    hi_open: bool = False

    def admits(self, correct: int, n: int) -> bool:
        """Whether ``correct`` of ``n`` falls in the band."""
        if self.names:
            return band(correct, n) in self.names
        p = correct / n
        return (p > self.lo if self.lo_open else p >= self.lo) and (p < self.hi if self.hi_open else p <= self.hi)

    def __str__(self) -> str:
        if self.names:
            return ",".join(b for b in BANDS if b in self.names)
        return f"{'(' if self.lo_open else '['}{self.lo:g},{self.hi:g}{')' if self.hi_open else ']'}"


def parse_band(spec: str | Iterable[str] | PassBand) -> PassBand:
    """A :class:`PassBand` from its spellings: band names and aliases, comma-separated
    (``solve_all``, ``goldilocks,solve_none``, ``informative``, ``stale``, ``all``), or an
    interval of the pass rate: ``LO,HI`` (both ends included) or with brackets that say
    which ends are open, ``(0,1)``, ``(0,0.5]``. ``informative`` and ``(0,1)`` are one band.

    >>> str(parse_band("stale")), str(parse_band("(0, 0.5]"))
    ('solve_none,solve_all', '(0,0.5]')
    >>> parse_band("0.9,0.2")
    Traceback (most recent call last):
    ...
    ValueError: band '0.9,0.2': LO must be <= HI, both in [0, 1] (e.g. 0.125,0.875 or (0,1))
    """
    if isinstance(spec, PassBand):
        return spec
    text = spec if isinstance(spec, str) else ",".join(spec)
    parts = [s.strip() for s in text.strip().split(",")]
    if all(s.replace("_", "").isalpha() for s in parts if s) and any(parts):
        out: set[str] = set()
        for name in filter(None, parts):
            if name in BANDS:
                out.add(name)
            elif name in BAND_ALIASES:
                out.update(BAND_ALIASES[name])
            else:
                known = ", ".join([*BANDS, *BAND_ALIASES])
                raise ValueError(f"unknown band {name!r}; known: {known}, or an interval LO,HI such as (0,1)")
        if out == {"goldilocks"}:
            return PassBand(lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        return PassBand(names=frozenset(out))
    s = text.strip()
    lo_open, hi_open = s[:1] == "(", s[-1:] == ")"
    body = s[1:] if s[:1] in "([" else s
    body = body[:-1] if body[-1:] in ")]" else body
    hint = "(e.g. 0.125,0.875 or (0,1))"
    try:
        lo, hi = (float(x) for x in body.split(","))
    except ValueError:
        raise ValueError(f"band {text!r}: not band names and not an interval LO,HI {hint}") from None
    if not (0.0 <= lo <= hi <= 1.0) or not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"band {text!r}: LO must be <= HI, both in [0, 1] {hint}")
    if lo == hi and (lo_open or hi_open):
        raise ValueError(f"band {text!r} holds no pass rate {hint}")
    return PassBand(lo=lo, hi=hi, lo_open=lo_open, hi_open=hi_open)
