"""The online curriculum (:mod:`composition_rl.jobs.train.online`) inside verl 0.9.1's V1 trainer.

verl's V1 trainer has two seams, and the online mode needs both:

- ``trainer.v1.sampler.custom_sampler`` replaces the **replay buffer**: the object that
  decides which finished rollout groups a step trains on. It is handed ``refill_fn``, which
  asks the dataloader for N fresh prompts, but it cannot say *which* prompts: those come
  from ``data.train_files`` through a ``RandomSampler``. What it does see is every finished
  group, with each trajectory's ``extra_info`` (our record id) and
  ``extra_fields.reward_extra_info`` (our reward's ``acc``), before DAPO's filter evicts the
  solve_all and solve_none groups. :class:`OnlineReplayBuffer` reads those outcomes there and
  feeds them to the pool; its sampling is verl's own (DAPO filtering included).
- ``data.custom_cls`` replaces the **dataset**. :class:`OnlineDataset` is verl's
  ``RLHFDataset`` over the same parquet, but each training row it serves is a seeded,
  weighted draw from the live pool (:class:`composition_rl.jobs.train.online.OnlinePool`): retired
  prompts are never drawn, solve_none ones rarely, and the compositions injected for retired
  prompts appear as soon as they are composed.

Both live in the process that runs the trainer (verl's ``TaskRunner``) and meet in a
module-level registry keyed by ``data.online.log_dir``. That needs
``data.dataloader_num_workers=0``: a dataloader worker process would hold a copy of the pool
that never hears about outcomes (the dataset refuses to run inside one). Our reward function
stays as it is (``acc`` is already in ``reward_extra_info``), so nothing depends on where
verl's reward workers run.

Resume: verl saves ``train_dataloader.state_dict()`` in every checkpoint (``data.pt``);
with no worker processes, torchdata's ``StatefulDataLoader`` stores the dataset's own
``state_dict()`` there, which is the pool's (tracker, injected compositions, draw counter,
log length). On resume the pool is restored and ``online.jsonl`` is cut back to the
checkpoint's rows.

Backfill on starvation. In verl 0.9.1's V1 sync trainer a step's batch comes from
``ReplayBuffer.sample``, a poll loop with no total budget: each DAPO-evicted group earns two
refill prompts, ``max_inflight_gen_batches`` bounds only how many are in flight, verl ignores
``max_num_gen_batches`` (a warning) and its dataloader restarts at each epoch's end. A step
whose prompts are all solve_all therefore blocks in ``sample()`` and generates without limit; it
never raises. (The ``num_gen_batches >= max_num_gen_batches`` error users hit came from the
legacy DAPO trainer, which verl 0.9.1 no longer ships.) :class:`OnlineReplayBuffer` wraps
``refill_fn``: once the step has asked for ``backfill_after * train_batch_size`` refill prompts,
the rest of each request is first composed from the step's own solve_all prompts
(:meth:`OnlinePool.backfill <composition_rl.jobs.train.online.OnlinePool.backfill>`, which the dataset's
draws serve next), so verl's loop, credits and draining stay verl's. 0 turns it off.

Overrides (``crl verl-recipe --online`` writes them)::

    data.custom_cls.path=pkg://composition_rl.integrations.verl_online
    data.custom_cls.name=OnlineDataset
    data.dataloader_num_workers=0
    +data.online.log_dir=RUN/online  +data.online.k=3 ...  (the OnlineConfig fields)
    trainer.v1.sampler.custom_sampler.path=pkg://composition_rl.integrations.verl_online
    trainer.v1.sampler.custom_sampler.name=OnlineReplayBuffer   # OnlineReplayBufferAsync for async modes
    +trainer.v1.sampler.sampler_kwargs.online_log_dir=${data.online.log_dir}
    +trainer.v1.sampler.sampler_kwargs.filter_groups=${algorithm.filter_groups}
    +trainer.v1.sampler.sampler_kwargs.train_batch_size=${data.train_batch_size}
    +trainer.v1.sampler.sampler_kwargs.backfill_after=4      # --backfill-after; 0 = off

(verl hands a custom replay buffer none of the DAPO settings it gives its own, so the last two
pass them through by interpolation: one source of truth.)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import transfer_queue as tq
from omegaconf import DictConfig, OmegaConf
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync
from verl.utils.dataset.rl_dataset import RLHFDataset

from composition_rl.integrations.verl_recipe import BACKFILL_AFTER
from composition_rl.jobs.train.online import OnlineConfig, OnlinePool
from composition_rl.records import Problem

log = logging.getLogger(__name__)

__all__ = ["OnlineDataset", "OnlineReplayBuffer", "OnlineReplayBufferAsync", "group_outcomes",
           "online_settings", "problem_from_row"]

PKG = "pkg://composition_rl.integrations.verl_online"

# log_dir -> the training pool; the dataset registers it, the replay buffer reads it
_POOLS: dict[str, OnlinePool] = {}


def _plain(x: Any) -> Any:
    if isinstance(x, DictConfig):
        return OmegaConf.to_container(x, resolve=True)
    return getattr(x, "data", x)  # tensordict's NonTensorData wraps stored dicts


def online_settings(data_config: Mapping | DictConfig) -> tuple[OnlineConfig, str]:
    """``(OnlineConfig, log_dir)`` from the ``data.online`` node.

    Raises:
        ValueError: the node or its ``log_dir`` is missing, or it has an unknown key.
    """
    node = data_config.get("online") if data_config is not None else None
    if node is None:
        raise ValueError("OnlineDataset needs data.online (at least +data.online.log_dir=DIR); "
                         "`crl verl-recipe --online` writes these overrides")
    d = dict(_plain(node))
    log_dir = d.pop("log_dir", None)
    if not log_dir:
        raise ValueError("data.online.log_dir is not set: the folder for online.jsonl, and the key "
                         "the replay buffer finds the pool by")
    return OnlineConfig.from_dict(d), os.path.abspath(str(log_dir))


def problem_from_row(row: Mapping[str, Any], index: int) -> Problem:
    """The record behind one row of our verl parquet (``extra_info`` written by ``to_verl``).

    Raises:
        ValueError: naming the row and the missing field.
    """
    info = row.get("extra_info") or {}
    for key in ("id", "question"):
        if not info.get(key):
            raise ValueError(f"row {index}: extra_info.{key} is missing; the online mode needs the rows "
                             "`crl export --format verl` / `crl compose --export verl` write")
    answers = info.get("answers") or [(row.get("reward_model") or {}).get("ground_truth")]
    if not answers or answers[0] in (None, ""):
        raise ValueError(f"row {index} ({info['id']}): no extra_info.answers and no reward_model.ground_truth")
    return Problem(id=str(info["id"]), question=str(info["question"]), answers=tuple(str(a) for a in answers),
                   source=str(row.get("data_source") or ""), depth=int(info.get("depth") or 1),
                   parents=tuple(info.get("parents") or ()), engine=str(info.get("engine") or ""))


class OnlineDataset(RLHFDataset):
    """verl's ``RLHFDataset`` whose training rows are draws from the online pool.

    verl builds the training set first and the validation set second with the same class;
    the first instance for a ``log_dir`` owns the pool, later ones (validation) read the file
    as plain ``RLHFDataset`` rows. ``len()`` is the starting pool's size, so verl's epoch and
    step arithmetic is unchanged; the index verl asks for is ignored, the pool decides.
    """

    def __init__(self, data_files, tokenizer, config, processor=None, max_samples: int = -1):
        super().__init__(data_files=data_files, tokenizer=tokenizer, config=config, processor=processor,
                         max_samples=max_samples)
        cfg, self.log_dir = online_settings(config)
        self.online = self.log_dir not in _POOLS
        self.pool: OnlinePool | None = None
        if not self.online:
            return
        rows = [self.dataframe[i] for i in range(len(self.dataframe))]
        problems = [problem_from_row(r, i) for i, r in enumerate(rows)]
        self._rows = {p.id: r for p, r in zip(problems, rows, strict=True)}
        self.pool = OnlinePool(problems, cfg, log_path=os.path.join(self.log_dir, "online.jsonl"), accept=self.fits)
        _POOLS[self.log_dir] = self.pool

    def fits(self, p: Problem) -> bool:
        """Whether ``p``'s prompt passes verl's own overlong-prompt filter (``max_prompt_length``)."""
        import datasets

        workers, self.num_workers = self.num_workers, None  # one row: no process pool
        try:
            return len(self.maybe_filter_out_long_prompts(datasets.Dataset.from_list([self._new_row(p)]))) == 1
        finally:
            self.num_workers = workers

    def _new_row(self, p: Problem) -> dict[str, Any]:
        from composition_rl.jobs.export import to_verl

        row = to_verl([p])[0]
        row["extra_info"]["index"] = len(self.dataframe) + self.pool.injected.index(p.id) \
            if self.pool is not None and p.id in self.pool.injected else len(self.dataframe)
        return row

    def row_for(self, p: Problem) -> dict[str, Any]:
        """The verl row of ``p`` before verl's per-item processing."""
        if p.id in self._rows:
            return dict(self._rows[p.id])
        return self._new_row(p)

    def __getitem__(self, item):
        if not self.online:
            return super().__getitem__(item)
        if torch.utils.data.get_worker_info() is not None:
            raise RuntimeError("OnlineDataset runs in a dataloader worker, where it never sees outcomes: "
                               "set data.dataloader_num_workers=0")
        return self._finish(self.row_for(self.pool.draw(1)[0]))

    def _finish(self, row_dict: dict[str, Any]) -> dict[str, Any]:
        # RLHFDataset.__getitem__ (verl 0.9.1) after its dataframe lookup; tests/verl checks
        # that a drawn row equals verl's own row for the same record.
        row_dict["raw_prompt"] = self._build_messages(row_dict, key=self.prompt_key)
        for key in (self.image_key, self.video_key, self.audio_key):
            row_dict.pop(key, None)
        row_dict["dummy_tensor"] = torch.tensor([0], dtype=torch.uint8)
        info = row_dict.get("extra_info") or {}
        row_dict["extra_info"] = info
        row_dict["index"] = info.get("index", 0)
        row_dict["tools_kwargs"] = info.get("tools_kwargs", {})
        row_dict["interaction_kwargs"] = info.get("interaction_kwargs", {})
        return row_dict

    def state_dict(self) -> dict[str, Any]:
        """``{"pool": ...}``, the pool's resumable state, saved by verl in each
        checkpoint (``{}`` for an instance that owns no pool)."""
        return {"pool": self.pool.state_dict()} if self.pool is not None else {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the pool from a checkpoint's :meth:`state_dict` (a no-op
        without a pool or a saved one)."""
        if self.pool is not None and state.get("pool"):
            self.pool.load_state_dict(state["pool"])


def group_outcomes(keys: Sequence[str], extra_infos: Sequence[Any], extra_fields: Sequence[Any],
                   metric: str = "acc") -> dict[str, tuple[str, int, int]]:
    """``{uid: (record id, correct, n)}`` from the trajectories of finished groups.

    ``keys`` are verl's TransferQueue keys ``{uid}_{session}_{index}``: one session is one
    rollout of the group (a multi-turn session may store several outputs, all carrying the
    session's reward). A rollout is correct when ``reward_extra_info[metric]`` is above 0.5
    (our reward's ``acc`` is 1.0 or 0.0).

    Raises:
        ValueError: a trajectory without ``extra_info.id`` or without the metric (naming the key).
    """
    sessions: dict[str, dict[str, bool]] = {}
    ids: dict[str, str] = {}
    for key, info, fields in zip(keys, extra_infos, extra_fields, strict=True):
        uid, session = key.split("_")[:2]
        info = _plain(info) or {}
        rid = info.get("id") if isinstance(info, Mapping) else None
        if not rid:
            raise ValueError(f"trajectory {key}: extra_info.id is missing (rows need our record ids: "
                             "use OnlineDataset over a parquet from `crl export --format verl`)")
        fields = _plain(fields) or {}
        rei = fields.get("reward_extra_info", {}) if isinstance(fields, Mapping) else {}
        if metric not in rei:
            raise ValueError(f"trajectory {key}: reward_extra_info has no {metric!r} (it has {sorted(rei)}); "
                             "use composition_rl.integrations.verl.compute_score as the reward")
        ids[uid] = str(rid)
        sessions.setdefault(uid, {})[session] = float(rei[metric]) > 0.5
    return {uid: (ids[uid], sum(s.values()), len(s)) for uid, s in sessions.items()}


class _OnlineHarvest:
    """Mixin over verl's replay buffers: feed every finished training group to the pool."""

    _KWARGS = ("online_log_dir", "outcome_metric", "filter_groups", "train_batch_size", "backfill_after")

    def __init__(self, trainer_mode, trainer_config, max_off_policy_threshold, max_off_policy_strategy,
                 sampler_kwargs, refill_fn=None, **kwargs):
        kw = dict(_plain(sampler_kwargs) or {})
        unknown = sorted(set(kw) - set(self._KWARGS))
        if unknown:
            raise ValueError(f"unknown sampler_kwargs {', '.join(unknown)}; known: {', '.join(self._KWARGS)}")
        if not kw.get("online_log_dir"):
            raise ValueError("trainer.v1.sampler.sampler_kwargs.online_log_dir is not set; "
                             "use ${data.online.log_dir} so the buffer finds OnlineDataset's pool")
        self.online_log_dir = os.path.abspath(str(kw["online_log_dir"]))
        self.outcome_metric = str(kw.get("outcome_metric") or "acc")
        fg = kw.get("filter_groups") or {}
        dapo = str(fg["metric"]) if fg.get("enable") else None
        extra: dict[str, Any] = {"filter_groups_metric": dapo}
        after = kw.get("backfill_after", BACKFILL_AFTER)
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise ValueError(f"sampler_kwargs.backfill_after={after!r}: an integer >= 0 (train batches of refill "
                             "prompts a step may generate before its refills become backfill; 0 = off)")
        self.backfill_after = after
        self._backfill_budget = 0  # refill prompts per step before backfill; 0 = never
        if not isinstance(self, ReplayBufferAsync):
            tbs = kw.get("train_batch_size")
            if dapo and not tbs:
                raise ValueError("filter_groups is enabled but sampler_kwargs.train_batch_size is not set; "
                                 "use ${data.train_batch_size}")
            extra.update(train_batch_size=tbs, gen_batch_size=1 if dapo else tbs,
                         max_inflight_gen_batches=int(fg.get("max_inflight_gen_batches", 1)) if dapo else 1)
            if dapo and after:  # without DAPO nothing is evicted, so a step cannot starve
                self._backfill_budget = after * int(tbs)
        elif dapo and after:
            log.info("backfill_after=%s is not applied by the async buffer (its refills also run between steps); "
                     "only the sync trainer backfills", after)
        self._verl_refill = refill_fn
        super().__init__(trainer_mode=trainer_mode, trainer_config=trainer_config,
                         max_off_policy_threshold=max_off_policy_threshold,
                         max_off_policy_strategy=max_off_policy_strategy, sampler_kwargs=sampler_kwargs,
                         refill_fn=self._refill if refill_fn is not None else None, **extra, **kwargs)
        self._harvested: set[str] = set()
        self._step: int | None = None  # the training step sample() is filling; None outside it
        self._refilled = 0  # prompts this step asked refill_fn for
        self._solve_all: dict[str, None] = {}  # this step's solve_all record ids, in the order seen
        self._starved_note = False

    def online_pool(self) -> OnlinePool:
        pool = _POOLS.get(self.online_log_dir)
        if pool is None:
            raise RuntimeError(f"no OnlineDataset pool for log_dir {self.online_log_dir}: set "
                               f"data.custom_cls.path={PKG} data.custom_cls.name=OnlineDataset and the same "
                               "data.online.log_dir")
        return pool

    def observe_groups(self, outcomes: Mapping[str, tuple[str, int, int]], step: int) -> None:
        """Feed groups to the pool in a stable order (record id, then outcome): uids are random."""
        groups = sorted(outcomes.values())
        self.online_pool().observe(step, groups)
        if self._step is not None:
            self._solve_all.update((rid, None) for rid, correct, n in groups if correct == n)

    def _refill(self, n: int) -> int:
        """verl's ``refill_fn`` with the backfill in front: past the step's budget, the prompts
        asked for are first composed from the step's solve_all prompts (the dataset serves them next)."""
        over = 0
        if self._backfill_budget and self._step is not None:
            over = min(n, max(0, self._refilled + n - self._backfill_budget))
        self._refilled += n
        if over:
            note = (f"step {self._step} starves: {self._refilled} refill prompt(s) asked for, {over} past its "
                    f"budget of {self._backfill_budget} (backfill_after={self.backfill_after} x train_batch_size "
                    f"{self.train_batch_size})")
            made = self.online_pool().backfill(self._step, self._solve_all, over, note=note)
            if len(made) < over and not self._starved_note:
                self._starved_note = True
                log.warning("step %s starves and its %d solve_all prompt(s) give only %d of %d backfill "
                            "composition(s); the rest are ordinary draws (verl's unbounded loop)",
                            self._step, len(self._solve_all), len(made), over)
        return self._verl_refill(n)

    def _harvest(self, step: int) -> None:
        present = set(self.prompt_global_steps["train"])
        self._harvested &= present
        new = self.finished_keys["train"] - self._harvested
        if not new:
            return
        keys = sorted(k for k in self.partitions["train"] if k.split("_")[0] in new)
        if keys:
            data = tq.kv_batch_get(keys=keys, partition_id="train", select_fields=["extra_info", "extra_fields"])
            self.observe_groups(group_outcomes(keys, list(data["extra_info"]), list(data["extra_fields"]),
                                               self.outcome_metric), step)
        self._harvested |= new

    def _terminal_eviction_reasons(self, global_steps, partition_id):
        # before DAPO evicts the solve_all / solve_none groups: they are the ones the rule needs
        if partition_id == "train":
            self._harvest(global_steps)
        return super()._terminal_eviction_reasons(global_steps, partition_id)

    def sample(self, global_steps: int, partition_id: str, batch_size: int):
        if partition_id != "train":
            return super().sample(global_steps, partition_id, batch_size)
        self._step, self._refilled, self._solve_all, self._starved_note = global_steps, 0, {}, False
        try:
            batch, metrics = super().sample(global_steps, partition_id, batch_size)
        finally:
            self._step = None
            self.online_pool().release_backfill()
        metrics.update(self.online_pool().metrics())
        metrics["online/refill_prompts"] = float(self._refilled)
        return batch, metrics


class OnlineReplayBuffer(_OnlineHarvest, ReplayBuffer):
    """verl's sync replay buffer (``trainer.v1.trainer_mode=sync``) feeding the online pool."""


class OnlineReplayBufferAsync(_OnlineHarvest, ReplayBufferAsync):
    """verl's async replay buffer (``colocate_async`` / ``separate_async``) feeding the online pool."""
