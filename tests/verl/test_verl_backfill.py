"""Backfill on dynamic-sampling starvation inside verl 0.9.1's V1 sync replay buffer, on CPU, in .venv-verl.

The same harness as test_verl_online.py (verl's dataset, dataloader, replay buffer and reward
loader built by verl's own code from `crl verl-recipe --online`'s overrides; TransferQueue and
the rollout are stand-ins). The scripted policy solves every depth-1 prompt and half the samples
of a composition, and the rule never retires (``retire_lower=1.0``: a Wilson lower bound never
reaches 1), so every group of the starting pool is solve_all and DAPO evicts them all: the
batch starves for as long as it draws starting prompts.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("verl.trainer.ppo.v1.replay_buffer",
                    reason="verl's V1 trainer modules need verl and TransferQueue (.venv-verl: "
                    "scripts/setup_verl_venv.sh)")

import torch  # noqa: E402
from test_verl_online import BATCH, _config, _Run  # noqa: E402

from composition_rl.integrations import verl_online  # noqa: E402
from composition_rl.jobs.export import export  # noqa: E402
from composition_rl.jobs.train.arithmetic import arithmetic_problems  # noqa: E402
from composition_rl.spc.checks import run_checks  # noqa: E402

pytestmark = pytest.mark.verl

SOLVES_DEPTH1 = {1: 1.0, 2: 0.5, 3: 0.5}
NEVER_RETIRE = {"k": 2, "window": 8, "retire_lower": 1.0, "max_depth": 3, "seed": 7}


@pytest.fixture(scope="module")
def problems():
    return arithmetic_problems(12, depth=1, seed=0)


def _run(tmp_path, problems, tokenizer, monkeypatch, backfill_after, cap=5000):
    verl_online._POOLS.clear()
    cfg = _config(tmp_path, export(problems, "verl", tmp_path), online=NEVER_RETIRE, backfill_after=backfill_after)
    assert cfg.trainer.v1.sampler.sampler_kwargs.backfill_after == backfill_after  # through verl's Hydra config
    return _Run(cfg, tokenizer, monkeypatch, skill=SOLVES_DEPTH1, cap=cap), cfg


def test_a_starving_batch_fills_with_compositions_of_its_own_solve_all_prompts_and_resumes(
        tmp_path, problems, tokenizer, monkeypatch):
    a, cfg = _run(tmp_path, problems, tokenizer, monkeypatch, backfill_after=1, cap=300)
    assert a.buffer._backfill_budget == BATCH
    a.train(range(1, 2))
    pool = a.dataset.pool
    start = {p.id: p for p in problems}
    step1 = [i for s, i in a.generated if s == 1]
    log = Path(cfg.data.online.log_dir) / "online.jsonl"
    rows = [json.loads(x) for x in log.read_text().splitlines()]

    # the step starved: its first batch and one batch of refills were all solve_all and evicted
    assert all(i in start for i in step1[:BATCH]) and a.metrics[0]["training/filter_groups/evicted_samples"] >= 2 * BATCH
    assert sum(1 for i in step1 if i in start) == BATCH * 2  # ordinary prompts stop at the budget
    # the batch is filled, with backfilled compositions only, each built from the step's solve_all prompts
    assert rows and all(r["event"] == "backfill" and r["step"] == 1 for r in rows)
    solve_all_before = sorted(set(step1[:BATCH]))  # outcomes the buffer had when verl first refilled past the budget
    assert rows[0]["sources"] == solve_all_before
    sources = {s for r in rows for s in r["sources"]}
    assert sources <= {i for i in step1 if i in start}
    backfilled = [i for r in rows for i in r["new"]]
    assert pool.backfilled == backfilled and set(a.batches[0]) <= set(backfilled)
    for pid in backfilled:
        p = pool.problems[pid]
        assert p.depth == 2 and set(p.parents) <= sources
        assert run_checks(p, [start[i] for i in p.parents]) is None
    # served once: no backfilled composition was generated twice in the step
    assert max(Counter(i for i in step1 if i in backfilled).values()) == 1
    assert a.metrics[0]["online/backfilled"] == len(backfilled) == a.metrics[0]["online/backfilled_total"]
    assert a.metrics[0]["online/refill_prompts"] == len(step1) - BATCH

    # resume: the dataloader checkpoint after step 1 holds the backfilled compositions
    ckpt = tmp_path / "data.pt"
    torch.save(a.loader.state_dict(), ckpt)
    a.train(range(2, 4))
    rows_a = log.read_text()
    b, _ = _run(tmp_path, problems, tokenizer, monkeypatch, backfill_after=1)
    b.loader.load_state_dict(torch.load(ckpt, weights_only=False))
    b.generated = [g for g in a.generated if g[0] <= 1]
    b.train(range(2, 4))  # torchdata hands the dataset its state when the first iterator starts
    assert b.dataset.pool.backfilled[:len(backfilled)] == backfilled and set(backfilled) <= set(b.dataset.pool.live)
    assert b.generated == a.generated and b.batches == a.batches[1:]
    assert b.dataset.pool.state_dict() == pool.state_dict()
    assert log.read_text() == rows_a  # cut back to step 1's rows, then steps 2-3 rewritten the same


def test_without_backfill_the_step_generates_without_limit_as_verl_does(tmp_path, problems, tokenizer, monkeypatch):
    run, _ = _run(tmp_path, problems, tokenizer, monkeypatch, backfill_after=0, cap=120)
    assert run.buffer._backfill_budget == 0
    with pytest.raises(RuntimeError, match="keeps asking for prompts"):
        run.train(range(1, 2))
    start = {p.id for p in problems}
    assert len(run.generated) > 120 and all(i in start for _, i in run.generated)
    assert run.dataset.pool.backfilled == [] and run.dataset.pool.injected == []
