"""What every composition engine shares: the registry, the rejection record, the protocol."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring as _js
from typing import Protocol

from composition_rl.records import Problem
from composition_rl.registry import Registry

__all__ = ["COMPOSERS", "Composer", "Rejection"]


@dataclass(frozen=True)
class Rejection:
    """A dropped candidate: the stage (check) that dropped it, a short reason, a detail."""

    stage: str
    reason: str
    detail: str

    def row(self, candidate_id: str, chain: Sequence[Problem]) -> dict[str, str | list[str]]:
        """The ``rejected.jsonl`` row every engine writes for a dropped chain."""
        return {"id": candidate_id, "candidates": [p.id for p in chain], "stage": self.stage,
                "reason": self.reason, "detail": self.detail}

    def row_json(self, candidate_id: str, chain: Sequence[Problem]) -> str:
        """``dumps(self.row(...))`` byte for byte (keys in sorted order), without the generic
        encoder: the symbolic pipeline writes one per dropped candidate."""
        ids = ",".join([_js(p.id) for p in chain])
        return (f'{{"candidates":[{ids}],"detail":{_js(self.detail)},"id":{_js(candidate_id)},'
                f'"reason":{_js(self.reason)},"stage":{_js(self.stage)}}}')


class Composer(Protocol):
    """A composition engine. ``compose`` returns an accepted depth-K Problem or a Rejection."""

    name: str

    def eligible(self, p: Problem, position: int, depth: int) -> bool: ...

    def compose(self, chain: Sequence[Problem], candidate_id: str) -> Problem | Rejection: ...


COMPOSERS: Registry[type] = Registry("composition engine")
