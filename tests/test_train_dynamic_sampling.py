"""Dynamic sampling (Equation 5): no zero-variance groups trained, refill, bounded rounds, band-pass.

These drive :class:`DynamicSampler` with scripted verifier scores; the trainer-level check on
a real model is in tests/test_train_grpo.py.
"""

from __future__ import annotations

import pytest
import torch

from composition_rl.jobs.train.config import DynamicSamplingConfig
from composition_rl.jobs.train.dynamic_sampling import DynamicSampler
from composition_rl.jobs.train.trl_adapter import assemble_batch

G = 4


class Script:
    """Prompts p0, p1, ... whose groups score by a fixed table of pass patterns."""

    def __init__(self, patterns):
        self.patterns = patterns  # prompt index -> list of G scores
        self.next = 0
        self.calls = []

    def draw(self, n):
        rows = [{"id": f"p{self.next + i}", "depth": 1 + (self.next + i) % 2, "stage": "s"} for i in range(n)]
        self.next += n
        return rows

    def generate(self, rows):
        self.calls.append(len(rows))
        ids = [r["id"] for r in rows[::G]]
        scores = [s for pid in ids for s in self.patterns(int(pid[1:]))]
        return ids, scores, [10] * len(rows)


def pattern(i):
    # every third prompt informative; the others alternate solve_all / solve_none
    if i % 3 == 2:
        return [1, 0, 1, 0]
    return [1] * G if i % 2 else [0] * G


def test_trained_groups_are_all_informative_and_the_batch_is_refilled():
    s = Script(pattern)
    out = DynamicSampler(DynamicSamplingConfig(max_rounds=10), G).sample(4, s.draw, s.generate)
    trained = out.trained_groups
    assert len(trained) == 4
    assert all(g.kind == "informative" and 0 < g.pass_rate < 1 for g in trained)
    assert out.rounds > 1 and not out.bound_hit and out.filled == 0
    assert len(s.calls) == out.rounds and out.generated == sum(s.calls)
    # refill rounds only ask for what is still missing
    assert s.calls[0] == 4 * G and all(c <= 4 * G for c in s.calls[1:])
    # every sampled group is recorded, before filtering
    assert len(out.groups) == sum(s.calls) // G
    assert {g.kind for g in out.groups} == {"solve_all", "solve_none", "informative"}


def test_on_round_sees_each_rounds_groups_before_the_next_draw():
    s = Script(pattern)
    seen = []
    draws_at_call = []

    def on_round(groups):
        seen.append([g.id for g in groups])
        draws_at_call.append(s.next)

    out = DynamicSampler(DynamicSamplingConfig(max_rounds=10), G, on_round=on_round).sample(4, s.draw, s.generate)
    assert len(seen) == out.rounds
    assert [i for r in seen for i in r] == [g.id for g in out.groups]
    assert draws_at_call == [sum(s.calls[: k + 1]) // G for k in range(out.rounds)]  # before round k+1 drew


def test_bound_is_honoured_and_the_batch_is_filled_with_dropped_groups():
    s = Script(lambda i: [1] * G if i % 2 else [0] * G)  # never informative
    out = DynamicSampler(DynamicSamplingConfig(max_rounds=3), G).sample(4, s.draw, s.generate)
    assert out.rounds == 3 and len(s.calls) == 3
    assert out.bound_hit and out.filled == 4
    assert len(out.trained_groups) == 4
    assert sum(len(idx) for _, idx in out.parts) == 4


def test_oversampling_draws_more_prompts_per_round():
    s = Script(pattern)
    DynamicSampler(DynamicSamplingConfig(oversample=2.0, max_rounds=1), G).sample(4, s.draw, s.generate)
    assert s.calls == [8 * G]


def test_band_pass_keeps_only_groups_inside_the_band():
    rates = {0: [1, 0, 0, 0], 1: [1, 1, 1, 0], 2: [1, 1, 0, 0]}
    s = Script(lambda i: rates[i % 3])
    cfg = DynamicSamplingConfig(band=(0.4, 0.6), max_rounds=20)
    out = DynamicSampler(cfg, G).sample(3, s.draw, s.generate)
    assert [g.pass_rate for g in out.trained_groups] == [0.5, 0.5, 0.5]
    assert any(g.kind == "informative" and not g.kept for g in out.groups)  # 0.25 / 0.75 dropped


def test_disabled_keeps_the_first_batch_as_plain_grpo_does():
    s = Script(pattern)
    out = DynamicSampler(DynamicSamplingConfig(enabled=False), G).sample(4, s.draw, s.generate)
    assert out.rounds == 1 and len(out.trained_groups) == 4
    assert any(g.kind != "informative" for g in out.trained_groups)


@pytest.mark.parametrize(
    "kw, msg",
    [({"oversample": 0.5}, "oversample"), ({"max_rounds": 0}, "max_rounds"), ({"band": (0.0, 0.5)}, "band"),
     ({"band": (0.7, 0.3)}, "band")],
)
def test_bad_settings_name_the_value(kw, msg):
    with pytest.raises(ValueError, match=msg):
        DynamicSamplingConfig(**kw).validate()


def _round(prompt_lens, completion_lens, start):
    """A TRL-shaped round batch: left-padded prompts, right-padded completions, pad id 0."""
    n = len(prompt_lens)
    P, C = max(prompt_lens), max(completion_lens)
    pids = torch.zeros(n, P, dtype=torch.long)
    pm = torch.zeros(n, P, dtype=torch.long)
    cids = torch.zeros(n, C, dtype=torch.long)
    cm = torch.zeros(n, C, dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompt_lens, completion_lens)):
        pids[i, P - p :] = start + i
        pm[i, P - p :] = 1
        cids[i, :c] = start + i
        cm[i, :c] = 1
    return {"prompt_ids": pids, "prompt_mask": pm, "completion_ids": cids, "completion_mask": cm,
            "advantages": torch.arange(n, dtype=torch.float) + start, "num_items_in_batch": cm.sum(),
            "old_per_token_logps": None}


def test_assemble_batch_selects_whole_groups_and_repads_each_side():
    a = _round([3, 3, 2, 2], [2, 1, 5, 4], start=10)  # groups (rows 0-1) and (rows 2-3), G=2
    b = _round([6, 6, 1, 1], [1, 1, 2, 2], start=20)
    out = assemble_batch([(a, [1]), (b, [0])], num_generations=2, pad_token_id=0)
    assert out["advantages"].tolist() == [12.0, 13.0, 20.0, 21.0]
    assert out["prompt_ids"].shape == (4, 6) and out["completion_ids"].shape == (4, 5)
    # prompts stay right-aligned (left padding), completions left-aligned (right padding)
    assert out["prompt_mask"].tolist()[0] == [0, 0, 0, 0, 1, 1]
    assert out["completion_mask"].tolist()[2] == [1, 0, 0, 0, 0]
    assert out["completion_ids"][0, :5].tolist() == [12] * 5
    assert int(out["num_items_in_batch"]) == 5 + 4 + 1 + 1
    assert "old_per_token_logps" not in out


def test_the_filler_groups_of_a_bound_hit_are_named():
    s = Script(lambda i: [1, 0, 1, 0] if i == 1 else [1] * G)  # one informative group in round 1
    out = DynamicSampler(DynamicSamplingConfig(max_rounds=2), G).sample(3, s.draw, s.generate)
    assert out.bound_hit and out.filled == 2
    assert sorted(out.fillers) == [(1, 0), (1, 1)]  # the latest dropped groups: round 2's


def test_zero_advantage_filler_tokens_are_not_in_the_token_mean():
    # a bound-hit step: one informative group, one zero-advantage filler, one out-of-band filler
    a = _round([2, 2, 2, 2, 2, 2], [3, 1, 7, 7, 2, 2], start=0)
    a["advantages"] = torch.tensor([0.5, -0.5, 0.0, 0.0, 0.3, -0.3])
    out = assemble_batch([(a, [0, 1, 2])], num_generations=2, pad_token_id=0, fillers=[(0, 1), (0, 2)])
    # the filler with no advantage teaches nothing: its 14 tokens must not dilute the loss of
    # the other groups' 8 (TRL's dapo loss divides by num_items_in_batch)
    assert int(out["num_items_in_batch"]) == 3 + 1 + 2 + 2
    assert out["completion_mask"][2:4].sum() == 0
    assert out["completion_mask"][4:6].sum() == 4  # out of band but with an advantage: trained
    assert out["completion_ids"][2, :7].tolist() == [2] * 7  # the rows stay; only their loss weight goes
