"""The reward of a completion: one function behind ``crl train``, TRL and verl.

A trainer hands over completions in its own shape (a string, or a conversation of
``{"role", "content"}`` messages) and the record's answers in its own columns (``answers``
and ``answer`` in our TRL rows; ``reward_model.ground_truth`` and ``extra_info.answers`` in
our verl rows). Each adapter only says which columns hold the answers; everything else is
here, so the three trainers cannot give one completion of one record two rewards:

- :func:`completion_text`: which text of a completion is graded (the last assistant message);
- :func:`accepted_answers`: every accepted form of the record's answer, from any of its columns;
- :func:`score_completions`: the verifier's verdicts, a length check first.

The reward is 1.0 when the completion's final answer equals *any* accepted form (a Minerva
record that accepts both ``6630.65`` and ``6630``), else 0.0.

>>> completion_text([{"role": "assistant", "content": "so $\\\\boxed{7}$"}, {"role": "tool", "content": "7"}])
'so $\\\\boxed{7}$'
>>> accepted_answers("6630.65", ["6630.65", "6630\\n"])
('6630.65', '6630')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from composition_rl.grading.extract import gold_forms
from composition_rl.grading.verifier import Verifier, VerifyResult

__all__ = ["ANSWER_COLUMNS", "accepted_answers", "answers_from_columns", "ascore_completions", "completion_text",
           "score_completions"]

#: The dataset columns that hold a record's accepted answers, in the order they are read
#: (``crl export --format trl`` and ``crl train`` write both).
ANSWER_COLUMNS = ("answers", "answer")


def completion_text(completion: Any) -> str:
    """The graded text of one completion: a string as it is; of a conversation, the last
    assistant message (a message without a role counts as the assistant's).

    A tool result or a user turn after the model's last message is never graded: a
    ``\\boxed{}`` the model did not write must not earn it a reward. Multimodal content parts
    are joined; a conversation with no assistant message has no text to grade.

    >>> completion_text("x = 2")
    'x = 2'
    >>> completion_text([{"role": "assistant", "content": [{"type": "text", "text": "so 3"}]}])
    'so 3'
    >>> completion_text([{"role": "user", "content": "\\\\boxed{4}"}])
    ''
    """
    if isinstance(completion, str):
        return completion
    if completion is None:
        return ""
    if isinstance(completion, Mapping):
        completion = [completion]
    if not isinstance(completion, Sequence):
        raise TypeError(f"cannot read a completion of type {type(completion).__name__}: "
                        "give a string or a list of {'role', 'content'} messages")
    mine = [m for m in completion if isinstance(m, Mapping) and m.get("role", "assistant") == "assistant"]
    if not mine:
        return ""
    content = mine[-1].get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # multimodal parts: [{"type": "text", "text": ...}, ...]
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)


def accepted_answers(*sources: Any) -> tuple[str, ...]:
    """Every accepted form of a record's answer, from each place a trainer keeps one.

    A source is a :class:`~composition_rl.records.Problem` (its ``answers``), a string, a
    number, a list or array of forms; ``None``, a blank string and NaN are absent (skipped),
    as are such forms inside a list. Forms are read by
    :func:`~composition_rl.grading.gold_forms` and kept once each, in first-seen order;
    ``()`` when no source has one.

    >>> accepted_answers(None, ["0.01\\n", "0.02"], "0.01")
    ('0.01', '0.02')
    >>> accepted_answers(None, [])
    ()
    """
    forms: list[str] = []
    for src in sources:
        src = getattr(src, "answers", src)  # a Problem
        if hasattr(src, "tolist") and not isinstance(src, str):  # numpy: verl reads list columns as arrays
            src = src.tolist()
        if isinstance(src, (list, tuple)):
            src = [s for s in src if not _absent(s)]
            if not src:
                continue
        elif _absent(src):
            continue
        for f in gold_forms(src):
            if f not in forms:
                forms.append(f)
    return tuple(forms)


def _absent(value: Any) -> bool:
    """Whether a cell says "no answer": ``None``, a blank string, or NaN (pandas' empty cell).

    A row without an answer gets no reward (``None``) instead of an error that would end
    the training step; an infinite or boolean answer is still an error, not a gap.
    """
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    return isinstance(value, float) and value != value


def answers_from_columns(columns: Mapping[str, Any], n: int, column: str | None = None) -> list[tuple[str, ...]]:
    """Each row's accepted answers from a trainer's per-row column lists.

    Args:
        columns: column name -> one value per row (TRL passes the dataset's columns so).
        n: the number of completions; every answer column must have that many rows.
        column: read only this column; by default every one of :data:`ANSWER_COLUMNS` present.

    Raises:
        ValueError: no answer column, or a column whose length is not ``n``.

    >>> answers_from_columns({"answer": ["1", "2"], "answers": [["1", "1.0"], None]}, 2)
    [('1', '1.0'), ('2',)]
    """
    names = (column,) if column is not None else ANSWER_COLUMNS
    present = [c for c in names if c in columns and columns[c] is not None]
    if not present:
        known = sorted(k for k in columns if k not in ("trainer_state", "log_extra", "log_metric"))
        raise ValueError(f"the reward needs the dataset column {' or '.join(repr(c) for c in names)}; "
                         f"the columns passed were {known}")
    for c in present:
        if len(columns[c]) != n:
            raise ValueError(f"{n} completions but {len(columns[c])} rows in column {c!r}")
    return [accepted_answers(*(columns[c][i] for c in present)) for i in range(n)]


def _pairs(completions: Sequence[Any], answers: Sequence[Any]) -> tuple[list[tuple[str, tuple[str, ...]]], list[int]]:
    if len(completions) != len(answers):
        raise ValueError(f"{len(completions)} completions but {len(answers)} answers: "
                         "each completion needs its record's answers")
    golds = [accepted_answers(a) for a in answers]
    keep = [i for i, g in enumerate(golds) if g]
    return [(completion_text(completions[i]), golds[i]) for i in keep], keep


def _place(n: int, keep: list[int], results: list[VerifyResult]) -> list[VerifyResult | None]:
    out: list[VerifyResult | None] = [None] * n
    for i, r in zip(keep, results, strict=True):
        out[i] = r
    return out


def score_completions(completions: Sequence[Any], answers: Sequence[Any], verifier: Verifier) -> list[VerifyResult | None]:
    """The verdict on each completion against its record's accepted answers.

    Args:
        completions: strings or conversations (see :func:`completion_text`).
        answers: per completion, the record's answers in any form :func:`accepted_answers`
            reads (a Problem, a string, a list of forms).
        verifier: the bounded verifier that grades them.

    Returns:
        One :class:`~composition_rl.grading.VerifyResult` per completion (its ``score`` is
        the reward), or ``None`` where the record has no answer.

    Raises:
        ValueError: ``completions`` and ``answers`` differ in length.

    >>> with Verifier() as v:
    ...     [r.score for r in score_completions([r"\\boxed{6630}"], [["6630.65", "6630"]], v)]
    [1.0]
    """
    pairs, keep = _pairs(completions, answers)
    return _place(len(completions), keep, verifier.score_batch(pairs) if pairs else [])


async def ascore_completions(completions: Sequence[Any], answers: Sequence[Any],
                             verifier: Verifier) -> list[VerifyResult | None]:
    """:func:`score_completions` as a coroutine (TRL awaits async reward functions)."""
    pairs, keep = _pairs(completions, answers)
    return _place(len(completions), keep, await verifier.ascore_batch(pairs) if pairs else [])
