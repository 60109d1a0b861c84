"""Run a reproduction: the job graph of every seed on a small process pool, then the report.

Jobs of different seeds are independent and the arms of one seed are too, so on 2 cores
two jobs run at once (each on one torch thread, which is as fast for a 1M-parameter model).
Each finished job leaves ``seed_S/jobs/NAME.json``; a rerun of the same command skips those
and continues, and a changed config is refused rather than mixed in. The one change accepted
is adding arms (``--arms ...,online`` on a finished run): the new arms' jobs run, and the
continue arm's evaluation reruns to pick its matched-token snapshot for them (the continue
arm itself is not retrained, so that snapshot is the nearest it already has).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from composition_rl.io.files import atomic_write_json
from composition_rl.io.identity import RunMismatch, claim_run
from composition_rl.jobs.reproduce.config import ReproduceConfig
from composition_rl.jobs.reproduce.seed import run_job, seed_dir

__all__ = ["Job", "plan", "run_reproduce"]

CONFIG_FILE = "config.json"


@dataclass(frozen=True)
class Job:
    """One unit of work: ``kind`` (sft, d1, profile, arm, eval) for one seed, after ``deps``."""

    seed: int
    kind: str
    arg: str | None = None
    deps: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """``s<seed>/<kind>`` or ``s<seed>/<kind>-<arg>``: the key of its result and of other
        jobs' ``deps``."""
        return f"s{self.seed}/{self.kind}" + (f"-{self.arg}" if self.arg else "")

    def marker(self, out: Path) -> Path:
        """``OUT/seed_<seed>/jobs/<kind>[-<arg>].json``: the result file whose presence marks
        the job finished."""
        return seed_dir(out, self.seed) / "jobs" / (self.kind + (f"-{self.arg}" if self.arg else "") + ".json")

_log = logging.getLogger(__name__)


def plan(cfg: ReproduceConfig) -> list[Job]:
    """Every job of every seed. The executor starts ready jobs in this order, so the long
    chains of all seeds begin first (each seed's SFT is its longest job; listing seed by seed
    left the last seed's SFT waiting until the others were nearly done).

    >>> [j.name for j in plan(ReproduceConfig(seeds=(0, 1), arms=("continue", "depth2")))][:7]
    ['s0/sft', 's1/sft', 's0/d1', 's1/d1', 's0/arm-depth2', 's1/arm-depth2', 's0/tests']
    """
    composed = [a for a in cfg.arms if a != "continue"]
    rounds: list[list[Job]] = [[] for _ in range(6)]
    for s in cfg.seeds:
        p = f"s{s}/"
        rounds[0].append(Job(s, "sft"))
        rounds[1].append(Job(s, "d1", deps=(p + "sft",)))
        rounds[2] += [Job(s, "arm", a, deps=(p + "d1",)) for a in composed]
        rounds[3] += [Job(s, "tests", deps=(p + "d1",)), Job(s, "profile", deps=(p + "d1",)),
                      Job(s, "eval", "start", deps=(p + "tests",))]
        # the continue arm runs until it has generated as many tokens as the composed arms
        rounds[4].append(Job(s, "arm", "continue", deps=tuple(p + f"arm-{a}" for a in composed)))
        rounds[5] += [Job(s, "eval", a, deps=(p + f"arm-{a}", p + "tests")) for a in (*composed, "continue")]
    return [j for r in rounds for j in r]


def _check_config(out: Path, cfg: ReproduceConfig) -> None:
    """Record the settings (:func:`composition_rl.io.identity.claim_run`); refuse other ones. The
    arms are the exception: arms added to a run reuse its finished jobs."""
    path = out / CONFIG_FILE
    want = json.loads(json.dumps(cfg.to_dict()))
    arms = want.pop("arms")
    had = json.loads(path.read_text()).get("arms") if path.exists() else None
    fix = "use another --out or the same settings to resume"
    out.mkdir(parents=True, exist_ok=True)
    claim_run(path, want, has_work=path.exists(), info={"arms": arms}, what="a reproduction", fix=fix)
    if had is not None and not set(had) <= set(arms):
        raise RunMismatch(f"{out} holds a reproduction made with other settings (arms: {had!r} -> {arms!r}); {fix}")
    if had is not None and had != arms:
        atomic_write_json(path, {**want, "arms": arms})  # arms added to a finished run: reuse its jobs


def _stale(cfg: ReproduceConfig, job: Job, result: dict[str, Any]) -> bool:
    """A finished job whose result lacks what an arm added since needs: the continue arm's
    evaluation at matched tokens for each composed arm."""
    if job.kind == "eval" and job.arg == "continue":
        return not {f"continue@tokens:{a}" for a in cfg.arms if a != "continue"} <= set(result)
    return False


def _cached(cfg: ReproduceConfig, out: Path, job: Job) -> dict[str, Any] | None:
    """The recorded result of a finished, still valid job, else None."""
    if not job.marker(out).exists():
        return None
    result = json.loads(job.marker(out).read_text())
    return None if _stale(cfg, job, result) else result


def execute(cfg: ReproduceConfig, out: Path, jobs: list[Job], on_done: Callable[[Job, dict], None],
            on_start: Callable[[Job], None] = lambda j: None) -> dict[str, dict[str, Any]]:
    """Run ``jobs`` respecting their deps on ``cfg.workers`` processes; skip finished ones."""
    results: dict[str, dict[str, Any]] = {}
    for j in jobs:
        cached = _cached(cfg, out, j)
        if cached is not None:
            results[j.name] = cached
            on_done(j, results[j.name])
    pending = [j for j in jobs if j.name not in results]
    cfg_dict = cfg.to_dict()
    ctx = multiprocessing.get_context("spawn")  # no torch state or threads inherited by workers
    pool = ProcessPoolExecutor(max_workers=cfg.workers, mp_context=ctx)
    try:
        running: dict[Any, Job] = {}
        while pending or running:
            for j in [j for j in pending if all(d in results for d in j.deps)]:
                if len(running) >= cfg.workers:
                    break
                pending.remove(j)
                on_start(j)
                running[pool.submit(run_job, cfg_dict, str(out), j.seed, j.kind, j.arg)] = j
            if not running:
                missing = sorted({d for j in pending for d in j.deps} - results.keys())
                raise RuntimeError(f"jobs wait on unknown or failed jobs: {missing}")
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                j = running.pop(fut)
                try:
                    results[j.name] = fut.result()
                except Exception as e:
                    for other in running:
                        other.cancel()
                    raise RuntimeError(f"job {j.name} failed: {type(e).__name__}: {e}") from e
                on_done(j, results[j.name])
    except BaseException:
        # Ctrl-C, SIGTERM or a failed job: a job still running would train on for many minutes
        # in an orphaned worker; stop the workers instead (finished jobs are kept, a rerun resumes)
        _stop_workers(pool)
        raise
    pool.shutdown(wait=True)
    return results


def _stop_workers(pool: ProcessPoolExecutor, grace_s: float = 5.0) -> None:
    """Cancel what has not started and end the worker processes: SIGTERM, then SIGKILL after ``grace_s``."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + grace_s
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
    # the executor's own thread may reap a worker first (our waitpid then fails with ECHILD and
    # is_alive() reads True until that thread records the exit code): wait until each is seen gone
    settle = time.monotonic() + 5.0
    for p in procs:
        while p.is_alive() and time.monotonic() < settle:
            p.join(0.1)


def run_reproduce(cfg: ReproduceConfig, out: str | Path, progress: bool = True,
                  log: Callable[[str], None] = _log.info) -> dict[str, Any]:
    """Run (or resume) the reproduction into ``out``; write report.md, results.json, figures.
    ``log`` takes the progress lines (by default this module's logger; ``crl reproduce`` prints
    them).

    Returns the results dict written to ``out/results.json``.
    """
    from composition_rl.jobs.reproduce.report import write_report

    out = Path(out)
    _check_config(out, cfg)
    jobs = plan(cfg)
    t0 = time.perf_counter()
    resumed = sum(_cached(cfg, out, j) is not None for j in jobs)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("[bold]reproduce"), BarColumn(), TextColumn("{task.completed}/{task.total} jobs"),
               TimeElapsedColumn(), TextColumn("{task.description}"))
    running: set[str] = set()
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task("", total=len(jobs))

        def started(j: Job) -> None:
            running.add(j.name)
            bar.update(task, description="running " + ", ".join(sorted(running)))

        def done(j: Job, result: dict) -> None:
            running.discard(j.name)
            bar.update(task, advance=1, description="running " + ", ".join(sorted(running)))
            if not progress:
                log(f"done {j.name} ({result.get('seconds', 0)} s)")

        results = execute(cfg, out, jobs, on_done=done, on_start=started)
    # wall time of this invocation; jobs finished by an earlier, interrupted one are counted
    return write_report(cfg, out, results, round(time.perf_counter() - t0, 1), resumed_jobs=resumed)
