"""The composition executor: one entry, :func:`run_compose`, for every registered engine.

It owns what is the same for all engines: the output lock, the engine built from the
registry, the pools (:func:`engine_pools`), the funnel and ``stats.json``, and the progress
bar. Two ways of running share it:

* a sync engine that is cheap per chain (``symbolic``) runs in-process or in forked workers
  over ranges of chain numbers (:func:`_run_batch`); an interrupted run leaves no output
  and is simply run again (it is fast);
* an engine with ``resumable = True`` (``llm``, ``auto``) runs many chains at once on an
  event loop and journals each finished candidate (:mod:`composition_rl.jobs.compose.journal`),
  so a rerun resumes where a crash stopped.

Outputs in ``out_dir``: ``composed.jsonl`` (accepted records), ``rejected.jsonl`` (one
``Rejection.row`` per dropped chain, in candidate order), ``input_rejects.jsonl`` and
``stats.json``. The same inputs and config give byte-identical ``composed.jsonl`` and
``rejected.jsonl``; in ``stats.json`` only the timing fields vary.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import logging
import os
import shutil
import tempfile
import time
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from composition_rl.io.files import (
    STAGE_PREFIX,
    StagedOutputs,
    atomic_open,
    atomic_write_json,
    atomic_write_jsonl,
    dumps,
    read_jsonl,
)
from composition_rl.io.runs import RUN_FILE, RunBusy, hold_lock, record_run, refuse_other_owner
from composition_rl.jobs.compose.pools import (
    build_pools,
    candidate_id,
    count_candidates,
    iter_candidates,
    iter_index_chains,
    iter_index_range,
    output_order,
)
from composition_rl.jobs.compose.spill import Spill, SpilledChunk, SpillIndex
from composition_rl.jobs.compose.workers import ForkedWorkers
from composition_rl.jobs.export import EXPORTERS, export, export_path
from composition_rl.progress import ProgressBar
from composition_rl.records import Problem
from composition_rl.spc.base import (
    CHECK_STAGES,
    COMPOSERS,
    FUNNEL_STAGES,
    Rejection,
    Stage,
    funnel,
    repeat_key,
    repeat_rejection,
)
from composition_rl.spc.protocols import (
    BatchComposer,
    Composer,
    PrefetchesPoolFacts,
    RanksPoolPartners,
    ResumableComposer,
    TakesPartners,
    WritesRecordJson,
    shape_error,
)

__all__ = ["OutputBusy", "Stage", "build_batch_engine", "build_engine", "build_resumable_engine", "engine_pools",
           "execute", "funnel", "is_resumable", "lock_output", "output_paths", "run_compose"]

log = logging.getLogger(__name__)


def build_engine(config: Any, **engine_kw: Any) -> Composer:
    """The engine ``config.engine`` names, from the registry (``engine_kw``: ``llm_config``,
    ``backend`` for the model-backed engines). Raises ``TypeError`` naming what is missing
    when the engine lacks a member of :class:`~composition_rl.spc.protocols.Composer` or
    of the way it declares to run (:class:`~composition_rl.spc.protocols.BatchComposer`
    or :class:`~composition_rl.spc.protocols.ResumableComposer`)."""
    if not is_resumable(config.engine):  # a batch engine takes no model settings
        return build_batch_engine(config)
    return build_resumable_engine(config, **engine_kw)


def build_batch_engine(config: Any) -> BatchComposer:
    """:func:`build_engine` for an engine that declares ``resumable = False``."""
    engine = COMPOSERS.load(config.engine).from_config(config)
    if not isinstance(engine, BatchComposer):
        raise shape_error(engine, BatchComposer, config.engine)
    return engine


def build_resumable_engine(config: Any, **engine_kw: Any) -> ResumableComposer:
    """:func:`build_engine` for an engine that declares ``resumable = True``."""
    engine = COMPOSERS.load(config.engine).from_config(config, **engine_kw)
    if not isinstance(engine, ResumableComposer):
        raise shape_error(engine, ResumableComposer, config.engine)
    return engine


def is_resumable(name: str) -> bool:
    """Whether engine ``name`` runs on the journaled path (a model behind it; its runs resume):
    its class declares ``resumable`` (:class:`~composition_rl.spc.protocols.Composer`)."""
    cls = COMPOSERS.load(name)
    resumable = getattr(cls, "resumable", None)  # read to say what is missing, not to guess
    if not isinstance(resumable, bool):
        raise TypeError(f"engine {name!r} ({cls.__name__}) declares no 'resumable' (a ClassVar[bool] of the "
                        "Composer protocol, spc/protocols.py)")
    return resumable


def engine_pools(engine: Composer, problems: Sequence[Problem], first_pool: Sequence[Problem] | None,
                 config: Any) -> list[list[Problem]]:
    """The candidate pools for ``engine`` (Section 3.4): positions 1..K-1 sampled among the
    problems the engine can place there, the last position the full set; q1 from
    ``first_pool`` when given (cross-domain, Section 4.4). An engine that ranks pool partners
    (:class:`~composition_rl.spc.protocols.RanksPoolPartners`) gets its ``pool_flaw``
    used and its ``pool_report`` filled, and one that takes further partners
    (:class:`~composition_rl.spc.protocols.TakesPartners`) gets the problems the pools
    did not draw and the pools themselves."""
    first = first_pool if first_pool is not None else problems
    sets = [first] + [problems] * (config.depth - 1)
    depth = config.depth
    ranker = engine if isinstance(engine, RanksPoolPartners) else None
    taker = engine if isinstance(engine, TakesPartners) else None
    pools = build_pools(sets, config.sizes, config.seed, lambda p, k: engine.eligible(p, k, depth),
                        flaw=(lambda p, k: ranker.pool_flaw(p, k, depth)) if ranker is not None else None,
                        report=ranker.pool_report if ranker is not None else None,
                        reserve=taker.partners if taker is not None else None)
    if taker is not None:  # the sampled pools, for distinct partners
        taker.pool_lists.clear()
        taker.pool_lists.update({k: pools[k] for k in taker.partners})
    return pools


def output_paths(out: str | os.PathLike) -> list[Path]:
    """Every file a compose run into ``out`` may write (records, stats, journal, exports):
    none of them may be an input of the run."""
    from composition_rl.jobs.compose.journal import JOURNAL
    from composition_rl.jobs.compose.journal import RUN_FILE as LLM_RUN_FILE

    names = ["composed.jsonl", "rejected.jsonl", "input_rejects.jsonl", "stats.json", JOURNAL, LLM_RUN_FILE, RUN_FILE]
    return [Path(out) / n for n in names] + [export_path(out, e) for e in EXPORTERS.names()]


def config_stats(config: Any, drop: Sequence[str] = ()) -> dict[str, Any]:
    """A ``ComposeConfig`` as stats.json writes it (tuples as lists)."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(config).items() if k not in drop}


def run_compose(
    problems: Sequence[Problem],
    config: Any,
    out_dir: str | os.PathLike,
    first_pool: Sequence[Problem] | None = None,
    inputs: dict[str, Any] | None = None,
    input_rejects: Sequence[dict[str, Any]] = (),
    progress: bool = True,
    llm_config: Any = None,
    backend: Any = None,
    exports: Sequence[str] = (),
) -> dict[str, Any]:
    """Compose and write ``composed.jsonl``, ``rejected.jsonl``, ``input_rejects.jsonl``,
    ``stats.json``, ``run.json`` and the trainer ``exports`` into ``out_dir`` while holding
    its lock; returns the stats.

    The batch engines write every file into a staging folder and move them over the previous
    run's only when the run is complete: an interrupted run, or one that accepts nothing
    where a previous run accepted something (``stats["kept_previous"]``), leaves the
    previous run as it was. The journaled engines keep their journal in ``out_dir`` (a rerun
    resumes it, and other settings are refused); their exports are staged the same way.
    Exports and a ``report.html`` of the replaced run never stay beside the new records.

    Args:
        config: a :class:`~composition_rl.jobs.compose.pipeline.ComposeConfig`; its ``engine``
            is looked up in :data:`~composition_rl.spc.base.COMPOSERS`.
        llm_config: the model settings for ``llm``/``auto``
            (:class:`~composition_rl.spc.llm.LLMComposeConfig`).
        backend: a ready chat backend (tests, benchmarks) instead of one built from
            ``llm_config``.
        exports: trainer datasets to write beside the records (``"verl"``, ``"trl"``).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    journaled = is_resumable(config.engine)
    records = [] if journaled else list(RECORD_FILES)
    with lock_output(out), StagedOutputs(out, [*records, RUN_FILE, *EXPORT_FILES, *DERIVED_FILES]) as stage:
        stats = execute(problems, config, out if journaled else stage.dir, first_pool, inputs, input_rejects,
                        progress, llm_config=llm_config, backend=backend)
        made = out if journaled else stage.dir
        if stats["accepted"] == 0 and not journaled and (out / "composed.jsonl").is_file():
            stage.discard()  # nothing to replace the previous complete run with
            return {**stats, "kept_previous": True}
        if stats["accepted"]:
            for name in exports:  # streamed from the file: never every record in memory at once
                export((Problem.from_dict(r) for r in read_jsonl(made / "composed.jsonl")), name, stage.dir)
        record_run(stage.dir, "compose", {"config": config_stats(config, drop=("workers",)),
                                          "inputs": {k: v.get("sha256") for k, v in (inputs or {}).items()
                                                     if isinstance(v, dict)}})
        removed = [n for n in stage.commit() if (n in EXPORT_FILES and n not in {f"{e}.parquet" for e in exports})
                   or n in DERIVED_FILES]
        if removed:
            log.info(f"note: removed {', '.join(removed)} of the previous run in {out}: they were made from the "
                     "records this run replaced")
    return stats


#: the record files of a run, and the files made from them: replaced or removed together
RECORD_FILES = ("composed.jsonl", "rejected.jsonl", "input_rejects.jsonl", "stats.json")
EXPORT_FILES = tuple(export_path("", e).name for e in EXPORTERS.names())
DERIVED_FILES = ("report.html",)


def execute(problems, config, out: Path, first_pool=None, inputs=None, input_rejects=(), progress=True,
            **engine_kw: Any) -> dict[str, Any]:
    """Compose into ``out`` without the lock or the staging of :func:`run_compose` (the
    caller holds the lock, or owns ``out``)."""
    out.mkdir(parents=True, exist_ok=True)
    if not is_resumable(config.engine):
        return _run_batch(problems, config, out, first_pool, inputs, input_rejects, progress)
    engine = build_resumable_engine(config, **engine_kw)
    pools = engine_pools(engine, problems, first_pool, config)
    upper = count_candidates(pools)
    total = min(upper, config.max_candidates) if config.max_candidates else upper
    atomic_write_jsonl(out / "input_rejects.jsonl", input_rejects)
    extra = {"config": config_stats(config), "pools": [len(p) for p in pools], "inputs": inputs or {},
             "input_rejects": len(input_rejects)}
    from composition_rl.jobs.compose.journal import run_journaled

    # the journal is keyed by each candidate's content, so a larger --max-candidates reuses
    # every finished candidate: the sample size is not part of what the journal holds
    identity = {"compose": config_stats(config, drop=("workers", "max_candidates", "engine")),
                "inputs": {k: v.get("sha256") for k, v in (inputs or {}).items() if isinstance(v, dict)}}
    return run_journaled(engine, iter_candidates(pools, config.seed, config.max_candidates), out,
                         config.engine, total=total, progress=progress, extra_stats=extra, identity=identity)


# ---------------------------------------------------------------------------------------
# the batch path: a sync engine, in-process or in forked workers
# ---------------------------------------------------------------------------------------
_CHUNK = 2048


def _run_batch(problems, config, out, first_pool, inputs, input_rejects, progress) -> dict[str, Any]:
    t0 = time.perf_counter()
    engine = build_batch_engine(config)
    _prefetch_pool_facts(engine, problems, first_pool, config)
    pools = engine_pools(engine, problems, first_pool, config)
    upper = count_candidates(pools)
    total = min(upper, config.max_candidates) if config.max_candidates else upper
    workers = _worker_count(config.workers, total)

    counts: Counter[str] = Counter()
    stages: Counter[str] = Counter()
    tally: Counter[str] = Counter()  # offset kinds of the accepted links
    n = accepted = 0
    chunks = _chain_chunks(pools, config, upper)
    index = SpillIndex()  # where each accepted line waits, in candidate order
    bar = ProgressBar("composing", total, enabled=progress, fields={"accepted": 0})
    # The loaded problems, pools and caches live for the whole run: keep the cyclic GC from
    # re-walking them on every full collection (it cost about a third of the run time), and
    # share them copy-on-write with the forked workers. unfreeze() in the finally undoes it.
    gc.freeze()
    try:
        with contextlib.ExitStack() as stack:
            # accepted lines wait in spill files beside the output until their order is known
            # (jobs/compose/spill.py); the folder goes when the workers are gone, whatever happened
            spill = Spill(tempfile.mkdtemp(prefix=".compose-parts-", dir=out))
            stack.callback(shutil.rmtree, spill.folder, True)
            stack.callback(spill.close)
            task = functools.partial(_compose_chunk, engine, pools, spill)
            if workers > 1:
                results = stack.enter_context(ForkedWorkers(task, workers)).imap(chunks)
            else:
                results = map(task, chunks)
            seen: set[int] = set()  # repeat_key of every line kept so far
            with atomic_open(out / "composed.jsonl", "wb") as fa, atomic_open(out / "rejected.jsonl", "wb") as fr:
                for n_acc, acc, rej_blob, rej_keys, links, (same, where) in results:
                    tally.update(links)
                    # a composition written once: a later record with the same parents, places
                    # and offsets (chains that met the same partners) is rejected as a repeat
                    repeats = _repeats(same, seen)
                    index.add(acc, skip=repeats)
                    if repeats:
                        rej_blob = _with_repeats(engine, pools, acc, where, rej_blob, repeats, tally)
                        rej_keys = rej_keys + [(Stage.DUPLICATE.value, "duplicate")] * len(repeats)
                    fr.write(rej_blob)
                    for stage, reason in rej_keys:
                        counts[reason] += 1
                        stages[stage] += 1
                    n += n_acc + len(rej_keys) - len(repeats)
                    accepted += n_acc - len(repeats)
                    bar.update(n, accepted=accepted)
                # one pass: each line from its spill file straight to its shuffled place
                index.write_in_order(fa, output_order(accepted, config.seed))
    finally:
        bar.close()
        gc.unfreeze()
    atomic_write_jsonl(out / "input_rejects.jsonl", input_rejects)
    stats = _batch_stats(engine, config, pools, n, accepted, counts, stages, tally, inputs, input_rejects,
                         time.perf_counter() - t0)
    atomic_write_json(out / "stats.json", stats)
    return stats


def _repeats(same: array, seen: set[int]) -> list[int]:
    """The places in ``same`` (a chunk's :func:`repeat_key` per accepted line, 0: unique by
    construction) whose key is in ``seen`` already; the others' keys are added to it."""
    out = []
    for j, key in enumerate(same):
        if key:
            if key in seen:
                out.append(j)
            else:
                seen.add(key)
    return out


def _chain_chunks(pools: list[list[Problem]], config: Any, upper: int) -> Iterator[range | list[tuple[int, ...]]]:
    """The batch path's tasks: ranges of chain numbers of the whole product (each worker
    enumerates its own), or, for a sample, chunks of the chains the parent draws."""
    if config.max_candidates is None or config.max_candidates >= upper:
        return (range(a, min(a + _CHUNK, upper)) for a in range(0, upper, _CHUNK))
    return _chunks(iter_index_chains(pools, config.seed, config.max_candidates), _CHUNK)


def _batch_stats(engine: BatchComposer, config: Any, pools: list[list[Problem]], n: int, accepted: int,
                 counts: Counter[str], stages: Counter[str], tally: Counter[str], inputs: dict[str, Any] | None,
                 input_rejects: Sequence[dict[str, Any]], elapsed: float) -> dict[str, Any]:
    """``stats.json`` of a batch run."""
    return {
        "engine": config.engine,
        "config": config_stats(config, drop=("workers",)),
        "pools": [len(p) for p in pools],
        "candidates": n,
        "accepted": accepted,
        "rejected": n - accepted,
        "acceptance": round(accepted / n, 6) if n else 0.0,
        "rejected_by_reason": dict(sorted(counts.items())),
        "rejected_by_stage": {s: stages.get(s, 0) for s in FUNNEL_STAGES},
        "links": engine.link_stats(tally),
        "pool_preference": engine.pool_report,
        "funnel": funnel(n, stages),
        "checks": list(CHECK_STAGES),
        "inputs": inputs or {},
        "input_rejects": len(input_rejects),
        "elapsed_s": round(elapsed, 3),
        "candidates_per_s": round(n / elapsed, 1) if elapsed > 0 else None,
    }


# the pools' questions to every problem of a sampled position before the last (its v1 and
# flaw: ~1.2 s of one core for MATH's 7,469) go to forked workers in tasks of this many
# problems, when there are at least _FACTS_MIN of them (fewer: a fork costs more than it saves)
_FACTS_CHUNK = 256
_FACTS_MIN = 2048


def _prefetch_pool_facts(engine: Composer, problems: Sequence[Problem], first_pool: Sequence[Problem] | None,
                         config: Any) -> None:
    """Ask ``engine.pool_facts`` of every problem that a sampled pool before the last position
    draws from, in forked workers, and give the answers to ``engine.learn_pool_facts``; the
    pools are then built from them in the parent as before, in the same order, so they are
    the same pools. Nothing happens for an engine that is no
    :class:`~composition_rl.spc.protocols.PrefetchesPoolFacts`, one worker, or fewer than
    ``_FACTS_MIN`` problems."""
    workers = config.workers or os.cpu_count() or 1
    if not isinstance(engine, PrefetchesPoolFacts) or workers < 2:
        return
    sets = [first_pool if first_pool is not None else problems] + [problems] * (config.depth - 1)
    items: list[Problem] = []
    seen: set[int] = set()
    for k in range(config.depth - 1):  # the last position's pool is the full set: nothing asked
        size = config.sizes[k]
        if size is not None and size < len(sets[k]) and id(sets[k]) not in seen:
            seen.add(id(sets[k]))
            items.extend(sets[k])
    if len(items) < _FACTS_MIN:
        return
    tasks = [range(a, min(a + _FACTS_CHUNK, len(items))) for a in range(0, len(items), _FACTS_CHUNK)]
    gc.freeze()  # as for the compose workers: no collection in a fork walks (and copies) the parent's objects
    try:
        with ForkedWorkers(functools.partial(_pool_facts_chunk, engine, items), min(workers, len(tasks))) as w:
            for r, facts in zip(tasks, w.imap(tasks)):
                engine.learn_pool_facts(items[r.start : r.stop], facts)
    finally:
        gc.unfreeze()


def _pool_facts_chunk(engine: PrefetchesPoolFacts, items: Sequence[Problem], r: range) -> list[Any]:
    return [engine.pool_facts(items[i]) for i in r]


def _worker_count(requested: int, total: int) -> int:
    if total < 4 * _CHUNK:
        return 1  # not worth a fork
    return max(1, requested if requested > 0 else (os.cpu_count() or 1))


def _chunks(it, size: int):
    buf = []
    for x in it:
        buf.append(x)
        if len(buf) == size:
            yield buf
            buf = []
    if buf:
        yield buf


def _compose_chunk(
    engine: BatchComposer, pools: list[list[Problem]], spill: Spill, chunk: range | list[tuple[int, ...]],
) -> tuple[int, SpilledChunk, bytes, list[tuple[str, str]], dict[str, int], tuple[array, array]]:
    """Compose one chunk of chains (in a worker or in-process): a range of chain numbers of
    the full product, or the chains themselves. Returns the number accepted, where
    ``spill`` put the accepted lines (file, offset, line lengths), the rejected lines as
    UTF-8, the (stage, reason) of each rejection, the offset kinds of the accepted links
    (``SymbolicComposer.take_tally``), and the :func:`repeat_key` and place in the chunk of
    each accepted line."""
    chains = iter_index_range(pools, chunk.start, chunk.stop) if isinstance(chunk, range) else chunk
    acc: list[str] = []
    rej: list[str] = []
    keys: list[tuple[str, str]] = []
    # the fast JSON seam: an engine may write its own records' lines (SymbolicComposer.record_json
    # splices each parent's pre-encoded JSON: JSON 2.8-3.0 s -> ~2.2 s single-process on MATH
    # depth 2, docs/benchmarks.md; tests hold it equal to dumps(to_dict()))
    record_json = engine.record_json if isinstance(engine, WritesRecordJson) else _plain_json
    same = array("Q")  # each accepted record's repeat_key (0: unique by construction), for the parent
    where = array("I")  # and its place in the chunk (a repeat's rejection goes there)
    for n, ix in enumerate(chains):
        chain = tuple([pools[k][i] for k, i in enumerate(ix)])
        cid = candidate_id(chain)
        res = engine.compose(chain, cid)
        if isinstance(res, Rejection):
            keys.append((res.stage, res.reason))
            rej.append(res.row_json(cid, chain))
        else:
            acc.append(record_json(res, chain))
            same.append(repeat_key(res, chain))
            where.append(n)
    return len(acc), spill.put(acc), _jsonl_bytes(rej), keys, engine.take_tally(), (same, where)


def _with_repeats(engine: BatchComposer, pools: list[list[Problem]], acc: SpilledChunk, where: array, rej_blob: bytes,
                  repeats: list[int], tally: Counter[str]) -> bytes:
    """The chunk's rejected lines with a ``duplicate`` row for each repeated accepted line,
    each at its candidate's place; the repeats' link counts are taken out of ``tally`` (the
    parent composes each again, which gives the same record, to learn what it counted)."""
    by_id = [{p.id: p for p in pool} for pool in pools]  # each id in its own position's pool
    rows: dict[int, bytes] = {}
    for j in repeats:
        rec = json.loads(SpillIndex.read(acc, j))
        drawn = tuple(by_id[k][i] for k, i in enumerate(rec["metadata"].get("candidate_parents", rec["parents"])))
        cid = rec["metadata"]["candidate"]
        engine.take_tally()
        again = engine.compose(drawn, cid)
        if isinstance(again, Rejection) or again.id != rec["id"]:
            raise RuntimeError(f"candidate {cid} composed again gave another result: a bug (record {rec['id']})")
        tally.subtract(engine.take_tally())
        rows[where[j]] = (repeat_rejection(rec["parents"]).row_json(cid, drawn) + "\n").encode()
    # the chunk's candidates in order: each was accepted (its place is in ``where``) or is the
    # next rejected line
    rejected = iter(rej_blob.splitlines(keepends=True))
    accepted_at = set(where)
    out = [rows.get(place, b"") if place in accepted_at else next(rejected)
           for place in range(len(where) + rej_blob.count(b"\n"))]
    return b"".join(out)


def _plain_json(rec: Problem, chain: Sequence[Problem]) -> str:
    return dumps(rec.to_dict())


def _jsonl_bytes(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode() if lines else b""


# ---------------------------------------------------------------------------------------
# the output folder's lock
# ---------------------------------------------------------------------------------------
class OutputBusy(RunBusy):
    """Another live run holds the output folder's lock."""


# what a run leaves in its output folder while it works: atomic_open temporaries of every
# output and export, the workers' spill folders and the staging folder
_LEFTOVERS = tuple(f".{name}.*.tmp" for name in (
    "composed.jsonl", "rejected.jsonl", "input_rejects.jsonl", "stats.json", "verl.parquet", "trl.parquet",
)) + (".compose-parts-*", STAGE_PREFIX + "*")


@contextlib.contextmanager
def lock_output(out: str | os.PathLike):
    """Hold the output folder's lock (the one every command takes,
    :func:`composition_rl.io.runs.hold_lock`) for a run; first remove what dead runs left
    there. A run killed with ``kill -9`` leaves its temporaries behind but not its lock
    (the kernel drops a dead process's ``flock``), so a free lock means no live run owns them.

    Raises:
        OutputBusy: another live process holds the lock.
        RunClash: the folder holds another command's run (one that started meanwhile).
    """
    out = Path(out)
    try:
        with hold_lock(out, "compose"):
            # a run of another command that took the folder between the caller's check and this lock
            refuse_other_owner("compose", out)
            removed = remove_leftovers(out)
            if removed:
                log.info(f"note: removed {len(removed)} leftover(s) of an interrupted run in {out}: "
                         + ", ".join(p.name for p in removed[:4]) + (" ..." if len(removed) > 4 else ""))
            yield out
    except RunBusy as e:
        if isinstance(e, OutputBusy):
            raise
        raise OutputBusy(str(e)) from None


def remove_leftovers(out: Path) -> list[Path]:
    """Remove temporary files and spill folders of dead runs from ``out`` (call with the lock held)."""
    gone: list[Path] = []
    for pattern in _LEFTOVERS:
        for p in sorted(out.glob(pattern)):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
            gone.append(p)
    return gone
