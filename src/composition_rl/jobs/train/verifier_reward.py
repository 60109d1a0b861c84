"""The trainer's reward: the project's one reward function, with the last verdicts kept.

TRL calls a reward function with ``prompts``, ``completions`` and every dataset column as
keyword lists. :class:`VerifierReward` grades each completion with
:func:`composition_rl.grading.reward.score_completions`, the function TRL's
:func:`~composition_rl.integrations.trl.make_reward_fn` and verl's
:func:`~composition_rl.integrations.verl.compute_score` also call, against every accepted
answer of its row (the ``answers`` and ``answer`` columns), and remembers the scores and
outcomes of the call, which the dynamic sampler reads to classify groups.
"""

from __future__ import annotations

import time
from typing import Any

from composition_rl.grading import VerifyConfig, shared_verifier
from composition_rl.grading.reward import answers_from_columns, completion_text, score_completions

__all__ = ["VerifierReward", "completion_text"]


class VerifierReward:
    """A TRL reward function backed by :class:`composition_rl.grading.Verifier`.

    Raises ``ValueError`` when the completions and the answer columns differ in length, or
    when a row has no accepted answer (every ``crl train`` row has one; the dynamic sampler
    needs a number for each completion).

    >>> r = VerifierReward(timeout_s=2.0)
    >>> r(prompts=["1+1=?"], completions=["\\\\boxed{2}"], answers=[["2"]])
    [1.0]
    """

    __name__ = "verifier"  # TRL names reward columns after the function

    def __init__(self, timeout_s: float = 5.0, workers: int | None = 1, config: VerifyConfig | None = None) -> None:
        self.config = config if config is not None else VerifyConfig(timeout_s=timeout_s, workers=workers)
        self.last_scores: list[float] = []
        self.last_outcomes: list[str] = []
        self.last_seconds = 0.0  # wall time of the last call, so a step can tell scoring from generating

    def __call__(self, prompts, completions, **columns: Any) -> list[float]:
        golds = answers_from_columns(columns, len(completions))
        missing = [i for i, g in enumerate(golds) if not g]
        if missing:
            raise ValueError(f"rows {missing[:5]} have no accepted answer in 'answers' or 'answer'")
        t0 = time.perf_counter()
        results = score_completions(completions, golds, shared_verifier(self.config))
        self.last_seconds = time.perf_counter() - t0
        self.last_scores = [float(r.score) for r in results]
        self.last_outcomes = [r.outcome.value for r in results]
        return list(self.last_scores)
