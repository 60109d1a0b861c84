"""Atomic and append-only file writing shared by every long job.

Whole-file outputs are written to a temporary sibling and renamed, so a crash leaves either
the old file or the new one, never half of one. Long jobs append JSON lines, flushing each
line, and a rerun reads back what is already there (see :class:`JsonlLog`).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_open", "atomic_write_json", "atomic_write_jsonl", "dumps", "JsonlLog", "read_jsonl",
           "refuse_overwrite", "remove_stale_stages", "StagedOutputs", "writable_dir", "writable_file"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def dumps(obj: Any) -> str:
    """Canonical one-line JSON: sorted keys, UTF-8 kept, so equal inputs give equal bytes."""
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"), check_circular=False)


def _cannot_write(folder: Path) -> str:
    """Why files cannot be written in ``folder`` (created with its parents), or ""."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".crl-write-test.{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except FileExistsError:
        return f"{folder} is a file, not a folder"
    except NotADirectoryError:
        return f"a part of {folder} is a file, not a folder"
    except OSError as e:
        return f"cannot write in {folder} ({e.strerror or e})"
    return ""


def writable_dir(path: str | os.PathLike, flag: str = "--out") -> Path:
    """Create folder ``path`` (and its parents) and prove it writable, before any work.

    Raises:
        ValueError: one line naming ``flag``, the path and why (a file in the way, no
            permission, a read-only file system), instead of a traceback later.
    """
    out = Path(path)
    why = _cannot_write(out)
    if why:
        raise ValueError(f"{flag} {out}: {why}")
    return out


def writable_file(path: str | os.PathLike, flag: str = "--out") -> Path:
    """Check, before any work, that file ``path`` can be written: not a folder, and its
    folder writable (created when missing). Raises ``ValueError`` in one line like
    :func:`writable_dir`."""
    out = Path(path)
    if out.is_dir():
        raise ValueError(f"{flag} {out} is a folder: give the name of a file to write")
    why = _cannot_write(out.parent)
    if why:
        raise ValueError(f"{flag} {out}: {why}")
    return out


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare where they would be
        return a.resolve() == b.resolve()


def refuse_overwrite(inputs: Mapping[str, str | os.PathLike | None], outputs: Iterable[str | os.PathLike],
                     fix: str = "choose another --out") -> None:
    """Raise ``ValueError`` when a file a run writes is one of its inputs.

    ``inputs`` maps each input's flag (``--input``) to its path (None: not given). A run
    truncates, appends to or renames over its outputs, so an output that is an input would
    destroy the data it reads (``crl score --input r.jsonl --out r.jsonl --fresh``
    left r.jsonl empty).

    >>> refuse_overwrite({"--input": "/tmp/r.jsonl"}, ["/tmp/r.jsonl"])
    Traceback (most recent call last):
    ...
    ValueError: --input /tmp/r.jsonl is also an output of this run (/tmp/r.jsonl would be overwritten); choose another --out
    """
    outs = [Path(o) for o in outputs]
    for flag, path in inputs.items():
        if path is None:
            continue
        for o in outs:
            if _same_file(Path(path), o):
                raise ValueError(f"{flag} {path} is also an output of this run ({o} would be overwritten); {fix}")


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Open a temp file beside ``path``; on success fsync and rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    binary = "b" in mode
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_json(path: str | os.PathLike, obj: Any, indent: int | None = 2) -> None:
    with atomic_open(path) as f:
        f.write(json.dumps(obj, ensure_ascii=False, sort_keys=True, indent=indent) + "\n")


def atomic_write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> int:
    n = 0
    with atomic_open(path) as f:
        for row in rows:
            f.write(dumps(row) + "\n")
            n += 1
    return n


def read_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    """Yield the complete JSON lines of ``path``; a torn last line (from a kill) is skipped."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break  # torn write: the writer died mid-line
            line = line.strip()
            if line:
                yield json.loads(line)


class JsonlLog:
    """Append-only JSONL output keyed by a field, for resumable jobs.

    On open it reads the complete lines already present, truncates a torn last line, and
    exposes the keys seen, so a rerun skips finished work and never writes a key twice.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "out.jsonl")
    >>> with JsonlLog(p, key="id") as log:
    ...     log.append({"id": "a", "v": 1})
    True
    >>> with JsonlLog(p, key="id") as log:
    ...     "a" in log.done
    True
    """

    def __init__(self, path: str | os.PathLike, key: str = "id") -> None:
        self.path = Path(path)
        self.key = key
        self.done: set[str] = set()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        good = 0
        if self.path.exists():
            with open(self.path, "rb") as f:
                for raw in f:
                    if not raw.endswith(b"\n"):
                        break
                    try:
                        row = json.loads(raw)
                    except json.JSONDecodeError:
                        break
                    self.done.add(str(row[key]))
                    good += len(raw)
            if good != self.path.stat().st_size:
                with open(self.path, "r+b") as f:
                    f.truncate(good)
        self._f = open(self.path, "a", encoding="utf-8")

    def append(self, row: dict) -> bool:
        """Write ``row`` unless its key is done; returns whether it was written."""
        k = str(row[self.key])
        if k in self.done:
            return False
        self._f.write(dumps(row) + "\n")
        self._f.flush()
        self.done.add(k)
        return True

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> JsonlLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


STAGE_PREFIX = ".crl-stage-"


class StagedOutputs:
    """A run's whole-file outputs, written into a staging folder inside ``folder`` and moved
    over the previous run's files only when the run succeeds (:meth:`commit`).

    An interrupted, failed or empty run (:meth:`discard`, or an exception in the ``with``
    block) leaves the previous complete run as it was. On commit every name of ``names``
    that this run did not write is removed: it was made by, or from, the run being replaced
    (a verl export of the old composed.jsonl, a report page of the old folder). The renames
    of a commit follow each other quickly but are not one atomic step.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "a.jsonl").write_text("old"); _ = (d / "b.html").write_text("old")
    >>> with StagedOutputs(d, ["a.jsonl", "b.html"]) as st:
    ...     _ = (st.dir / "a.jsonl").write_text("new")
    ...     st.commit()
    ['b.html']
    >>> sorted(p.name for p in d.iterdir()), (d / "a.jsonl").read_text()
    (['a.jsonl'], 'new')
    """

    def __init__(self, folder: str | os.PathLike, names: Iterable[str]) -> None:
        self.folder = Path(folder)
        self.names = list(dict.fromkeys(names))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=self.folder))
        self.done = False

    def commit(self) -> list[str]:
        """Move the staged files over the old ones; remove the old ones not rebuilt. Returns
        the names removed."""
        removed = []
        for name in self.names:
            staged, final = self.dir / name, self.folder / name
            if staged.exists():
                os.replace(staged, final)
            elif final.exists() or final.is_symlink():
                final.unlink()
                removed.append(name)
        self.discard()
        return removed

    def discard(self) -> None:
        """Drop what this run staged; the folder keeps the previous run."""
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)
        self.done = True

    def __enter__(self) -> StagedOutputs:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.done:
            self.discard()


def remove_stale_stages(folder: str | os.PathLike) -> list[Path]:
    """Staging folders of dead runs in ``folder`` (call with the folder's lock held)."""
    import shutil

    gone = sorted(Path(folder).glob(STAGE_PREFIX + "*"))
    for p in gone:
        shutil.rmtree(p, ignore_errors=True)
    return gone
