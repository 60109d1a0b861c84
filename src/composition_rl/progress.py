"""One progress bar for every long command, on rich; free when disabled (tests, pipes).

    with ProgressBar("composing", total=n, enabled=progress, fields={"acc": 0}) as bar:
        bar.update(done, acc=accepted)      # absolute position
        bar.advance(k)                      # or relative steps

Extra ``fields`` become columns after the counter (``name value``); ``elapsed=True`` shows
the elapsed time instead of the time remaining (for runs whose total is unknown). The
training loop keeps its own (``train/progress.py``): it reports per-step metrics.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ProgressBar"]


class ProgressBar:
    """A rich progress bar that costs nothing when ``enabled`` is False.

    >>> with ProgressBar("scoring", total=3, enabled=False) as bar:
    ...     bar.advance(3)
    """

    def __init__(self, label: str, total: int | None, enabled: bool = True, *, completed: int = 0,
                 fields: dict[str, Any] | None = None, elapsed: bool = False, transient: bool = True) -> None:
        self._p = None
        if not enabled:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        fields = dict(fields or {})
        cols = [TextColumn(label), BarColumn(), MofNCompleteColumn()]
        cols += [TextColumn(f"{{task.fields[{k}]}}" if k.startswith("_") else f"{k} {{task.fields[{k}]}}")
                 for k in fields]
        cols.append(TimeElapsedColumn() if elapsed else TimeRemainingColumn())
        self._p = Progress(*cols, transient=transient)
        self._p.start()
        self._t = self._p.add_task(label, total=total, completed=completed, **fields)

    def update(self, completed: int, **fields: Any) -> None:
        """Move the bar to ``completed`` and set the extra fields."""
        if self._p is not None:
            self._p.update(self._t, completed=completed, **fields)

    def advance(self, k: int = 1) -> None:
        if self._p is not None:
            self._p.advance(self._t, k)

    def close(self) -> None:
        if self._p is not None:
            self._p.stop()
            self._p = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
