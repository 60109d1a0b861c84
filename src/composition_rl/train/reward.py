"""The trainer's reward: the project's bounded verifier, with the last scores kept.

TRL calls a reward function with ``prompts``, ``completions`` and every dataset column as
keyword lists. :class:`VerifierReward` scores each completion against all accepted answer
forms of its row (``answers``; ``answer`` when that is all there is) and remembers the
scores and outcomes of the call, which the dynamic sampler reads to classify groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from composition_rl.verify import VerifyConfig, shared_verifier

__all__ = ["VerifierReward", "completion_text"]


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string, or the last message of a conversation."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], dict):
        content = completion[-1].get("content", "")
        return content if isinstance(content, str) else str(content)
    return ""


class VerifierReward:
    """A TRL reward function backed by :class:`composition_rl.verify.Verifier`.

    >>> r = VerifierReward(timeout_s=2.0)                                # doctest: +SKIP
    >>> r(prompts=["1+1=?"], completions=["\\\\boxed{2}"], answers=[["2"]])  # doctest: +SKIP
    [1.0]
    """

    __name__ = "verifier"  # TRL names reward columns after the function

    def __init__(self, timeout_s: float = 5.0, workers: int | None = 1) -> None:
        self.config = VerifyConfig(timeout_s=timeout_s, workers=workers)
        self.last_scores: list[float] = []
        self.last_outcomes: list[str] = []

    def __call__(self, prompts, completions, answers=None, answer=None, **_: Any) -> list[float]:
        golds = answers if answers is not None else answer
        if golds is None:
            raise ValueError("the dataset needs an 'answers' or 'answer' column for the verifier reward")
        pairs = [(completion_text(c), list(g) if not isinstance(g, str) else g) for c, g in zip(completions, golds)]
        results = shared_verifier(self.config).score_batch(pairs)
        self.last_scores = [float(r.score) for r in results]
        self.last_outcomes = [r.outcome.value for r in results]
        return list(self.last_scores)
