"""How the library's notes reach a person: every module logs on its own ``composition_rl.*``
logger (``logging.getLogger(__name__)``) and prints nothing; ``crl`` (and the verl recipe's
driver, a command line too) calls :func:`show_logs` to show them on stderr as lines of text.

A library user sees nothing unless they attach a handler of their own, e.g.
``logging.basicConfig(level=logging.INFO)``, or call :func:`show_logs`.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["show_logs"]


class _Stderr(logging.StreamHandler):
    """The handler ``crl`` shows the library's notes with: each message as it is, on the
    ``sys.stderr`` of the moment (a test's capture, a progress bar's redirect), not the one at
    setup."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))
        self.setLevel(logging.INFO)

    @property
    def stream(self):  # read at each write
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def show_logs() -> None:
    """Show the ``composition_rl`` loggers' notes (INFO and above) on stderr, as ``crl`` does;
    one handler however often it is called. The library itself only logs: without this (or a
    handler of the user's own) it prints nothing."""
    logger = logging.getLogger("composition_rl")
    if not any(isinstance(h, _Stderr) for h in logger.handlers):
        logger.addHandler(_Stderr())
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
