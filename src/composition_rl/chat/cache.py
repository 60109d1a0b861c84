"""An on-disk response cache: a rerun of a finished job makes zero model calls.

One append-only JSONL file. Each line is ``{"k": key, "v": response}`` where ``key`` is
:meth:`ChatRequest.cache_key` (sha256 of backend + model + parameters + messages). Opening
the file scans it once and keeps only ``key -> byte offset`` in memory, so a cache of
hundreds of thousands of responses costs a few tens of MB. A line torn by ``kill -9`` is cut
off on open; every complete line is a finished response. Only successful responses are
stored, so a rerun retries what failed.

One process writes a cache file at a time (an advisory ``flock`` enforces it).
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from composition_rl.io.files import dumps

__all__ = ["ResponseCache"]


class ResponseCache:
    """Append-only ``key -> response dict`` store.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "cache.jsonl")
    >>> c = ResponseCache(p); c.put("k1", {"choices": []}); c.close()
    >>> ResponseCache(p).get("k1")
    {'choices': []}
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._offsets: dict[str, int] = {}
        self._f = open(self.path, "a+b")
        try:
            fcntl.flock(self._f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._f.close()
            raise ValueError(
                f"response cache {self.path} is in use by another process; "
                "give each concurrent job its own --cache"
            ) from None
        self._f.seek(0)
        good = 0
        for raw in self._f:
            if not raw.endswith(b"\n"):
                break
            try:
                key = json.loads(raw)["k"]
            except (json.JSONDecodeError, KeyError, TypeError):
                break
            self._offsets.setdefault(str(key), good)
            good += len(raw)
        if good != os.fstat(self._f.fileno()).st_size:
            self._f.truncate(good)  # torn tail from a kill: drop it
        self._f.seek(0, os.SEEK_END)

    def __len__(self) -> int:
        return len(self._offsets)

    def __contains__(self, key: str) -> bool:
        return key in self._offsets

    def get(self, key: str) -> dict[str, Any] | None:
        """The response stored under ``key``, or ``None`` when there is none."""
        off = self._offsets.get(key)
        if off is None:
            return None
        self._f.seek(off)
        row = json.loads(self._f.readline())
        self._f.seek(0, os.SEEK_END)
        return row["v"]

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Append ``value`` under ``key`` and flush; a key already stored keeps its first value."""
        if key in self._offsets:
            return
        self._f.seek(0, os.SEEK_END)
        off = self._f.tell()
        self._f.write((dumps({"k": key, "v": value}) + "\n").encode("utf-8"))
        self._f.flush()
        self._offsets[key] = off

    def close(self) -> None:
        """Close the file, releasing its lock (again is a no-op)."""
        if not self._f.closed:
            self._f.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
