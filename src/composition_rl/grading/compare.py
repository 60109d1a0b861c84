"""Scoring one response against its gold forms with Math-Verify, in this process, unbounded.

Only the verifier's worker processes import this module: it pulls in sympy and Math-Verify
(about a second), and it has no time bound of its own. Math-Verify is always called with its
``signal.alarm`` timeouts disabled (``parsing_timeout=None``, ``timeout_seconds=None``),
because alarms fail off the main thread; the bound is enforced from outside by
:mod:`composition_rl.grading.pool`, which kills a worker that overruns.

The steps for one item, cheapest first (each later step runs only if the earlier did not
decide):

1. extract the final answer (``extract.extract_final``); none -> ``no_answer``. A gold form
   written as a solution with boxes is read by its final boxes the same way. A multi-part
   answer (several boxes) is compared as a set, as Math-Verify reads it (and, against a gold
   tuple of as many entries, also as that tuple in order); steps 2-4 run on that;
2. exact match of normalised strings against any gold form -> ``correct`` ("string");
   an answer read from prose by a fallback also matches a gold written with the other
   decimal mark, where the comma cannot be a thousands separator ("decimal_comma");
3. both sides plain integers -> exact integer comparison ("integer"); both sides plain
   rationals (integers, decimals, ``a/b``, ``\\frac{a}{b}``) -> exact comparison, where a
   decimal only counts as different if it differs by a unit in Math-Verify's rounding
   place, else it goes on to step 4 ("rational");
4. Math-Verify ``parse`` of the answer and of each gold form (gold parses are cached, so a
   GRPO group of 8 parses its gold once), then ``verify`` -> correct / incorrect ("math_verify");
   the verdict is cached per (gold, answer), since a group often repeats an answer.

Answers and golds are wrapped in ``$...$`` before parsing: bare, ``7\\sqrt{2}`` parses as 7
and ``64,\\!328`` as 64.
"""

from __future__ import annotations

import logging
import re
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from composition_rl.grading.extract import (
    decimal_comma,
    extract_final,
    final_boxes,
    normalize,
    plain_integer,
)
from composition_rl.values.numbers import plain_number

__all__ = ["ItemScore", "Scorer", "warm_up"]

# We disable Math-Verify's timeouts on purpose; its warning about that is noise here.
logging.getLogger("math_verify").setLevel(logging.ERROR)

_EXTRACTION = (LatexExtractionConfig(), ExprExtractionConfig())
_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
_ASSIGNMENT = re.compile(r"^\s*[A-Za-z](?:_\{?\w+\}?)?\s*=\s*([^=<>]+)$")
_MAX_EXTRACTED_CHARS = 200  # what travels back to the caller; the full string is scored


@dataclass(frozen=True)
class ItemScore:
    """What a worker reports for one item (plain values: it crosses a process boundary)."""

    outcome: str  # an Outcome value
    via: str = ""  # "string" | "decimal_comma" | "integer" | "rational" | "math_verify" | ""
    extracted: str | None = None
    detail: str = ""

    def as_tuple(self) -> tuple:
        """The fields in order ``(outcome, via, extracted, detail)``, as a worker sends them
        back."""
        return (self.outcome, self.via, self.extracted, self.detail)


def _as_math(s: str) -> str:
    return "$" + _UNESCAPED_DOLLAR.sub(" ", s).strip() + "$"


def _gold_answer(form: str) -> str:
    """A gold form as an answer: a gold written as a solution with boxes (Math-Verify's own
    tests give golds such as ``... so the solutions are $n = \\boxed{1,-2}$.``) is read by its
    final boxes, as a response is; any other form is itself."""
    if "boxed" not in form and "fbox" not in form:
        return form
    boxes = final_boxes(form)
    return ", ".join(b.strip() for b in boxes) if boxes else form


def _tuple_len(form: str) -> int:
    """Entries of a gold written as one parenthesised tuple (``(3, 2)``), else 0."""
    s = normalize(_gold_answer(form))
    if len(s) < 3 or s[0] != "(" or s[-1] != ")":
        return 0
    depth, n = 0, 1
    for c in s[1:-1]:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:
                return 0  # "(1, 2), (3, 4)": two tuples, not one
        elif c == "," and depth == 0:
            n += 1
    return n if n > 1 else 0


def _decimal_comma_match(a: str, b: str) -> bool:
    """Whether one normal form is the other written with a decimal comma (``1,22`` and
    ``1.22``, ``1000,99`` and ``1000.99``, ``0,111`` and ``0.111``): the comma one cannot read
    as a thousands separator, and the other side a plain decimal with a point of equal value.
    A comma against anything else stays a list (``-2,1`` is two solutions in MATH)."""
    for comma, point in ((a, b), (b, a)):
        read = decimal_comma(comma)
        if read is None or "." not in point:
            continue
        q = plain_number(point)
        if q is not None and q[1] and q[0] == Fraction(read):
            return True
    return False


def _short(s: str) -> str:
    return s if len(s) <= _MAX_EXTRACTED_CHARS else s[: _MAX_EXTRACTED_CHARS - 1] + "\u2026"


class Scorer:
    """Scores (response, gold forms) pairs in-process; keeps an LRU cache of parsed golds.

    Args:
        fallbacks: answer-extraction fallbacks, see ``extract.FALLBACKS``.
        float_rounding, numeric_precision, strict: passed to ``math_verify.verify``.
        gold_cache_size: parsed gold forms kept per process (and 4x as many verdicts).
    """

    def __init__(
        self,
        fallbacks: Sequence[str] = ("answer_line",),
        float_rounding: int = 6,
        numeric_precision: int = 15,
        strict: bool = True,
        gold_cache_size: int = 4096,
    ) -> None:
        self.fallbacks = tuple(fallbacks)
        self.float_rounding = float_rounding
        self.numeric_precision = numeric_precision
        self.strict = strict
        self.gold_cache_size = gold_cache_size
        # gold form -> (normal form, plain integer, plain rational, Math-Verify parse or None)
        self._gold: OrderedDict[str, tuple] = OrderedDict()
        # (gold forms, answer) -> verdict: in a GRPO group the same final answer recurs, and
        # Math-Verify is deterministic, so one sympy comparison serves them all.
        self._verdicts: OrderedDict[tuple[tuple[str, ...], str], bool] = OrderedDict()
        self.gold_parses = 0  # misses, for tests and the benchmark

    def _gold_entry(self, form: str) -> tuple:
        hit = self._gold.get(form)
        if hit is not None:
            self._gold.move_to_end(form)
            return hit
        norm = normalize(_gold_answer(form))
        entry = (norm, plain_integer(norm), plain_number(_gold_answer(form)), None)
        self._gold[form] = entry  # normal forms are cheap; the sympy parse is filled lazily
        if len(self._gold) > self.gold_cache_size:
            self._gold.popitem(last=False)
        return entry

    def _gold_parsed(self, form: str) -> list:
        norm, integer, rational, parsed = self._gold_entry(form)
        if parsed is None:
            parsed = parse(_as_math(_gold_answer(form)), _EXTRACTION, parsing_timeout=None)
            self.gold_parses += 1
            self._gold[form] = (norm, integer, rational, parsed)
        return parsed

    def score(self, response: str, golds: Sequence[str]) -> ItemScore:
        """Score one response against every accepted gold form (correct if any matches)."""
        got = extract_final(response, self.fallbacks)
        if got is None:
            return ItemScore("no_answer")
        parts, source = got
        extracted = ", ".join(parts)
        if len(parts) == 1:
            outcome, via = self._score_answer(extracted, golds, unboxed=source != "box")
            return ItemScore(outcome, via, _short(extracted))
        # Several boxes: a set of answers, as Math-Verify reads them ("1, 2, 3" against
        # {1,2,3}); against a gold tuple of as many entries they are its entries in order.
        outcome, via = self._score_answer(extracted, golds)
        if outcome != "correct" and any(_tuple_len(g) == len(parts) for g in golds):
            outcome, via = self._score_answer("(" + extracted + ")", golds)
        return ItemScore(outcome, via, _short(extracted))

    def _score_answer(self, extracted: str, golds: Sequence[str], unboxed: bool = False) -> tuple[str, str]:
        """(outcome, via) of one extracted answer: the fast paths, then Math-Verify.
        ``unboxed``: the answer was read from prose by a fallback, where a decimal comma is
        read as Math-Verify reads plain text (see :func:`_decimal_comma_match`)."""
        entries = [self._gold_entry(g) for g in golds]
        # "x = 5" for gold 5: the fast paths look at the right-hand side (Math-Verify, which
        # gets the full answer if they cannot decide, compares an assignment the same way).
        m = _ASSIGNMENT.match(extracted)
        core = m.group(1) if m and not any("=" in g for g in golds) else extracted
        norm = normalize(core)
        if any(norm == e[0] for e in entries):
            return "correct", "string"
        # on the written forms: "2, 5" (a space after the comma) is a list, never 2.5
        if unboxed and any(_decimal_comma_match(_UNESCAPED_DOLLAR.sub("", core).strip(),
                                                _UNESCAPED_DOLLAR.sub("", _gold_answer(g)).strip()) for g in golds):
            return "correct", "decimal_comma"
        pred_int = plain_integer(norm)
        if pred_int is not None and all(e[1] is not None for e in entries):
            ok = any(pred_int == e[1] for e in entries)
            return ("correct" if ok else "incorrect"), "integer"
        pred_q = plain_number(core)
        if pred_q is not None and all(e[2] is not None for e in entries):
            if any(pred_q[0] == e[2][0] for e in entries):
                return "correct", "rational"
            # Math-Verify rounds to `float_rounding` decimals when a float is involved, so
            # only a gap of at least one unit in that place is a sure "incorrect" there.
            tol = Fraction(1, 10**self.float_rounding)
            if all((abs(pred_q[0] - e[2][0]) >= tol) if (pred_q[1] or e[2][1]) else True for e in entries):
                return "incorrect", "rational"
        key = (tuple(golds), extracted)
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._math_verify(extracted, golds)
            self._verdicts[key] = verdict
            if len(self._verdicts) > self.gold_cache_size * 4:
                self._verdicts.popitem(last=False)
        else:
            self._verdicts.move_to_end(key)
        return ("correct" if verdict else "incorrect"), "math_verify"

    def _math_verify(self, extracted: str, golds: Sequence[str]) -> bool:
        pred = parse(_as_math(extracted), _EXTRACTION, parsing_timeout=None)
        for g in golds:
            gold = self._gold_parsed(g)
            if gold and pred and verify(
                gold,
                pred,
                float_rounding=self.float_rounding,
                numeric_precision=self.numeric_precision,
                strict=self.strict,
                timeout_seconds=None,
            ):
                return True
        return False

    def safe_score(self, response: str, golds: Sequence[str]) -> ItemScore:
        """:meth:`score`, with any exception reported as outcome ``error`` instead of raised."""
        try:
            return self.score(response, golds)
        except Exception as e:  # the whole point: one bad item never kills the worker loop
            return ItemScore("error", detail=f"{type(e).__name__}: {str(e)[:200]}")


# Answer shapes seen in MATH-style data. Parsing each once fills ANTLR's lazily built
# prediction tables and sympy's caches; done in the fork server, every worker inherits them
# (about 2 s once, and it saves 20-25% of the CPU of a first batch of 2048 pairs per worker).
_WARM_UP = (
    r"\frac{1}{2}", "0.5", "-3", "12", "1/3", r"-\frac{7}{4}", r"3\sqrt{2}", r"\frac{\sqrt{3}}{2}",
    r"2\pi", r"\frac{5\pi}{6}", r"(1, -2)", r"\left( \frac{1}{2}, 3 \right)", r"[0, 4)",
    r"(-\infty, 2] \cup (3, \infty)", r"\{1, 2\}", r"\begin{pmatrix} 1 \\ -2 \end{pmatrix}",
    r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}", r"x^2 + 2x + 1", r"-2x^3+4x-6", r"x = 5",
    r"y = 2x - 3", r"45^\circ", r"25\%", r"\text{(C)}", "B", r"\text{Tuesday}", r"10\text{ cm}",
    r"1,\!000", r"2^{10}", r"e^{2}", r"\log_2 5", r"\sin 30^\circ", r"3 + 4i", r"\$ 12.50",
    r"6, 8, \text{ and } 10", r"a^2 b", r"\dfrac{4}{9}", "3.14", r"\infty", r"\sqrt[3]{2}",
)


def warm_up() -> float:
    """Pay Math-Verify's first-call costs once (ANTLR set-up, prediction tables); returns seconds."""
    t = time.perf_counter()
    scorer = Scorer()  # thrown away: its caches must not leak into real scoring
    for answer in _WARM_UP:
        scorer.score(rf"\boxed{{{answer}}}", ("7",))
        scorer.score(r"\boxed{7}", (answer,))
    return time.perf_counter() - t


def worker_loop(conn, settings: dict) -> None:
    """Serve tasks on ``conn`` until it closes or a ``None`` arrives.

    A task is ``(task_id, golds, [(index, response), ...])``; for each item, in order, the
    worker sends ``(task_id, index, outcome, via, extracted, detail)`` as soon as it is done,
    so the parent always knows which item is running and since when.
    """
    scorer = Scorer(**settings)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        task_id, golds, items = msg
        for index, response in items:
            conn.send((task_id, index, *scorer.safe_score(response, golds).as_tuple()))
