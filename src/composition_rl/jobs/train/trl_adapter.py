"""The one place that touches TRL internals (written for the trl 1.16 series; CI runs 1.16.0).

:class:`DynamicSamplingGRPOTrainer` is TRL's ``GRPOTrainer`` with dynamic sampling
(Composition-RL, Equation 5: over-sample, keep only groups with ``0 < correct < G``, refill
until the batch is full, bounded), solve_all / solve_none tracking and, optionally, the online
composition pool. It serves a user's own TRL script (their dataset, their model, the reward of
:func:`composition_rl.integrations.trl.make_reward_fn`; public as
``composition_rl.integrations.trl.GRPOTrainer``) and ``crl train`` (jobs/train/grpo.py) alike: where
a round's prompts come from is a :class:`~composition_rl.jobs.train.prompt_source.PromptSource`.

TRL's ``GRPOTrainer`` has no public hook between "generate and score" and "train on the
batch", which is where dynamic sampling must sit. We override the non-public
``GRPOTrainer._generate_and_score_completions(inputs)``: our version calls TRL's own one
round by round on prompts drawn from the source, keeps the informative groups, and returns a
batch with exactly TRL's layout. Everything this relies on is asserted by
:func:`check_trl_compat`, which runs when the trainer is built and in
tests/test_train_adapter.py, so a TRL upgrade fails loudly instead of training wrongly:

- the installed version is of the series the adapter was written for (a patch release keeps
  the private method; a minor release may not);
- ``_generate_and_score_completions(self, inputs)`` exists and ``_prepare_inputs`` calls it
  once per generation batch;
- the batch dict holds only keys we know how to select and re-pad (prompt tensors padded
  on the left, completion tensors on the right, ``num_items_in_batch`` a scalar);
- ``GRPOTrainer.log`` reports the per-mode ``self._metrics`` lists, where our
  ``dynamic_sampling/*`` metrics go.

The step count still comes from TRL's dataloader. One process only (CPU or one GPU); for many
GPUs use the verl recipe.
"""

from __future__ import annotations

import inspect
import json
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import trl
from transformers import TrainerCallback
from trl import GRPOTrainer
from trl.trainer.utils import get_callable_name, is_async_callable

from composition_rl.jobs.train.config import DynamicSamplingConfig
from composition_rl.jobs.train.dynamic_sampling import DynamicSampler, StepSample
from composition_rl.jobs.train.prompt_source import DatasetSource, PoolSource, PromptSource

if TYPE_CHECKING:  # pragma: no cover
    from composition_rl.jobs.train.online import OnlinePool

__all__ = ["PINNED_TRL", "SOURCE_STATE", "TRL_SERIES", "DynamicSamplingGRPOTrainer", "assemble_batch",
           "check_trl_compat"]

SOURCE_STATE = "prompt_source.json"  # the prompt source's state, in each TRL checkpoint folder

PINNED_TRL = "1.16.0"  # what CI installs (constraints/ci.txt)
TRL_SERIES = "1.16"  # what the adapter accepts: pyproject's train extra asks for trl>=1.16,<1.17
LEFT_PADDED = {"prompt_ids": "pad", "prompt_mask": 0}
RIGHT_PADDED = {
    "completion_ids": "pad",
    "completion_mask": 0,
    "old_per_token_logps": 0.0,
    "sampling_per_token_logps": 0.0,
    "ref_per_token_logps": 0.0,
}
ROW_VECTORS = {"advantages"}
SCALARS = {"num_items_in_batch"}
KNOWN_KEYS = set(LEFT_PADDED) | set(RIGHT_PADDED) | ROW_VECTORS | SCALARS


class TRLCompatError(RuntimeError):
    """The installed TRL differs from the one the adapter was written and tested against."""


def check_trl_compat() -> None:
    """Raise :class:`TRLCompatError` if TRL no longer matches what the adapter overrides."""
    problems = []
    if trl.__version__.split(".")[:2] != TRL_SERIES.split("."):
        major, minor = TRL_SERIES.split(".")
        problems.append(f"trl=={trl.__version__} is installed; the adapter is written for trl {TRL_SERIES}.x "
                        f"(pip install 'trl>={TRL_SERIES},<{major}.{int(minor) + 1}')")
    fn = getattr(GRPOTrainer, "_generate_and_score_completions", None)
    if fn is None:
        problems.append("GRPOTrainer._generate_and_score_completions no longer exists")
    else:
        params = list(inspect.signature(fn).parameters)
        if params != ["self", "inputs"]:
            problems.append(f"_generate_and_score_completions takes {params}, expected ['self', 'inputs']")
    try:
        src = inspect.getsource(GRPOTrainer._prepare_inputs)
    except (OSError, TypeError, AttributeError):
        src = ""
    if "self._generate_and_score_completions(generation_batch)" not in src:
        problems.append("_prepare_inputs no longer calls _generate_and_score_completions(generation_batch)")
    if "split_tensor_dict(generation_batch, self.args.steps_per_generation)" not in src:
        problems.append("_prepare_inputs no longer splits the generation batch by steps_per_generation")
    try:
        log_src = inspect.getsource(GRPOTrainer.log)
    except (OSError, TypeError, AttributeError):
        log_src = ""
    if "self._metrics[mode].items()" not in log_src:
        problems.append("GRPOTrainer.log no longer reports self._metrics[mode] (where the dynamic_sampling/* "
                        "metrics are put)")
    if problems:
        raise TRLCompatError("; ".join(problems) + ". Update composition_rl/jobs/train/trl_adapter.py.")


def check_batch_keys(batch: dict[str, Any]) -> None:
    """Refuse a TRL batch with a non-``None`` key outside ``KNOWN_KEYS`` (raises
    :class:`TRLCompatError`): dynamic sampling could not filter it by group."""
    unknown = sorted(k for k, v in batch.items() if v is not None and k not in KNOWN_KEYS)
    if unknown:
        raise TRLCompatError(
            f"TRL returned batch keys {unknown} that dynamic sampling does not know how to filter "
            f"(known: {sorted(KNOWN_KEYS)}); multimodal and tool batches are not supported."
        )


def _pad_cat(tensors: list[torch.Tensor], value: float | int, left: bool) -> torch.Tensor:
    width = max(t.shape[1] for t in tensors)
    out = []
    for t in tensors:
        extra = width - t.shape[1]
        if extra:
            pad = t.new_full((t.shape[0], extra), value)
            t = torch.cat([pad, t] if left else [t, pad], dim=1)
        out.append(t)
    return torch.cat(out, dim=0)


def assemble_batch(parts: list[tuple[dict[str, Any], list[int]]], num_generations: int, pad_token_id: int,
                   fillers: list[tuple[int, int]] | None = None) -> dict[str, Any]:
    """Concatenate the chosen groups of several TRL round batches into one TRL batch.

    Args:
        parts: (round batch, indices of the groups to keep in it), in round order.
        num_generations: rows per group (G); group g owns rows ``g*G .. g*G+G-1``.
        pad_token_id: padding for the id tensors (masks pad with 0, log-probs with 0.0).
        fillers: (part index, group index) of the groups that only fill a batch whose
            rounds ran out (:attr:`StepSample.fillers`). Those whose advantages are all zero
            keep their rows (TRL's shapes) but get an all-zero ``completion_mask``: they
            carry no gradient, and their tokens must not count in ``num_items_in_batch``,
            the token-mean's denominator (TRL's ``dapo`` loss), nor add a KL term. A filler
            with an advantage (outside a ``band`` but not zero-variance) is trained on.
    """
    fill = set(fillers or ())
    selected: list[dict[str, Any]] = []
    for p, (batch, groups) in enumerate(parts):
        if not groups:
            continue
        rows = torch.tensor([g * num_generations + j for g in groups for j in range(num_generations)], dtype=torch.long)
        chosen = {k: v.index_select(0, rows.to(v.device)) for k, v in batch.items()
                  if v is not None and k not in SCALARS}
        for k, g in enumerate(groups):
            span = slice(k * num_generations, (k + 1) * num_generations)
            if (p, g) in fill and not chosen["advantages"][span].any():
                chosen["completion_mask"] = chosen["completion_mask"].clone()
                chosen["completion_mask"][span] = 0
        selected.append(chosen)
    if not selected:
        raise ValueError("no groups selected")
    out: dict[str, Any] = {}
    for key in selected[0]:
        ts = [s[key] for s in selected]
        if key in LEFT_PADDED or key in RIGHT_PADDED:
            value = LEFT_PADDED.get(key, RIGHT_PADDED.get(key))
            out[key] = _pad_cat(ts, pad_token_id if value == "pad" else value, left=key in LEFT_PADDED)
        else:
            out[key] = torch.cat(ts, dim=0)
    # The token-level loss (Equation 3) normalises by the tokens actually trained on
    # (a zero-advantage filler's were masked out above).
    out["num_items_in_batch"] = out["completion_mask"].sum()
    return out


class _Recorded:
    """The reward function that decides correctness, remembering its last scores and time.

    TRL calls it as it would the function itself (same name, same arguments, same return).
    """

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        self.__name__ = get_callable_name(fn)
        self.scores: list[float] = []
        self.seconds = 0.0

    def _keep(self, out, t0: float):
        self.seconds = time.perf_counter() - t0
        # no score (None, NaN) is not a correct answer
        self.scores = [0.0 if r is None or r != r else float(r) for r in out]
        return out

    def __call__(self, *args, **kwargs):
        t0 = time.perf_counter()
        return self._keep(self.fn(*args, **kwargs), t0)


class _RecordedAsync(_Recorded):
    async def __call__(self, *args, **kwargs):
        t0 = time.perf_counter()
        return self._keep(await self.fn(*args, **kwargs), t0)


class _SaveSource(TrainerCallback):
    """Writes the prompt source's state into each checkpoint folder TRL saves."""

    def __init__(self, trainer: DynamicSamplingGRPOTrainer) -> None:
        self.trainer = trainer

    def on_save(self, args, state, control, **kw):
        src = self.trainer.prompt_source.state_dict()
        folder = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        if src is not None and os.path.isdir(folder):
            from composition_rl.io.files import atomic_write_json

            atomic_write_json(os.path.join(folder, SOURCE_STATE), src)


class DynamicSamplingGRPOTrainer(GRPOTrainer):
    """TRL's ``GRPOTrainer`` with dynamic sampling (Composition-RL, Equation 5).

    Each step, the groups of ``G`` completions whose prompts were all solved (solve_all) or
    all failed (solve_none) carry no advantage; they are dropped and more prompts are drawn,
    generated and scored until the batch holds ``B`` informative groups (``0 < correct < G``)
    or ``dynamic_sampling.max_rounds`` rounds have run (then the batch is topped up with the
    latest dropped groups, kept out of the loss, and ``bound_hit`` is logged). The trained
    batch has TRL's usual size, so everything else (loss, optimiser, logging, checkpoints)
    is TRL's.

    Use it where you would use ``trl.GRPOTrainer``; the positional arguments and every other
    keyword are TRL's::

        trainer = GRPOTrainer(model, reward_funcs=[make_reward_fn()], args=GRPOConfig(...),
                              train_dataset=dataset)   # prompt + answer columns

    Args:
        reward_funcs: as TRL's; the one at ``solve_reward`` decides which completions are
            correct (score 1.0; ``None`` counts as wrong).
        dynamic_sampling: over-sampling factor, round bound and optional pass-rate band
            (:class:`~composition_rl.jobs.train.config.DynamicSamplingConfig`; default: on,
            ``oversample=1``, ``max_rounds=4``).
        prompt_source: where each round's prompts come from (a
            :class:`~composition_rl.jobs.train.prompt_source.PromptSource`). Default: the batch
            TRL's dataloader gave, then refills drawn further from ``train_dataset`` in a
            seeded order (:class:`~composition_rl.jobs.train.prompt_source.DatasetSource`).
        online: an :class:`~composition_rl.jobs.train.online.OnlinePool`: draw every round from it and
            let it see each round's outcomes, so prompts the policy has mastered are retired
            and replaced by compositions of them (a shorthand for
            ``prompt_source=PoolSource(online)``).
        solve_reward: index of the reward function that decides correctness.

    Logged with TRL's metrics at each logging step (averaged over the steps since the last):

    - ``dynamic_sampling/rounds``: generation rounds of the step (1 when nothing was refilled);
    - ``dynamic_sampling/solve_all``, ``/solve_none``, ``/informative``: the shares of every
      group sampled in the step, before filtering (Figure 2, left, of the paper);
    - ``dynamic_sampling/refilled``: trained groups that a refill round (not the first) gave and
      that were kept on their merit (not as fillers of a bound hit);
    - ``dynamic_sampling/bound_hit`` (0 or 1) and ``/filled``: the round bound was reached and
      this many uninformative groups filled the batch;
    - ``dynamic_sampling/generated``: completions generated in the step (TRL's own
      ``reward`` and ``completions/*`` metrics average over every round);
    - the source's own metrics (``online/*`` from an online pool).

    After each step :attr:`last_sample` holds the step's
    :class:`~composition_rl.jobs.train.dynamic_sampling.StepSample` (every group with its pass
    rate, kind and round), :attr:`last_gen_seconds` the time spent generating and scoring, of
    which :attr:`last_reward_seconds` in the correctness reward. The prompt source's state is
    saved in each checkpoint (``prompt_source.json``) and restored by
    ``train(resume_from_checkpoint=...)``.

    Raises:
        TRLCompatError: the installed TRL is not the one this class was written for.
        ValueError: several processes, ``num_iterations != 1``, ``steps_per_generation`` other
            than ``gradient_accumulation_steps``, both ``prompt_source`` and ``online``, or no
            dataset to refill from.
    """

    def __init__(self, model, reward_funcs=None, args=None, train_dataset=None, *,
                 dynamic_sampling: DynamicSamplingConfig | None = None,
                 prompt_source: PromptSource | None = None, online: OnlinePool | None = None,
                 solve_reward: int = 0,
                 **kwargs) -> None:
        check_trl_compat()
        funcs = list(reward_funcs) if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
        if not 0 <= solve_reward < len(funcs) or funcs[solve_reward] is None:
            raise ValueError(f"solve_reward={solve_reward}: dynamic sampling needs a reward function at that index "
                             f"of reward_funcs (it has {len(funcs)})")
        fn = funcs[solve_reward]
        if isinstance(fn, (str, torch.nn.Module)) or not callable(fn):
            raise ValueError(f"reward_funcs[{solve_reward}] is {type(fn).__name__}: dynamic sampling needs a reward "
                             "function whose 1.0 means correct (make_reward_fn()), not a reward model")
        funcs[solve_reward] = (_RecordedAsync if is_async_callable(fn) else _Recorded)(fn)
        if prompt_source is not None and online is not None:
            raise ValueError("give prompt_source or online, not both (online=pool is prompt_source=PoolSource(pool))")
        dynamic_sampling = dynamic_sampling if dynamic_sampling is not None else DynamicSamplingConfig()
        dynamic_sampling.validate()  # before the model loads
        super().__init__(model, funcs, args, train_dataset, **kwargs)
        if self.accelerator.num_processes != 1:
            raise ValueError("dynamic sampling on TRL runs in one process; use `crl verl-recipe` for many GPUs")
        if self.args.num_iterations != 1 or self.args.steps_per_generation != self.args.gradient_accumulation_steps:
            raise ValueError(f"dynamic sampling needs num_iterations=1 and steps_per_generation="
                             f"gradient_accumulation_steps; got num_iterations={self.args.num_iterations}, "
                             f"steps_per_generation={self.args.steps_per_generation}, gradient_accumulation_steps="
                             f"{self.args.gradient_accumulation_steps}")
        if online is not None:
            prompt_source = PoolSource(online)
        if prompt_source is None:
            if self.train_dataset is None or not hasattr(self.train_dataset, "__len__"):
                raise ValueError("dynamic sampling refills from train_dataset, which must be a map-style dataset "
                                 "(not an IterableDataset); or give a prompt_source")
            prompt_source = DatasetSource(self.train_dataset, seed=self.args.seed)
        self.dynamic_sampling = dynamic_sampling
        self.prompt_source = prompt_source
        self._solve = funcs[solve_reward]
        self.last_sample: StepSample | None = None
        self.last_gen_seconds = 0.0
        self.last_reward_seconds = 0.0
        self.add_callback(_SaveSource(self))

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs):
        """TRL's ``train``; resuming from a checkpoint also restores the prompt source's state."""
        ckpt = resume_from_checkpoint
        if ckpt is True:
            from transformers.trainer_utils import get_last_checkpoint

            ckpt = get_last_checkpoint(self.args.output_dir)
        if isinstance(ckpt, (str, os.PathLike)) and os.path.isfile(os.path.join(ckpt, SOURCE_STATE)):
            with open(os.path.join(ckpt, SOURCE_STATE), encoding="utf-8") as f:
                self.prompt_source.load_state_dict(json.load(f))
        return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)

    def _generate_and_score_completions(self, inputs):
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        G = self.num_generations
        need = len(inputs) // G
        base = super()._generate_and_score_completions
        reward_seconds = 0.0
        step = self.state.global_step + 1

        def generate(rows: list[dict]) -> tuple[dict[str, Any], list[float], list[int]]:
            nonlocal reward_seconds
            batch = base(rows)
            reward_seconds += self._solve.seconds
            check_batch_keys(batch)
            lengths = batch["completion_mask"].sum(dim=1).tolist()
            return batch, list(self._solve.scores), lengths

        t0 = time.perf_counter()
        # TRL's sampler repeats each prompt G times in a row: one row per group
        self.prompt_source.start_step([dict(r) for r in inputs[::G]])
        sampler = DynamicSampler(self.dynamic_sampling, G,
                                 on_round=lambda groups: self.prompt_source.observe(step, groups))
        sample = sampler.sample(need, self.prompt_source.draw, generate)
        batch = assemble_batch(sample.parts, G, self.processing_class.pad_token_id, fillers=sample.fillers)
        if batch["completion_ids"].shape[0] != len(inputs):
            raise RuntimeError(f"assembled {batch['completion_ids'].shape[0]} rows, TRL expects {len(inputs)}")
        self.last_sample = sample
        self.last_gen_seconds = time.perf_counter() - t0
        self.last_reward_seconds = reward_seconds
        self._log_sample(sample)
        return batch

    def _log_sample(self, sample: StepSample) -> None:
        for key, value in {**sample.metrics(), **self.prompt_source.metrics()}.items():
            self._metrics["train"][key].append(float(value))
