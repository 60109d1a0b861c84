"""The online curriculum inside verl 0.9.1's V1 trainer, on CPU, run in .venv-verl.

The config comes from verl's Hydra composition of `crl verl-recipe --online`'s overrides; the
dataset, dataloader and replay buffer are built by verl's own code (``create_rl_dataset``,
``create_rl_sampler``, ``PPOTrainer._build_replay_buffer``); rewards are our compute_score
loaded by verl. Only two things are stand-ins: TransferQueue (tests/fakes/transfer_queue.py:
its real Ray actors do not start on this machine) and the rollout (a seeded policy that
answers right with a probability set by the prompt's depth).
"""

from __future__ import annotations

import json
import random
import types
from pathlib import Path

import pytest

pytest.importorskip("verl.utils.config", reason="verl is not installed here; run with .venv-verl "
                    "(scripts/setup_verl_venv.sh)")
pytest.importorskip("verl.trainer.ppo.v1.replay_buffer",
                    reason="verl's V1 trainer modules need TransferQueue and its server deps "
                    "(scripts/setup_verl_venv.sh installs them)")

import torch  # noqa: E402
import verl  # noqa: E402
from fakes.transfer_queue import FakeTransferQueue  # noqa: E402

from composition_rl.integrations import verl_online  # noqa: E402
from composition_rl.integrations.verl_recipe import RecipeConfig, RecipeStage, stage_overrides  # noqa: E402
from composition_rl.jobs.export import export  # noqa: E402
from composition_rl.jobs.train.arithmetic import arithmetic_problems  # noqa: E402
from composition_rl.spc.checks import run_checks  # noqa: E402

pytestmark = pytest.mark.verl

BATCH = 4
SKILL = {1: 0.97, 2: 0.6, 3: 0.05}  # P(correct) of the scripted policy by depth


@pytest.fixture(scope="module")
def problems():
    return arithmetic_problems(24, depth=1, seed=0)


def _config(tmp_path, parquet, online=None, **recipe):
    from hydra import compose, initialize_config_dir

    rc = RecipeConfig(model="unused", out_dir=str(tmp_path / "run"), stages=[RecipeStage("depth1", str(parquet), 1)],
                      online=online or {"k": 2, "max_depth": 3, "seed": 7}, **recipe)
    overrides = stage_overrides(rc, 0, "unused", 100) + [
        f"data.train_batch_size={BATCH}", "data.max_prompt_length=512", "data.filter_overlong_prompts_workers=1",
        f"+data.cache_dir={tmp_path / 'cache'}", "data.seed=1"]
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=overrides)
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    return cfg


class _Run:
    """verl's pieces as PPOTrainer builds them, a fake rollout, and the trainer's step loop."""

    def __init__(self, cfg, tokenizer, monkeypatch, skill=SKILL, cap=5000):
        from torchdata.stateful_dataloader import StatefulDataLoader
        from verl.trainer.ppo import v1 as _v1  # noqa: F401  (the V1 package, as main_ppo imports it)
        from verl.trainer.ppo.reward import get_custom_reward_fn
        from verl.trainer.ppo.utils import create_rl_dataset, create_rl_sampler
        from verl.trainer.ppo.v1 import replay_buffer
        from verl.trainer.ppo.v1.trainer_base import PPOTrainer
        from verl.utils.dataset.rl_dataset import collate_fn

        self.tq = FakeTransferQueue()
        monkeypatch.setattr(replay_buffer, "tq", self.tq)
        monkeypatch.setattr(verl_online, "tq", self.tq)
        self.cfg = cfg
        self.dataset = create_rl_dataset(cfg.data.train_files, cfg.data, tokenizer, None, is_train=True)
        self.val = create_rl_dataset(cfg.data.val_files, cfg.data, tokenizer, None, is_train=False)
        self.loader = StatefulDataLoader(dataset=self.dataset, batch_size=1, num_workers=cfg.data.dataloader_num_workers,
                                         drop_last=True, collate_fn=collate_fn,
                                         sampler=create_rl_sampler(cfg.data, self.dataset))
        self.it = None
        trainer = types.SimpleNamespace(config=cfg, trainer_mode=cfg.trainer.v1.trainer_mode,
                                        _add_prompts_to_generate=self.refill,
                                        _resolve_filter_groups_metric=lambda: None)
        self.buffer = PPOTrainer._build_replay_buffer(trainer)
        self.buffer.poll_interval = 0.0
        self.reward = get_custom_reward_fn(cfg)
        self.step = 0
        self.generated: list[tuple[int, str]] = []  # (step, record id) of every group
        self.metrics: list[dict] = []
        self.batches: list = []  # the record ids of each step's training batch
        self.skill, self.cap = skill, cap

    def refill(self, n: int) -> int:
        """Generate ``n`` groups the way verl's agent loop stores them in TransferQueue."""
        for _ in range(n):
            if self.it is None:
                self.it = iter(self.loader)
            try:  # PPOTrainer._fetch_one_gen_batch: a new epoch when one ends
                row = next(self.it)
            except StopIteration:
                self.it = iter(self.loader)
                row = next(self.it)
            info, gt = row["extra_info"][0], row["reward_model"][0]["ground_truth"]
            k = sum(1 for s, i in self.generated if s == self.step and i == info["id"])
            uid = f"s{self.step}n{len(self.generated)}"
            self.generated.append((self.step, info["id"]))
            rng = random.Random(f"{info['id']}:{self.step}:{k}")
            self.tq.kv_put(uid, "train", {"is_prompt": True, "status": "finished", "global_steps": self.step})
            for s in range(self.cfg.actor_rollout_ref.rollout.n):
                text = f"\\boxed{{{gt}}}" if rng.random() < self.skill[info["depth"]] else "\\boxed{987654}"
                score = self.reward(data_source=row["data_source"][0], solution_str=text, ground_truth=gt,
                                    extra_info=info)
                self.tq.kv_put(f"{uid}_{s}_0", "train", {"status": "success", "global_steps": self.step},
                               {"extra_info": info, "extra_fields": {"reward_extra_info": score}})
            if len(self.generated) > self.cap:
                raise RuntimeError("the replay buffer keeps asking for prompts")
        return n

    def train(self, steps: range) -> None:
        for step in steps:
            self.step = step
            self.refill(BATCH)  # PPOTrainer.prepare_step
            batch, metrics = self.buffer.sample(global_steps=step, partition_id="train", batch_size=BATCH)
            uids = {k.split("_")[0] for k in batch.keys}
            assert len(uids) == BATCH
            self.batches.append(sorted(self.generated[int(u.split("n")[1])][1] for u in uids))
            self.tq.kv_clear(keys=batch.keys, partition_id="train")  # PPOTrainer.fit, step 7
            self.metrics.append(metrics)


def test_drawn_rows_are_verl_rows_and_validation_reads_the_file(tmp_path, problems, tokenizer, monkeypatch):
    from verl.utils.dataset.rl_dataset import RLHFDataset

    verl_online._POOLS.clear()
    parquet = export(problems, "verl", tmp_path)
    cfg = _config(tmp_path, parquet)
    run = _Run(cfg, tokenizer, monkeypatch)
    assert type(run.dataset).__name__ == "OnlineDataset" and run.dataset.online and not run.val.online
    assert type(run.buffer).__name__ == "OnlineReplayBuffer"
    assert run.buffer.filter_groups_metric == "acc" and run.buffer.max_inflight_gen_batches == 2
    plain = RLHFDataset(data_files=[str(parquet)], tokenizer=tokenizer, config=cfg.data)
    assert len(run.dataset) == len(plain) == len(problems)
    for i in (0, 5, 17):
        ours = run.dataset._finish(run.dataset.row_for(run.dataset.pool.problems[problems[i].id]))
        theirs = plain[i]
        assert ours.keys() == theirs.keys()
        assert all(torch.equal(ours[k], theirs[k]) if torch.is_tensor(ours[k]) else ours[k] == theirs[k] for k in ours)
    assert run.val[3]["extra_info"]["id"] == problems[3].id  # validation: plain rows by index


def test_online_run_retires_injects_and_resumes_from_the_dataloader_checkpoint(tmp_path, problems, tokenizer,
                                                                               monkeypatch):
    verl_online._POOLS.clear()
    parquet = export(problems, "verl", tmp_path)
    cfg = _config(tmp_path, parquet)
    a = _Run(cfg, tokenizer, monkeypatch)
    a.train(range(1, 5))
    ckpt = tmp_path / "data.pt"
    torch.save(a.loader.state_dict(), ckpt)  # PPOTrainer._save_checkpoint
    a.train(range(5, 11))
    pool = a.dataset.pool
    log = Path(cfg.data.online.log_dir) / "online.jsonl"
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    m = a.metrics[-1]

    # every group verl generated reached the rule, DAPO-evicted ones included
    assert sum(pool.tracker.counts.values()) == len(a.generated)
    assert sum(x.get("training/filter_groups/evicted_samples", 0) for x in a.metrics) > 0
    # retirements and injections, logged; the injected compositions were drawn and trained on
    assert len(rows) == len(pool.tracker.retired) >= 3 and pool.injected
    assert {r["retired"] for r in rows} == set(pool.tracker.retired)
    assert {i for _, i in a.generated} & set(pool.injected)
    assert m["online/injected_total"] == len(pool.injected) and m["online/live_depth_2"] >= 1
    assert m["online/retired_total"] == len(rows) == sum(x["online/retired"] for x in a.metrics)
    assert all(r["depth"] == r["retired_depth"] + 1 and r["new"] for r in rows if r["retired_depth"] == 1)
    assert sum(x["online/step_groups"] for x in a.metrics) == len(a.generated)
    assert 0.0 <= m["online/step_informative_share"] <= 1.0
    base = {p.id: p for p in problems}
    for pid in pool.injected:
        p = pool.problems[pid]
        assert run_checks(p, [base[i] for i in p.parents]) is None
    retired_at = {r["retired"]: r["step"] for r in rows}
    assert all(s <= retired_at.get(i, s) for s, i in a.generated)  # no draw after its retirement step

    # resume: a new process (empty registry), verl's _load_checkpoint, the same six steps
    verl_online._POOLS.clear()
    b = _Run(cfg, tokenizer, monkeypatch)
    b.loader.load_state_dict(torch.load(ckpt, weights_only=False))
    b.generated = [g for g in a.generated if g[0] <= 4]
    b.train(range(5, 11))
    assert b.generated == a.generated
    assert b.dataset.pool.state_dict() == pool.state_dict()
    assert [json.loads(x) for x in log.read_text().splitlines()] == rows  # cut back, then rewritten
