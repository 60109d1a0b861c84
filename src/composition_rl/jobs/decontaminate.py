"""Decontamination: set aside training prompts whose text overlaps a benchmark problem.

The measure is word 8-gram *containment* (Broder 1997): with ``G(t)`` the set of word
8-grams of a normalized text, a prompt ``c`` and a benchmark problem ``b`` overlap by

    max(|G(b) & G(c)| / |G(b)|,  |G(b) & G(c)| / |G(c)|)

and the prompt is set aside when that reaches the threshold (0.5) for some ``b``. The
first term catches a benchmark problem pasted into a longer prompt (a composed prompt
holds its parts' text whole), the second a prompt that is a piece of a longer benchmark
problem. A text of fewer than 8 words is one n-gram, its whole word sequence. Why 8 and 0.5
rather than GPT-3's 13-gram match: MATH problems are short (a median of about 30 words), so
one changed number removes up to 13 of 13-grams' few and a near duplicate slips through;
the measured false-positive rate on MATH train against MATH500 and the planted-duplicate
tests are in docs/refresh.md.

Normalization: lowercase; LaTeX spacing (``\\,``, ``\\!``, ``\\quad``), ``\\left``/``\\right``
and the ``\\dfrac``/``\\tfrac`` spellings dropped or unified; the words are the runs of
letters and the numbers (kept: "the sum of 3 and 4" and "the sum of 5 and 4" differ).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composition_rl.records import Problem

__all__ = ["DecontamConfig", "BenchmarkIndex", "Match", "normalize_words", "ngrams"]

_SPACING = re.compile(r"\\(?:[,;:! ]|quad|qquad|left|right|displaystyle|textstyle|limits)(?![a-zA-Z])")
_FRAC = re.compile(r"\\[dt]frac(?![a-zA-Z])")
_WORD = re.compile(r"[a-z]+|\d+(?:\.\d+)?")


def normalize_words(text: str) -> list[str]:
    """The words of ``text`` after normalization (lowercase, LaTeX spacing dropped, numbers kept).

    >>> normalize_words(r"Find $\\dfrac{1}{2}\\,+\\left(3.5\\right)$ apples!")
    ['find', 'frac', '1', '2', '3.5', 'apples']
    """
    t = _FRAC.sub(r"\\frac", text.lower())
    t = _SPACING.sub(" ", t)
    t = t.replace("{,}", "")  # 64{,}328 is 64328
    return _WORD.findall(re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", t))


def _numbers(words: Sequence[str]) -> frozenset[str]:
    return frozenset(w for w in words if w[0].isdigit())


def ngrams(words: Sequence[str], n: int) -> set[tuple[str, ...]]:
    """The word ``n``-grams of ``words``; a text shorter than ``n`` is one gram, itself.

    >>> sorted(ngrams(["a", "b", "c"], 2)), ngrams(["a"], 8)
    ([('a', 'b'), ('b', 'c')], {('a',)})
    """
    if not words:
        return set()
    if len(words) < n:
        return {tuple(words)}
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@dataclass(frozen=True)
class DecontamConfig:
    """How overlap with a benchmark is measured.

    Args:
        n: words per n-gram.
        threshold: the containment (see the module doc) at or above which a prompt is set aside.
    """

    n: int = field(default=8, metadata={"help": "words per n-gram of the decontamination overlap",
                                        "flag": "--decontam-n"})
    threshold: float = field(default=0.5, metadata={
        "help": "set a prompt aside when this share of a benchmark problem's n-grams (or of its own) is shared",
        "flag": "--decontam-threshold"})
    numbers: bool = field(default=True, metadata={
        "help": "a match also needs every number of the benchmark problem in the prompt: the same wording with "
                "other numbers is another problem",
        "help_no": "match on the n-gram overlap alone (a problem that shares a benchmark problem's wording with "
                   "other numbers is set aside too)", "flag": "--no-decontam-numbers"})

    def __post_init__(self) -> None:
        bad = []
        if not 1 <= self.n <= 64:
            bad.append(f"n={self.n} (must be in [1, 64])")
        if not 0.0 < self.threshold <= 1.0:
            bad.append(f"threshold={self.threshold} (must be in (0, 1])")
        if bad:
            raise ValueError("invalid decontamination config: " + "; ".join(bad))


@dataclass(frozen=True)
class Match:
    """The benchmark row a prompt overlaps: its file, row number, id, text and the overlap."""

    benchmark: str
    row: int
    id: str
    question: str
    containment: float
    part: str  # "prompt", or "part k" of a composed prompt

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (a ``set_aside.jsonl`` row's match), containment rounded to 4 places."""
        return {"benchmark": self.benchmark, "row": self.row, "id": self.id, "question": self.question,
                "containment": round(self.containment, 4), "part": self.part}


class BenchmarkIndex:
    """The n-grams of benchmark problems, for :meth:`match`.

    >>> idx = BenchmarkIndex([("b.json", [Problem.new("What is the sum of the first ten odd "
    ...                                               "positive integers in this list?", "100")])])
    >>> idx.match("Find it: what is the sum of the first ten odd positive integers in this list?").row
    0
    >>> idx.match("What is the sum of the first ten even positive integers?") is None
    True
    """

    def __init__(self, benchmarks: Iterable[tuple[str, Sequence[Problem]]], config: DecontamConfig | None = None):
        self.config = config or DecontamConfig()
        self.rows: list[tuple[str, int, Problem, int, frozenset[str]]] = []  # (file, row, problem, grams, numbers)
        self._grams: dict[tuple[str, ...], list[int]] = defaultdict(list)
        self._short: set[int] = set()  # word counts of the problems shorter than n
        for name, problems in benchmarks:
            for i, p in enumerate(problems):
                words = normalize_words(p.question)
                g = ngrams(words, self.config.n)
                if not g:
                    continue
                k = len(self.rows)
                self.rows.append((name, i, p, len(g), _numbers(words)))
                if len(words) < self.config.n:
                    self._short.add(len(words))
                for gram in g:
                    self._grams[gram].append(k)

    def __len__(self) -> int:
        return len(self.rows)

    def match(self, text: str, part: str = "prompt", numbers: Iterable[str] = ()) -> Match | None:
        """The benchmark problem ``text`` overlaps most, if it reaches the threshold.

        ``numbers``: numbers the text stands for without writing them (a composed prompt's
        constants that became variables), counted as the text's own by the number rule."""
        words = normalize_words(text)
        g = ngrams(words, self.config.n)
        if not g:
            return None
        nums = _numbers(words) | {w for t in numbers for w in _numbers(normalize_words(t))}
        shared: dict[int, int] = defaultdict(int)
        for gram in g:
            for k in self._grams.get(gram, ()):
                shared[k] += 1
        for size in self._short:  # a benchmark problem shorter than n words: its whole text, anywhere
            for gram in ngrams(words, size) if len(words) >= size else ():
                for k in self._grams.get(gram, ()):
                    shared[k] += 1
        best: tuple[tuple[float, int, float], Match] | None = None
        for k, s in shared.items():
            name, row, p, size, theirs = self.rows[k]
            c = max(s / size, s / len(g))
            # the highest overlap; of equal ones the row sharing the most, then the one closest
            # both ways (the same text beats a longer problem that contains it)
            key = (c, s, min(s / size, s / len(g)))
            if c < self.config.threshold or (best is not None and key <= best[0]):
                continue
            if not self.config.numbers or theirs <= nums:
                best = (key, Match(name, row, p.id, p.question, c, part))
        return best[1] if best else None

    def match_problem(self, problem: Problem, parts: Sequence[str] = ()) -> Match | None:
        """The best match of ``problem``'s text or of one of ``parts`` (a composed prompt's
        parents' questions): each part is checked alone, so a part is found even where the
        composition reworded the text around it. A composed prompt's own text is checked with
        the constants its links replaced by variables (``Y is 3 more than X`` stands for 3)."""
        hidden = [lk.v2_literal for lk in problem.links]
        found = [m for m in (self.match(problem.question, numbers=hidden),
                             *(self.match(t, f"part {i + 1}") for i, t in enumerate(parts))) if m is not None]
        return max(found, key=lambda m: m.containment) if found else None


# --- the benchmark files, and the crl decontaminate job ---------------------------------------


def benchmark_paths(specs: Iterable[str]) -> list[str]:
    """The files of ``--benchmarks`` values, each comma-separated or repeated.

    >>> benchmark_paths(["a.json, b.parquet", "c.jsonl"])
    ['a.json', 'b.parquet', 'c.jsonl']
    """
    return [b.strip() for item in specs for b in item.split(",") if b.strip()]


def load_benchmarks(paths: Sequence[str]) -> list[tuple[str, list[Problem]]]:
    """``(path, problems)`` of each benchmark file; an unreadable one, or one without a usable
    problem, is a ValueError in one line."""
    from composition_rl.io.readers import InputError, load_problems

    out = []
    for b in paths:
        try:
            res = load_problems(b)
        except (InputError, OSError) as e:
            raise ValueError(f"--benchmarks {b}: {e}") from None
        if not res.problems:
            raise ValueError(f"--benchmarks {b}: no usable problem ({res.why_empty(b)})")
        out.append((b, res.problems))
    return out


def decontaminate_file(path: str, marks: Sequence[str], out: Path, config: DecontamConfig,
                       question_field: str | None = None, answer_field: str | None = None) -> dict[str, Any]:
    """The ``crl decontaminate`` job with ``out`` held: set aside the problems of ``path`` that
    overlap a problem of the benchmark files ``marks``; write ``clean.jsonl``,
    ``set_aside.jsonl``, ``input_rejects.jsonl``, ``summary.json`` and ``run.json``
    together (staged, replaced on success only). Returns the summary (ValueError for an
    unusable input or benchmark)."""
    from composition_rl.io.files import StagedOutputs, atomic_write_json, atomic_write_jsonl
    from composition_rl.io.identity import run_identity
    from composition_rl.io.readers import InputError, ReaderConfig, load_problems
    from composition_rl.io.runs import record_run

    try:
        res = load_problems(path, ReaderConfig(question_field=question_field, answer_field=answer_field))
    except (InputError, OSError) as e:
        raise ValueError(str(e)) from None
    if not res.problems:
        raise ValueError(res.why_empty(f"--input {path}"))
    index = BenchmarkIndex(load_benchmarks(marks), config)
    # a composed prompt's parts are checked alone too, where the input holds them
    text = {p.id: p.question for p in res.problems}
    clean, aside = [], []
    for p in res.problems:
        m = index.match_problem(p, [text[q] for q in p.parents if q in text])
        if m is None:
            clean.append(p)
        else:
            aside.append({"id": p.id, "reason": "benchmark_overlap", "match": m.to_dict(),
                          "problem": p.to_dict()})
    summary = {"input": len(res.problems), "clean": len(clean), "set_aside": len(aside),
               "input_rejects": len(res.rejects), "benchmark_rows": len(index),
               "n": config.n, "threshold": config.threshold}
    names = ["clean.jsonl", "set_aside.jsonl", "input_rejects.jsonl", "summary.json", "run.json"]
    with StagedOutputs(out, names) as stage:
        atomic_write_jsonl(stage.dir / "clean.jsonl", (p.to_dict() for p in clean))
        atomic_write_jsonl(stage.dir / "set_aside.jsonl", aside)
        atomic_write_jsonl(stage.dir / "input_rejects.jsonl", res.rejects)
        atomic_write_json(stage.dir / "summary.json", summary)
        record_run(stage.dir, "decontaminate",
                   run_identity(inputs={"input": path, **{f"benchmark {b}": b for b in marks}},
                                n=config.n, threshold=config.threshold))
        stage.commit()
    return summary
