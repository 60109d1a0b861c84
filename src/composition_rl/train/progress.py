"""A rich progress bar for step loops that degrades to nothing when disabled."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["step_progress"]


@contextmanager
def step_progress(label: str, total: int, enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """Yield ``advance(status)``; each call moves the bar one step and shows ``status``."""
    if not enabled:
        yield lambda status="": None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeRemainingColumn(), TextColumn("{task.fields[status]}"))
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task(label, total=total, status="")

        def advance(status: str = "") -> None:
            bar.update(task, advance=1, status=status)

        yield advance
