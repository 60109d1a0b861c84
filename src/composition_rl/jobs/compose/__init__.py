"""The compose job (``crl compose``): candidate pools, the resumable executor and the job's
config, around the engines of :mod:`composition_rl.spc`."""

from composition_rl.jobs.compose.pipeline import ComposeConfig, ComposeResult, compose_problems
from composition_rl.jobs.compose.run import run_compose

__all__ = ["ComposeConfig", "ComposeResult", "compose_problems", "run_compose"]
