"""The LLM composition engine: the paper's SPC with any chat model, in 1-2 calls per link.

The Composition-RL paper (Section 3.4) has an LLM do the three sub-steps and three self-checks (about 11
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
step), :mod:`.composer` (the ``llm`` engine), :mod:`.auto` (the ``auto`` engine), :mod:`.answers`
(when a model's answer is the stated one). Runs go through the one
executor, :mod:`composition_rl.compose.run` (resumable journal:
:mod:`composition_rl.compose.journal`); :func:`compose_in_memory` composes without files
(what ``composition_rl.compose(..., engine="llm")`` calls).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Sequence
from typing import Any

from composition_rl.backends.base import run_sync
from composition_rl.compose.base import LLM_STAGES
from composition_rl.compose.llm.auto import AutoComposer
from composition_rl.compose.llm.composer import LLMComposer
from composition_rl.compose.llm.config import LLMComposeConfig, build_backend
from composition_rl.compose.llm.prompts import PROPOSE_SCHEMA, VERIFY_SCHEMA, parse_json_object
from composition_rl.compose.llm.proposal import Usage
from composition_rl.records import Problem

__all__ = [
    "LLM_STAGES",
    "AutoComposer",
    "LLMComposeConfig",
    "LLMComposer",
    "PROPOSE_SCHEMA",
    "VERIFY_SCHEMA",
    "compose_candidates",
    "compose_in_memory",
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


def compose_in_memory(
    problems: Sequence[Problem],
    config: Any,
    llm_config: LLMComposeConfig | None = None,
    backend: Any = None,
    first_pool: Sequence[Problem] | None = None,
) -> Any:
    """Compose ``problems`` with the ``llm`` or ``auto`` engine in memory; no file is written.

    The candidates are the executor's (the same pools and seeded sample as ``crl compose``),
    composed concurrently (``llm_config.concurrency`` requests in flight) and returned in
    candidate order, accepted and rejected, with every record checked by the same checks.

    Args:
        problems: the problems to chain (``first_pool``: other problems for q1).
        config: a :class:`~composition_rl.compose.pipeline.ComposeConfig` whose ``engine``
            is ``llm`` or ``auto``.
        llm_config: the endpoint and model; a response cache only if ``llm_config.cache``
            names a file (a rerun then asks the model nothing it answered before).
        backend: a ready chat backend instead (the caller closes it).

    Returns:
        A :class:`~composition_rl.compose.pipeline.ComposeResult`.

    Raises:
        ChatError: some candidates got no answer after the backend's retries (an endpoint
            down): a transient failure is never turned into a rejection. The message says
            how many; calling again retries them (with a cache, answered calls are reused).
        RequestRefused: the server refused a request (a setting to change).

    Example (not run here: it needs a served model; docs/api.md runs it on a stand-in):
        >>> from composition_rl import ComposeConfig
        >>> cfg = ComposeConfig(depth=2, engine="llm")
        >>> llm = LLMComposeConfig(base_urls=("http://localhost:8000/v1",), model="qwen")
        >>> compose_in_memory(problems, cfg, llm).accepted[0].question      # doctest: +SKIP
    """
    from composition_rl.compose.pipeline import ComposeResult
    from composition_rl.compose.pools import candidate_id, iter_candidates
    from composition_rl.compose.run import build_resumable_engine, engine_pools, is_resumable

    if not is_resumable(config.engine):
        raise ValueError(f"engine={config.engine!r}: compose_in_memory runs a model-backed engine ('llm' or 'auto')")
    if backend is None and llm_config is None:
        raise ValueError(f"engine {config.engine!r} needs a model: pass llm_config=LLMComposeConfig(base_urls=(URL,), "
                         "model=NAME) or a backend")
    cache = None
    own = backend is None
    if own:
        if llm_config.cache and not llm_config.no_cache:
            from composition_rl.backends.cache import ResponseCache

            cache = ResponseCache(llm_config.cache)
        backend = build_backend(llm_config, cache)
    try:
        engine = build_resumable_engine(config, llm_config=llm_config, backend=backend)
        pools = engine_pools(engine, problems, first_pool, config)
        chains: dict[str, tuple[Problem, ...]] = {}
        for chain in iter_candidates(pools, config.seed, config.max_candidates):
            chains.setdefault(candidate_id(chain), tuple(chain))  # the same chain twice: composed once
        outs = run_sync(_compose_all(engine, backend, list(chains.items()), engine.config.concurrency, own))
    finally:
        if cache is not None:
            cache.close()
    res = ComposeResult(candidates=len(chains))
    for (cid, chain), out in zip(chains.items(), outs, strict=True):
        if isinstance(out, Problem):
            res.accepted.append(out)
        else:
            res.rejected.append(out.row(cid, chain))
    return res


async def _compose_all(engine: Any, backend: Any, chains: list, concurrency: int, own_backend: bool) -> list:
    from composition_rl.backends.base import ChatError

    slots = asyncio.Semaphore(concurrency)

    async def one(chain: Sequence[Problem], cid: str) -> Any:
        async with slots:
            return await engine.acompose(chain, cid, Usage())

    try:
        outs = await asyncio.gather(*(one(chain, cid) for cid, chain in chains), return_exceptions=True)
    finally:
        if own_backend:
            await backend.aclose()
        else:
            await backend.end_loop()
    failed = [o for o in outs if isinstance(o, BaseException)]
    transient = [e for e in failed if isinstance(e, ChatError) and e.transient]
    for e in failed:
        if not (isinstance(e, ChatError) and e.transient):
            raise e  # a refusal or a bug: the caller must see it
    if transient:
        e = transient[0]
        raise ChatError(e.kind, f"{len(transient)} of {len(chains)} candidates got no answer (last: {e.detail[:160]}); "
                        "call again to retry them", transient=True, endpoint=e.endpoint)
    return outs
