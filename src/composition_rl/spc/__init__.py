"""Sequential Prompt Composition: the engines that compose one chain and the checks it must pass.

Running an engine over a dataset (pools, the resumable executor, the job's config) is the
compose job, :mod:`composition_rl.jobs.compose`.
"""

from composition_rl.spc import symbolic as _symbolic  # noqa: F401  (registers the engine)
from composition_rl.spc.base import COMPOSERS, Rejection

__all__ = ["COMPOSERS", "Rejection"]
