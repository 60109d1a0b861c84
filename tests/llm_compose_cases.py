"""The shared cases of the LLM engine's end-to-end tests (``test_llm_compose.py``,
``test_llm_compose_faults.py``): real MATH problems in every answer form, the scripted
backend's settings, and the checks that every run's outputs keep their contract."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from composition_rl.chat.cache import ResponseCache
from composition_rl.chat.openai import OpenAIChat
from composition_rl.records import Problem
from composition_rl.spc.checks import run_checks
from composition_rl.spc.llm import (
    LLM_STAGES,
    LLMComposeConfig,
)

# (question, answer) from MATH train, chosen for their answer forms
MATH = [
    (
        "If $a$,$b$, and $c$ are positive real numbers such that $a(b+c) = 152$, $b(c+a) = 162$, and $c(a+b) = 170$, then find $abc.$",
        "720",
    ),
    ("One and one-half of what number is 30?", "20"),
    ("Find the product of the solutions of: $|y|=2(|y|-1)$.", "-4"),
    (
        "A cubic polynomial $p(x)$ satisfies\n\\[p(n) = \\frac{1}{n^2}\\]for $n = 1, 2, 3,$ and $4.$  Find $p(5).$",
        "-\\frac{5}{12}",
    ),
    ("Compute \\[\\sum_{n=1}^{1000} \\frac{1}{n^2 + n}.\\]", "\\frac{1000}{1001}"),
    ("Find the center of the hyperbola $4x^2 - 24x - 25y^2 + 250y - 489 = 0.$", "(3,5)"),
    (
        "A circle is tangent to the lines $4x - 3y = 30$ and $4x - 3y = -10.$  The center of the circle lies on the line $2x + y = 0.$  Find the center of the circle.",
        "(1,-2)",
    ),
    (
        "Find $a+b+c$ if the graph of the equation $y=ax^2+bx+c$ is a parabola with vertex $(5,3)$, vertical axis of symmetry, and contains the point $(2,0)$.",
        "-\\frac73",
    ),
    (
        "What is the degree measure of an interior angle of a regular pentagon?",
        "108\\text{ degrees}",
    ),
    (
        "In a particular right triangle, the two legs have lengths of 40 inches and 42 inches. What is the area of the triangle?",
        "840\\text{ square inches}",
    ),
    (
        "The time right now is exactly midnight. What time will it be in 1234 minutes?",
        "8\\!:\\!34 \\text{ p.m.}",
    ),
    (
        "What is the distance, in units, between the points $(-3, -4)$ and $(4, -5)$? Express your answer in simplest radical form.",
        "5\\sqrt{2}",
    ),
    ("Find the area of a triangle with side lengths 8, 9, and 9.", "4\\sqrt{65}"),
    (
        "Solve\n\\[(x - 3)^4 + (x - 5)^4 = -8.\\]Enter all the solutions, separated by commas.",
        "4 + i, 4 - i, 4 + i \\sqrt{5}, 4 - i \\sqrt{5}",
    ),
]
PROBLEMS = [Problem.new(q, a, source="math_train") for q, a in MATH]
PAIRS = [c for c in itertools.permutations(PROBLEMS, 2)]  # 182 ordered candidates


def backend(url: str | list[str], cache: ResponseCache | None = None, **kw) -> OpenAIChat:
    kw.setdefault("timeout_s", 2.0)
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("backoff_max_s", 0.05)
    kw.setdefault("max_retries", 4)
    return OpenAIChat([url] if isinstance(url, str) else url, "fake-model", cache=cache, **kw)


# these tests exercise the model's whole proposal (v1, definition, constant, rewritten problem)
# and its checks; the program plan, where the model only defines X or places a constant the
# finder has none for, is tested in test_llm_plan.py
CFG = LLMComposeConfig(base_urls=("http://unused",), model="fake-model", concurrency=16, plan="model")


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def assert_counts_add_up(stats: dict, out: Path, n: int) -> None:
    composed, rejected = rows(out / "composed.jsonl"), rows(out / "rejected.jsonl")
    assert stats["candidates"] == n == len(composed) + len(rejected)
    assert stats["accepted"] == len(composed) and stats["rejected"] == len(rejected)
    assert sum(stats["rejected_by_reason"].values()) == len(rejected)
    kept = [s["kept"] for s in stats["funnel"]]
    assert kept == sorted(kept, reverse=True) and kept[0] == n and kept[-1] == stats["accepted"]
    assert [s["stage"] for s in stats["funnel"]] == ["candidates", *LLM_STAGES]
    ids = [r["id"] for r in rejected] + [r["metadata"]["candidate"] for r in composed]
    assert len(set(ids)) == n  # no candidate lost, none twice


def assert_contract(out: Path) -> None:
    """Every accepted composition checks out against its own record and parents."""
    by_id = {p.id: p for p in PROBLEMS}
    for r in rows(out / "composed.jsonl"):
        c = Problem.from_dict(r)
        assert run_checks(c, [by_id[i] for i in c.parents]) is None, r["question"]
