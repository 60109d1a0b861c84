"""A TRL ``GRPOTrainer`` reward function backed by the bounded verifier.

TRL calls each reward function as ``f(prompts=..., completions=..., completion_ids=...,
**columns)``, where ``columns`` are the dataset's other columns repeated per completion
(plus ``trainer_state``, ``log_extra``, ``log_metric``), and expects one float (or ``None``)
per completion. Conversational completions are lists of ``{"role", "content"}`` messages.

>>> from composition_rl.integrations.trl import make_reward_fn
>>> reward = make_reward_fn()                                   # doctest: +SKIP
>>> GRPOTrainer(model, reward_funcs=[reward], train_dataset=ds)  # doctest: +SKIP

The reward is 1.0 only for outcome ``correct``; ``timeout`` and ``error`` score 0.0 and are
logged (``verify/<outcome>`` fractions through TRL's ``log_metric``), never raised. A row
whose answer is ``None`` gets ``None`` (TRL then ignores this reward for that row).

Importing this module does not import TRL or torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from composition_rl.verify import Verifier, VerifyConfig, shared_verifier, summarize

__all__ = ["MathVerifyReward", "AsyncMathVerifyReward", "completion_text", "make_reward_fn"]


def completion_text(completion: Any) -> str:
    """The text of one TRL completion: a string, or the last assistant message's content.

    >>> completion_text([{"role": "assistant", "content": "x = 2"}])
    'x = 2'
    >>> completion_text([{"role": "assistant", "content": [{"type": "text", "text": "so 3"}]}])
    'so 3'
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if isinstance(completion, Sequence):
        msgs = [m for m in completion if isinstance(m, dict)]
        chosen = [m for m in msgs if m.get("role", "assistant") == "assistant"] or msgs
        if not chosen:
            return ""
        content = chosen[-1].get("content", "")
        if isinstance(content, str):
            return content
        if isinstance(content, Sequence):  # multimodal parts
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return "" if content is None else str(content)
    raise TypeError(f"cannot read a completion of type {type(completion).__name__}")


class MathVerifyReward:
    """Callable TRL reward: 1.0 when the completion's final answer matches the ``answer`` column.

    Picklable (it keeps the config, not the worker pool): each process uses its own
    :func:`~composition_rl.verify.shared_verifier`.

    Args:
        config: verifier settings (time bound, workers, fallbacks).
        answer_column: the dataset column holding the gold answer(s).
        name: what TRL logs the reward as (``rewards/<name>/mean``).
        verifier: use this verifier instead of the shared one (tests, custom lifetimes).
    """

    def __init__(
        self,
        config: VerifyConfig | None = None,
        answer_column: str = "answer",
        name: str = "math_verify",
        verifier: Verifier | None = None,
    ) -> None:
        self.config = config or VerifyConfig()
        self.answer_column = answer_column
        self.__name__ = name
        self._verifier = verifier

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_verifier"] = None
        return state

    @property
    def verifier(self) -> Verifier:
        if self._verifier is None or self._verifier.closed:
            self._verifier = shared_verifier(self.config)
        return self._verifier

    def _pairs(self, completions: Sequence[Any], kwargs: dict) -> tuple[list, list[int]]:
        if self.answer_column not in kwargs:
            known = sorted(k for k in kwargs if k not in ("trainer_state", "log_extra", "log_metric"))
            raise ValueError(
                f"reward {self.__name__!r} needs the dataset column {self.answer_column!r}; "
                f"the columns passed were {known}"
            )
        answers = kwargs[self.answer_column]
        if len(answers) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(answers)} answers")
        keep = [i for i, a in enumerate(answers) if a is not None]
        return [(completion_text(completions[i]), answers[i]) for i in keep], keep

    def _finish(self, n: int, keep: list[int], results: list, kwargs: dict) -> list[float | None]:
        out: list[float | None] = [None] * n
        for i, r in zip(keep, results):
            out[i] = r.score
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and results:
            for outcome, count in summarize(results).items():
                log_metric(f"verify/{outcome}", count / len(results))
        log_extra = kwargs.get("log_extra")
        if callable(log_extra):
            outcomes: list[str | None] = [None] * n
            for i, r in zip(keep, results):
                outcomes[i] = r.outcome.value
            log_extra("verify_outcome", outcomes)
        return out

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        pairs, keep = self._pairs(completions, kwargs)
        results = self.verifier.score_batch(pairs)
        return self._finish(len(completions), keep, results, kwargs)


class AsyncMathVerifyReward(MathVerifyReward):
    """The same reward as a coroutine: TRL awaits async reward functions on its event loop."""

    async def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        pairs, keep = self._pairs(completions, kwargs)
        results = await self.verifier.ascore_batch(pairs)
        return self._finish(len(completions), keep, results, kwargs)


def make_reward_fn(
    config: VerifyConfig | None = None,
    answer_column: str = "answer",
    name: str = "math_verify",
    asynchronous: bool = False,
    verifier: Verifier | None = None,
) -> MathVerifyReward:
    """A TRL reward function reading ``answer_column``; see :class:`MathVerifyReward`.

    ``asynchronous=True`` returns the coroutine version (TRL runs async reward functions
    concurrently with each other on its own event loop thread).
    """
    cls = AsyncMathVerifyReward if asynchronous else MathVerifyReward
    return cls(config=config, answer_column=answer_column, name=name, verifier=verifier)
