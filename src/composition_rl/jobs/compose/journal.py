"""The resumable, concurrent path of the composition executor (engines with
``resumable = True``: ``llm``, ``auto``).

Every finished candidate is one line of an append-only journal (``llm_journal.jsonl``)
keyed by the candidate's content id; a rerun skips what is there, and the final
``composed.jsonl`` / ``rejected.jsonl`` are written from the journal in candidate order, so
an interrupted and resumed run writes the same bytes as an uninterrupted one. The settings
the journal was made with are kept in ``llm_run.json``; resuming with others is refused.

A candidate that failed by a bug of ours (an exception in the engine: ``internal_error``)
is journaled with ``"retryable": true``: it counts as rejected in this run, but a rerun
composes it again (the bug may be fixed by then) and its new line supersedes the old one.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from composition_rl.chat.base import ChatError, RequestRefused, run_sync
from composition_rl.io.files import JsonlLog, atomic_open, atomic_write_json, dumps
from composition_rl.io.identity import claim_run
from composition_rl.jobs.compose.pools import candidate_id
from composition_rl.progress import ProgressBar
from composition_rl.records import Problem
from composition_rl.spc.base import LLM_STAGES, Rejection
from composition_rl.spc.base import funnel as _funnel
from composition_rl.spc.protocols import ResumableComposer

__all__ = ["JOURNAL", "RUN_FILE", "EndpointDown", "run_journaled"]

log = logging.getLogger(__name__)

JOURNAL = "llm_journal.jsonl"
RUN_FILE = "llm_run.json"


class EndpointDown(RuntimeError):
    """Candidates in a row failed without an answer (``LLMComposeConfig.stop_after``): the
    run stopped; what finished is in the journal and a rerun retries the rest."""


def _claim_run(out: Path, engine_name: str, cfg: Any, seed: int, max_chars: int, backend: Any,
               identity: dict[str, Any]) -> None:
    """Record what the journal in ``out`` was made with; refuse to resume it with other
    settings (a rerun would otherwise mix two models' compositions in one output). The
    endpoint URLs are not part of it: the same model may be served from elsewhere."""
    from composition_rl.spc.llm.prompts import PROMPT_NAMES, load_prompt

    prompts = "".join(load_prompt(n) for n in PROMPT_NAMES)
    mine = {
        "engine": engine_name,
        "backend": backend.name if backend is not None else cfg.backend,
        "model": backend.model if backend is not None else cfg.model,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "max_tokens": cfg.max_tokens,
        "verify": cfg.verify,
        # who does what in a link and how often a reply is sent back decide the outcomes too
        "plan": cfg.plan,
        "dependence": cfg.dependence,
        "feedback_tries": cfg.feedback_tries,
        "seed": seed,
        "max_chars": max_chars,
        "prompts_sha256": hashlib.sha256(prompts.encode()).hexdigest()[:16],
        **identity,
    }
    claim_run(out / RUN_FILE, mine, has_work=(out / JOURNAL).exists(), what="an LLM compose run",
              fix=f"use a new --out, or delete {out / JOURNAL} to start over")


def run_journaled(
    engine: ResumableComposer,
    candidates: Iterable[Sequence[Problem]],
    out: Path,
    engine_name: str,
    total: int | None = None,
    progress: bool = True,
    extra_stats: dict[str, Any] | None = None,
    identity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Compose ``candidates`` with a resumable engine and write ``composed.jsonl``,
    ``rejected.jsonl`` and ``stats.json`` into ``out``; returns the stats.

    Resumable: rerun with the same ``out`` after a crash or ``kill -9``; finished candidates
    are read from the journal and never composed (or called for) again. ``identity``: what
    else decides the output (the composition options, the input hashes), recorded in
    ``llm_run.json`` with the model settings; a rerun with any of it changed is refused.
    """
    out.mkdir(parents=True, exist_ok=True)
    given = engine.backend  # a ready backend (tests, benchmarks) is the caller's to close
    _claim_run(out, engine_name, engine.config, engine.seed, engine.max_chars, given, identity or {})
    backend, cache = engine.open(out)
    t0 = time.perf_counter()
    try:
        order, journal_path = run_sync(_drive(candidates, out, engine, backend, engine.config.concurrency,
                                                 total, progress, own_backend=given is None))
    except RequestRefused as e:
        e.args = (f"{e}. Candidates finished so far are kept in {out / JOURNAL}; rerun with the "
                  "setting changed to go on",)
        raise
    finally:
        if cache is not None:
            cache.close()
    elapsed = time.perf_counter() - t0
    return _finalize(out, order, journal_path, engine_name, backend, engine.config, elapsed, extra_stats or {})


class _Drive:
    """One pass of the journaled path over the candidates: what the candidate tasks share
    (the journal, the order, the counts, the progress bar, the transient failures in a row)."""

    def __init__(self, out: Path, engine: ResumableComposer, backend: Any, total: int | None,
                 progress: bool) -> None:
        self.out, self.engine, self.backend = out, engine, backend
        self.journal = JsonlLog(out / JOURNAL, key="cid")
        self.journal.done -= _retryable(out / JOURNAL)  # composed again: the new line supersedes the retryable one
        self.order: list[str] = []
        self.done_before = len(self.journal.done)
        self.counters = {"done": 0, "accepted": 0}
        self.bar = ProgressBar("llm compose", total, enabled=progress, elapsed=True,
                               fields={"acc": "-", "_cps": "0.0 calls/s", "_tok": "0 tok"})
        self.t0 = time.perf_counter()
        self.refused: list[BaseException] = []
        # transient failures (no answer at all) are never journaled: a rerun retries them. So many
        # in a row that no answer came between them means the endpoint is down: stop early.
        self.transient = {"in_a_row": 0, "total": 0}
        self.stop_after = engine.config.stop_after

    def tick(self) -> None:
        s, done, elapsed = self.backend.stats, self.counters["done"], time.perf_counter() - self.t0
        self.bar.update(done, acc=f"{self.counters['accepted'] / done:.0%}" if done else "-",
                        _cps=f"{s.calls / elapsed:.1f} calls/s" if elapsed > 0 else "0.0 calls/s",
                        _tok=f"{s.prompt_tokens + s.completion_tokens:,} tok")

    async def one(self, chain: Sequence[Problem], cid: str) -> None:
        """Compose one candidate and journal it (a transient failure or a refusal: not journaled)."""
        from composition_rl.spc.llm.proposal import Usage

        usage = Usage()
        transient = self.transient
        try:
            res = await self.engine.acompose(chain, cid, usage)
        except RequestRefused as e:
            self.refused.append(e)  # not journaled: a rerun with the option changed redoes it
            return
        except ChatError as e:
            if not e.transient:
                raise
            transient["total"] += 1
            transient["in_a_row"] += 1
            if transient["in_a_row"] >= self.stop_after and not self.refused:
                where = e.endpoint or "the endpoint"
                self.refused.append(EndpointDown(
                    f"{where} gave no answer to {transient['in_a_row']} candidates in a row (last: {e.kind}: "
                    f"{e.detail[:160]}); stopped. Finished candidates are kept in {self.out / JOURNAL}; rerun the "
                    "same command when the endpoint answers (the failed ones are retried)"))
            return
        except Exception as e:  # a bug must not sink a day-long run: count it, loudly
            log.exception("candidate %s failed", cid)
            res = Rejection("internal", "internal_error", f"{type(e).__name__}: {e}"[:300])
        if usage.requests:  # an answer came back: the endpoint is up (a candidate the program
            transient["in_a_row"] = 0  # decided without a call says nothing about it)
        ok = isinstance(res, Problem)
        engine, row = (res.engine, res.to_dict()) if isinstance(res, Problem) else ("llm", res.row(cid, chain))
        entry: dict[str, Any] = {
            "cid": cid,
            "ok": ok,
            "engine": engine,
            "requests": usage.requests,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "row": row,
        }
        if isinstance(res, Rejection) and res.reason in RETRYABLE:
            entry["retryable"] = True
        self.journal.append(entry)
        self.counters["done"] += 1
        self.counters["accepted"] += int(ok)
        self.tick()

    async def feed(self, candidates: Iterable[Sequence[Problem]], concurrency: int) -> None:
        """Start a task per new candidate, at most ``2 * concurrency`` at once; wait for all.
        On a refusal (or the endpoint down) stop starting, cancel the rest and raise it."""
        seen: set[str] = set()
        slots = asyncio.Semaphore(max(2 * concurrency, 4))
        tasks: set[asyncio.Task] = set()
        for chain in candidates:
            if self.refused:
                break
            chain = tuple(chain)
            cid = candidate_id(chain)
            if cid in seen:
                continue  # the same chain twice in the input: composed once
            seen.add(cid)
            self.order.append(cid)
            if cid in self.journal.done:
                self.counters["done"] += 1
                continue
            await slots.acquire()
            t = asyncio.create_task(self.one(chain, cid))
            tasks.add(t)
            t.add_done_callback(functools.partial(_finished, tasks, slots))
        if self.refused:
            for t in list(tasks):
                t.cancel()
        if tasks:
            await asyncio.gather(*list(tasks), return_exceptions=bool(self.refused))
        self.tick()
        if self.refused:
            # requests the cancelled candidates shared (engine._ask shields them) may still be
            # in flight: end them now, or asyncio.run reports each failure as a traceback
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
            raise self.refused[0]


def _finished(tasks: set[asyncio.Task], slots: asyncio.Semaphore, t: asyncio.Task) -> None:
    tasks.discard(t)
    slots.release()


async def _drive(candidates: Iterable[Sequence[Problem]], out: Path, engine: ResumableComposer, backend: Any,
                 concurrency: int, total: int | None, progress: bool, own_backend: bool) -> tuple[list[str], Path]:
    drive = _Drive(out, engine, backend, total, progress)
    try:
        await drive.feed(candidates, concurrency)
    finally:
        drive.bar.close()
        drive.journal.close()
        if own_backend:
            await backend.aclose()
        else:
            await backend.end_loop()
    log.info("llm compose: %d candidates, %d already done before this run", len(drive.order), drive.done_before)
    if drive.transient["total"]:
        log.warning("llm compose: %d candidates got no answer (timeouts, connection errors, 5xx); they are left "
                    "for the next run", drive.transient["total"])
    return drive.order, out / JOURNAL


#: rejection reasons that say nothing about the candidate (a bug of ours): a rerun retries them
RETRYABLE = frozenset({"internal_error"})


def _retryable(path: Path) -> set[str]:
    """The candidates whose latest journal line is retryable (composed again by this run)."""
    latest: dict[str, bool] = {}
    if path.exists():
        with open(path, "rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    break
                if b'"retryable"' in raw or latest:  # only a journal with one reads each line
                    e = json.loads(raw)
                    latest[e["cid"]] = bool(e.get("retryable"))
    return {cid for cid, again in latest.items() if again}


def _index_journal(path: Path) -> dict[str, int]:
    """Where each candidate's line is: the last one, which supersedes a retryable earlier one."""
    offsets: dict[str, int] = {}
    pos = 0
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break
            offsets[json.loads(raw)["cid"]] = pos
            pos += len(raw)
    return offsets


def _finalize(
    out, order, journal_path, engine, backend, llm_config, elapsed, extra
) -> dict[str, Any]:
    offsets = _index_journal(journal_path)
    reasons: Counter[str] = Counter()
    stages: Counter[str] = Counter()
    by_engine: Counter[str] = Counter()
    dependence: Counter[str] = Counter()  # check 5 on the accepted records (dependent / unknown)
    requests = ptoks = ctoks = accepted = missing = 0
    with (
        open(journal_path, "rb") as j,
        atomic_open(out / "composed.jsonl") as fa,
        atomic_open(out / "rejected.jsonl") as fr,
    ):
        for cid in order:
            off = offsets.get(cid)
            if off is None:
                missing += 1  # no answer came (a transient failure): left for the next run
                continue
            j.seek(off)
            e = json.loads(j.readline())
            requests += e["requests"]
            ptoks += e["prompt_tokens"]
            ctoks += e["completion_tokens"]
            if e["ok"]:
                accepted += 1
                by_engine[e["engine"]] += 1
                dependence[e["row"].get("metadata", {}).get("dependence", "unknown")] += 1
                fa.write(dumps(e["row"]) + "\n")
            else:
                reasons[e["row"]["reason"]] += 1
                stages[e["row"]["stage"]] += 1
                fr.write(dumps(e["row"]) + "\n")
    n = len(order) - missing
    funnel = _funnel(n, stages, LLM_STAGES)
    s = backend.stats
    llm_acc = by_engine.get("llm", 0)
    stats = {
        **extra,
        "engine": engine,
        "llm_config": llm_config.public(),
        "backend": backend.describe(),
        "candidates": n,
        "pending": missing,  # candidates with no answer yet (transient failures): a rerun retries them
        "accepted": accepted,
        "rejected": n - accepted,
        "acceptance": round(accepted / n, 6) if n else 0.0,
        "accepted_by_engine": dict(sorted(by_engine.items())),
        "rejected_by_reason": dict(sorted(reasons.items())),
        "rejected_by_stage": {st: stages.get(st, 0) for st in LLM_STAGES},
        "funnel": funnel,
        # check 5's outcomes: accepted records shown to depend on their variables or left
        # undecided, chains rejected because an answer did not depend on one, and (with
        # --dependence blind) chains whose later problem the model solved without the value
        "dependence": {"dependent": dependence.get("dependent", 0), "unknown": dependence.get("unknown", 0),
                       "independent": reasons.get("independent", 0) + reasons.get("independent_model", 0),
                       **({"revealed": reasons.get("revealed_model", 0)} if llm_config.dependence == "blind" else {})},
        "llm": {
            "requests": requests,
            "prompt_tokens": ptoks,
            "completion_tokens": ctoks,
            "requests_per_accepted": round(requests / accepted, 4) if accepted else None,
            "requests_per_llm_accepted": round(requests / llm_acc, 4) if llm_acc else None,
        },
        "this_run": {
            **s.to_dict(),
            "calls_per_s": round(s.calls / elapsed, 2) if elapsed > 0 else None,
            **_bound(s, llm_config.concurrency, elapsed),
        },
        "elapsed_s": round(elapsed, 3),
    }
    atomic_write_json(out / "stats.json", stats)
    return stats


def _bound(s: Any, concurrency: int, elapsed: float) -> dict[str, Any]:
    """The concurrency/latency bound on calls/s and the fraction of it this run reached.

    With ``concurrency`` requests in flight and a mean latency L per successful call (as the
    client saw it, queueing at the server included), no client can exceed concurrency / L
    calls/s; the fraction says how well the engine kept its slots busy.
    """
    if not s.ok or s.latency_s <= 0 or elapsed <= 0:
        return {"mean_latency_s": None, "bound_calls_per_s": None, "fraction_of_bound": None}
    lat = s.latency_s / s.ok
    bound = concurrency / lat
    return {
        "mean_latency_s": round(lat, 3),
        "bound_calls_per_s": round(bound, 3),
        "fraction_of_bound": round(s.ok / elapsed / bound, 3),
    }
