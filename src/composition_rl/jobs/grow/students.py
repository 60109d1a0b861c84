"""Students: accuracy of one or more rollout backends on problems, with or without
in-context worked examples (MagicBeanStalk, Methodology: effectivity test and calibration).

A student is any rollout backend (:mod:`composition_rl.rollout.base`): a local
transformers model or an OpenAI-compatible endpoint. "The weakest student" is measured
per problem as the lowest accuracy over the panel, never declared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from composition_rl.chat.context import TOO_LONG
from composition_rl.jobs.grow.teachers import Item
from composition_rl.rollout.base import (
    RolloutBackend,
    SamplingConfig,
    load_template,
    render_prompt,
)

__all__ = ["Students", "incontext_question", "too_long"]


def incontext_question(question: str, examples: Sequence[Item]) -> str:
    """``question`` preceded by worked examples: each example's question, then its trace.

    >>> incontext_question("X=1+2. Y=X-1. Y+3=?", [Item("1+2=?", "1+2=3. \\\\boxed{3}", "3")])
    '1+2=?\\n1+2=3. \\\\boxed{3}\\n\\nX=1+2. Y=X-1. Y+3=?'
    """
    blocks = [f"{e.question}\n{e.trace}" for e in examples]
    return "\n\n".join([*blocks, question])


def too_long(backend: RolloutBackend, prompt: str) -> str | None:
    """Why ``prompt`` does not fit a local backend's context (``"prompt_too_long: the prompt is
    N tokens and the model's context C ..."``), as the backend itself says it
    (``prompt_too_long``: the hf and llama.cpp backends), or None when it fits or the backend
    cannot tell. An endpoint's context is not known here: a prompt too long for it stops the
    run with an error, never an empty answer.
    """
    ask = getattr(backend, "prompt_too_long", None)
    return ask(prompt) if callable(ask) else None


def _unread(backend: RolloutBackend, prompt: str, n: int) -> str:
    """What a student that answered ``prompt`` with ``n`` empty ``prompt_too_long`` answers
    says about it: the length and the context where the backend tells them."""
    why = too_long(backend, prompt)
    if why:
        return why.removeprefix(f"{TOO_LONG}:").strip()
    return f"all {n} answers ended {TOO_LONG} (the prompt, {len(prompt):,} characters, does not fit its context)"


@dataclass
class Students:
    """A panel of named rollout backends scored by the project verifier.

    Args:
        backends: ``(name, backend)`` pairs; the first is reported first.
        verifier: the project verifier (``score_batch``).
        n: rollouts per problem and student.
        sampling: decoding settings.
        template: rollout template name or path (``boxed``, ``plain``), as ``crl profile``.
    """

    backends: Sequence[tuple[str, RolloutBackend]]
    verifier: object
    n: int = 8
    sampling: SamplingConfig = SamplingConfig()
    template: str = "boxed"
    rollouts: int = 0

    def __post_init__(self) -> None:
        if not self.backends:
            raise ValueError("a student panel needs at least one student")
        names = [nm for nm, _ in self.backends]
        if len(set(names)) != len(names):
            raise ValueError(f"student names must differ; got {names}")
        self._template = load_template(self.template)

    @property
    def names(self) -> list[str]:
        """The students' names, in panel order (the first is reported first)."""
        return [nm for nm, _ in self.backends]

    def accuracy(self, questions: Sequence[str], answers: Sequence[Sequence[str]]) -> list[dict[str, float]]:
        """Per question, ``{student: correct / n}``; one generate call per student."""
        return self.measure(questions, answers)[0]

    def measure(self, questions: Sequence[str], answers: Sequence[Sequence[str]]
                ) -> tuple[list[dict[str, float]], list[dict[str, str]]]:
        """Per question, ``{student: correct / n}`` and ``{student: why}`` for each student
        that could not read it: every answer ended ``prompt_too_long`` (the prompt fills the
        local model's context), so its 0 says nothing of how hard the problem is. ``why``
        names the prompt's length and the context where the backend tells them."""
        if len(questions) != len(answers):
            raise ValueError(f"{len(questions)} questions but {len(answers)} answer lists")
        out: list[dict[str, float]] = [{} for _ in questions]
        unread: list[dict[str, str]] = [{} for _ in questions]
        if not questions:
            return out, unread
        prompts = [render_prompt(self._template, q) for q in questions]
        for name, backend in self.backends:
            comps = backend.generate(prompts, self.n, self.sampling)
            self.rollouts += len(prompts) * self.n
            pairs = [(c.text, list(a)) for cs, a in zip(comps, answers) for c in cs]
            res = self.verifier.score_batch(pairs)
            for i in range(len(questions)):
                out[i][name] = sum(r.score for r in res[i * self.n : (i + 1) * self.n]) / self.n
                if comps[i] and all(c.finish_reason == TOO_LONG for c in comps[i]):
                    unread[i][name] = _unread(backend, prompts[i], len(comps[i]))
        return out, unread

    @staticmethod
    def weakest(acc: dict[str, float]) -> float:
        """Accuracy of the weakest student on one problem (the lowest over the panel)."""
        return min(acc.values())
