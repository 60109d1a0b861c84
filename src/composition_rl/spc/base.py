"""What every composition engine shares: the registry, the stage names, the rejection
record. The engine protocol, :class:`~composition_rl.spc.protocols.Composer`, is declared
in :mod:`composition_rl.spc.protocols` with the ways of running and the optional
capabilities (imported from there; this module does not import it, so the two cannot form a
circle).

An engine is one module with one class registered here by name. The class satisfies
:class:`~composition_rl.spc.protocols.Composer` (``name``, ``resumable``, ``eligible`` and ``compose(chain, candidate_id) ->
Problem | Rejection``) and has a ``from_config(config, **engine_kw)`` constructor. A cheap
engine is a ``BatchComposer`` (``resumable = False``); one whose work is slow and external (a
model behind an API) is a ``ResumableComposer`` (``resumable = True`` and ``async
acompose(chain, candidate_id, usage)``): the executor (:mod:`composition_rl.jobs.compose.run`)
then runs many chains at once and journals each finished one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from json.encoder import encode_basestring as _js

from composition_rl.records import Problem
from composition_rl.registry import Registry

__all__ = ["CHECK_STAGES", "COMPOSERS", "FUNNEL_STAGES", "LLM_STAGES", "Rejection", "Stage",
           "composition_key", "funnel", "repeat_key", "repeat_rejection", "took_partner"]


class Stage(str, Enum):
    """Where a candidate can be dropped, in funnel order (Appendix D reports the yield after
    each check). The values are the ``stage`` field of ``rejected.jsonl`` rows."""

    LLM_CALL = "llm_call"  # the request failed (timeout, refusal, server error)
    LLM_OUTPUT = "llm_output"  # the reply was not the JSON asked for
    CHECK1_V1 = "check1_v1"
    CONSTANT = "constant"
    CHECK2_SUBSTITUTION = "check2_substitution"
    CHECK3_RELATION = "check3_relation"
    CHECK4_NAMES_LENGTH = "check4_names_length"
    CHECK5_DEPENDENCE = "check5_dependence"  # the answer does not depend on the variable
    DUPLICATE = "duplicate"  # the same composition as an earlier record (another chain met the same partners)
    INTERNAL = "internal"  # a bug, counted instead of sinking the run

    def __str__(self) -> str:
        return self.value


#: the five checks every composed record must pass (spc/checks.py)
CHECK_STAGES: tuple[str, ...] = tuple(s.value for s in (
    Stage.CHECK1_V1, Stage.CHECK2_SUBSTITUTION, Stage.CHECK3_RELATION, Stage.CHECK4_NAMES_LENGTH,
    Stage.CHECK5_DEPENDENCE))
#: the funnel of an engine that makes no model call (symbolic)
FUNNEL_STAGES: tuple[str, ...] = tuple(s.value for s in (
    Stage.CHECK1_V1, Stage.CONSTANT, Stage.CHECK2_SUBSTITUTION, Stage.CHECK3_RELATION, Stage.CHECK4_NAMES_LENGTH,
    Stage.CHECK5_DEPENDENCE, Stage.DUPLICATE))
#: the funnel of an engine that calls a model (llm, auto)
LLM_STAGES: tuple[str, ...] = tuple(s.value for s in Stage)


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


COMPOSERS: Registry[type] = Registry("composition engine")
# symbolic registers itself (spc/symbolic.py, imported by the package); the model-backed
# engines are imported on first use, so that `import composition_rl.spc` stays light
COMPOSERS.register("llm")("composition_rl.spc.llm.composer:LLMComposer")
COMPOSERS.register("auto")("composition_rl.spc.llm.auto:AutoComposer")


def composition_key(rec: Problem) -> int:
    """What makes two records one composition, as a 64-bit number: the parents in order and,
    per link, the replaced place and the stated offset (and the derivation of a derived v1).
    The variable names and the relation's wording are left out: two records that differ only
    there ask the same question of the policy."""
    parts = [*rec.parents]
    for lk in rec.links:
        parts.append(f"{lk.v2_offset}:{lk.d_expr}:{lk.v1_derivation!r}")
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def took_partner(rec: Problem, chain: Sequence[Problem]) -> bool:
    """Whether ``rec`` was composed from other problems than its drawn ``chain`` (a partner
    took a drawn problem's place). Only such records can repeat another's composition: a
    record of its own drawn chain has a parent at each position from that position's pool
    (whose problems are distinct: the readers reject a repeated question, so a caller who
    hands ``run_compose`` the same problem twice gets its records twice), and a partner
    never comes from the pool of its position,
    so no two candidates, and no drawn chain and partnered one, share parents. The repeat
    check (the executor's and ``compose_problems``') keys these records alone: a few
    thousand, where keying all would hold a key per record in the parent."""
    return len(rec.parents) != len(chain) or any(a != b.id for a, b in zip(rec.parents, chain))


def repeat_key(rec: Problem, chain: Sequence[Problem]) -> int:
    """:func:`composition_key` of a record that can repeat another (:func:`took_partner`), 0 for
    one that cannot: what the executor and ``compose_problems`` check for repeats."""
    return composition_key(rec) if took_partner(rec, chain) else 0


def repeat_rejection(parents: Sequence[str]) -> Rejection:
    """The row of a record whose composition an earlier record already has."""
    return Rejection(Stage.DUPLICATE.value, "duplicate", "the same parents, replaced places and offsets as an earlier "
                     f"record (only the variable names or the relation's wording differ): parents {', '.join(parents)}")


def funnel(candidates: int, rejected_by_stage: dict[str, int], stages: Sequence[str] = FUNNEL_STAGES) -> list[dict]:
    """What survives each stage, in order (the paper's Appendix D: 240K -> 231K -> 200K -> 199K)."""
    rows = [{"stage": "candidates", "kept": candidates}]
    kept = candidates
    for s in stages:
        kept -= rejected_by_stage.get(s, 0)
        rows.append({"stage": s, "kept": kept})
    return rows
