"""The LLM composition engine end to end against a real loopback OpenAI-compatible server.

Problems are real MATH training problems (answers in every form: integers, fractions,
radicals, tuples, expressions, text with units). The "model" is scripted
(tests/fakes/composer_script.py): it reads the engine's own prompts, so what is tested is
the whole path: prompt -> HTTP -> retries -> tolerant parsing -> exact checks -> records ->
journal -> outputs. Faults, kills and reruns are in ``test_llm_compose_faults.py``.
"""
from __future__ import annotations

import json

import pytest
import sympy
from fakes.composer_script import good_composer, propose
from fakes.openai_server import FakeOpenAIServer
from llm_compose_cases import (
    CFG,
    MATH,
    PAIRS,
    PROBLEMS,
    assert_contract,
    assert_counts_add_up,
    backend,
    rows,
)

from composition_rl.jobs.compose.run import run_compose
from composition_rl.jobs.compose.with_model import compose_candidates
from composition_rl.records import Problem
from composition_rl.spc.checks import run_checks
from composition_rl.spc.llm import (
    LLMComposeConfig,
    parse_json_object,
)
from composition_rl.spc.llm.answer_numbers import answer_numbers, relation
from composition_rl.values.numwords import word_number


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
    from composition_rl.jobs.compose.pipeline import ComposeConfig

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
