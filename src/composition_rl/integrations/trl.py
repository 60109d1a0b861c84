"""TRL: the reward function backed by the bounded verifier, and a ``GRPOTrainer`` with dynamic
sampling for your own TRL script.

``GRPOTrainer`` here is TRL's with dynamic sampling (Composition-RL, Equation 5), solve_all /
solve_none tracking and, optionally, the online composition pool
(:class:`composition_rl.jobs.train.trl_adapter.DynamicSamplingGRPOTrainer`; ``crl train`` uses the
same class). It loads TRL and torch when first used; :class:`DatasetSource`,
:class:`PoolSource` and :class:`PromptSource` choose where refill prompts come from, and
:class:`DynamicSamplingConfig` the rounds (docs/api.md has a complete script; the trainer
lines need your model and dataset, so they are shown, not run):

>>> from composition_rl.integrations.trl import GRPOTrainer, make_reward_fn
>>> GRPOTrainer(model, reward_funcs=[make_reward_fn()], train_dataset=ds,
...             args=GRPOConfig(...)).train()                               # doctest: +SKIP

TRL calls each reward function as ``f(prompts=..., completions=..., completion_ids=...,
**columns)``, where ``columns`` are the dataset's other columns repeated per completion
(plus ``trainer_state``, ``log_extra``, ``log_metric``), and expects one float (or ``None``)
per completion. Conversational completions are lists of ``{"role", "content"}`` messages.

>>> from composition_rl.integrations.trl import make_reward_fn
>>> reward = make_reward_fn()
>>> GRPOTrainer(model, reward_funcs=[reward], train_dataset=ds)  # doctest: +SKIP

The reward is :func:`composition_rl.grading.reward.score_completions`, the one function
behind ``crl train`` and verl's ``compute_score`` too: 1.0 when the completion's final answer
(the last assistant message of a conversation) equals any accepted answer of its row (the
``answers`` and ``answer`` columns that ``crl export --format trl`` writes), else 0.0.
``timeout`` and ``error`` score 0.0 and are logged (``verify/<outcome>`` fractions through
TRL's ``log_metric``), never raised. A row with no answer gets ``None`` (TRL then ignores
this reward for that row).

Importing this module does not import TRL or torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from composition_rl.grading import Verifier, VerifyConfig, shared_verifier, summarize
from composition_rl.grading.reward import (
    answers_from_columns,
    ascore_completions,
    completion_text,
    score_completions,
)
from composition_rl.jobs.train.config import DynamicSamplingConfig
from composition_rl.jobs.train.prompt_source import DatasetSource, PoolSource, PromptSource

__all__ = ["AsyncMathVerifyReward", "DatasetSource", "DynamicSamplingConfig", "GRPOTrainer", "MathVerifyReward",
           "PoolSource", "PromptSource", "completion_text", "make_reward_fn"]

if TYPE_CHECKING:  # pragma: no cover
    from composition_rl.jobs.train.trl_adapter import DynamicSamplingGRPOTrainer as GRPOTrainer


def __getattr__(name: str) -> Any:
    # the trainer subclasses TRL's: importing it imports TRL and torch, so only on first use
    if name == "GRPOTrainer":
        from composition_rl.jobs.train.trl_adapter import DynamicSamplingGRPOTrainer

        globals()[name] = DynamicSamplingGRPOTrainer
        return DynamicSamplingGRPOTrainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class MathVerifyReward:
    """Callable TRL reward: 1.0 when the completion's final answer matches an accepted answer.

    Picklable (it keeps the config, not the worker pool): each process uses its own
    :func:`~composition_rl.grading.shared_verifier`.

    Args:
        config: verifier settings (time bound, workers, fallbacks).
        answer_column: read the accepted answers from this column only; by default from
            ``answers`` and ``answer``, whichever the dataset has (both: every form of both).
        name: what TRL logs the reward as (``rewards/<name>/mean``).
        verifier: use this verifier instead of the shared one (tests, custom lifetimes).
    """

    def __init__(
        self,
        config: VerifyConfig | None = None,
        answer_column: str | None = None,
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
        """The verifier that scores completions: the one given, else the process's
        shared one for ``config`` (fetched again when it was closed)."""
        if self._verifier is None or self._verifier.closed:
            self._verifier = shared_verifier(self.config)
        return self._verifier

    def _golds(self, completions: Sequence[Any], kwargs: dict) -> list[tuple[str, ...]]:
        return answers_from_columns(kwargs, len(completions), self.answer_column)

    def _finish(self, verdicts: list, kwargs: dict) -> list[float | None]:
        results = [r for r in verdicts if r is not None]
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and results:
            for outcome, count in summarize(results).items():
                log_metric(f"verify/{outcome}", count / len(results))
        log_extra = kwargs.get("log_extra")
        if callable(log_extra):
            log_extra("verify_outcome", [None if r is None else r.outcome.value for r in verdicts])
        return [None if r is None else r.score for r in verdicts]

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        golds = self._golds(completions, kwargs)
        return self._finish(score_completions(completions, golds, self.verifier), kwargs)


class AsyncMathVerifyReward(MathVerifyReward):
    """The same reward as a coroutine: TRL awaits async reward functions on its event loop."""

    async def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        golds = self._golds(completions, kwargs)
        return self._finish(await ascore_completions(completions, golds, self.verifier), kwargs)


def make_reward_fn(
    config: VerifyConfig | None = None,
    answer_column: str | None = None,
    name: str = "math_verify",
    asynchronous: bool = False,
    verifier: Verifier | None = None,
) -> MathVerifyReward:
    """A TRL ``GRPOTrainer`` reward function; see :class:`MathVerifyReward`.

    ``asynchronous=True`` returns the coroutine version (TRL runs async reward functions
    concurrently with each other on its own event loop thread).

    Example:
        >>> reward = make_reward_fn()
        >>> reward(prompts=["..."], completions=[[{"role": "assistant", "content": r"so \\boxed{6630}"}]],
        ...        answers=[["6630.65", "6630"]])
        [1.0]
        >>> GRPOTrainer(model, reward_funcs=[reward], train_dataset=ds)  # doctest: +SKIP
    """
    cls = AsyncMathVerifyReward if asynchronous else MathVerifyReward
    return cls(config=config, answer_column=answer_column, name=name, verifier=verifier)
