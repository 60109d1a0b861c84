"""Atomic and append-only file writing shared by every long job.

Whole-file outputs are written to a temporary sibling and renamed, so a crash leaves either
the old file or the new one, never half of one. Long jobs append JSON lines, flushing each
line, and a rerun reads back what is already there (see :class:`JsonlLog`).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_open", "atomic_write_json", "atomic_write_jsonl", "dumps", "is_crl_page", "JsonlLog", "quarantine_path", "read_jsonl",
           "refuse_overwrite", "remove_stale_stages", "StagedOutputs", "writable_dir", "writable_file"]

log = logging.getLogger(__name__)


def _temp_beside(path: Path) -> tuple[int, str]:
    """Create a new temporary file beside ``path`` (``.NAME.XXXXXXXX.tmp``), open for writing,
    with the usual permissions: mode 0666 less the process umask, applied by the kernel at
    creation (``tempfile.mkstemp`` makes 0600, and reading the umask means setting it, which
    races with other threads)."""
    import secrets

    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")  # pragma: no cover


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
    fd, tmp = _temp_beside(path)
    binary = "b" in mode
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_json(path: str | os.PathLike, obj: Any, indent: int | None = 2) -> None:
    """Write ``obj`` to ``path`` as JSON (sorted keys, UTF-8 kept, ``indent``), atomically
    (:func:`atomic_open`)."""
    with atomic_open(path) as f:
        f.write(json.dumps(obj, ensure_ascii=False, sort_keys=True, indent=indent) + "\n")


def atomic_write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> int:
    """Write ``rows`` to ``path`` as JSON lines (:func:`dumps`), atomically
    (:func:`atomic_open`); returns how many were written."""
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

    On open it reads the complete lines already present and exposes the keys seen, so a
    rerun skips finished work and never writes a key twice. A torn last line (what a kill
    leaves) is cut off. A complete line that cannot be read (not JSON, not an object, no
    ``key``: a disk error, a hand edit) is never a reason to drop the lines after it: it is
    moved, with its line number and the reason, to the side file ``NAME.jsonl.quarantined``
    (see :func:`quarantine_path`), the log is rewritten without it (atomically), a note
    names both, and its work is done again.

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
        if self.path.exists():
            self._read_back()
        self._f = open(self.path, "a", encoding="utf-8")

    def _read_back(self) -> None:
        good: list[bytes] = []
        bad: list[dict[str, Any]] = []
        torn = False
        with open(self.path, "rb") as f:
            for n, raw in enumerate(f, 1):
                if not raw.endswith(b"\n"):
                    torn = True  # only the last line can lack its newline: a write cut short
                    break
                if not raw.strip():
                    bad.append({"line": n, "reason": "an empty line", "text": ""})
                    continue
                why = ""
                try:
                    row = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError) as e:
                    why = f"not JSON ({e})"
                else:
                    if not isinstance(row, dict) or self.key not in row:
                        why = f"no {self.key!r} field" if isinstance(row, dict) else "not a JSON object"
                if why:
                    bad.append({"line": n, "reason": why, "text": raw.decode("utf-8", "replace").rstrip("\n")})
                    continue
                self.done.add(str(row[self.key]))
                good.append(raw)
        if bad:
            side = quarantine_path(self.path)
            with open(side, "a", encoding="utf-8") as q:
                for b in bad:
                    q.write(dumps({"file": self.path.name, **b}) + "\n")
                q.flush()
                os.fsync(q.fileno())
            with atomic_open(self.path, "wb") as f:  # the good lines, in their order
                f.writelines(good)
            lines = ", ".join(str(b["line"]) for b in bad[:5]) + (" ..." if len(bad) > 5 else "")
            log.warning("note: %d unreadable line(s) of %s (line %s) moved to %s with the reason; their work "
                        "is done again, every other line is kept", len(bad), self.path, lines, side)
        elif torn:
            with open(self.path, "r+b") as f:
                f.truncate(sum(len(g) for g in good))

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
        """Close the log file (leaving the ``with`` block does it)."""
        self._f.close()

    def __enter__(self) -> JsonlLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def quarantine_path(path: str | os.PathLike) -> Path:
    """Where :class:`JsonlLog` moves the unreadable lines of log ``path`` (JSON lines, each
    with the file, line number, reason and text): ``profile.jsonl`` ->
    ``profile.jsonl.quarantined`` beside it (not ``*.jsonl``: no reader takes it for a log)."""
    p = Path(path)
    return p.with_name(f"{p.name}.quarantined")


def is_crl_page(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a page ``crl browse`` wrote (its title starts ``crl browse:``, see
    jobs/browse/page.py)."""
    try:
        with open(path, "rb") as f:
            return b"<title>crl browse: " in f.read(4096)
    except OSError:
        return False


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
            elif name == "report.html" and final.exists() and not is_crl_page(final):
                continue  # a page crl did not write (the user's own) stays
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
