"""Progress of step loops (training, SFT warm-up): the one display of
:mod:`composition_rl.progress`, with a status text (the step's metrics) after the counter."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from composition_rl.progress import ProgressBar

__all__ = ["step_progress"]


@contextmanager
def step_progress(label: str, total: int, enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """Yield ``advance(status)``; each call moves the display one step and shows ``status``.

    >>> with step_progress("SFT", 2, enabled=False) as advance:
    ...     advance("loss 0.1")
    """
    with ProgressBar(label, total=total, enabled=enabled, fields={"_status": ""}, transient=False) as bar:

        def advance(status: str = "") -> None:
            bar.advance(1, _status=status)

        yield advance
