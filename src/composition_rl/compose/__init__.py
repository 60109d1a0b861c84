"""Sequential Prompt Composition: engines, pools, checks and the pipeline."""

from composition_rl.compose import symbolic as _symbolic  # noqa: F401  (registers the engine)
from composition_rl.compose.base import COMPOSERS, Rejection
from composition_rl.compose.pipeline import ComposeConfig, ComposeResult, compose_problems
from composition_rl.compose.run import run_compose

__all__ = ["COMPOSERS", "ComposeConfig", "ComposeResult", "Rejection", "compose_problems", "run_compose"]
