"""The LLM engine's program plan: v1 and the constant from the program, the model only for words.

Under ``plan="program"`` (the default) v1 is q1's exact answer or the number the symbolic
engine derives from it, the constant is the symbolic finder's pick, and the relation is
computed; the model writes X's definition, and places a constant only where the finder has
none it may replace (an ordinal, a number in words). The "model" here is scripted per test and
served over a real loopback HTTP server; its proposals are deliberately wrong, so a record that
used them could not pass.
"""

from __future__ import annotations

import json
import re

import pytest
from fakes.openai_server import FakeOpenAIServer

from composition_rl.chat.openai import OpenAIChat
from composition_rl.jobs.compose.pipeline import ComposeConfig
from composition_rl.records import Problem
from composition_rl.spc.base import Rejection
from composition_rl.spc.checks import run_checks
from composition_rl.spc.llm import LLMComposeConfig
from composition_rl.spc.llm.auto import AutoComposer
from composition_rl.spc.llm.composer import LLMComposer
from composition_rl.spc.llm.proposal import Draft, place_marker, program_definition
from composition_rl.spc.symbolic import SymbolicComposer

# MATH train rows (question, answer)
WAYS = Problem.new("In how many ways can 7 people sit around a round table if no two of the 3 people Pierre, "
                   "Rosa, and Thomas can sit next to each other? (Seating arrangements which are rotations of "
                   "each other are treated as the same.)", "144")
LINES = Problem.new("What is the value of $c$ if the lines with equations $y = 8x + 2$ and $y = (2c)x - 4$ are "
                    "parallel?", "4")
POINT = Problem.new("Solve the system $x + y = 2$, $x - y = 4$. Enter your answer as an ordered pair.", "(3,-1)")
BOX = Problem.new("A rectangular box has width $6$ inches, length $8$ inches and height $10$ inches. "
                  "What is its volume, in cubic inches?", "480")
TUTORS = Problem.new("Jaclyn, Marcelle, Susanna and Wanda are tutors in their school math lab. Their schedule "
                     "is as follows: Jaclyn works every third school day, Marcelle works every fourth school "
                     "day, Susanna works every sixth school day, and Wanda works every seventh school day. "
                     "Today, they are all working in the math lab. In how many school days from today will they "
                     "next be together tutoring in the lab?", "84")
SUM = Problem.new("What is $3 \\cdot 4 + 5$?", "17")
MARBLES = Problem.new("A bag holds $3$ red and $4$ blue marbles. How many marbles are in the bag?", "7")
TUTORS_6 = Problem.new(TUTORS.question.replace("every sixth", "every $6$th"), "84")
DEFINITION = "the value of $c$ found in the problem above"


def scripted(definition: str = DEFINITION, place: dict | None = None, mended: dict | None = None):
    """A model that defines X with ``definition``, places ``place`` (or nothing), confirms
    what a verification call asks, and proposes only nonsense (v1 12345, no <VAR>). Told why
    a reply was rejected (a feedback turn), it repeats itself, or answers ``mended``."""
    calls: list[str] = []
    feedback: list[str] = []

    def reply(body: dict) -> str:
        text = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if body["messages"][-1]["content"] != text:  # a feedback turn
            feedback.append(body["messages"][-1]["content"])
            if mended is not None:
                calls.append("mend")
                return json.dumps(mended)
        if text.startswith("Problem:\n"):
            calls.append("define")
            return json.dumps({"definition": definition})
        if text.startswith("Problem 2:\n"):
            calls.append("place")
            return json.dumps(place) if place else "Nothing fits."
        if "Someone wrote" in text:
            calls.append("verify")
            lit = re.search(r"If <VAR> is replaced by (.*?), is", text, re.S).group(1)
            return json.dumps({"definition_value": "4", "same_problem": True,
                               "constant_value": {"seventh": "7"}.get(lit, lit)})
        if "Fill in these fields" in text:
            calls.append("propose")
            return json.dumps({"v1": "12345", "definition": "a number", "constant": "7", "constant_value": "7",
                               "rewritten": "unchanged"})
        calls.append("solve")
        return json.dumps({"answer": "0"})

    reply.feedback = feedback
    return reply, calls


def engine(url: str, **cfg) -> LLMComposer:
    config = LLMComposeConfig(base_urls=(url,), model="fake-model", dependence="exact", **cfg)
    return LLMComposer.from_config(ComposeConfig(), config, OpenAIChat([url], "fake-model", timeout_s=5.0,
                                                                        max_retries=1))


def test_v1_and_the_constant_are_the_programs_and_the_model_only_defines_x():
    reply, calls = scripted()
    chains = [(LINES, BOX), (LINES, TUTORS_6), (POINT, BOX)]
    with FakeOpenAIServer(reply) as srv:
        eng = engine(srv.url)
        recs = [eng.compose(chain, f"c{i}") for i, chain in enumerate(chains)]
        assert all(isinstance(r, Problem) for r in recs), recs
    sym = [SymbolicComposer().compose(chain, f"c{i}") for i, chain in enumerate(chains)]
    for rec, s, chain in zip(recs, sym, chains):
        assert run_checks(rec, chain) is None
        # the symbolic engine's v1 and constant, at the same place; d computed (not proposed)
        (lk,), (sk,) = rec.links, s.links
        assert (lk.v1_expr, lk.v2_literal, lk.v2_offset, lk.d_expr) == (sk.v1_expr, sk.v2_literal, sk.v2_offset, sk.d_expr)
        assert rec.answers == chain[-1].answers and rec.engine == "llm"
    # an integer answer: the model's definition, one call for the q1 of two chains; a tuple: the
    # derived number's own phrase, no call at all; the proposal prompt is never sent
    assert recs[0].metadata["definitions"] == [DEFINITION] and recs[0].metadata["v1_from"] == ["answer"]
    assert f"$ be {DEFINITION}. $" in recs[0].question
    assert recs[2].metadata["v1_from"] == ["derived"] and recs[2].links[0].v1_derivation
    assert calls == ["define"]


@pytest.mark.parametrize("definition, reason", [
    ("the number 7 found in the problem above", "definition_leaks_value"),
    # a small model copies an example, or names a symbol the problem does not ask for
    ("the number of ways counted in the problem above", "definition_not_asked"),
    ("the value of $y$ found in the problem above", "definition_not_asked"),
    ("the sum of the numbers in the problem above", "definition_not_asked"),
    ("the number found in the problem above", "definition_not_asked"),
    ("the number of marbles\nfound above", "definition_invalid"),
    ("", "malformed_output"),
])
def test_the_models_definition_is_checked_as_a_proposals_is(definition, reason):
    # told why, a model that repeats its definition is rejected for it after the one feedback turn
    reply, calls = scripted(definition)
    with FakeOpenAIServer(reply) as srv:
        res = engine(srv.url).compose((MARBLES, BOX), "c")
    assert isinstance(res, Rejection) and res.reason == reason
    assert calls == ["define", "define"] and len(reply.feedback) == 1
    assert res.detail.removeprefix("link 1: ") in reply.feedback[0]  # the turn tells the model what was wrong
    reply, calls = scripted(definition)
    with FakeOpenAIServer(reply) as srv:
        res = engine(srv.url, feedback_tries=0).compose((MARBLES, BOX), "c")
    assert isinstance(res, Rejection) and res.reason == reason and calls == ["define"]


def test_a_definition_mended_after_the_feedback_turn_is_taken():
    """qwen-0.5b wrote "the sum of the numbers in the problem above" for "Find $a+b+c$.": the
    reason goes back to it, and a definition made of what q1 asks is accepted."""
    reply, calls = scripted("the sum of the numbers in the problem above",
                            mended={"definition": "the number of marbles in the bag found in the problem above"})
    with FakeOpenAIServer(reply) as srv:
        rec = engine(srv.url).compose((MARBLES, BOX), "c")
    assert isinstance(rec, Problem), rec
    assert run_checks(rec, (MARBLES, BOX)) is None
    assert rec.metadata["definitions"] == ["the number of marbles in the bag found in the problem above"]
    assert rec.metadata["defined_by"] == ["model"]
    assert calls == ["define", "mend"]
    assert "sum, numbers not in what the problem asks" in reply.feedback[0]


def test_a_q1_that_asks_for_one_formula_is_defined_by_the_program_without_a_call():
    """"What is $3 \\cdot 4 + 5$?" needs no words turned into a noun phrase: the program writes
    "the value of ..."; a question in words still goes to the model."""
    reply, calls = scripted("the sum of the numbers in the problem above")
    with FakeOpenAIServer(reply) as srv:
        rec = engine(srv.url).compose((SUM, BOX), "c")
    assert isinstance(rec, Problem) and calls == [], rec
    assert run_checks(rec, (SUM, BOX)) is None
    assert rec.metadata["definitions"] == ["the value of $3 \\cdot 4 + 5$ found in the problem above"]
    assert rec.metadata["defined_by"] == ["program"]
    assert program_definition("Suppose $d\\not=0$.  Write it in the form $ad+b+cd^2$.  Find $a+b+c$.") == \
        "the value of $a+b+c$ found in the problem above"
    assert program_definition("What is the value of $N$?") == "the value of $N$ found in the problem above"
    assert program_definition("Compute $\\sqrt[4]{12960000}.$") == \
        "the value of $\\sqrt[4]{12960000}$ found in the problem above"  # the period inside the math
    for words in ("Find the three-digit number formed by the last three digits.", "What is $x$ if $x+1=2$?",
                  "Find $f(2)$, given that.",
                  "Compute the smallest positive integer $n$ such that", "How many marbles are in the bag?"):
        assert program_definition(words) is None, words


def test_a_number_in_words_the_finder_cannot_take_is_placed_by_the_model_and_verified():
    good = {"phrase": "and Wanda works every seventh school day", "constant": "seventh", "constant_value": "7"}
    reply, calls = scripted(place=good)
    assert not SymbolicComposer().safe_constants(TUTORS)
    with FakeOpenAIServer(reply) as srv:
        rec = engine(srv.url).compose((LINES, TUTORS), "c")
        assert isinstance(rec, Problem), rec
        assert run_checks(rec, (LINES, TUTORS)) is None
        (lk,) = rec.links
        # v1 the program's, the word's value read back by the verification call; d by program
        assert (lk.v1_expr, lk.v2_literal, lk.v2_expr, lk.d_expr) == ("4", "seventh", "7", "-3")
        assert f"every ${lk.y}$ school day" in rec.question and rec.metadata["verified_by"] == ["llm"]
        assert calls == ["place", "define", "verify"]
        # auto: the symbolic engine cannot take the chain, the program plan can
        auto = AutoComposer.from_config(ComposeConfig(engine="auto"), engine(srv.url).config,
                                        OpenAIChat([srv.url], "fake-model", timeout_s=5.0, max_retries=1))
        assert isinstance(auto.symbolic.compose((LINES, TUTORS), "c"), Rejection)
        assert auto.compose((LINES, TUTORS), "c").links[0].v2_literal == "seventh"
        assert auto.compose((LINES, BOX), "c").engine == "symbolic"


@pytest.mark.parametrize("place, reason, calls", [
    # a word not in problem 2 (qwen-0.5b answered the prompt's own example): told, it repeats
    ({"phrase": "Ann works every third day", "constant": "eighth", "constant_value": "8"},
     "constant_not_in_problem", ["place", "place"]),
    # "school" occurs four times and the phrase is not problem 2's: which one is unknown
    ({"phrase": "every school in town", "constant": "school", "constant_value": "1"},
     "phrase_not_in_problem", ["place", "place"]),
    # nothing to place: said with empty fields, nothing to mend
    ({"phrase": "", "constant": "", "constant_value": ""}, "no_constant", ["place"]),
])
def test_a_placement_is_read_exactly_and_a_mendable_one_goes_back_once(place, reason, calls):
    reply, got = scripted(place=place)
    with FakeOpenAIServer(reply) as srv:
        res = engine(srv.url).compose((LINES, TUTORS), "c")
    assert isinstance(res, Rejection) and res.reason == reason and got == calls


def test_the_phrase_only_says_which_occurrence_the_program_writes_the_problem():
    # "seventh" occurs once: a phrase copied wrong does not matter; the rewritten problem is
    # the program's, problem 2 word for word with the constant replaced
    draft = Draft(LINES, TUTORS, {"phrase": "Wanda works on the seventh day", "constant": "seventh"})
    assert place_marker(draft) is None
    assert draft.f["rewritten"] == TUTORS.question.replace("every seventh", "every <VAR>")
    # 2 occurs twice: the phrase, found once in problem 2, picks the second
    two = Problem.new("Ann works every 2 days and Bo every 2 weeks. Find the sum.", "4")
    draft = Draft(LINES, two, {"phrase": "Bo every 2 weeks", "constant": "2"})
    assert place_marker(draft) is None and draft.f["rewritten"] == two.question.replace("every 2 weeks", "every <VAR> weeks")
    # 2 inside 12 is not an occurrence of 2
    twelve = Problem.new("A dozen is 12 and a pair is 2. Find it.", "1")
    draft = Draft(LINES, twelve, {"phrase": "", "constant": "2"})
    assert place_marker(draft) is None and draft.f["rewritten"].endswith("a pair is <VAR>. Find it.")
    # nor are the three of "three-digit" and the 1 of 1.5: "three" and "1" stand once each
    compound = Problem.new("How many three-digit numbers are there? Take 1.5 or three, or 1.", "1")
    draft = Draft(LINES, compound, {"phrase": "", "constant": "three"})
    assert place_marker(draft) is None and draft.f["rewritten"].endswith("Take 1.5 or <VAR>, or 1.")
    draft = Draft(LINES, compound, {"phrase": "", "constant": "1"})
    assert place_marker(draft) is None and draft.f["rewritten"].endswith("or three, or <VAR>.")
    # a phrase copied with single spaces finds a problem's double space and line break
    spaced = Problem.new("Ann has five  pens.\nBo has five\ncups. How many?", "10")
    draft = Draft(LINES, spaced, {"phrase": "Bo has five cups", "constant": "five"})
    assert place_marker(draft) is None and "Bo has <VAR>\ncups" in draft.f["rewritten"]
    # several occurrences, one where the rules allow a constant: that one, no phrase needed
    draft = Draft(LINES, two, {"phrase": "", "constant": "2"})
    assert place_marker(draft, {"2": frozenset({two.question.index("2 weeks")})}) is None
    assert draft.f["rewritten"] == two.question.replace("every 2 weeks", "every <VAR> weeks")
    # a LaTeX literal is matched as written
    half = Problem.new("Take $\\frac{1}{2}$ of the cake.", "1")
    draft = Draft(LINES, half, {"phrase": "", "constant": "$\\frac{1}{2}$"})
    assert place_marker(draft) is None and draft.f["rewritten"] == "Take $<VAR>$ of the cake."


def test_a_placement_mended_after_the_feedback_turn_is_taken():
    bad = {"phrase": "Ann works every third day", "constant": "eighth", "constant_value": "8"}
    good = {"phrase": "Wanda works every seventh school day", "constant": "seventh", "constant_value": "7"}
    reply, calls = scripted(place=bad, mended=good)
    with FakeOpenAIServer(reply) as srv:
        rec = engine(srv.url).compose((LINES, TUTORS), "c")
    assert isinstance(rec, Problem) and rec.links[0].v2_literal == "seventh", rec
    assert calls == ["place", "mend", "define", "verify"]
    assert "'eighth' does not occur in the problem" in reply.feedback[0]


def test_a_later_problem_whose_constants_give_no_natural_offset_costs_no_call():
    """144 is more than 100 away from 6, 8 and 10: a constant the model placed instead would
    state an offset just as unnatural, so the link is rejected as the symbolic engine rejects it."""
    reply, calls = scripted()
    with FakeOpenAIServer(reply) as srv:
        res = engine(srv.url).compose((WAYS, BOX), "c")
    assert isinstance(res, Rejection) and res.reason == "unnatural_offset" and calls == []
    assert SymbolicComposer().compose((WAYS, BOX), "c").reason == "unnatural_offset"


def test_the_model_plan_still_takes_the_whole_proposal():
    reply, calls = scripted()
    with FakeOpenAIServer(reply) as srv:
        res = engine(srv.url, plan="model").compose((LINES, BOX), "c")
    assert isinstance(res, Rejection) and res.reason == "v1_not_in_answer" and calls == ["propose"]


def test_a_rerun_over_the_same_cache_repeats_every_turn_without_a_call(tmp_path):
    """The feedback turns are requests like any other: cached, so a rerun into a new folder
    over the same cache makes no call and gives the same records; each turn counted once."""
    from dataclasses import replace

    from composition_rl.jobs.compose.with_model import compose_candidates

    bad = {"phrase": "Ann works every third day", "constant": "eighth", "constant_value": "8"}
    good = {"phrase": "Wanda works every seventh school day", "constant": "seventh", "constant_value": "7"}
    reply, calls = scripted("the sum of the numbers in the problem above", place=bad,
                            mended={**good, "definition": "the number of marbles in the bag found in the problem above"})
    chains = [(MARBLES, BOX), (SUM, TUTORS)]  # SUM's definition is the program's
    with FakeOpenAIServer(reply) as srv:
        cfg = LLMComposeConfig(base_urls=(srv.url,), model="fake-model", dependence="exact", concurrency=1)
        first = compose_candidates(chains, tmp_path / "a", cfg, progress=False)
        sent = srv.requests
        again = compose_candidates(chains, tmp_path / "b", replace(cfg, cache=str(tmp_path / "a" / "llm_cache.jsonl")),
                                   progress=False)
        assert srv.requests == sent  # every turn came from the cache
    # MARBLES: define, mended; TUTORS: place, mended, the word's value verified
    assert sorted(calls) == sorted(["define", "mend", "place", "mend", "verify"]), calls
    assert first["accepted"] == again["accepted"] == 2 and first["llm"]["requests"] == sent == 5
    assert (tmp_path / "a" / "composed.jsonl").read_bytes() == (tmp_path / "b" / "composed.jsonl").read_bytes()


def test_the_sync_contract_runs_inside_an_event_loop_and_close_ends_its_loop():
    import asyncio

    reply, _ = scripted()
    with FakeOpenAIServer(reply) as srv:
        eng = engine(srv.url)
        first = eng.compose((LINES, BOX), "c")

        async def cell():  # a Jupyter cell: the caller's thread already runs a loop
            return eng.compose((LINES, BOX), "c")

        again = asyncio.run(cell())
        loop = eng._loop
        eng.close()
    assert isinstance(first, Problem) and again.to_dict() == first.to_dict()
    assert loop is not None and loop.is_closed()
    eng.close()  # twice is harmless
