"""The local executor: one backend in this process, chunk after chunk (the default).

Each chunk is one ``generate`` call and one ``score_batch`` call on the caller's verifier
(the shared process pool); the caller appends the chunk's rows before the next one starts,
so a kill loses at most the chunk in flight.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from composition_rl.executors.base import (
    BackendSpec,
    Executor,
    ExecutorConfig,
    SampleJob,
    Scored,
    check_completions,
)
from composition_rl.records import Problem
from composition_rl.rollout.base import RolloutBackend

__all__ = ["LocalExecutor", "as_executor"]


class LocalExecutor:
    """Sample and grade in this process.

    Args:
        spec: the backend to build here (None when ``backend`` is given).
        config: the executor config (the local executor takes no options of its own).
        backend: an already-built backend to use instead; it stays the caller's to close.

    Example (not run here: it needs a model folder):
        >>> ex = LocalExecutor(BackendSpec("hf", {"model": "runs/tiny"}))   # doctest: +SKIP
        >>> for scored in ex.run([problems], job, shared_verifier()): ...  # doctest: +SKIP
    """

    #: ExecutorConfig fields this executor takes (besides ``executor``).
    options: tuple[str, ...] = ()

    def __init__(
        self,
        spec: BackendSpec | None,
        config: ExecutorConfig | None = None,
        backend: RolloutBackend | None = None,
    ) -> None:
        if backend is None and spec is None:
            raise ValueError("the local executor needs a backend spec or a built backend")
        self._owned = backend is None
        self.backend: Any = spec.build() if backend is None else backend
        self.name: str = getattr(self.backend, "name", type(self.backend).__name__)

    def run(
        self, chunks: Sequence[Sequence[Problem]], job: SampleJob, verifier: Any
    ) -> Iterator[list[Scored]]:
        """Sample each chunk on the backend, then grade all its completions in one
        ``verifier.score_batch`` call; one list of :class:`Scored` per chunk, in order.

        Raises:
            RuntimeError: the backend returned the wrong number of completions.
        """
        n = job.n
        for chunk in chunks:
            completions = self.backend.generate(job.prompts(chunk), n, job.sampling)
            check_completions(self.name, len(chunk), completions, n)
            pairs = [(c.text, list(p.answers)) for p, comps in zip(chunk, completions) for c in comps]
            results = verifier.score_batch(pairs)
            yield [
                Scored(p, tuple(comps), tuple(results[i * n : (i + 1) * n]))
                for i, (p, comps) in enumerate(zip(chunk, completions))
            ]

    def close(self) -> None:
        """Close the backend if this executor built it; a backend passed in stays open."""
        if self._owned:
            self.backend.close()


def as_executor(backend: Any) -> Executor:
    """``backend`` itself when it is an executor, else the local executor around it.

    The library functions take either: a rollout backend (run here, as before executors
    existed) or an executor from :func:`~composition_rl.executors.base.build_executor`. The
    wrapper does not own the backend: closing it stays with the caller.
    """
    if isinstance(backend, Executor):
        return backend
    return LocalExecutor(None, backend=backend)
