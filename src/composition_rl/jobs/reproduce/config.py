"""Settings of ``crl reproduce``: one dataclass, each field documented once (the CLI reads it).

>>> ReproduceConfig().seeds, ReproduceConfig.quick().seeds
((0, 1, 2, 3, 4), (0,))
>>> ReproduceConfig(arm_steps=70, snapshot_every=20)
Traceback (most recent call last):
...
ValueError: arm_steps (70) and curve_every (20) must be multiples of snapshot_every (20), and arm_steps of curve_every: every arm is evaluated at step arm_steps and along its curve
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ARMS", "DEFAULT_ARMS", "ReproduceConfig"]

#: The arms of the Table 1 / Figure 3 comparison, all started from the depth-1 checkpoint:
#: (a) continue, (b) depth2, (c) curriculum, (d) mix, (f) skip (GRESO-style pre-rollout
#: skipping of stale prompts, no composition), and (e) ``online`` (per-prompt composition
#: during training), which runs only when asked for (``--arms ...,online``).
ARMS = ("continue", "depth2", "curriculum", "mix", "online", "skip")
DEFAULT_ARMS = ("continue", "depth2", "curriculum", "mix", "skip")


def _f(default: Any, help: str) -> Any:
    """A field with its help text (defaults are immutable: ints, floats, tuples)."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class ReproduceConfig:
    """What one reproduction runs. Defaults: the full 5-seed run (docs/science.md gives its time)."""

    seeds: tuple[int, ...] = _f((0, 1, 2, 3, 4), "seeds; each seeds data split, SFT, RL sampling and evaluation")
    sft_steps: int = _f(600, "SFT warm-up steps of each seed's tiny model")
    pool_size: int = _f(64, "depth-1 prompts in the RL pool")
    d1_steps: int = _f(60, "depth-1 GRPO steps before the arms split (Figure 2 left)")
    arm_steps: int = _f(100, "GRPO steps of every arm (the matched-steps comparison)")
    arms: tuple[str, ...] = _f(DEFAULT_ARMS, "arms to train: continue, depth2, curriculum, mix, skip, online "
                                             "(online is off by default)")
    snapshot_every: int = _f(10, "the continue arm saves a checkpoint every N steps (matched-compute picks)")
    curve_every: int = _f(20, "every arm is evaluated on the new-pairs depth-2 test every N steps (Fig. 3 curve)")
    max_continue_factor: float = _f(4.0, "the continue arm runs at most this many times arm_steps")
    profile_n: int = _f(8, "samples per prompt when profiling the depth-1 checkpoint (Figure 2 right)")
    profile_composed: int = _f(64, "composed prompts per depth profiled")
    eval_n: int = _f(4, "samples per test problem (avg@N)")
    test_composed: int = _f(64, "problems per test set (depth 1, and composed depth 2 and 3 of each kind)")
    train_probe: int = _f(256, "train-side problems outside the pool screened (greedy, on the depth-1 checkpoint) "
                               "for the new-pairs tests")
    eval_max_tokens: int = _f(128, "most new tokens per evaluation sample")
    workers: int = _f(2, "jobs run in parallel (one CPU thread each)")

    def __post_init__(self) -> None:
        bad = []
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            bad.append(f"seeds {self.seeds} must be distinct and at least one")
        unknown = sorted(set(self.arms) - set(ARMS))
        if unknown or "continue" not in self.arms:
            bad.append(f"arms {self.arms}: known {ARMS}, and 'continue' (the reference) is required")
        for name in ("sft_steps", "pool_size", "d1_steps", "arm_steps", "snapshot_every", "curve_every", "profile_n",
                     "profile_composed", "eval_n", "test_composed", "train_probe", "eval_max_tokens", "workers"):
            if getattr(self, name) < 1:
                bad.append(f"{name}={getattr(self, name)} must be >= 1")
        if self.max_continue_factor < 1:
            bad.append(f"max_continue_factor={self.max_continue_factor} must be >= 1")
        if bad:
            raise ValueError("; ".join(bad))
        if self.arm_steps % self.snapshot_every or self.curve_every % self.snapshot_every \
                or self.arm_steps % self.curve_every:
            raise ValueError(f"arm_steps ({self.arm_steps}) and curve_every ({self.curve_every}) must be multiples "
                             f"of snapshot_every ({self.snapshot_every}), and arm_steps of curve_every: every arm "
                             "is evaluated at step arm_steps and along its curve")

    @classmethod
    def quick(cls, **overrides: Any) -> ReproduceConfig:
        """One seed and shorter phases: the wiring and the direction of the effects, in minutes."""
        base = dict(seeds=(0,), d1_steps=30, arm_steps=30, curve_every=30, snapshot_every=10,
                    profile_composed=32, test_composed=32, train_probe=128, arms=("continue", "depth2", "skip"))
        return cls(**{**base, **overrides})

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict (``config.json`` of the run, checked on a rerun)."""
        return dataclasses.asdict(self)

    @classmethod
    def fields_help(cls) -> list[tuple[str, Any, str]]:
        """(name, default, help) of every field: what the command line is generated from."""
        return [(f.name, f.default, f.metadata["help"]) for f in dataclasses.fields(cls)]
