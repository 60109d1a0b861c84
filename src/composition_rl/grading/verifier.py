"""The verifier: does a response's final answer equal the ground truth? Bounded in time.

One :class:`Verifier` owns a persistent pool of worker processes (see ``pool.py``); every
item is scored in a worker with Math-Verify and a hard per-item bound, so it is safe from
any thread and from asyncio, and a pathological answer costs at most ``timeout_s``.

Use one per process: :func:`shared_verifier` hands the same instance to the trainer's
reward, the profiler, evaluation and the composition checks, so they share workers and
gold-parse caches and cannot disagree.
"""

from __future__ import annotations

import asyncio
import atexit
import enum
import os
import threading
import weakref
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import asdict, dataclass

from composition_rl.grading.extract import FALLBACKS, gold_forms
from composition_rl.grading.pool import PoolStats, RawResult, WorkerPool

__all__ = [
    "Outcome",
    "Verifier",
    "VerifyConfig",
    "VerifyResult",
    "close_shared_verifiers",
    "fallbacks_from_names",
    "shared_verifier",
    "summarize",
]


class Outcome(str, enum.Enum):
    """What became of one (response, gold) pair. Only ``correct`` scores 1.0."""

    CORRECT = "correct"
    INCORRECT = "incorrect"
    NO_ANSWER = "no_answer"  # no box and no fallback match: nothing to compare
    TIMEOUT = "timeout"  # ran past the bound; never silently "incorrect"
    ERROR = "error"  # an exception, or the worker died

    def __str__(self) -> str:
        return self.value


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


#: Most seconds one answer check may be given, and most worker processes.
MAX_TIMEOUT_S = 3600
MAX_WORKERS = 1024


@dataclass(frozen=True)
class VerifyConfig:
    """How answers are checked.

    Args:
        timeout_s: hard bound per item (extraction + parsing + comparison), in seconds.
            An item over it gets outcome ``timeout`` and its worker is replaced. Math-Verify's
            own default is 5 s per parse and per comparison.
        workers: worker processes; ``None`` means one per usable core.
        fallbacks: answer extraction when there is no ``\\boxed{}``, tried in order; names
            from ``composition_rl.grading.extract.FALLBACKS``: ``answer_line``, ``answer_is``,
            ``last_line``, ``whole`` (a short response that is one expression, or one math span
            with a short phrase: ``7,425,000``, ``$(3,2)$``, ``Answer $9$``), and ``prose``
            (the common unboxed endings, for evaluation: "The answer is X", "Final Answer:
            ...", "**Answer:** X", a last line that is only the answer, then ``whole``; an
            answer read from prose also compares ``1,22`` with ``1.22``). ``()`` means a box
            is required. An empty final box counts as no box. The default keeps ``prose`` and
            ``whole`` off, as RL rewards should: a policy could learn to drop the box.
        chunk_size: at most this many items sharing a gold go to a worker as one task.
        float_rounding, numeric_precision, strict: passed to ``math_verify.verify``.
        gold_cache_size: parsed gold answers kept per worker.
    """

    timeout_s: float = 5.0
    workers: int | None = None
    fallbacks: tuple[str, ...] = ("answer_line",)
    chunk_size: int = 8
    float_rounding: int = 6
    numeric_precision: int = 15
    strict: bool = True
    gold_cache_size: int = 4096

    def __post_init__(self) -> None:
        if isinstance(self.fallbacks, str) or not isinstance(self.fallbacks, tuple):
            object.__setattr__(self, "fallbacks", (self.fallbacks,) if isinstance(self.fallbacks, str) else tuple(self.fallbacks))
        # The upper bounds stop a typo (1e9 s, a million workers) before it overflows a
        # C timeout or forks without end; they are far above any real use.
        if not (isinstance(self.timeout_s, (int, float)) and 0 < self.timeout_s <= MAX_TIMEOUT_S):
            raise ValueError(f"timeout_s must be a number in (0, {MAX_TIMEOUT_S}] seconds, got {self.timeout_s!r}")
        if self.workers is not None and (not isinstance(self.workers, int) or not 1 <= self.workers <= MAX_WORKERS):
            raise ValueError(f"workers must be an int in [1, {MAX_WORKERS}] (or None: one per usable core), "
                             f"got {self.workers!r}")
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {self.chunk_size}")
        if self.gold_cache_size < 1:
            raise ValueError(f"gold_cache_size must be >= 1, got {self.gold_cache_size}")
        unknown = [f for f in self.fallbacks if f not in FALLBACKS.names()]
        if unknown:
            raise ValueError(f"unknown answer fallback(s) {unknown}; known: {sorted(FALLBACKS.names())}")

    @property
    def n_workers(self) -> int:
        """``workers``, or one per usable core (the process's CPU affinity) when it is ``None``."""
        return self.workers if self.workers is not None else _usable_cores()

    def worker_settings(self) -> dict:
        """The settings a worker needs (fallbacks, ``math_verify`` options, gold cache size), as
        plain JSON values for the fork server."""
        return {
            "fallbacks": list(self.fallbacks),
            "float_rounding": self.float_rounding,
            "numeric_precision": self.numeric_precision,
            "strict": self.strict,
            "gold_cache_size": self.gold_cache_size,
        }


FALLBACK_HELP = (
    "answer extraction when there is no \\boxed{} (or it is empty): answer_line (default: an 'Answer: X' line), "
    "prose (the common unboxed endings: 'The answer is X', 'Final Answer: ...', '**Answer:** X', a last line "
    "that is only the answer, a short response that is its own answer; decimal commas such as 1,22 read against "
    "1.22), or one of answer_is, last_line, whole; repeat for several, tried in order; 'none' requires a box"
)


def fallbacks_from_names(names: Iterable[str] | None) -> tuple[str, ...]:
    """The fallbacks a command line names (``--fallback`` repeated): none given means the
    default, ``none`` alone means a box is required. Names are checked by :class:`VerifyConfig`.

    >>> fallbacks_from_names(None), fallbacks_from_names(["none"]), fallbacks_from_names(["prose"])
    (('answer_line',), (), ('prose',))
    """
    got = tuple(names or VerifyConfig.fallbacks)
    return () if got == ("none",) else got


@dataclass(frozen=True)
class VerifyResult:
    """The verdict on one (response, gold) pair.

    Attributes:
        outcome: see :class:`Outcome`.
        score: 1.0 if correct, else 0.0.
        extracted: the final answer found in the response (cut to 200 characters), or None.
        via: which step decided: "string" (normalised match), "integer" (exact integer
            comparison), "math_verify", or "" (no answer, timeout, error).
        elapsed_s: seconds the item spent in a worker.
        detail: why, for timeout and error.
    """

    outcome: Outcome
    score: float
    extracted: str | None = None
    via: str = ""
    elapsed_s: float = 0.0
    detail: str = ""

    @property
    def correct(self) -> bool:
        """Whether the outcome is :attr:`Outcome.CORRECT`."""
        return self.outcome is Outcome.CORRECT

    def to_dict(self) -> dict:
        """The fields as a JSON-ready dict, ``outcome`` as its string value."""
        d = asdict(self)
        d["outcome"] = self.outcome.value
        return d

    @classmethod
    def _from_raw(cls, raw: RawResult) -> VerifyResult:
        outcome = Outcome(raw.outcome)
        return cls(
            outcome=outcome,
            score=1.0 if outcome is Outcome.CORRECT else 0.0,
            extracted=raw.extracted,
            via=raw.via,
            elapsed_s=raw.elapsed_s,
            detail=raw.detail,
        )


def summarize(results: Iterable[VerifyResult]) -> dict[str, int]:
    """Counts by outcome, every outcome present, in a fixed order.

    >>> summarize([])
    {'correct': 0, 'incorrect': 0, 'no_answer': 0, 'timeout': 0, 'error': 0}
    """
    c = Counter(r.outcome for r in results)
    return {o.value: c.get(o, 0) for o in Outcome}


def _text(response: object) -> str:
    if isinstance(response, str):
        return response
    if response is None:
        return ""
    raise TypeError(f"response must be a str, got {type(response).__name__}")


class Verifier:
    """Scores responses against gold answers with Math-Verify under a hard per-item bound.

    Safe to call from any thread and from asyncio (``ascore``/``ascore_batch``). The pool
    starts on first use (about 1.5 s: one fork server imports Math-Verify, workers fork
    from it) and lives until :meth:`close`, the end of a ``with`` block, or exit.

    >>> with Verifier(VerifyConfig(timeout_s=2.0)) as v:
    ...     v.score(r"... so $\\boxed{\\dfrac12}$", "0.5").outcome
    <Outcome.CORRECT: 'correct'>
    """

    def __init__(self, config: VerifyConfig | None = None) -> None:
        self.config = config or VerifyConfig()
        self._pool = WorkerPool(
            self.config.n_workers,
            self.config.timeout_s,
            self.config.worker_settings(),
            make_result=VerifyResult._from_raw,
        )
        self._finalizer = weakref.finalize(self, self._pool.close)

    # -- lifecycle
    def close(self) -> None:
        """Stop the workers. Items still queued fail with RuntimeError."""
        self._finalizer()

    def start(self) -> Verifier:
        """Start the workers now, in the background, rather than on the first item (returns at
        once, and ``self``): the start-up then overlaps whatever the caller does next."""
        self._pool.start()
        return self

    @property
    def closed(self) -> bool:
        """Whether the worker pool has been closed."""
        return self._pool.closed

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def stats(self) -> PoolStats:
        """Items scored, timeouts, worker crashes and workers started so far."""
        return self._pool.stats

    def worker_pids(self) -> list[int]:
        """Pids of the live worker processes and, last, of their fork server (diagnostics)."""
        z = self._pool.zygote_pid()
        return self._pool.worker_pids() + ([z] if z is not None else [])

    # -- scoring
    def submit_batch(self, pairs: Iterable[tuple[str, object]]) -> list[Future]:
        """Queue ``(response, gold)`` pairs; futures of :class:`VerifyResult`, in input order.

        Pairs that share a gold are sent together (in chunks), so each worker parses that
        gold once. ``gold`` may be a LaTeX string, an int, a float or a list of accepted forms.

        Raises:
            ValueError: a gold answer with no usable form (None, "", []).
        """
        pairs = [(_text(r), gold_forms(g)) for r, g in pairs]
        out: list[Future | None] = [None] * len(pairs)
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, (_, golds) in enumerate(pairs):
            groups.setdefault(golds, []).append(i)
        # Small batches are split finer so every worker gets some of them.
        n_workers = self._pool.n_workers
        chunk = max(1, min(self.config.chunk_size, -(-len(pairs) // (2 * n_workers))))
        for golds, idx in groups.items():
            for k in range(0, len(idx), chunk):
                part = idx[k : k + chunk]
                futures = self._pool.submit(golds, [pairs[i][0] for i in part])
                for i, f in zip(part, futures):
                    out[i] = f
        return out  # type: ignore[return-value]

    def submit(self, response: str, gold: object) -> Future:
        """Queue one pair; a future of its :class:`VerifyResult`."""
        return self.submit_batch([(response, gold)])[0]

    def score(self, response: str, gold: object) -> VerifyResult:
        """Score one response against a gold answer (any accepted form matching is correct)."""
        return self.submit(response, gold).result()

    def score_batch(self, pairs: Iterable[tuple[str, object]], progress: bool = False) -> list[VerifyResult]:
        """Score many pairs in parallel; results in input order.

        Args:
            pairs: ``(response, gold)`` tuples.
            progress: show a progress bar (rich) while waiting.
        """
        futures = self.submit_batch(pairs)
        if not progress or not futures:
            return [f.result() for f in futures]
        from composition_rl.progress import ProgressBar

        results = []
        with ProgressBar("verifying", len(futures)) as bar:
            for f in futures:
                results.append(f.result())
                bar.advance()
        return results

    async def ascore(self, response: str, gold: object) -> VerifyResult:
        """:meth:`score` for asyncio: awaits without blocking the event loop."""
        return await asyncio.wrap_future(self.submit(response, gold))

    async def ascore_batch(self, pairs: Iterable[tuple[str, object]]) -> list[VerifyResult]:
        """:meth:`score_batch` for asyncio."""
        return list(await asyncio.gather(*(asyncio.wrap_future(f) for f in self.submit_batch(pairs))))


# ---------------------------------------------------------------- one verifier per process
_SHARED: dict[VerifyConfig, Verifier] = {}
_SHARED_LOCK = threading.Lock()


def shared_verifier(config: VerifyConfig | None = None) -> Verifier:
    """The process-wide :class:`Verifier` for ``config`` (default config if None).

    Every module that checks answers (TRL and verl rewards, profiling, evaluation, the
    composition checks) should take its verifier from here unless handed one, so one
    process runs one pool. Closed at interpreter exit; a closed one is replaced on the
    next call. After ``os.fork()`` the child gets fresh instances.
    """
    config = config or VerifyConfig()
    with _SHARED_LOCK:
        v = _SHARED.get(config)
        if v is None or v.closed:
            v = _SHARED[config] = Verifier(config)
        return v


def close_shared_verifiers() -> None:
    """Close every :func:`shared_verifier` of this process (they are recreated on next use).

    Runs at interpreter exit; call it yourself to release the worker processes earlier.
    """
    with _SHARED_LOCK:
        for v in _SHARED.values():
            v.close()
        _SHARED.clear()


def _forget_shared_in_child() -> None:
    global _SHARED_LOCK
    _SHARED_LOCK = threading.Lock()
    _SHARED.clear()


atexit.register(close_shared_verifiers)
os.register_at_fork(after_in_child=_forget_shared_in_child)
