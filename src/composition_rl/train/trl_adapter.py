"""The one place that touches TRL internals (written for the trl 1.16 series; CI runs 1.16.0).

TRL's ``GRPOTrainer`` has no public hook between "generate and score" and "train on the
batch", which is where dynamic sampling must sit. We override the non-public
``GRPOTrainer._generate_and_score_completions(inputs)``: our version calls TRL's own one
round by round on prompts drawn from the curriculum, keeps the informative groups, and
returns a batch with exactly TRL's layout. Everything this relies on is asserted by
:func:`check_trl_compat`, which runs when the trainer is built and in
tests/test_train_adapter.py, so a TRL upgrade fails loudly instead of training wrongly:

- the installed version is of the series the adapter was written for (a patch release keeps
  the private method; a minor release may not);
- ``_generate_and_score_completions(self, inputs)`` exists and ``_prepare_inputs`` calls it
  once per generation batch;
- the batch dict holds only keys we know how to select and re-pad (prompt tensors padded
  on the left, completion tensors on the right, ``num_items_in_batch`` a scalar).

Prompts from TRL's dataloader are ignored (the step count still comes from it): the prompts
come from the current curriculum stage, so a stage switch takes effect at the next step
without rebuilding TRL's dataloader. One process only (CPU or one GPU); for many GPUs use
the verl recipe.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

import torch
import trl
from trl import GRPOTrainer

from composition_rl.train.dynamic_sampling import DynamicSampler, StepSample
from composition_rl.train.reward import VerifierReward

__all__ = ["PINNED_TRL", "TRL_SERIES", "DynamicSamplingGRPOTrainer", "assemble_batch", "check_trl_compat"]

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
    if problems:
        raise TRLCompatError("; ".join(problems) + ". Update composition_rl/train/trl_adapter.py.")


def check_batch_keys(batch: dict[str, Any]) -> None:
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


class DynamicSamplingGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose training batches come from a :class:`DynamicSampler`.

    Args:
        crl_sampler: decides which groups are trained on.
        crl_draw: ``n -> n`` prompt rows of the current curriculum stage.
        crl_reward: the verifier reward; its last scores classify the groups.
        Everything else goes to ``GRPOTrainer``.

    After each step, :attr:`crl_last` holds the :class:`StepSample` of that step and
    :attr:`crl_gen_seconds` the time spent generating and scoring it, of which
    :attr:`crl_reward_seconds` scoring.
    """

    def __init__(self, *args, crl_sampler: DynamicSampler, crl_draw: Callable[[int], list[dict]],
                 crl_reward: VerifierReward, **kwargs) -> None:
        check_trl_compat()
        super().__init__(*args, reward_funcs=[crl_reward], **kwargs)
        if self.accelerator.num_processes != 1:
            raise ValueError("dynamic sampling on TRL runs in one process; use `crl verl-recipe` for many GPUs")
        if self.args.num_iterations != 1 or self.args.steps_per_generation != self.args.gradient_accumulation_steps:
            raise ValueError("dynamic sampling needs num_iterations=1 and steps_per_generation=gradient_accumulation_steps")
        self.crl_sampler = crl_sampler
        self.crl_draw = crl_draw
        self.crl_reward = crl_reward
        self.crl_last: StepSample | None = None
        self.crl_gen_seconds = 0.0
        self.crl_reward_seconds = 0.0

    def _generate_and_score_completions(self, inputs):
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        G = self.num_generations
        need = len(inputs) // G
        base = super()._generate_and_score_completions
        reward_seconds = 0.0

        def generate(rows: list[dict]) -> tuple[dict[str, Any], list[float], list[int]]:
            nonlocal reward_seconds
            batch = base(rows)
            reward_seconds += self.crl_reward.last_seconds
            check_batch_keys(batch)
            scores = list(self.crl_reward.last_scores)
            lengths = batch["completion_mask"].sum(dim=1).tolist()
            return batch, scores, lengths

        t0 = time.perf_counter()
        sample = self.crl_sampler.sample(need, self.crl_draw, generate)
        batch = assemble_batch(sample.parts, G, self.processing_class.pad_token_id, fillers=sample.fillers)
        if batch["completion_ids"].shape[0] != len(inputs):
            raise RuntimeError(f"assembled {batch['completion_ids'].shape[0]} rows, TRL expects {len(inputs)}")
        self.crl_last = sample
        self.crl_gen_seconds = time.perf_counter() - t0
        self.crl_reward_seconds = reward_seconds
        return batch
