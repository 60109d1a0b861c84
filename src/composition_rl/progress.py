"""One progress display for every long command, on rich; free when disabled (tests).

    with ProgressBar("composing", total=n, enabled=progress, fields={"acc": 0}) as bar:
        bar.update(done, acc=accepted)      # absolute position
        bar.advance(k)                      # or relative steps

Extra ``fields`` become columns after the counter (``name value``; a name starting with
``_`` shows its value alone); ``elapsed=True`` shows the elapsed time instead of the time
remaining (for runs whose total is unknown).

On a terminal the display is a rich bar. Where the output is not a terminal (``make demo >
log``, a batch job, CI) a bar cannot redraw, so the display is one plain line every
``interval`` seconds (default 30, or ``$CRL_PROGRESS_INTERVAL``) and a last line when such a
loop ends: a log then shows a long run is alive and how far it got (a loop shorter than one
interval prints nothing).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, TextIO

__all__ = ["ProgressBar", "progress_help"]

#: Seconds between two lines of the plain display when neither flag nor environment says.
DEFAULT_INTERVAL = 30.0


def progress_help() -> str:
    """The help of every command's ``--no-progress`` flag (one text, so they cannot drift)."""
    return ("show no progress (by default a bar on a terminal; when the output is not a terminal, "
            f"a line every $CRL_PROGRESS_INTERVAL seconds, default {DEFAULT_INTERVAL:.0f})")


def _interval() -> float:
    raw = os.environ.get("CRL_PROGRESS_INTERVAL", "")
    try:
        v = float(raw)
    except ValueError:
        return DEFAULT_INTERVAL
    return v if v >= 0 else DEFAULT_INTERVAL


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class _Lines:
    """The plain display: ``label done/total (pct%) fields, elapsed, ~left`` every interval."""

    def __init__(self, label: str, total: int | None, completed: int, fields: dict[str, Any],
                 interval: float, stream: TextIO) -> None:
        self.label, self.total, self.done, self.fields = label, total, completed, fields
        self.interval, self.stream = interval, stream
        self.start = self.last = time.monotonic()
        self.start_done = completed
        self.said = -1

    def set(self, completed: int | None = None, advance: int = 0, **fields: Any) -> None:
        if completed is not None:
            self.done = completed
        self.done += advance
        self.fields.update(fields)
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self._say(now)

    def _say(self, now: float) -> None:
        parts = [f"{self.label} {self.done}" + (f"/{self.total}" if self.total else "")]
        if self.total:
            parts[0] += f" ({100 * self.done / self.total:.0f}%)"
        extra = [f"{v}" if k.startswith("_") else f"{k} {v}" for k, v in self.fields.items()]
        parts += [e for e in extra if e.strip()]
        spent = now - self.start
        tail = f"{_clock(spent)} elapsed"
        rate = (self.done - self.start_done) / spent if spent > 0 else 0.0
        if self.total and rate > 0 and self.done < self.total:
            tail += f", ~{_clock((self.total - self.done) / rate)} left"
        print(", ".join(parts) + f" [{tail}]", file=self.stream, flush=True)
        self.said = self.done

    def close(self) -> None:
        # A loop shorter than one interval stays silent; a longer one ends on its last count.
        if self.said >= 0 and self.said != self.done:
            self._say(time.monotonic())


class ProgressBar:
    """A progress display that costs nothing when ``enabled`` is False.

    Args:
        label: what is counted (``"scoring"``).
        total: the count at the end, or None when unknown.
        enabled: False shows nothing (``--no-progress``).
        completed: where the count starts (a resumed run).
        fields: extra values shown after the counter, updated with :meth:`update`.
        elapsed: show elapsed time instead of time left (the bar on a terminal).
        transient: the bar disappears when done (the bar on a terminal).
        interval: seconds between lines when the output is not a terminal (default
            ``$CRL_PROGRESS_INTERVAL`` or 30).
        stream: where the display goes (default stdout, where rich draws its bar).

    >>> with ProgressBar("scoring", total=3, enabled=False) as bar:
    ...     bar.advance(3)
    >>> import io
    >>> log = io.StringIO()
    >>> with ProgressBar("scoring", total=4, interval=0, stream=log) as bar:
    ...     bar.advance(2)
    >>> log.getvalue().split(" [")[0]
    'scoring 2/4 (50%)'
    """

    def __init__(self, label: str, total: int | None, enabled: bool = True, *, completed: int = 0,
                 fields: dict[str, Any] | None = None, elapsed: bool = False, transient: bool = True,
                 interval: float | None = None, stream: TextIO | None = None) -> None:
        self._p = None
        self._lines: _Lines | None = None
        if not enabled:
            return
        fields = dict(fields or {})
        out = stream if stream is not None else sys.stdout
        if not (hasattr(out, "isatty") and out.isatty()):
            self._lines = _Lines(label, total, completed, fields, _interval() if interval is None else interval, out)
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        cols = [TextColumn(label), BarColumn(), MofNCompleteColumn()]
        cols += [TextColumn(f"{{task.fields[{k}]}}" if k.startswith("_") else f"{k} {{task.fields[{k}]}}")
                 for k in fields]
        cols.append(TimeElapsedColumn() if elapsed else TimeRemainingColumn())
        self._p = Progress(*cols, transient=transient, console=Console(file=out) if stream is not None else None)
        self._p.start()
        self._t = self._p.add_task(label, total=total, completed=completed, **fields)

    def update(self, completed: int, **fields: Any) -> None:
        """Move the bar to ``completed`` and set the extra fields."""
        if self._p is not None:
            self._p.update(self._t, completed=completed, **fields)
        elif self._lines is not None:
            self._lines.set(completed, **fields)

    def advance(self, k: int = 1, **fields: Any) -> None:
        """Move the bar ``k`` steps on (and set the extra fields)."""
        if self._p is not None:
            self._p.update(self._t, advance=k, **fields)
        elif self._lines is not None:
            self._lines.set(advance=k, **fields)

    def close(self) -> None:
        """Stop the bar (a line display that printed any line ends on its last count); again is
        a no-op."""
        if self._p is not None:
            self._p.stop()
            self._p = None
        if self._lines is not None:
            self._lines.close()
            self._lines = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
