"""GRESO-style pre-rollout skipping (jobs/train/skip.py): the rule, its adaptation, its draws, and a
short GRPO run that uses it (the skip-only baseline of crl reproduce, arm ``skip``)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from composition_rl.jobs.train.skip import PromptSkipper, SkipConfig


def _skipper(**kw) -> PromptSkipper:
    return PromptSkipper(SkipConfig(enabled=True, **kw), seed=0)


@pytest.mark.parametrize(
    ("kinds", "p_easy", "p_hard", "expected"),
    [
        ([], 0.5, 0.5, 0.0),                                        # never seen: always generated
        (["solve_all"], 0.5, 0.5, 0.5),                             # 1 - 0.5**1
        (["solve_all"] * 3, 0.5, 0.5, 0.875),                       # 1 - 0.5**3
        (["solve_none"] * 2, 0.5, 0.9, 1 - 0.81),                   # the hard side has its own p
        (["solve_all"] * 2 + ["informative"], 0.5, 0.5, 0.0),       # an informative group ends the streak
        (["solve_all"] * 2 + ["solve_none"], 0.5, 0.5, 0.5),        # a streak of the other side starts at 1
        (["solve_all"] * 40, 0.5, 0.5, 0.99),                       # never skipped for good: floor 0.01
    ],
)
def test_skip_probability_is_one_minus_p_to_the_streak(kinds, p_easy, p_hard, expected):
    s = _skipper(p_easy=p_easy, p_hard=p_hard)
    for k in kinds:
        s.observe("q", k)
    assert s.skip_probability("q") == pytest.approx(expected)


def test_exploration_probability_moves_towards_the_target_share_and_stays_in_bounds():
    s = _skipper(p_easy=0.5, p_hard=0.5, target_zero_variance=0.3, adjust=0.1, min_p=0.2, max_p=0.7)
    for _ in range(8):
        s.observe("a", "solve_all")  # all easy: far above the easy target (0.1)
    row = s.end_step()
    assert (row["p_easy"], row["p_hard"]) == (0.4, 0.6)  # skip more easy, explore more hard
    for _ in range(5):
        for _ in range(8):
            s.observe("a", "solve_all")
        s.end_step()
    assert (s.p_easy, s.p_hard) == (0.2, 0.7)  # held at min_p / max_p


def _stream(ids):
    it = iter(ids * 1000)
    return lambda: {"id": next(it)}


def test_select_skips_stale_prompts_refills_when_it_must_and_counts_add_up():
    s = _skipper(p_easy=0.05)
    for _ in range(3):
        s.observe("stale", "solve_all")  # keep probability 0.05**3 -> the floor, 0.01
    rows = s.select(_stream(["stale", "fresh", "stale", "stale"]), need=64)
    got = Counter(r["id"] for r in rows)
    # without skipping a quarter would be fresh; a stale draw passes with probability 0.01
    assert len(rows) == 64 and got["fresh"] / 64 >= 0.85
    c = s.counts
    assert c.drawn == c.skipped + len(rows) - c.refilled
    # only stale prompts left: the scan bound ends the search and skipped ones fill the batch
    s2 = _skipper(p_easy=0.05, max_scan=4)
    for _ in range(3):
        s2.observe("stale", "solve_all")
    rows = s2.select(_stream(["stale"]), need=4)
    assert len(rows) == 4 and s2.counts.drawn == 16 and s2.counts.refilled >= 1


def test_draws_are_seeded_and_a_restored_state_continues_the_same_sequence():
    def run(s, steps):
        out = []
        for _ in range(steps):
            rows = s.select(_stream(["a", "b", "c", "d"]), need=3)
            out.append([r["id"] for r in rows])
            for r in rows:
                s.observe(r["id"], "solve_all" if r["id"] in "ab" else "informative")
            s.end_step()
        return out

    full = run(_skipper(), 6)
    assert full == run(_skipper(), 6)
    first = _skipper()
    head = run(first, 3)
    state = json.loads(json.dumps(first.state_dict()))
    again = _skipper()
    again.load_state_dict(state)
    assert head + run(again, 3) == full


@pytest.mark.parametrize(("bad", "named"), [({"p_easy": 0.0}, "p_easy=0.0"), ({"floor": 1.5}, "floor=1.5"),
                                            ({"min_p": 0.9, "max_p": 0.5}, "min_p (0.9)")])
def test_bad_settings_are_refused_naming_the_value(bad, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(")", r"\)")):
        SkipConfig(**bad).validate()


def test_train_config_reads_the_skip_section_and_refuses_it_with_online_mode():
    from composition_rl.jobs.train.config import TrainConfig

    base = {"preset": "cpu-tiny", "model": "m", "output_dir": "o",
            "stages": [{"name": "d1", "data": "d1.jsonl", "max_steps": 5}]}
    cfg = TrainConfig.from_dict({**base, "skip": {"enabled": True, "p_easy": 0.3}})
    assert cfg.skip.enabled and cfg.skip.p_easy == 0.3
    with pytest.raises(ValueError, match="do not combine"):
        TrainConfig.from_dict({**base, "skip": {"enabled": True}, "curriculum": {"mode": "online"}})
    with pytest.raises(ValueError, match="unknown key"):
        TrainConfig.from_dict({**base, "skip": {"enabled": True, "p": 0.3}})


@pytest.mark.slow
def test_a_grpo_run_with_skipping_logs_its_draws_and_skips_zero_variance_prompts(pytestconfig, tmp_path):
    pytest.importorskip("trl")
    from fakes.tiny_policy import tiny_policy_dir

    from composition_rl.io.files import read_jsonl
    from composition_rl.jobs.train.arithmetic import make_problem
    from composition_rl.jobs.train.config import TrainConfig
    from composition_rl.jobs.train.grpo import run_training
    from composition_rl.records import Problem

    model = tiny_policy_dir(pytestconfig)
    # four prompts of the policy's own task and four it cannot solve (products of two 4-digit
    # numbers, answers of 7-8 digits), so zero-variance groups do not hang on how the tiny
    # policy trained: on a CPU with AMX it solved every one-digit prompt sometimes and never
    # always, all 24 groups were informative and nothing was ever skipped
    problems = [make_problem(1, seed=5, index=i, digits=1)[0] for i in range(4)]
    problems += [Problem.new(f"What is ${a} \\times {b}$?", (str(a * b),)) for a, b in
                 ((4821, 7394), (6057, 9138), (7319, 5846), (8642, 3517))]
    data = tmp_path / "mixed.jsonl"
    data.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in problems))
    raw = {"preset": "cpu-tiny", "model": str(model), "output_dir": str(tmp_path / "run"), "seed": 0, "progress": False,
           "plot": False, "stages": [{"name": "easy", "data": str(data), "max_steps": 6}],
           "grpo": {"prompts_per_step": 4, "max_completion_length": 24},
           "dynamic_sampling": {"oversample": 1.0, "max_rounds": 2},
           "curriculum": {"mode": "manual"}, "skip": {"enabled": True, "p_easy": 0.05, "p_hard": 0.05}}
    rows = list(read_jsonl(run_training(TrainConfig.from_dict(raw), resume=False, log=None)))
    assert len(rows) == 6 and all("skip" in r for r in rows)
    groups = list(read_jsonl(tmp_path / "run/pass_rates.jsonl"))
    stale = {g["id"] for g in groups if g["kind"] != "informative"}
    # once a prompt has shown a zero-variance group, later steps skip draws (the first step cannot)
    assert rows[0]["skip"]["skipped"] == 0
    assert stale and sum(r["skip"]["skipped"] for r in rows) > 0
    for r in rows:
        s = r["skip"]
        assert s["drawn"] - s["skipped"] + s["refilled"] >= 4  # every round got its prompts
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert summary["skip"]["skipped"] == sum(r["skip"]["skipped"] for r in rows)
