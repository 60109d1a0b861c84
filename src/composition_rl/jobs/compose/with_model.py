"""The compose job with a model-backed engine (``llm``, ``auto``): given candidate chains
composed into a resumable folder (:func:`compose_candidates`), or problems composed in
memory (:func:`compose_in_memory`, what ``composition_rl.compose(..., engine="llm")``
calls)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Sequence
from typing import Any

from composition_rl.chat.base import run_sync
from composition_rl.records import Problem
from composition_rl.spc.llm.config import LLMComposeConfig, build_backend
from composition_rl.spc.llm.proposal import Usage


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
    (resumable; see :mod:`composition_rl.jobs.compose.journal`). ``backend``: a ready chat
    backend (tests, benchmarks); by default one is built from ``llm_config`` with the
    response cache attached. Returns the stats written to ``stats.json``."""
    from pathlib import Path
    from types import SimpleNamespace

    from composition_rl.jobs.compose.journal import run_journaled
    from composition_rl.jobs.compose.run import build_engine

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
        config: a :class:`~composition_rl.jobs.compose.pipeline.ComposeConfig` whose ``engine``
            is ``llm`` or ``auto``.
        llm_config: the endpoint and model; a response cache only if ``llm_config.cache``
            names a file (a rerun then asks the model nothing it answered before).
        backend: a ready chat backend instead (the caller closes it).

    Returns:
        A :class:`~composition_rl.jobs.compose.pipeline.ComposeResult`.

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
    from composition_rl.jobs.compose.pipeline import ComposeResult
    from composition_rl.jobs.compose.pools import candidate_id, iter_candidates
    from composition_rl.jobs.compose.run import build_resumable_engine, engine_pools, is_resumable

    if not is_resumable(config.engine):
        raise ValueError(f"engine={config.engine!r}: compose_in_memory runs a model-backed engine ('llm' or 'auto')")
    if backend is None and llm_config is None:
        raise ValueError(f"engine {config.engine!r} needs a model: pass llm_config=LLMComposeConfig(base_urls=(URL,), "
                         "model=NAME) or a backend")
    cache = None
    own = backend is None
    if own:
        if llm_config.cache and not llm_config.no_cache:
            from composition_rl.chat.cache import ResponseCache

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
    from composition_rl.chat.base import ChatError

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
