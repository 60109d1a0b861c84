"""Parallel spill plumbing: how forked workers hand their accepted lines to the parent.

A named seam of the symbolic executor (:mod:`composition_rl.compose.run`), kept out of the
job logic. The readable default is ``workers=1`` (or any run under four chunks): the worker
returns its lines as bytes and the parent writes them. With several workers each writes
its lines to its own spill file and returns only (file, offset, length); the parent copies
the ranges into ``composed.jsonl`` in candidate order. Figure that justifies it
(docs/benchmarks.md): parent CPU 0.6-0.7 s -> 0.3-0.5 s on the MATH depth-2 job, no 134 MB
through pickle and pipe.
"""

from __future__ import annotations

import os

__all__ = ["OrderedOutput", "Spill"]


class Spill:
    """Where a worker leaves its accepted lines: one append-only file per worker process in a
    private temporary folder of the output directory. The worker hands the parent only the
    (file, offset, length) of each chunk; the parent copies that range into composed.jsonl in
    candidate order. Sending the bytes instead (pickle, pipe, unpickle, write: ~134 MB for the
    MATH depth-2 run) cost the parent ~0.4 s of CPU that the two workers needed."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._fd: int | None = None
        self._pid = 0
        self._path = ""
        self._size = 0

    def put(self, data: bytes) -> tuple[str, int, int]:
        if self._fd is None or self._pid != os.getpid():  # opened in the worker, never inherited
            self._pid = os.getpid()
            self._path = os.path.join(self.folder, f"{self._pid}.part")
            self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
            self._size = 0
        offset = self._size
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self._size += len(data)
        return self._path, offset, len(data)


class OrderedOutput:
    """Appends to an open file by explicit offsets: bytes, or byte ranges of spill files
    (``os.copy_file_range`` where the OS has it, so the data never enters this process)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.size = 0
        self._src: dict[str, int] = {}

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        while view:  # pwrite does not move the file position: we keep our own offset
            n = os.pwrite(self.fd, view, self.size)
            view = view[n:]
            self.size += n
        return len(data)

    def copy_range(self, path: str, offset: int, length: int) -> int:
        src = self._src.get(path)
        if src is None:
            src = self._src[path] = os.open(path, os.O_RDONLY)
        done = 0
        while done < length:
            n = _copy(src, self.fd, length - done, offset + done, self.size + done)
            if n <= 0:
                raise OSError(f"spill file {path} ended at {offset + done}, expected {offset + length}")
            done += n
        self.size += length
        return length

    def close(self) -> None:
        for fd in self._src.values():
            os.close(fd)
        self._src.clear()


def _copy(src: int, dst: int, n: int, src_off: int, dst_off: int) -> int:
    if hasattr(os, "copy_file_range"):
        try:
            copied = os.copy_file_range(src, dst, n, src_off, dst_off)
            if copied > 0:
                return copied
        except OSError:  # e.g. not supported by this filesystem: copy through memory
            pass
    data = os.pread(src, min(n, 1 << 24), src_off)
    return os.pwrite(dst, data, dst_off) if data else 0
