"""Contract tests over the engine registry (the reasoning-gym ``test_dataset_common`` shape):
every registered engine composes through the one ``Composer`` contract, and every record it
accepts checks out, through the one check path, against its own parents."""

from __future__ import annotations

import argparse
import dataclasses
import itertools

import pytest
from fakes.composer_script import good_composer
from fakes.openai_server import FakeOpenAIServer

from composition_rl.flags import add_flags, from_flags
from composition_rl.jobs.compose import ComposeConfig, compose_problems
from composition_rl.jobs.compose.pipeline import parse_pool_sizes
from composition_rl.jobs.compose.run import build_engine, engine_pools, funnel
from composition_rl.progress import ProgressBar
from composition_rl.records import Problem
from composition_rl.spc import COMPOSERS
from composition_rl.spc.base import LLM_STAGES, Rejection, Stage
from composition_rl.spc.checks import run_checks
from composition_rl.spc.llm import LLMComposeConfig

# MATH train problems with single-number answers, so that every engine can lead with them
MATH = [
    ("One and one-half of what number is 30?", "20"),
    ("Find the product of the solutions of: $|y|=2(|y|-1)$.", "-4"),
    ("Compute \\[\\sum_{n=1}^{1000} \\frac{1}{n^2 + n}.\\]", "\\frac{1000}{1001}"),
    ("In a particular right triangle, the two legs have lengths of 40 inches and 42 inches. "
     "What is the area of the triangle?", "840"),
    ("Find the area of a triangle with side lengths 8, 9, and 9.", "4\\sqrt{65}"),
    ("What is the degree measure of an interior angle of a regular pentagon?", "108"),
]
PROBLEMS = [Problem.new(q, a, source="math_train") for q, a in MATH]
CHAINS = list(itertools.permutations(PROBLEMS, 2))


def test_every_engine_is_registered_and_the_config_takes_its_names_from_the_registry():
    assert {"symbolic", "llm", "auto"} <= set(COMPOSERS.names())
    with pytest.raises(ValueError, match="known: auto, llm, symbolic"):
        ComposeConfig(engine="gpt")


@pytest.mark.parametrize("name", ["symbolic", "llm", "auto"])
def test_every_engine_keeps_the_contract_and_its_records_check_out(name):
    from composition_rl.chat.openai import OpenAIChat

    with FakeOpenAIServer(good_composer) as srv:
        cfg = ComposeConfig(engine=name, seed=0)
        llm = LLMComposeConfig(base_urls=(srv.url,), model="fake-model", concurrency=4)
        engine = build_engine(cfg, llm_config=llm, backend=OpenAIChat([srv.url], "fake-model"))
        accepted = 0
        for chain in CHAINS:
            out = engine.compose(chain, f"c{accepted}")  # the sync contract, for every engine
            assert isinstance(out, (Problem, Rejection)), type(out)
            if isinstance(out, Problem):
                accepted += 1
                assert run_checks(out, chain) is None  # one check path, whatever wrote it
                assert out.answers == chain[-1].answers and out.parents == tuple(p.id for p in chain)
            else:
                assert out.stage in {s.value for s in Stage}
        assert accepted > 0, name


def test_one_rejection_type_and_stage_names():
    q1, q2 = Problem.new("What is $3+4$?", "7"), Problem.new("Compute $2 + 5$.", "7")
    record = compose_problems([q1, q2], ComposeConfig(depth=2)).accepted[0]
    chain = [{p.id: p for p in (q1, q2)}[i] for i in record.parents]
    assert run_checks(record, chain) is None
    failed = run_checks(dataclasses.replace(record, answers=("8",)), chain)  # a check's failure is a Rejection
    assert type(failed) is Rejection and (failed.stage, failed.reason) == ("check1_v1", "answer_mismatch")
    assert LLM_STAGES == tuple(s.value for s in Stage)
    assert str(Stage.CHECK3_RELATION) == "check3_relation"
    assert [r["kept"] for r in funnel(10, {"check1_v1": 3, "constant": 2, "check5_dependence": 1, "duplicate": 1})] == [
        10, 7, 5, 5, 5, 5, 4, 3]  # the last stage: a repeated composition (jobs/compose/run.py)


def test_pools_come_from_one_builder_for_every_engine():
    cfg = ComposeConfig(pool_size=3, seed=1)
    sym = engine_pools(build_engine(cfg), PROBLEMS, None, cfg)
    llm = engine_pools(build_engine(dataclasses.replace(cfg, engine="llm"),
                                    llm_config=LLMComposeConfig(model="m")), PROBLEMS, None, cfg)
    assert [len(p) for p in sym] == [len(p) for p in llm] == [3, len(PROBLEMS)]


def test_flags_are_generated_from_the_config_fields():
    p = argparse.ArgumentParser()
    add_flags(p, ComposeConfig)
    add_flags(p, LLMComposeConfig, prefix="llm_")
    args = p.parse_args(["--depth", "3", "--pool-sizes", "500,full,20", "--engine", "auto",
                         "--base-url", "http://a/v1", "--base-url", "http://b/v1", "--model", "m",
                         "--timeout", "9", "--no-cache"])
    cfg = from_flags(ComposeConfig, args)
    assert (cfg.depth, cfg.pool_sizes, cfg.engine) == (3, (500, None, 20), "auto")
    llm = from_flags(LLMComposeConfig, args, prefix="llm_")
    assert llm.base_urls == ("http://a/v1", "http://b/v1") and llm.timeout_s == 9.0 and llm.no_cache
    with pytest.raises(SystemExit):  # choices come from the registries
        p.parse_args(["--engine", "gpt"])
    with pytest.raises(SystemExit):
        p.parse_args(["--llm-backend", "nope"])
    with pytest.raises(ValueError, match="concurrency=0"):  # validation stays in __post_init__
        from_flags(LLMComposeConfig, p.parse_args(["--model", "m", "--concurrency", "0"]), prefix="llm_")
    assert parse_pool_sizes("full,20") == (None, 20)


def test_progress_bar_disabled_is_free_and_enabled_counts():
    with ProgressBar("x", total=3, enabled=False) as bar:
        bar.advance(2)
        bar.update(3, acc=1)
    import io

    class Tty(io.StringIO):  # the bar draws only on a terminal
        def isatty(self):
            return True

    bar = ProgressBar("x", total=3, enabled=True, fields={"acc": 0}, stream=Tty())
    bar.update(2, acc=1)
    bar.advance()
    assert bar._p.tasks[0].completed == 3 and bar._p.tasks[0].fields["acc"] == 1
    bar.close()


def test_llm_engine_writes_the_variable_bare_inside_a_math_environment():
    """One math-mode rule for every engine (values.in_math): a constant inside
    ``\\begin{align*}`` in prose is math, so Y replaces it bare, as the symbolic engine writes
    it. The LLM engine's own scan used to see only $...$ and \\(...\\) and wrote ``$W$`` there
    (14 of 2,745 records of the fake-server MATH runs changed; MATH train pair below)."""
    from composition_rl.chat.openai import OpenAIChat

    q1 = Problem.new("Assume that $f$ and $g$ are functions for which $f^{-1}(g(x))=5x+3$.  "
                     "Find $g^{-1}(f(-7))$.", "-2", source="math_train")
    q2 = Problem.new("How many points of intersection are there between the graphs of the following "
                     "equations: \\begin{align*}\ny &=|2x + 5|, \\\\\ny &= -|3x - 2|\n\\end{align*}", "0",
                     source="math_train")
    with FakeOpenAIServer(good_composer) as srv:
        # the model plan: the scripted model picks the 5 of |2x + 5| (the program plan takes the 3)
        engine = build_engine(ComposeConfig(engine="llm"), llm_config=LLMComposeConfig(model="fake-model", plan="model"),
                              backend=OpenAIChat([srv.url], "fake-model"))
        rec = engine.compose((q1, q2), "c0")
    assert isinstance(rec, Problem), rec
    y = rec.links[0].y
    assert f"|2x + {y}|" in rec.question and f"${y}$" not in rec.question.split("\\begin{align*}")[1]
    assert run_checks(rec, (q1, q2)) is None
