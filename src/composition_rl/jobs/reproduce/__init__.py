"""``crl reproduce``: the Composition-RL paper's mechanism (Figure 2, Table 1 / Figure 3) at toy scale on CPU.

A tiny Qwen2 policy learns reasoning-gym arithmetic; GRPO on a depth-1 pool drives its
solve_all up; the same checkpoint meets compositions of that pool; four arms continue from
it (depth 1, composed depth 2, the automatic curriculum, a mix) and are evaluated on held-out
depth-1/2/3 sets, per seed, with 95% intervals across seeds and a matched-compute view.

>>> from composition_rl.jobs.reproduce import ReproduceConfig, run_reproduce
>>> ReproduceConfig.quick().arms
('continue', 'depth2', 'skip')

The run itself trains for minutes, so it is shown, not run, here (tests/test_reproduce_smoke.py runs it):

>>> run_reproduce(ReproduceConfig.quick(), "runs/repro")                  # doctest: +SKIP
"""

from composition_rl.jobs.reproduce.config import ARMS, ReproduceConfig
from composition_rl.jobs.reproduce.run import run_reproduce

__all__ = ["ARMS", "ReproduceConfig", "run_reproduce"]
