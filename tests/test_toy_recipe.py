"""The toy recipe of crl demo / crl reproduce (jobs/train/toy.py, jobs/train/rg_task.py): the task family,
its splits and the test sets that design 2 (docs/science.md) rests on."""

from __future__ import annotations

import json
import re

import pytest

from composition_rl.jobs.train.rg_task import RGTask, _base_index, _solve, scratchpad
from composition_rl.jobs.train.toy import ToyRecipe

STEP = re.compile(r"(-?\d+[+\-]\d+)=")


@pytest.fixture(scope="module")
def task3() -> RGTask:
    return ToyRecipe().task(seed=7)


@pytest.mark.parametrize(("question", "work", "value"), [
    ("Calculate 5 + 3.", "5+3=8.", 8),
    ("Calculate 5 + 9 - 7.", "5+9=14. 14-7=7.", 7),
    ("Calculate 0 - 4 - 8.", "0-4=-4. -4-8=-12.", -12),
    ("Calculate 9 + 8 + 10.", "9+8=17. 17+10=27.", 27),
])
def test_work_is_one_fact_per_operator_left_to_right(question, work, value):
    assert _solve(question) == (work, value)


def test_a_held_out_problem_is_a_new_combination_of_facts_the_training_side_covers(task3):
    """Design 2's premise: held-out depth 1 tests a skill, not recall of unseen facts."""
    def facts(problems):
        return {f for p in problems for f in STEP.findall(_solve(p.question)[0])}

    pool = {p.id for p in task3.pool()}
    sft = [p for p in task3.base("train") if p.id not in pool]
    test = task3.base("test")
    assert not {p.question for p in sft} & {p.question for p in test}
    covered = facts(sft)
    per_problem = [STEP.findall(_solve(p.question)[0]) for p in test]
    fact_share = sum(f in covered for fs in per_problem for f in fs) / sum(map(len, per_problem))
    whole_share = sum(all(f in covered for f in fs) for fs in per_problem) / len(per_problem)
    # measured for seeds 0, 1, 2, 7: 97-98% of held-out steps and 94-96% of held-out problems
    # are made only of facts that SFT's problems show
    assert fact_share > 0.95 and whole_share > 0.9, (fact_share, whole_share)
    # the first design's held-out problems were single facts that training never showed
    two = RGTask(seed=7, n_base=600, test_share=0.25, terms=2)
    assert not facts(two.base("train")) & facts(two.base("test"))


def test_every_composed_scratchpad_ends_in_the_records_answer(task3):
    index = _base_index(task3.seed, task3.n_base, task3.terms)
    for depth in (2, 3):
        for p in task3.compose(task3.base("train")[:80], depth, 200)[:60]:
            assert scratchpad(p, index).endswith(f"\\boxed{{{p.answer}}}")


def test_stage_data_composes_the_pool_with_itself_and_keeps_tests_apart(tmp_path):
    r = ToyRecipe(pool_size=24, composed_per_depth=300)
    paths = r.write_stage_data(7, tmp_path, test_composed=16, train_probe=40)

    def rows(name):
        return [json.loads(line) for line in open(paths[name])]

    pool = {x["id"] for x in rows("pool")}
    assert len(pool) == 24
    for name in ("depth2", "depth3"):
        assert all(set(x["parents"]) <= pool for x in rows(name))  # partners "pool": same originals
    train = {x["id"] for x in rows("train")}
    assert not train & pool and {x["id"] for x in rows("train1")} <= train
    held = {x["id"] for x in rows("test1")}
    assert not held & (train | pool)
    assert all(set(x["parents"]) <= held for x in rows("test2") + rows("test3"))


def test_new_pair_tests_use_only_solved_problems_in_pairs_sft_never_shows():
    r = ToyRecipe(composed_per_depth=300)
    task = r.task(7)
    solved = task.base("train")[:120]
    tests = r.new_pair_tests(7, solved, 40)
    sft_pairs = {pair for d in (2, 3) for p in task.sft_problems(d) for pair in zip(p.parents, p.parents[1:])}
    ids = {p.id for p in solved}
    for depth, probs in tests.items():
        assert len(probs) == 40 and all(p.depth == depth for p in probs)
        for p in probs:
            assert set(p.parents) <= ids
            assert not set(zip(p.parents, p.parents[1:])) & sft_pairs


def test_the_demo_recipe_is_the_quick_mechanism_and_reproduce_the_held_out_one():
    demo, full = ToyRecipe.demo(), ToyRecipe()
    assert (demo.terms, demo.pool_size, demo.partners) == (2, 16, "train") and demo.depth2_limit
    assert (full.terms, full.pool_size, full.partners) == (3, 64, "pool") and full.depth2_limit is None
    stages = demo.curriculum_stages({"pool": "p", "train": "t", "depth3": "d3"}, 0, {1: 5, 2: 5, 3: 5})
    assert stages[1]["limit"] == demo.depth2_limit and stages[1]["compose"]["first"] == "mastered"
