"""The shapes a composition engine declares: the contract every engine meets and the optional
capabilities the executor (:mod:`composition_rl.jobs.compose.run`) uses when an engine has them.

Every engine is a :class:`Composer`. Then one of two ways of running:

* :class:`BatchComposer`: cheap per chain (``symbolic``); run in-process or in forked workers.
* :class:`ResumableComposer`: a model behind it (``llm``, ``auto``); many chains at once on an
  event loop, each finished one journaled (:mod:`composition_rl.jobs.compose.journal`).

The optional capabilities are small protocols of their own (:class:`RanksPoolPartners`,
:class:`TakesPartners`, :class:`PrefetchesPoolFacts`, :class:`WritesRecordJson`): the
executor asks ``isinstance(engine, Capability)`` instead of looking members up by name, so a
type checker holds an engine to the shape, and a misspelt member fails there rather than
silently turning a capability off. ``tests/test_engine_protocol.py`` checks every registered
engine against these protocols at run time and with mypy.

All are ``runtime_checkable``: ``isinstance`` checks that the members exist (not their
signatures: that is mypy's part).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: base.py imports this module
    from composition_rl.chat.base import ChatBackend
    from composition_rl.records import Problem
    from composition_rl.spc.base import Rejection
    from composition_rl.spc.llm.config import LLMComposeConfig
    from composition_rl.spc.llm.proposal import Usage

__all__ = ["BatchComposer", "Composer", "PrefetchesPoolFacts", "RanksPoolPartners",
           "ResumableComposer", "TakesPartners", "WritesRecordJson", "missing_members", "shape_error"]


@runtime_checkable
class Composer(Protocol):
    """A composition engine. ``compose`` returns an accepted depth-K Problem or a Rejection.

    ``resumable`` says which way the executor runs it: False for a :class:`BatchComposer`,
    True for a :class:`ResumableComposer`. (The class also has a ``from_config(config,
    **engine_kw)`` constructor, whose keywords differ per engine, so it is not part of the
    protocol.)"""

    name: str
    resumable: ClassVar[bool]

    def eligible(self, p: Problem, position: int, depth: int) -> bool:
        """Whether ``p`` can stand at ``position`` (0-based) of a chain of ``depth`` problems."""
        ...

    def compose(self, chain: Sequence[Problem], candidate_id: str) -> Problem | Rejection:
        """The depth-K record composed from ``chain`` under ``candidate_id``, or why not."""
        ...


@runtime_checkable
class BatchComposer(Composer, Protocol):
    """An engine cheap per chain, run over ranges of chains in forked workers: each worker
    counts the offset kinds of its accepted links (``take_tally``) and the parent sums them
    into ``stats.json`` (``link_stats``, beside ``pool_report``)."""

    pool_report: dict[str, object]

    def take_tally(self) -> dict[str, int]:
        """The offset kinds counted since the last call, then cleared (one worker's share)."""
        ...

    def link_stats(self, tally: dict[str, int]) -> dict[str, dict[str, object]]:
        """``stats.json``'s summary of the accepted links from the summed tallies."""
        ...


@runtime_checkable
class ResumableComposer(Composer, Protocol):
    """An engine with a model behind it: the executor awaits ``acompose`` for many chains at
    once, after ``open`` has attached the backend (and its response cache in the output
    folder). ``config``, ``backend``, ``seed`` and ``max_chars`` go into ``llm_run.json``,
    so a rerun with other settings is refused."""

    @property
    def config(self) -> LLMComposeConfig:
        """The LLM compose config (recorded in ``llm_run.json``)."""
        ...

    @property
    def backend(self) -> ChatBackend | None:
        """The chat backend, or ``None`` before :meth:`open`."""
        ...

    @property
    def seed(self) -> int:
        """The engine's seed."""
        ...

    @property
    def max_chars(self) -> int:
        """The longest composed question, in characters."""
        ...

    def open(self, out: Path) -> tuple[ChatBackend, Any]:
        """Attach the backend (response cache in ``out``); returns it and the cache to close (or
        None)."""
        ...

    async def acompose(self, chain: Sequence[Problem], candidate_id: str,
                       usage: Usage | None = None) -> Problem | Rejection:
        """:meth:`compose` on an event loop; ``usage`` receives the requests and tokens it cost."""
        ...


@runtime_checkable
class RanksPoolPartners(Protocol):
    """Ranks pool partners: ``pool_flaw`` names why a problem reads poorly at a position (""
    if it does not), and :func:`~composition_rl.jobs.compose.pools.build_pools` writes what it
    swapped out into ``pool_report``."""

    pool_report: dict[str, object]

    def pool_flaw(self, p: Problem, position: int, depth: int) -> str:
        """Why ``p`` reads poorly at ``position`` ("" if it does not)."""
        ...


@runtime_checkable
class TakesPartners(Protocol):
    """Takes further partners past the pools: the executor fills ``partners`` with, per
    sampled position, the eligible problems the pool did not draw, and ``pool_lists`` with
    the sampled pools themselves."""

    partners: dict[int, list[Problem]]
    pool_lists: dict[int, list[Problem]]


@runtime_checkable
class PrefetchesPoolFacts(Protocol):
    """Per-problem facts the pools need, pure per problem: the executor asks ``pool_facts`` in
    forked workers and hands the (picklable) answers back to ``learn_pool_facts``."""

    def pool_facts(self, p: Problem) -> Any:
        """The picklable facts the pools need about ``p``, computed in a forked worker."""
        ...

    def learn_pool_facts(self, problems: Sequence[Problem], facts: Sequence[Any]) -> None:
        """Keep :meth:`pool_facts` of ``problems``, computed elsewhere, as if computed here."""
        ...


@runtime_checkable
class WritesRecordJson(Protocol):
    """Writes its own records' JSON lines, byte for byte ``dumps(rec.to_dict())``, faster."""

    def record_json(self, rec: Problem, chain: Sequence[Problem]) -> str:
        """``dumps(rec.to_dict())`` for a record built from ``chain``, byte for byte."""
        ...


def missing_members(obj: object, proto: type) -> list[str]:
    """The members of protocol ``proto`` that ``obj`` lacks, sorted (empty: it conforms, as far
    as ``isinstance`` can tell).

    >>> class Half:
    ...     name = "half"
    ...     resumable = False
    ...     def eligible(self, p, position, depth): return True
    >>> missing_members(Half(), Composer)
    ['compose']
    """
    names: set[str] = set()
    for base in proto.__mro__:
        if base is Protocol or base is object or not getattr(base, "_is_protocol", False):
            continue
        declared = (*vars(base), *getattr(base, "__annotations__", {}))
        names.update(n for n in declared if not n.startswith("_"))
    return sorted(n for n in names if not hasattr(obj, n))


def shape_error(engine: object, proto: type, what: str) -> TypeError:
    """The error for an ``engine`` (``what``: its registered name) that does not have the
    shape of ``proto``, naming the members it lacks; raise it after a failed ``isinstance``
    (which also tells a type checker the shape from there on)."""
    missing = ", ".join(missing_members(engine, proto)) or "nothing isinstance can see"
    return TypeError(f"engine {what!r} ({type(engine).__name__}) is no {proto.__name__}: "
                     f"it lacks {missing}")
