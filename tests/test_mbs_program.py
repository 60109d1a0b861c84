"""The program teacher on the toy arithmetic chains of jobs/train/arithmetic.py: exact traces,
exact decompositions, harder leaves by generator parameters, parents rebuilt in the seed's
configuration. A contract: every item a teacher verb returns checks out against its own
answer (trace ends in it, and the chain evaluates to it)."""

from __future__ import annotations

import pytest

from composition_rl.grading.extract import last_boxed
from composition_rl.jobs.grow.teachers import (
    Blueprint,
    Item,
    ProgramTeacher,
    TeacherError,
    chain_values,
    parse_chain,
    render_chain,
)
from composition_rl.jobs.train.arithmetic import make_problem

FAMILY = [(d, g, i) for d in (1, 2, 3, 4) for g in (1, 2, 3) for i in range(25)]


def _exact(item: Item) -> None:
    """The contract: trace ends in the answer and the chain evaluates to it."""
    steps = parse_chain(item.question)
    assert steps is not None, item.question
    assert last_boxed(item.trace) == item.answer == str(chain_values(steps)[-1])
    assert all(v >= 0 for v in chain_values(steps)) and all(a >= 0 and b >= 0 for a, _, b in steps)


@pytest.mark.parametrize("depth,digits,index", FAMILY)
def test_parse_and_render_match_the_generator(depth, digits, index):
    p, scratchpad = make_problem(depth, seed=3, index=index, digits=digits)
    steps = parse_chain(p.question)
    assert steps is not None and len(steps) == depth
    assert render_chain(steps) == (p.question, scratchpad)
    assert str(chain_values(steps)[-1]) == p.answer


@pytest.mark.parametrize("text", ["What is 2+2?", "X=1+2. Y=X-1.", "X=1+2. Y=Q-1. Y+3=?", "1*2=?", "X=1+2. Y=X+0. Y+3=?"])
def test_not_a_chain(text):
    # the last one reads, but the generator writes X-0, never X+0: only exact round trips count
    assert parse_chain(text) is None
    with pytest.raises(TeacherError, match="not_a_chain"):
        ProgramTeacher().solve(text, 0)


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_decompose_is_exact_and_retries_differ(depth):
    t = ProgramTeacher()
    p, _ = make_problem(depth, seed=5, index=1)
    root = t.solve(p.question, 0)
    assert root.answer == p.answer and root.trace == make_problem(depth, seed=5, index=1)[1]
    seen = set()
    for attempt in range(4):
        subs = t.decompose(root, attempt, 3)
        assert 2 <= len(subs) <= 3
        for s in subs:
            _exact(s)
        # the parts are the chain's own steps, in order, and the last part ends in the answer
        steps = [s for it in subs for s in parse_chain(it.question)]
        assert steps == parse_chain(root.question) and subs[-1].answer == root.answer
        seen.add(tuple(it.question for it in subs))
    assert len(seen) == min(4, {2: 1, 3: 3, 4: 6}[depth])
    assert t.decompose(t.solve("7+2=?", 0), 0, 3) == []  # one step: a leaf


@pytest.mark.parametrize("trial", range(6))
def test_harder_leaf_keeps_operators_and_grows(trial):
    t = ProgramTeacher()
    leaf = t.solve("4+3=?", 0)
    h = t.harder(leaf, trial)
    _exact(h)
    (a, op, b), = parse_chain(h.question)
    assert op == "+"
    if trial < 2:
        assert a < 10 and b < 10 and a + b >= 10  # same digits, a carry forced
    else:
        assert len(str(a)) == len(str(b)) == 1 + trial // 2
    assert t.harder(leaf, trial) == h  # deterministic in (seed, leaf, trial)


def test_compose_rebuilds_the_seed_configuration():
    t = ProgramTeacher()
    p, _ = make_problem(3, seed=5, index=2)
    root = t.solve(p.question, 0)
    kids = t.decompose(root, 0, 3)
    variants = [t.harder(k, 2) for k in kids]
    parent = t.compose(variants, Blueprint(root, tuple(kids)), 0)
    _exact(parent)
    assert parse_chain(parent.question) == [s for v in variants for s in parse_chain(v.question)]
    assert parent.answer == variants[-1].answer
    with pytest.raises(TeacherError, match="blueprint_mismatch"):
        t.compose(variants[:2], Blueprint(root, tuple(kids)), 0)


def test_vary_keeps_shape_digits_and_operators():
    t = ProgramTeacher()
    p, _ = make_problem(3, seed=9, index=4, digits=2)
    item = Item(p.question, "", p.answer)
    vs = [t.vary(item, k) for k in range(5)]
    for v in vs:
        _exact(v)
        assert [op for _, op, _ in parse_chain(v.question)] == [op for _, op, _ in parse_chain(p.question)]
        assert all(len(str(x)) == 2 for a, _, b in parse_chain(v.question) for x in (a, b))
    assert len({v.question for v in vs}) == 5 and t.cost()["calls"] == 5


def test_config_defaults_are_the_papers_and_bad_values_are_named():
    from composition_rl.jobs.grow import GrowConfig

    c = GrowConfig()
    assert (c.max_subproblems, c.decompose_retries, c.max_depth, c.alpha_leaf, c.alpha_parent,
            c.compose_trials, c.student_n) == (3, 3, 3, 0.8, 0.625, 10, 8)
    with pytest.raises(ValueError, match=r"alpha_leaf=1.5 .*on_ineffective='maybe'"):
        GrowConfig(alpha_leaf=1.5, on_ineffective="maybe")


def test_a_seed_no_teacher_can_read_is_dropped_as_not_a_chain():
    from types import SimpleNamespace

    from composition_rl.jobs.grow import GrowConfig
    from composition_rl.jobs.grow.run import grow_seed
    from composition_rl.jobs.grow.teachers import ProgramTeacher
    from composition_rl.records import Problem

    students = SimpleNamespace(rollouts=0)  # never asked: no trace, no student
    row = grow_seed(Problem.new("Find $x$ if $2x = 6$.", "3"), [ProgramTeacher()], students, None, GrowConfig())
    assert (row["status"], row["reason"]) == ("dropped", "not_a_chain")
