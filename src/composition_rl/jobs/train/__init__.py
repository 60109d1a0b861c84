"""Training: GRPO with dynamic sampling and a depth curriculum (TRL), and the tiny model.

Importing this package is light; torch, transformers and TRL load when a function runs.

>>> from composition_rl.jobs.train import TrainConfig, run_training, build_tiny_model
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from composition_rl.jobs.train.config import TrainConfig, load_config
from composition_rl.jobs.train.curriculum import Curriculum, StageSpec

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

__all__ = ["Curriculum", "StageSpec", "TinyModelConfig", "TrainConfig", "build_tiny_model", "load_config",
           "run_training"]


def run_training(config, resume="auto", **options) -> Path:
    """Train; see :func:`composition_rl.jobs.train.grpo.run_training` (``log``, ``branch_from``)."""
    from composition_rl.jobs.train.grpo import run_training as _run

    return _run(config, resume=resume, **options)


def build_tiny_model(out_dir, config=None, progress: bool = True, log=None, task=None) -> Path:
    """Build the tiny Qwen2; see :func:`composition_rl.jobs.tiny_model.build_tiny_model`."""
    from composition_rl.jobs.tiny_model import build_tiny_model as _build

    return _build(out_dir, config, progress=progress, log=log, task=task)


def __getattr__(name: str):
    if name == "TinyModelConfig":
        from composition_rl.jobs.tiny_model import TinyModelConfig

        return TinyModelConfig
    raise AttributeError(name)
