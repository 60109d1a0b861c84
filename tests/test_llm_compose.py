"""The LLM composition engine end to end against a real loopback OpenAI-compatible server.

Problems are real MATH training problems (answers in every form: integers, fractions,
radicals, tuples, expressions, text with units). The "model" is scripted
(tests/fakes/composer_script.py): it reads the engine's own prompts, so what is tested is
the whole path: prompt -> HTTP -> retries -> tolerant parsing -> exact checks -> records ->
journal -> outputs.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sympy
from cli_run import REPO
from fakes.composer_script import good_composer, propose
from fakes.openai_server import FakeOpenAIServer, Fault, body_key

from composition_rl.backends.base import RequestRefused
from composition_rl.backends.cache import ResponseCache
from composition_rl.backends.openai_chat import OpenAIChat
from composition_rl.compose.checks import run_checks
from composition_rl.compose.llm import (
    LLM_STAGES,
    LLMComposeConfig,
    compose_candidates,
    parse_json_object,
)
from composition_rl.compose.llm.numbers import answer_numbers, relation
from composition_rl.compose.run import run_compose
from composition_rl.records import Problem
from composition_rl.values.numwords import word_number

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


# ------------------------------------------------------------------------------------------
# pieces
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"v1": "7"}', {"v1": "7"}),
        (
            'Sure!\n```json\n{"v1": "\\\\frac{3}{4}", "d": "x",}\n```',
            {"v1": "\\frac{3}{4}", "d": "x"},
        ),
        ('{"v1": "\\frac{3}{4}"}', {"v1": "\\frac{3}{4}"}),  # raw LaTeX: \f would be a form feed
        (
            '{"d": "the \\theta with \\neq and \\right) and \\sqrt{2} and \\( x \\)"}',
            {"d": "the \\theta with \\neq and \\right) and \\sqrt{2} and \\( x \\)"},
        ),
        (
            '{"r": "line one\\nline two", "q": "say \\"hi\\""}',
            {"r": "line one\nline two", "q": 'say "hi"'},
        ),
        ('{"r": "a raw\nnewline and\ttab"}', {"r": "a raw\nnewline and\ttab"}),
        (
            '{"r": "a {brace} in a string", "n": 1} trailing chatter {"x": 2}',
            {"r": "a {brace} in a string", "n": 1},
        ),
        ('{"v1": "7", "definition": "the su', None),  # truncated
        ("I cannot help with that.", None),
        ("[1, 2, 3]", None),
    ],
)
def test_tolerant_json(text, expected):
    assert parse_json_object(text) == expected


@pytest.mark.parametrize(
    "answer, whole, parts",
    [
        ("720", 720, [720]),
        ("-\\frac73", sympy.Rational(-7, 3), None),
        ("(1,-2)", None, [1, -2, 2]),
        ("108\\text{ degrees}", 108, [108]),
        ("5\\sqrt{2}", 5 * sympy.sqrt(2), [5, 2]),
        ("7x+10", None, [7, 10]),
        ("\\text{(B)}", None, []),
    ],
)
def test_answer_numbers(answer, whole, parts):
    w, ps = answer_numbers(answer)
    assert w == whole
    if parts is not None:
        assert list(ps) == parts


def test_word_numbers_and_exact_relation():
    assert [
        word_number(w) for w in ("one", "Twelve", "forty-two", "three hundred six", "dozen")
    ] == [1, 12, 42, 306, None]
    d, direction, d_abs, d_tex = relation(5 * sympy.sqrt(2), sympy.Integer(3))
    assert d == 5 * sympy.sqrt(2) - 3 and direction == "less" and "sqrt{2}" in d_abs
    assert relation(sympy.Integer(2), sympy.Integer(2))[1] == "equal"
    assert relation(sympy.Rational(-7, 3), sympy.Integer(1))[1:] == (
        "more",
        "\\frac{10}{3}",
        "-\\frac{10}{3}",
    )


# ------------------------------------------------------------------------------------------
# runs
# ------------------------------------------------------------------------------------------
def test_good_model_composes_every_answer_form_within_budget(tmp_path):
    with FakeOpenAIServer(good_composer) as srv:
        b = backend(srv.url)
        stats = compose_candidates(PAIRS, tmp_path, CFG, backend=b, progress=False)
        server_requests = srv.requests
    assert_counts_add_up(stats, tmp_path, len(PAIRS))
    assert_contract(tmp_path)
    composed = rows(tmp_path / "composed.jsonl")
    # tuples feed v1 through the menu of derived numbers: exact, so no verification call
    derived = [r for r in composed if r["metadata"]["v1_from"] == ["derived"]]
    # ... and a time of day by its minutes past the hour ("8:34 p.m." -> 34)
    assert {r["parents"][0] for r in derived} >= {PROBLEMS[5].id, PROBLEMS[6].id, PROBLEMS[10].id}
    assert all(r["metadata"]["verified_by"] == ["symbolic"] and r["links"][0]["v1_derivation"] for r in derived)
    # other compound answers (complex solutions, which derive nothing) via a number in them,
    # confirmed by one check
    parts = [r for r in composed if r["metadata"]["v1_from"] == ["part_of_answer"]]
    assert parts and all(r["metadata"]["verified_by"] == ["llm"] for r in parts)
    assert {r["parents"][0] for r in parts} >= {PROBLEMS[13].id}
    # plain numbers never cost a verification call
    assert all(
        r["metadata"]["verified_by"] == ["symbolic"]
        for r in composed
        if r["metadata"]["v1_from"] == ["answer"]
    )
    assert stats["accepted"] >= 0.8 * len(PAIRS)
    # the budget is 4: a proposal, a verification where exact checks cannot decide, and check 5's
    # solve calls where exact reading leaves the dependence open (this fake solves nothing, so
    # one call per such link: the perturbed problem is asked only of a model that solves q2)
    assert stats["llm"]["requests_per_llm_accepted"] <= 3.0
    assert stats["this_run"]["calls"] == server_requests == stats["llm"]["requests"]
    assert stats["llm"]["prompt_tokens"] > 0 and stats["llm"]["completion_tokens"] > 0
    one = next(r for r in composed if r["parents"] == [PROBLEMS[0].id, PROBLEMS[1].id])
    # 720 -> "30" in q2: d = 690 computed by program, the composed answer is q2's
    assert (
        one["links"][0]["v1"] == "720"
        and one["links"][0]["v2"] == "30"
        and one["links"][0]["d"] == "690"
    )
    assert one["answer"] == "20" and "$Y$ is $690$ less than $X$." in one["question"]


FAULT_CYCLE = [
    Fault("delay", seconds=5.0),
    Fault("status", status=500),
    Fault("rate_limit", retry_after="0.05"),
    Fault("malformed"),
    Fault("drop"),
    Fault("truncate"),
    None,
    None,
]


def fault_for(body: dict, attempt: int) -> Fault | None:
    h = int(body_key(body), 16)
    if h % 23 == 0:
        return Fault("status", status=503)  # never recovers: retries run out
    if attempt > 0:
        return None
    return FAULT_CYCLE[h % len(FAULT_CYCLE)]


def test_every_fault_is_survived_and_counts_add_up(tmp_path):
    with FakeOpenAIServer(good_composer) as clean_srv:
        clean = compose_candidates(
            PAIRS, tmp_path / "clean", CFG, backend=backend(clean_srv.url), progress=False
        )
    with FakeOpenAIServer(good_composer, faults=fault_for) as srv:
        t0 = time.monotonic()
        stats = compose_candidates(
            PAIRS,
            tmp_path / "faulty",
            CFG,
            backend=backend(srv.url, timeout_s=0.5, max_retries=3),
            progress=False,
        )
        elapsed = time.monotonic() - t0
        injected = dict(srv.faults_injected)
    assert set(injected) == {"delay", "status", "rate_limit", "malformed", "drop", "truncate"}
    # a candidate whose requests failed for good (503 after every retry) got no answer: it is
    # pending for the next run, never a reject (an outage says nothing about the candidate)
    assert stats["pending"] >= 1
    assert_counts_add_up(stats, tmp_path / "faulty", len(PAIRS) - stats["pending"])
    assert_contract(tmp_path / "faulty")
    reasons = stats["rejected_by_reason"]
    assert "internal_error" not in reasons
    assert reasons.get("truncated_output", 0) + reasons.get("truncated_verification", 0) >= 1
    assert not any(k.startswith("llm_http_5") for k in reasons)
    retried = stats["this_run"]["retried_by_kind"]
    assert {"timeout", "http_500", "rate_limited", "bad_response", "connection"} <= set(retried)
    # whatever survived the faults is exactly what the clean run produced for that candidate
    clean_by_cand = {
        r["metadata"]["candidate"]: r for r in rows(tmp_path / "clean" / "composed.jsonl")
    }
    faulty = rows(tmp_path / "faulty" / "composed.jsonl")
    assert faulty and all(clean_by_cand[r["metadata"]["candidate"]] == r for r in faulty)
    # and every clean acceptance that is missing was lost to a fault, with the fault as reason
    faulty_rej = {r["id"]: r["reason"] for r in rows(tmp_path / "faulty" / "rejected.jsonl")}
    lost = set(clean_by_cand) - {r["metadata"]["candidate"] for r in faulty}
    assert lost and all(faulty_rej.get(c, "pending").startswith(("llm_", "truncated_", "pending")) for c in lost)
    assert clean["accepted"] - stats["accepted"] == len(lost)
    assert elapsed < 30


def test_rerun_of_a_finished_job_makes_zero_calls(tmp_path):
    with FakeOpenAIServer(good_composer) as srv:
        with ResponseCache(tmp_path / "cache.jsonl") as cache:
            first = compose_candidates(
                PAIRS[:40], tmp_path / "a", CFG, backend=backend(srv.url, cache), progress=False
            )
        n_first = srv.requests
        with ResponseCache(tmp_path / "cache.jsonl") as cache:  # same out dir: the journal answers
            again = compose_candidates(
                PAIRS[:40], tmp_path / "a", CFG, backend=backend(srv.url, cache), progress=False
            )
            fresh = compose_candidates(
                PAIRS[:40], tmp_path / "b", CFG, backend=backend(srv.url, cache), progress=False
            )
        assert srv.requests == n_first > 0  # not one more request
    assert again["this_run"]["calls"] == 0 and again["this_run"]["requests"] == 0
    assert (
        fresh["this_run"]["calls"] == 0
        and fresh["this_run"]["cache_hits"] == first["llm"]["requests"]
    )
    for name in ("composed.jsonl", "rejected.jsonl"):
        a = (tmp_path / "a" / name).read_bytes()
        assert a == (tmp_path / "b" / name).read_bytes()
    for key in ("candidates", "accepted", "rejected_by_reason", "funnel", "llm"):
        assert first[key] == again[key] == fresh[key]
    # resuming with other settings would mix two runs in one output: refused
    with pytest.raises(ValueError, match="temperature: 0.1 -> 0.7"):
        compose_candidates(
            PAIRS[:40],
            tmp_path / "a",
            LLMComposeConfig(model="fake-model", temperature=0.7),
            backend=backend("http://127.0.0.1:9/v1"),
            progress=False,
        )


CHILD = r"""
import json, sys
from composition_rl.records import Problem
from composition_rl.compose.llm import LLMComposeConfig, compose_candidates
import itertools
url, out, data = sys.argv[1:4]
probs = [Problem.new(q, a, source="math_train") for q, a in json.load(open(data))]
cfg = LLMComposeConfig(base_urls=(url,), model="fake-model", concurrency=4, timeout_s=5)
compose_candidates(list(itertools.permutations(probs, 2)), out, cfg, progress=False)
"""


def test_kill_9_mid_run_then_rerun_equals_an_uninterrupted_run(tmp_path):
    data = tmp_path / "problems.json"
    data.write_text(json.dumps(MATH))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    with FakeOpenAIServer(good_composer, latency_s=0.03) as srv:
        cfg = LLMComposeConfig(base_urls=(srv.url,), model="fake-model", concurrency=4, timeout_s=5)
        compose_candidates(
            PAIRS, tmp_path / "clean", cfg, progress=False
        )  # the same job, uninterrupted
        clean_requests = srv.requests
        srv.reset_counts()
        out = tmp_path / "killed"
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, srv.url, str(out), str(data)], env=env
        )
        journal = out / "llm_journal.jsonl"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and child.poll() is None:
            if journal.exists() and journal.read_text().count("\n") >= 40:
                break
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        assert not (out / "composed.jsonl").exists()  # killed before the end
        done_at_kill = journal.read_text().count("\n")
        assert 40 <= done_at_kill < len(PAIRS)
        killed_requests = srv.requests
        srv.reset_counts()
        compose_candidates(PAIRS, out, cfg, progress=False)  # the rerun
        resumed_requests = srv.requests
    for name in ("composed.jsonl", "rejected.jsonl"):
        assert (out / name).read_bytes() == (tmp_path / "clean" / name).read_bytes()
    lines = [json.loads(x)["cid"] for x in journal.read_text().splitlines()]
    assert len(lines) == len(set(lines)) == len(PAIRS)
    # the rerun only asked for what the killed run had not finished (+ what was in flight)
    assert killed_requests + resumed_requests <= clean_requests + 8
    assert resumed_requests < clean_requests


SECRET = "sk-live-NEVER-WRITE-ME-0a1b2c3d"


def test_no_secret_in_logs_outputs_or_stats(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)

    served = itertools.count()

    def leaky(body, attempt):
        # the key "expires" after a few requests: from then on every request is refused alike
        # (counted, not keyed on the body: a 401 on a request that asks for a response_format is
        # first read as that format being refused, and which bodies those are depends on the prompt)
        return Fault("status", status=401, message="Incorrect API key provided: {auth}") if next(served) >= 6 else None

    with FakeOpenAIServer(good_composer, faults=leaky) as srv:
        cfg = LLMComposeConfig(base_urls=(srv.url,), model="fake-model", concurrency=8, timeout_s=2)
        # a 401 is refused for every request alike: the run stops with one error naming the
        # key's variable (not one rejection per candidate)
        with pytest.raises(RequestRefused) as err:
            compose_candidates(PAIRS[:30], tmp_path, cfg, progress=False)
    assert srv.auth_headers == {f"Bearer {SECRET}"}
    assert err.value.kind == "http_401" and "OPENAI_API_KEY" in str(err.value)
    assert "Incorrect API key" in str(err.value)
    # the rest of the run, resumed without the fault, keeps the key out of every file
    with FakeOpenAIServer(good_composer) as srv:
        cfg = LLMComposeConfig(base_urls=(srv.url,), model="fake-model", concurrency=8, timeout_s=2)
        stats = compose_candidates(PAIRS[:30], tmp_path, cfg, progress=False)
    assert stats["candidates"] == 30
    blobs = [caplog.text, str(err.value), json.dumps(stats)] + [
        p.read_text() for p in tmp_path.iterdir() if p.is_file()
    ]
    assert all(SECRET not in b for b in blobs)
    assert stats["backend"]["api_key_set"] is True


def test_rephrased_problems_and_word_constants(tmp_path):
    word_q = Problem.new(
        "Five friends share $20$ apples equally. How many apples does each friend get?",
        "4",
        source="t",
    )
    dozen_q = Problem.new(
        "A baker sells a dozen rolls for $6$ dollars. How many cents does one roll cost?",
        "50",
        source="t",
    )
    rephrase_q = PROBLEMS[2]

    def model(body):
        text = body["messages"][-1]["content"]
        if "Question 2." in text:  # verification: reads "a dozen" as 12, refuses the rephrase
            return json.dumps(
                {
                    "definition_value": "720",
                    "same_problem": "Please" not in text,
                    "constant_value": "12",
                }
            )
        for q, lit in ((word_q, "Five"), (dozen_q, "a dozen")):
            if q.question in text:
                return json.dumps(
                    {
                        "v1": "720",
                        "definition": "the value of $abc$ above",
                        "constant": lit,
                        "constant_value": "12" if lit == "a dozen" else "5",
                        "rewritten": q.question.replace(lit, "<VAR>"),
                    }
                )
        p = propose(PROBLEMS[0].question, PROBLEMS[0].answer, rephrase_q.question)
        p["rewritten"] = "Please " + p["rewritten"]
        return json.dumps(p)

    chains = [(PROBLEMS[0], word_q), (PROBLEMS[0], dozen_q), (PROBLEMS[0], rephrase_q)]
    with FakeOpenAIServer(model) as srv:
        stats = compose_candidates(chains, tmp_path, CFG, backend=backend(srv.url), progress=False)
    five, dozen = rows(tmp_path / "composed.jsonl")
    (rej,) = rows(tmp_path / "rejected.jsonl")
    # an English numeral is read by program: no verification call
    assert (
        five["links"][0]["v2"] == "Five"
        and five["links"][0]["d"] == "715"
        and five["metadata"]["verified_by"] == ["symbolic"]
    )
    assert five["question"].endswith(
        "$Y$ friends share $20$ apples equally. How many apples does each friend get?"
    )
    # a phrase the program cannot read costs one verification call, which must agree
    assert (
        dozen["links"][0]["v2_expr"] == "12"
        and dozen["links"][0]["d"] == "708"
        and dozen["metadata"]["verified_by"] == ["llm"]
    )
    assert "sells $Y$ rolls" in dozen["question"]
    assert rej["reason"] == "rephrase_rejected" and rej["stage"] == "check2_substitution"
    # 1 + 2 + 2, and check 5's call for "Five friends": exact reading cannot decide a word in
    # prose, so the model is asked to solve the problem (this fake cannot: it stays unknown)
    assert stats["llm"]["requests"] == 6
    assert five["metadata"]["dependence"] == "unknown" and five["metadata"]["dependence_by"] == ["none"]
    for r, q in ((five, word_q), (dozen, dozen_q)):
        assert run_checks(Problem.from_dict(r), [PROBLEMS[0], q]) is None


@pytest.mark.parametrize(
    "tamper, reason",
    [
        (lambda p: {**p, "v1": "721"}, "v1_not_in_answer"),
        (lambda p: {**p, "v1": "seven hundred"}, "v1_unparsable"),
        (lambda p: {**p, "definition": "the number 720"}, "definition_leaks_value"),
        (lambda p: {**p, "constant": "31"}, "constant_not_in_problem"),
        (lambda p: {**p, "rewritten": p["rewritten"].replace("<VAR>", "30")}, "marker_missing"),
        (lambda p: {k: v for k, v in p.items() if k != "rewritten"}, "malformed_output"),
        (
            lambda p: {**p, "constant_value": "31"},
            None,
        ),  # the model's arithmetic is ignored: v2 comes from the literal
    ],
)
def test_model_mistakes_are_counted_rejections(tmp_path, tamper, reason):
    base = propose(PROBLEMS[0].question, PROBLEMS[0].answer, PROBLEMS[1].question)
    with FakeOpenAIServer(lambda body: json.dumps(tamper(dict(base)))) as srv:
        stats = compose_candidates(
            [(PROBLEMS[0], PROBLEMS[1])], tmp_path, CFG, backend=backend(srv.url), progress=False
        )
    if reason is None:
        (r,) = rows(tmp_path / "composed.jsonl")
        assert r["links"][0]["v2_expr"] == "30" and r["links"][0]["d"] == "690"
    else:
        assert stats["rejected_by_reason"] == {reason: 1}


def test_constants_the_symbolic_rules_forbid_are_rejected(tmp_path):
    q2 = Problem.new(
        "Let $a_1 = 3$ and $a_{n+1} = 2a_n$ for $n \\ge 1$. Find $a_5$ in 2004.", "48", source="t"
    )
    replies = iter(
        [
            ("1", "Let $a_<VAR> = 3$ and $a_{n+1} = 2a_n$ for $n \\ge 1$. Find $a_5$ in 2004."),
            ("2004", "Let $a_1 = 3$ and $a_{n+1} = 2a_n$ for $n \\ge 1$. Find $a_5$ in <VAR>."),
            ("3", "Let $a_1 = <VAR>$ and $a_{n+1} = 2a_n$ for $n \\ge 1$. Find $a_5$ in 2004."),
        ]
    )
    answers = {}
    for c, rw in replies:
        answers[c] = json.dumps(
            {
                "v1": "720",
                "definition": "the value of $abc$ above",
                "constant": c,
                "constant_value": c,
                "rewritten": rw,
            }
        )
    out = {}
    for c, reply in answers.items():
        with FakeOpenAIServer(lambda body, r=reply: r) as srv:
            out[c] = compose_candidates(
                [(PROBLEMS[0], q2)], tmp_path / c, CFG, backend=backend(srv.url), progress=False
            )
    assert out["1"]["rejected_by_reason"] == {"constant_not_allowed": 1}  # a subscript
    assert out["2004"]["rejected_by_reason"] == {"constant_not_allowed": 1}  # a year
    assert out["3"]["accepted"] == 1
    (r,) = rows(tmp_path / "3" / "composed.jsonl")
    assert "$a_1 = Y$" in r["question"] and r["links"][0]["d"] == "717"


def test_depth_3_cross_domain_and_auto_through_the_pipeline(tmp_path):
    from composition_rl.compose.pipeline import ComposeConfig

    science = [
        Problem.new(
            "A ball falls from rest for 3 seconds with g = 10 m/s^2. How far does it fall, in meters?",
            "45",
            source="minerva",
        ),
        Problem.new(
            "A star has a parallax of 0.1 arcseconds. What is its distance in parsecs?",
            "10",
            source="minerva",
        ),
    ]
    with FakeOpenAIServer(good_composer) as srv:
        b = backend(srv.url)
        d3 = run_compose(
            PROBLEMS,
            ComposeConfig(depth=3, pool_size=4, max_candidates=40, seed=1, engine="llm"),
            tmp_path / "d3",
            first_pool=science,
            backend=b,
            progress=False,
            llm_config=CFG,
        )
        auto = run_compose(
            PROBLEMS,
            ComposeConfig(depth=2, pool_size=14, seed=0, engine="auto"),
            tmp_path / "auto",
            backend=backend(srv.url),
            progress=False,
            llm_config=CFG,
        )
    assert_counts_add_up(d3, tmp_path / "d3", d3["candidates"])
    sci_ids = {p.id for p in science}
    by_id = {p.id: p for p in [*PROBLEMS, *science]}
    composed = rows(tmp_path / "d3" / "composed.jsonl")
    assert composed and all(
        r["depth"] == 3 and len(r["links"]) == 2 and r["parents"][0] in sci_ids for r in composed
    )
    for r in composed:
        c = Problem.from_dict(r)
        assert run_checks(c, [by_id[i] for i in c.parents]) is None
        assert r["question"].startswith(by_id[r["parents"][0]].question)
        assert len({n for lk in r["links"] for n in (lk["x"], lk["y"])}) == 4
    # the budget is 4 per link pair, plus check 5's solve call for each link exact reading leaves open
    assert d3["llm"]["requests_per_llm_accepted"] <= 6
    # auto: the symbolic engine takes what it can, the model the rest (tuples, expressions)
    assert (
        auto["accepted_by_engine"].get("symbolic", 0) > 0
        and auto["accepted_by_engine"].get("llm", 0) > 0
    )
    assert_counts_add_up(auto, tmp_path / "auto", auto["candidates"])
    engines = {r["engine"] for r in rows(tmp_path / "auto" / "composed.jsonl")}
    assert engines == {"symbolic", "llm"}


def test_crl_compose_engine_llm_and_auto_from_the_command_line(tmp_path, capsys):
    from composition_rl.cli import main

    data = tmp_path / "math.json"
    data.write_text(json.dumps([{"problem": q, "answer": a} for q, a in MATH]))
    with FakeOpenAIServer(good_composer) as srv:
        common = [
            "compose",
            "--input",
            str(data),
            "--pool-size",
            "5",
            "--seed",
            "3",
            "--no-progress",
            "--base-url",
            srv.url,
            "--model",
            "fake-model",
        ]
        assert main([*common, "--engine", "llm", "--out", str(tmp_path / "llm")]) == 0
        assert (
            main([*common, "--engine", "auto", "--out", str(tmp_path / "auto"), "--export", "trl"])
            == 0
        )
    for name in ("llm", "auto"):
        stats = json.loads((tmp_path / name / "stats.json").read_text())
        assert (
            stats["engine"] == name
            and stats["candidates"] == stats["accepted"] + stats["rejected"] > 0
        )
        assert stats["config"]["depth"] == 2 and stats["pools"][0] == 5
    assert (tmp_path / "auto" / "trl.parquet").exists()
    assert "candidates accepted" in capsys.readouterr().out
    # resuming an output folder with another model: a clean usage error, exit 2
    assert (
        main([*common[:-1], "other-model", "--engine", "llm", "--out", str(tmp_path / "llm")]) == 2
    )
    assert "other settings (model: 'fake-model' -> 'other-model')" in capsys.readouterr().err
    # no endpoint: a clean usage error, exit 2
    assert (
        main(["compose", "--input", str(data), "--engine", "llm", "--out", str(tmp_path / "x")])
        == 2
    )
    assert "--base-url" in capsys.readouterr().err


def test_a_middle_definition_may_not_restate_its_replaced_constant(tmp_path):
    a, b, c = PROBLEMS[0], PROBLEMS[1], PROBLEMS[2]  # 720 -> "30" in b; b's answer 20 -> c

    def model(body):
        text = body["messages"][-1]["content"]
        q1 = text.split("Problem 1:\n", 1)[1].split("\n\nFinal answer", 1)[0]
        q2 = text.split("Problem 2:\n", 1)[1].split("\n\nFill in these fields:", 1)[0]
        p = propose(q1, next(x.answer for x in PROBLEMS if x.question == q1), q2)
        if q1 == b.question:
            p["definition"] = "the number whose one and one-half is 30"
        return json.dumps(p)

    with FakeOpenAIServer(model) as srv:
        stats = compose_candidates(
            [(a, b, c)], tmp_path, CFG, backend=backend(srv.url), progress=False
        )
    assert stats["rejected_by_reason"] == {"definition_reveals_constant": 1}


@pytest.mark.parametrize("verify, requests", [("never", 1), ("auto", 2), ("always", 2)])
def test_verify_modes(tmp_path, verify, requests):
    """A number taken from inside a compound answer (a set of complex solutions) needs the check in auto mode;
    never keeps only exact decisions; a derived number (a tuple's entry) is exact (check 5 by
    exact reading alone, so that only the verification calls are counted)."""
    cfg = LLMComposeConfig(model="fake-model", verify=verify, dependence="exact", plan="model")
    with FakeOpenAIServer(good_composer) as srv:
        derived_q1 = compose_candidates(
            [(PROBLEMS[5], PROBLEMS[1])],
            tmp_path / "d",
            cfg,
            backend=backend(srv.url),
            progress=False,
        )
        tuple_q1 = compose_candidates(
            [(PROBLEMS[13], PROBLEMS[1])],
            tmp_path / "t",
            cfg,
            backend=backend(srv.url),
            progress=False,
        )
        plain_q1 = compose_candidates(
            [(PROBLEMS[0], PROBLEMS[1])],
            tmp_path / "p",
            cfg,
            backend=backend(srv.url),
            progress=False,
        )
    assert tuple_q1["llm"]["requests"] == requests
    assert tuple_q1["accepted"] == (verify != "never")
    if verify == "never":
        assert tuple_q1["rejected_by_reason"] == {"definition_unverified": 1}
    assert plain_q1["accepted"] == 1 and plain_q1["llm"]["requests"] == (
        2 if verify == "always" else 1
    )
    assert derived_q1["accepted"] == 1 and derived_q1["llm"]["requests"] == plain_q1["llm"]["requests"]


def test_stats_report_latency_and_the_fraction_of_the_concurrency_bound(tmp_path):
    # a fixed 0.2 s server latency at concurrency 4: the client sees at least 0.2 s per call,
    # the bound is at most 4 / 0.2 = 20 calls/s, and no run can exceed its bound
    cfg = LLMComposeConfig(base_urls=("http://unused",), model="fake-model", concurrency=4)
    with FakeOpenAIServer(good_composer, latency_s=0.2) as srv:
        b = backend(srv.url, concurrency=4)
        stats = compose_candidates(PAIRS[:16], tmp_path, cfg, backend=b, progress=False)
    run = stats["this_run"]
    assert run["ok"] > 0 and run["latency_s"] >= 0.2 * run["ok"]
    assert run["mean_latency_s"] >= 0.2 and run["bound_calls_per_s"] <= 20.0
    assert run["bound_calls_per_s"] == pytest.approx(4 / run["mean_latency_s"], rel=0.01)
    assert 0 < run["fraction_of_bound"] <= 1.0


def _math14(tmp_path: Path) -> Path:
    data = tmp_path / "math.json"
    data.write_text(json.dumps([{"problem": q, "answer": a} for q, a in MATH]))
    return data


def test_llm_compose_against_a_dead_endpoint_stops_early_and_a_rerun_sends_them(tmp_path):
    import socket

    from composition_rl.cli import main

    data = _math14(tmp_path)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"  # bound, never listening: connection refused
    out = tmp_path / "llm"
    common = ["compose", "--input", str(data), "--engine", "llm", "--model", "fake-model", "--pool-size", "5",
              "--seed", "3", "--no-progress", "--out", str(out), "--max-retries", "1", "--concurrency", "4",
              "--stop-after", "8"]
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "composition_rl.cli", *common, "--base-url", dead],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")},
                       timeout=300)
    s.close()
    assert r.returncode == 1, r.stderr
    line = [x for x in r.stderr.splitlines() if x.startswith("crl compose: error:")]
    assert len(line) == 1 and dead in line[0] and "in a row" in line[0] and "Traceback" not in r.stderr
    assert time.monotonic() - t0 < 120
    journal = out / "llm_journal.jsonl"
    done = [json.loads(x) for x in journal.read_text().splitlines()] if journal.exists() else []
    # no connection failure became a reject (what the program decides without a call may be)
    assert all(r["requests"] == 0 and not r["ok"] and r["row"]["stage"] != "llm_call" for r in done)
    with FakeOpenAIServer(good_composer) as srv:  # the endpoint is back: every candidate is sent
        assert main([*common, "--base-url", srv.url]) == 0
        assert srv.requests > 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["pending"] == 0 and "llm_connection" not in stats["rejected_by_reason"]
    assert stats["candidates"] == stats["accepted"] + stats["rejected"] > 0


def test_a_candidate_whose_requests_all_fail_is_pending_not_rejected(tmp_path):
    from composition_rl.compose.llm import compose_candidates

    q2 = PAIRS[0][1].question[:30]  # among the first 12 pairs only the first one holds this problem

    def faults(body, attempt):  # every request of that candidate fails, retries included (503)
        return Fault("status", status=503) if q2 in json.dumps(body) else None

    with FakeOpenAIServer(good_composer, faults=faults) as srv:
        stats = compose_candidates(PAIRS[:12], tmp_path / "o", CFG, backend=backend(srv.url, max_retries=1),
                                   progress=False)
    assert stats["pending"] >= 1 and not any(k.startswith("llm_http_5") for k in stats["rejected_by_reason"])
    assert stats["candidates"] + stats["pending"] == 12
    with FakeOpenAIServer(good_composer) as srv:  # rerun: only the pending ones are sent
        again = compose_candidates(PAIRS[:12], tmp_path / "o", CFG, backend=backend(srv.url), progress=False)
        assert srv.requests > 0
    assert again["pending"] == 0 and again["candidates"] == 12


def test_an_internal_error_is_journaled_as_retryable_and_a_rerun_composes_it_again(tmp_path, monkeypatch):
    """A bug in the engine (an exception in one candidate) is counted, not fatal; the journal
    marks it retryable, so once the bug is fixed a rerun composes that candidate again instead
    of keeping the internal_error forever, and the outputs are an uninterrupted run's."""
    from composition_rl.compose.llm.composer import LLMComposer

    real = LLMComposer.acompose
    broken = {(a.id, b.id) for a, b in PAIRS[:30:3]}  # a third of the candidates trip the bug

    async def buggy(self, chain, cid, usage=None):
        if tuple(p.id for p in chain) in broken:
            raise ZeroDivisionError("a bug")
        return await real(self, chain, cid, usage)

    with FakeOpenAIServer(good_composer) as srv:
        monkeypatch.setattr(LLMComposer, "acompose", buggy)
        first = compose_candidates(PAIRS[:30], tmp_path / "a", CFG, backend=backend(srv.url), progress=False)
        hit = first["rejected_by_reason"].get("internal_error", 0)
        assert hit == len(broken)
        journal = [json.loads(x) for x in (tmp_path / "a" / "llm_journal.jsonl").read_text().splitlines()]
        assert sum(bool(e.get("retryable")) for e in journal) == hit
        monkeypatch.setattr(LLMComposer, "acompose", real)  # the bug fixed
        again = compose_candidates(PAIRS[:30], tmp_path / "a", CFG, backend=backend(srv.url), progress=False)
        fresh = compose_candidates(PAIRS[:30], tmp_path / "b", CFG, backend=backend(srv.url), progress=False)
        third = compose_candidates(PAIRS[:30], tmp_path / "a", CFG, backend=backend(srv.url), progress=False)
    assert "internal_error" not in again["rejected_by_reason"] and again["candidates"] == 30
    assert again["accepted"] == fresh["accepted"] and again["rejected_by_reason"] == fresh["rejected_by_reason"]
    assert again["this_run"]["calls"] > 0 and third["this_run"]["calls"] == 0  # retried once, then done
    for name in ("composed.jsonl", "rejected.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
