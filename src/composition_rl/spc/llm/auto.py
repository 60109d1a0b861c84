"""The ``auto`` engine: the symbolic engine where it composes the chain, the LLM engine
(:mod:`composition_rl.spc.llm.composer`) elsewhere, and the model for check 5 where exact
reading left a link undecided."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from composition_rl.chat.base import ChatBackend
from composition_rl.records import Problem
from composition_rl.spc.base import COMPOSERS, Rejection
from composition_rl.spc.llm.composer import LLMComposer
from composition_rl.spc.llm.config import LLMComposeConfig
from composition_rl.spc.llm.proposal import Usage

__all__ = ["AutoComposer"]

# how often a chain is composed again after the model set one of its constants aside
_MAX_MARKS = 8


@dataclass
class AutoComposer:
    """``auto``: the symbolic engine where it composes the chain, the LLM engine elsewhere.

    The symbolic half keeps its default naturalness rules (as it always has in ``auto``)."""

    symbolic: Any
    llm: LLMComposer
    name: str = "auto"
    resumable: ClassVar[bool] = True

    @classmethod
    def from_config(cls, config: Any, llm_config: LLMComposeConfig | None = None,
                    backend: ChatBackend | None = None) -> AutoComposer:
        """The engine for a ``ComposeConfig``: a symbolic engine with the config's seed, length,
        ``derive_q1`` and ``risks``, shared with an :class:`LLMComposer` as its constant finder."""
        symbolic = COMPOSERS.get("symbolic")(seed=config.seed, max_chars=config.max_chars,
                                             derive_q1=config.derive_q1, risks=getattr(config, "risks", "last"))
        return cls(symbolic, LLMComposer.from_config(config, llm_config, backend, finder=symbolic))

    @property
    def config(self) -> LLMComposeConfig:
        """The LLM half's config (what ``llm_run.json`` records)."""
        return self.llm.config

    @property
    def backend(self) -> ChatBackend | None:
        """The LLM half's backend, or ``None`` before :meth:`open`."""
        return self.llm.backend

    @property
    def seed(self) -> int:
        """The LLM half's seed."""
        return self.llm.seed

    @property
    def max_chars(self) -> int:
        """The LLM half's longest composed question, in characters."""
        return self.llm.max_chars

    def open(self, out: Path) -> tuple[ChatBackend, Any]:
        """Attach the LLM half's backend (:meth:`LLMComposer.open`); returns it and the cache to
        close."""
        return self.llm.open(out)

    def eligible(self, p: Problem, position: int, depth: int) -> bool:
        """Whether ``p`` can stand at ``position`` for either half."""
        return self.llm.eligible(p, position, depth) or self.symbolic.eligible(p, position, depth)

    async def acompose(self, chain: Sequence[Problem], candidate_id: str, usage: Usage | None = None) -> Problem | Rejection:
        """The symbolic record when the symbolic engine accepts the chain, else the LLM's.

        Check 5 for the links exact reading left undecided is the model's (unless
        ``--dependence exact``). A constant the model finds the answer independent of (or
        revealed, ``--dependence blind``) is marked so in the symbolic engine, as a proved one
        is, and the chain is composed again with its next constant (the probe is a
        property of the later problem and its constant, not of the pair). The marks stay for
        the run, so later chains with that problem skip the constant without a call. When the
        symbolic engine has no constant left, the chain goes to the LLM engine, as a chain the
        symbolic engine rejects at once does: so a chain takes the same path whether or not
        another chain set the constants aside first (concurrency, a resumed run)."""
        if not all(self.symbolic.eligible(p, k, len(chain)) for k, p in enumerate(chain)):
            return await self.llm.acompose(chain, candidate_id, usage)
        res = self.symbolic.compose(chain, candidate_id)
        if not isinstance(res, Problem):
            return await self.llm.acompose(chain, candidate_id, usage)
        usage = usage if usage is not None else Usage()
        later = chain[1:]  # auto takes no other partner (it has no reserve): the record's parents are the chain
        for _ in range(_MAX_MARKS):
            if res.metadata.get("dependence") != "unknown" or self.llm.config.dependence == "exact":
                return res
            deps = []
            for k, lk in enumerate(res.links):
                dep = await self.llm.dependence(later[k], lk.v2_literal, (lk.v2_offset, *lk.v2_also), usage)
                if isinstance(dep, Rejection):
                    return Rejection(dep.stage, dep.reason, f"link {k + 1} (dependence): {dep.detail}")
                if dep[0] in ("independent", "revealed"):
                    self.symbolic.mark_independent(later[k], lk.v2_offset)
                    break
                deps.append(dep)
            else:
                meta = {**res.metadata, "dependence": "unknown" if any(d != "dependent" for d, _ in deps) else "dependent",
                        "dependence_by": [by for _, by in deps]}
                return Problem(res.id, res.question, res.answers, res.source, res.depth, res.parents, res.links,
                               res.engine, meta)
            res = self.symbolic.compose(chain, candidate_id)
            if not isinstance(res, Problem):
                break
        return await self.llm.acompose(chain, candidate_id, usage)

    def compose(self, chain: Sequence[Problem], candidate_id: str) -> Problem | Rejection:
        """The engine contract, synchronously, on the LLM half's own event loop."""
        return self.llm.on_own_loop(self.acompose(chain, candidate_id))

    def close(self) -> None:
        """End the loop of the synchronous :meth:`compose` (see :meth:`LLMComposer.close`)."""
        self.llm.close()
