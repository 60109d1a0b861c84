"""The LLM composition engine: the paper's SPC with any chat model, in 1-2 calls per link.

Seed 000, Section 3.4 has an LLM do the three sub-steps and three self-checks (about 11
chained calls per pair in the public release, with the arithmetic done by LLM-written,
executed Python). Here, per link ``q_k -> q_{k+1}``:

1. **One structured call** proposes everything the model is needed for: ``v1`` (a number
   from ``gt_k``, which may be an expression, a tuple, an interval ...), a natural
   definition of it, the constant in ``q_{k+1}`` and ``q_{k+1}`` rewritten with the marker
   ``<VAR>`` in its place (prompts: ``prompts/llm_propose*.txt``; JSON schema in
   :mod:`.prompts`).
2. **Exact checks in sympy, no model** (:mod:`.proposal`): v1 must be the exact value of
   ``gt_k`` or a number literally present in it; putting the constant back for ``<VAR>``
   must give ``q_{k+1}`` character for character, at a position the symbolic rules allow;
   ``d = v1 - v2`` is computed and rendered by program, and the rendered relation must
   parse back to ``d``; names and length.
3. **At most one verification call**, only when the exact checks cannot decide: v1 was taken
   from inside a compound answer (does the definition denote it?), the model rephrased
   ``q_{k+1}`` (is it the same problem?), or the constant is written in a form we cannot
   read (what number is it?). The model only reads values off; every comparison is sympy's.

Model-written code is never executed. Malformed output is a counted rejection with its
reason. A depth-K chain is ``SPC(q1..qK) = Compose(q1, SPC(q2..qK))``: K-1 links, each
proposed on the original problem texts (so a link's calls are shared, through the response
cache, by every chain that contains the pair). The record is then checked by the same
:func:`composition_rl.compose.checks.run_checks` as every engine's.

Modules, one job each: :mod:`.config` (settings, backend), :mod:`.prompts` (prompts, schemas,
lenient JSON), :mod:`.numbers` (numbers in replies), :mod:`.proposal` (one link, step by
step), :mod:`.composer` (the ``llm`` and ``auto`` engines). Runs go through the one
executor, :mod:`composition_rl.compose.run` (resumable journal:
:mod:`composition_rl.compose.journal`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from composition_rl.compose.base import LLM_STAGES
from composition_rl.compose.llm.composer import AutoComposer, LLMComposer
from composition_rl.compose.llm.config import LLMComposeConfig
from composition_rl.compose.llm.prompts import PROPOSE_SCHEMA, VERIFY_SCHEMA, parse_json_object
from composition_rl.records import Problem

__all__ = [
    "LLM_STAGES",
    "AutoComposer",
    "LLMComposeConfig",
    "LLMComposer",
    "PROPOSE_SCHEMA",
    "VERIFY_SCHEMA",
    "compose_candidates",
    "parse_json_object",
]


def compose_candidates(
    candidates: Iterable[Sequence[Problem]],
    out_dir: str | os.PathLike,
    llm_config: LLMComposeConfig,
    engine: str = "llm",
    seed: int = 0,
    max_chars: int = 8000,
    backend: Any = None,
    total: int | None = None,
    progress: bool = True,
    extra_stats: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Compose given candidate chains with the ``llm`` or ``auto`` engine into ``out_dir``
    (resumable; see :mod:`composition_rl.compose.journal`). ``backend``: a ready chat
    backend (tests, benchmarks); by default one is built from ``llm_config`` with the
    response cache attached. Returns the stats written to ``stats.json``."""
    from pathlib import Path
    from types import SimpleNamespace

    from composition_rl.compose.journal import run_journaled
    from composition_rl.compose.run import build_engine

    if engine not in ("llm", "auto"):
        raise ValueError(f"engine={engine!r}; the LLM driver runs 'llm' or 'auto'")
    cfg = SimpleNamespace(engine=engine, seed=seed, max_chars=max_chars, derive_q1=True)
    composer = build_engine(cfg, llm_config=llm_config, backend=backend)
    return run_journaled(composer, candidates, Path(out_dir), engine, total=total, progress=progress,
                         extra_stats=extra_stats)
