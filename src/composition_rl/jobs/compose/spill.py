"""Spill plumbing: where the batch executor keeps accepted lines until it knows their order.

A named seam of the symbolic executor (:mod:`composition_rl.jobs.compose.run`), kept out of the
job logic. ``composed.jsonl`` is written in a seeded shuffle of candidate order
(:func:`~composition_rl.jobs.compose.pools.output_order`), and that order depends on how many
records were accepted, which is known only at the end. So every accepted line waits in a
spill file: the process that composed it (a forked worker, or the parent itself with one
worker) appends its chunk's lines to its own file and hands the parent only
``(file, offset, line lengths)``. At the end the parent writes ``composed.jsonl`` once,
line by line in output order, straight from the spill files (:meth:`SpillIndex.write_in_order`).

Why (docs/notes/benchmarks_log.md): before, the parent copied the ranges into
``composed.jsonl`` in candidate order and then rewrote the whole file in output order out of
a memory map: a second write and fsync of ~125 MB, and the map's pages counted in the
parent's RSS (peak 214-220 MB, of which ~136 MB file pages). Now the lines are read with
``pread`` and written in 1 MB batches, so the parent holds one batch and a ~14-byte index entry per line.
"""

from __future__ import annotations

import itertools
import os
from array import array
from collections.abc import Sequence

__all__ = ["Spill", "SpillIndex", "SpilledChunk"]

# (spill file, offset of the chunk's first line, byte length of each line, newline included)
SpilledChunk = tuple[str, int, array]


class Spill:
    """Where a process leaves its accepted lines: one append-only file per process in a
    private temporary folder of the output directory (the executor removes the folder)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._fd: int | None = None
        self._pid = 0
        self._path = ""
        self._size = 0

    def put(self, lines: Sequence[str]) -> SpilledChunk:
        """Append ``lines`` (without newlines) as UTF-8; return where they went."""
        if self._fd is None or self._pid != os.getpid():  # opened in the worker, never inherited
            self._pid = os.getpid()
            self._path = os.path.join(self.folder, f"{self._pid}.part")
            self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
            self._size = 0
        encoded = [s.encode() for s in lines]
        lengths = array("I", [len(b) + 1 for b in encoded])
        data = b"\n".join(encoded) + b"\n" if encoded else b""
        offset = self._size
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self._size += len(data)
        return self._path, offset, lengths

    def close(self) -> None:
        """Close this process's spill file; a descriptor inherited from the parent is left alone."""
        if self._fd is not None and self._pid == os.getpid():
            os.close(self._fd)
        self._fd = None


class SpillIndex:
    """The parent's index of spilled lines, in candidate order: for line i, its spill file,
    offset and length (about 14 bytes a line)."""

    def __init__(self) -> None:
        self._paths: list[str] = []
        self._file_no: dict[str, int] = {}
        self._files = array("H")
        self._offsets = array("q")
        self._lengths = array("I")

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, chunk: SpilledChunk, skip: Sequence[int] = ()) -> int:
        """Append one chunk's lines, but for those numbered in ``skip`` (the chunk's line
        numbers, ascending); returns the bytes appended."""
        path, offset, lengths = chunk
        if not lengths:
            return 0
        f = self._file_no.get(path)
        if f is None:
            f = self._file_no[path] = len(self._paths)
            self._paths.append(path)
        starts = itertools.islice(itertools.accumulate(lengths, initial=offset), len(lengths))
        if skip:
            dropped = set(skip)
            kept = [(o, n) for j, (o, n) in enumerate(zip(starts, lengths)) if j not in dropped]
            starts, lengths = [o for o, _ in kept], array("I", [n for _, n in kept])
        self._offsets.extend(starts)
        self._files.extend(itertools.repeat(f, len(lengths)))
        self._lengths.extend(lengths)
        return sum(lengths)

    @staticmethod
    def read(chunk: SpilledChunk, j: int) -> bytes:
        """Line ``j`` of a spilled chunk (newline included)."""
        path, offset, lengths = chunk
        start = offset + sum(lengths[:j])
        with open(path, "rb") as fh:
            fh.seek(start)
            line = fh.read(lengths[j])
        if len(line) != lengths[j]:
            raise OSError(f"spill file {path} ended at {start + len(line)}, expected {start + lengths[j]}")
        return line

    def write_in_order(self, out, order: Sequence[int], batch: int = 1 << 20) -> None:
        """Write line ``order[j]`` as line j of the binary file ``out``.

        ``order`` must be a permutation of ``range(len(self))``."""
        if len(order) != len(self):
            raise ValueError(f"an order of {len(order)} lines for {len(self)} spilled lines")
        fds = [os.open(p, os.O_RDONLY) for p in self._paths]
        try:
            files, offsets, lengths, pread = self._files, self._offsets, self._lengths, os.pread
            buf: list[bytes] = []
            held = 0
            for i in order:
                n = lengths[i]
                line = pread(fds[files[i]], n, offsets[i])
                while len(line) < n:  # a short read: rare on a regular file, so kept off the fast path
                    more = pread(fds[files[i]], n - len(line), offsets[i] + len(line))
                    if not more:
                        raise OSError(f"spill file {self._paths[files[i]]} ended at {offsets[i] + len(line)}, "
                                      f"expected {offsets[i] + n}")
                    line += more
                buf.append(line)
                held += n
                if held >= batch:
                    out.write(b"".join(buf))
                    buf.clear()
                    held = 0
            out.write(b"".join(buf))
        finally:
            for fd in fds:
                os.close(fd)
