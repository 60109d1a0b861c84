"""verl custom reward: ``compute_score(data_source, solution_str, ground_truth, extra_info=None)``.

Point verl at this file::

    custom_reward_function.path=<site-packages>/composition_rl/integrations/verl.py
    custom_reward_function.name=compute_score            # or compute_score_async
    +custom_reward_function.reward_kwargs.timeout_s=2.0  # optional: workers=, fallbacks=

It returns ``{"score", "acc", "pred", "outcome"}`` with the same keys on every call (verl
collects each key into ``reward_extra_info`` per sample). ``acc`` is 1.0/0.0, so DAPO's
dynamic sampling can filter on it: ``algorithm.filter_groups.enable=True
algorithm.filter_groups.metric=acc`` keeps the groups with 0 < mean acc < 1 (Eq. 5).

verl calls a synchronous ``compute_score`` from a thread pool (its reward loop runs it in
an executor) and awaits a coroutine one; both are bounded by the verifier's worker pool,
never by ``signal.alarm``. Each verl reward process gets one shared verifier per settings.

The reward is :func:`composition_rl.grading.reward.score_completions`, the one function behind
``crl train`` and the TRL reward too, against every accepted answer of the row:
``ground_truth`` (a string, a number, or a list/array of forms) and ``extra_info["answers"]``.
verl's reward managers pass the row's ``extra_info`` whole, so the forms ``crl export
--format verl`` writes there arrive. ``ground_truth`` itself stays one string, the canonical
answer, because verl's own scorers (``default_compute_score``) and its validation logs read
it as one.
"""

from __future__ import annotations

from typing import Any

from composition_rl.grading import VerifyConfig, VerifyResult, shared_verifier
from composition_rl.grading.reward import accepted_answers, ascore_completions, score_completions

__all__ = ["compute_score", "compute_score_async"]


def _config(timeout_s: float | None, workers: int | None, fallbacks: Any) -> VerifyConfig:
    kw: dict[str, Any] = {}
    if timeout_s is not None:
        kw["timeout_s"] = float(timeout_s)
    if workers is not None:
        kw["workers"] = int(workers)
    if fallbacks is not None:
        kw["fallbacks"] = tuple(fallbacks) if not isinstance(fallbacks, str) else (fallbacks,)
    return VerifyConfig(**kw)


def _golds(ground_truth: Any, extra_info: Any) -> tuple[str, ...]:
    more = extra_info.get("answers") if isinstance(extra_info, dict) else None
    golds = accepted_answers(ground_truth, more)
    if not golds:
        raise ValueError(f"no accepted answer for this row: ground_truth={ground_truth!r}, "
                         f"extra_info answers={more!r}")
    return golds


def _as_dict(r: VerifyResult) -> dict[str, Any]:
    return {
        "score": r.score,
        "acc": 1.0 if r.correct else 0.0,
        "pred": r.extracted or "",  # a string always: verl votes on "pred" for maj@k
        "outcome": r.outcome.value,
    }


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    timeout_s: float | None = None,
    workers: int | None = None,
    fallbacks: Any = None,
    **_: Any,
) -> dict[str, Any]:
    """Score one verl rollout with the bounded verifier.

    Args:
        data_source: the dataset name (unused: every source is checked the same way).
        solution_str: the decoded response.
        ground_truth: ``reward_model.ground_truth`` of the row (str, number, or list of forms).
        extra_info: the row's ``extra_info``; its ``answers`` are accepted too.
        timeout_s, workers, fallbacks: verifier settings from ``reward_kwargs``.

    Returns:
        ``{"score": float, "acc": float, "pred": str, "outcome": str}``.

    >>> compute_score("math", r"... $\\boxed{\\dfrac12}$", "0.5")
    {'score': 1.0, 'acc': 1.0, 'pred': '\\\\dfrac12', 'outcome': 'correct'}
    """
    v = shared_verifier(_config(timeout_s, workers, fallbacks))
    (r,) = score_completions([solution_str], [_golds(ground_truth, extra_info)], v)
    return _as_dict(r)


async def compute_score_async(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    timeout_s: float | None = None,
    workers: int | None = None,
    fallbacks: Any = None,
    **_: Any,
) -> dict[str, Any]:
    """:func:`compute_score` as a coroutine, for verl's async reward loop."""
    v = shared_verifier(_config(timeout_s, workers, fallbacks))
    (r,) = await ascore_completions([solution_str], [_golds(ground_truth, extra_info)], v)
    return _as_dict(r)
