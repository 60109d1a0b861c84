"""The one record type that crosses every module boundary.

A :class:`Problem` is a verifiable prompt: a question plus every accepted form of its
answer. Composed prompts are Problems too (``depth > 1``, with ``parents`` and ``links``),
so they can be composed again, exported, profiled and trained on without conversion.
Raw dicts exist only at the file boundary (:meth:`Problem.to_dict` / :meth:`Problem.from_dict`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Link", "Problem", "content_id"]


def content_id(*parts: str, n: int = 16) -> str:
    """Stable content hash of ``parts`` (hex, ``n`` chars).

    >>> content_id("What is 1+1?", "2") == content_id("What is 1+1?", "2")
    True
    """
    # each part followed by a unit separator, hashed as one buffer (one encode, one update)
    data = "\x1f".join(parts) + "\x1f" if parts else ""
    return hashlib.sha1(data.encode("utf-8")).hexdigest()[:n]


@dataclass(frozen=True)
class Link:
    """One link of a sequential composition (Composition-RL, Section 3.4, sub-steps 1-3).

    ``x`` names v1 (the value taken from the earlier problem's answer); ``y`` replaces the
    constant v2 in the later problem; the stated relation is ``y = x - d`` with ``d = v1 - v2``.
    Values are kept as exact strings: ``*_latex`` is what the prompt shows, ``*_expr`` is a
    sympy ``srepr``-free string that ``sympy.sympify`` reads back exactly.
    """

    x: str
    y: str
    v1_latex: str
    v1_expr: str
    v2_literal: str
    v2_expr: str
    d_latex: str
    d_expr: str
    v2_offset: int  # character offset of the literal in the later problem's original text
    # offsets of further occurrences of the same literal that Y also replaces (the text
    # repeats the quantity: leaving one would show Y's value); () for one occurrence
    v2_also: tuple[int, ...] = ()
    # how v1 was derived from an earlier answer that is not one number: the
    # (key, value) pairs of ``values.Derivation.to_dict()``, sorted ("kind", and "arg" and
    # "name" when set); () when v1 is the answer's own value
    v1_derivation: tuple[tuple[str, str], ...] = ()

    def __init__(self, x: str, y: str, v1_latex: str, v1_expr: str, v2_literal: str, v2_expr: str,
                 d_latex: str, d_expr: str, v2_offset: int, v2_also: tuple[int, ...] = (),
                 v1_derivation: tuple[tuple[str, str], ...] = ()) -> None:
        # The state the generated frozen __init__ makes (one object.__setattr__ per field), in
        # one dict update: composing builds a Link and a Problem per candidate, and this halves
        # that cost. tests/test_records_init.py holds the signature to the fields.
        self.__dict__.update(x=x, y=y, v1_latex=v1_latex, v1_expr=v1_expr, v2_literal=v2_literal,
                             v2_expr=v2_expr, d_latex=d_latex, d_expr=d_expr, v2_offset=v2_offset,
                             v2_also=v2_also, v1_derivation=v1_derivation)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: short keys (``v1``, ``d``, ...); ``v2_also`` and ``v1_derivation`` only
        when set, so records without them keep their bytes."""
        d = {
            "x": self.x,
            "y": self.y,
            "v1": self.v1_latex,
            "v1_expr": self.v1_expr,
            "v2": self.v2_literal,
            "v2_expr": self.v2_expr,
            "d": self.d_latex,
            "d_expr": self.d_expr,
            "v2_offset": self.v2_offset,
        }
        if self.v2_also:  # absent for one occurrence, so such records keep their bytes
            d["v2_also"] = list(self.v2_also)
        if self.v1_derivation:  # absent when v1 is the answer itself, likewise
            d["v1_derivation"] = dict(self.v1_derivation)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Link:
        """The link :meth:`to_dict` wrote (absent ``v2_also`` / ``v1_derivation`` read as
        ``()``)."""
        return cls(
            x=d["x"],
            y=d["y"],
            v1_latex=d["v1"],
            v1_expr=d["v1_expr"],
            v2_literal=d["v2"],
            v2_expr=d["v2_expr"],
            d_latex=d["d"],
            d_expr=d["d_expr"],
            v2_offset=int(d["v2_offset"]),
            v2_also=tuple(int(o) for o in d.get("v2_also", ())),
            v1_derivation=tuple(sorted((str(k), str(v)) for k, v in (d.get("v1_derivation") or {}).items())),
        )


@dataclass(frozen=True)
class Problem:
    """A verifiable prompt.

    Args:
        id: stable content hash (see :func:`content_id`); never a row number.
        question: the prompt text shown to the policy.
        answers: every accepted form of the ground truth, as strings, first one canonical.
        source: where it came from (file stem, generator name, ``compose:<engine>``).
        depth: 1 for an original problem, K for an SPC chain of K problems; the original
            problems are counted, so a chain of composed records has the sum of their depths.
        parents: ids of the chained problems in order (q1 .. qK); empty at depth 1.
        links: the K-1 links, outermost (q1 -> q2) first.
        engine: the composition engine that produced it ("" at depth 1).
        metadata: everything else from the source row (subject, level, ...).
    """

    id: str
    question: str
    answers: tuple[str, ...]
    source: str = ""
    depth: int = 1
    parents: tuple[str, ...] = ()
    links: tuple[Link, ...] = ()
    engine: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __init__(self, id: str, question: str, answers: tuple[str, ...], source: str = "", depth: int = 1,
                 parents: tuple[str, ...] = (), links: tuple[Link, ...] = (), engine: str = "",
                 metadata: Mapping[str, Any] | None = None) -> None:
        # as Link.__init__: the generated frozen __init__'s state in one dict update
        self.__dict__.update(id=id, question=question, answers=answers, source=source, depth=depth,
                             parents=parents, links=links, engine=engine,
                             metadata={} if metadata is None else metadata)

    def __hash__(self) -> int:  # metadata is a dict: hash by the content id instead
        return hash(self.id)

    @property
    def answer(self) -> str:
        """The canonical (first) accepted answer."""
        return self.answers[0]

    @classmethod
    def new(cls, question: str, answers, **kw: Any) -> Problem:
        """Build a Problem whose id is the content hash of question and answers."""
        answers = tuple(answers) if not isinstance(answers, str) else (answers,)
        return cls(id=content_id(question, *answers), question=question, answers=answers, **kw)

    def to_dict(self) -> dict[str, Any]:
        """The JSON line of the record: ``answer`` is the first of ``answers``; ``parents``,
        ``links`` and ``engine`` only for a composition (depth above 1 or with parents)."""
        d: dict[str, Any] = {
            "id": self.id,
            "question": self.question,
            "answer": self.answers[0],
            "answers": list(self.answers),
            "source": self.source,
            "depth": self.depth,
        }
        if self.depth > 1 or self.parents:
            d["parents"] = list(self.parents)
            d["links"] = [lk.to_dict() for lk in self.links]
            d["engine"] = self.engine
        d["metadata"] = dict(self.metadata)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Problem:
        """The record :meth:`to_dict` wrote; also reads a row with only ``answer`` (no ``answers``),
        and defaults the rest (depth 1, no parents or links)."""
        answers = d.get("answers") or [d["answer"]]
        return cls(
            id=d["id"],
            question=d["question"],
            answers=tuple(str(a) for a in answers),
            source=d.get("source", ""),
            depth=int(d.get("depth", 1)),
            parents=tuple(d.get("parents", ())),
            links=tuple(Link.from_dict(x) for x in d.get("links", ())),
            engine=d.get("engine", ""),
            metadata=dict(d.get("metadata", {})),
        )
