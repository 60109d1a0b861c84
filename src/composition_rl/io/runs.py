"""What made a run folder, and the refusal to resume it with anything else.

Every resumable command (``profile``, ``eval``, ``grow``, ``score``, ``compose --engine
llm/auto``) keeps finished work and a rerun continues from it. That is only right when the
rerun is the same run: another model, another input file or other options would mix two
runs' results in one folder and report them as one (``crl eval --model B`` into a
folder made with model A sent no request and reported A's results as B's). So each run
writes one record of what produced it (its *identity*: input hashes, model, engine or
backend, the options that change a result) and :func:`claim_run` compares a rerun's
identity with it, refusing a difference with every differing field named. Settings that do
not change a result (an endpoint URL, worker counts, progress bars) stay out of the
identity, so they can change between a run and its resume.

This is the one implementation of that contract; commands build their identity with
:func:`run_identity` and the library functions that own a run folder call
:func:`claim_run`.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from composition_rl.io.files import (
    atomic_write_json,
    is_crl_page,
    remove_stale_stages,
    writable_dir,
    writable_file,
)
from composition_rl.io.gguf import describe_identity, find_model, is_gguf, read_gguf_metadata

__all__ = ["LOCK_FILE", "RUN_FILE", "RUN_OUTPUTS", "RunBusy", "RunClash", "RunMismatch", "check_model_source",
           "claim_run", "crl_made", "drop_made_folder", "file_sha256", "folder_owner", "folder_sha256", "foreign_files",
           "hold_lock", "is_crl_page", "make_folder", "model_content", "model_identity", "package_versions", "record_run",
           "refuse_foreign", "refuse_other_owner", "run_folder", "run_identity"]

RUN_FILE = "run.json"
_NOT_RECORDED = "(not recorded)"


class RunMismatch(ValueError):
    """An output folder holds a run made with other settings; resuming it would mix them."""


_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes (hex, first 16 digits), read in 1 MiB blocks.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.txt"; _ = p.write_text("abc")
    >>> file_sha256(p)
    'ba7816bf8f01cfea'
    """
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    hit = _DIGESTS.get(key)
    if hit is None:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        hit = _DIGESTS[key] = h.hexdigest()[:16]
    return hit


#: what a run folder holds that is not its content: the lock (it names its last holder), a
#: page made from the folder (``crl browse``), hidden staging folders and temporaries
_NOT_CONTENT = ("report.html",)


def folder_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a folder's content (hex, first 16 digits): every file under it by its
    path inside the folder and its bytes (:func:`file_sha256`), in sorted order; hidden
    names (the lock, staging folders, temporaries) and ``report.html`` left out. A profile
    folder given to ``crl grow --from-profile`` is the same input exactly when this is the same.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "profile.jsonl").write_text("abc")
    >>> a = folder_sha256(d); _ = (d / ".crl.lock").write_text("1 profile"); a == folder_sha256(d)
    True
    """
    root = Path(path)
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        here = Path(dirpath)
        for name in sorted(filenames):
            f = here / name
            if name.startswith(".") or name in _NOT_CONTENT or not f.is_file():
                continue
            h.update(f"{f.relative_to(root).as_posix()}\0{file_sha256(f)}\n".encode())
    return h.hexdigest()[:16]


def model_identity(model: str) -> str:
    """A model as a run records it: a local folder by its absolute path, a served model by
    its name (``NAME@URL`` by ``NAME``: the endpoint may move between a run and its resume), a
    GGUF (a ``.gguf`` path or a name such as ``smollm2``) by its file's sha256.

    >>> model_identity("Qwen3-4B@http://gpu:8000/v1")
    'Qwen3-4B'
    """
    if "@" in model and "://" in model.split("@", 1)[1]:
        return model.split("@", 1)[0]
    if is_gguf(model):
        return _gguf_identity(model)
    return str(Path(model).resolve()) if Path(model).is_dir() else model


def _gguf_identity(model: str) -> str:
    """A GGUF model by its file's content: a named one (``smollm2``) by the sha256 pinned for
    it, which is its file's, so a name and a path to the same file are one model, and a name is
    compared before its file is assembled; a ``.gguf`` path by its bytes.

    >>> _gguf_identity("smollm2")
    'Smollm2 135M 8k Lc100K Mix1 Ep2 (GGUF sha256 b179c9523d0e6a0f)'
    """
    m = None if model.endswith(".gguf") else find_model(model)
    if m is not None:
        return f"{m.name} (GGUF sha256 {m.sha256[:16]})"
    p = Path(model).expanduser()
    if not p.is_file():
        return str(p.resolve())  # the load fails later, naming the missing file
    return f"{read_gguf_metadata(p).get('general.name', p.name)} (GGUF sha256 {file_sha256(p)})"


def run_identity(model: str | None = None, backend: str | None = None,
                 inputs: Mapping[str, str | os.PathLike | None] | None = None, **options: Any) -> dict[str, Any]:
    """The identity of a run: ``model`` (a local folder by its absolute path and its content,
    :func:`model_content`; an endpoint's model by its name), ``backend``, each named input by
    its content hash (a file by its bytes, a folder such as ``--from-profile`` by its files:
    :func:`folder_sha256`), and any further ``options`` as given. ``None`` values are left out.

    >>> run_identity(model="Qwen3-4B", backend="openai", n=8)
    {'model': 'Qwen3-4B', 'backend': 'openai', 'n': 8}
    """
    ident: dict[str, Any] = {}
    if model is not None:
        ident["model"] = model_identity(model)
        content = model_content(model)
        if content is not None:  # a local model: by what is in it, not only where it is
            ident["model_content"] = content
    if backend is not None:
        ident["backend"] = backend
    for name, path in (inputs or {}).items():
        if path is not None:
            p = Path(path)
            ident[f"{name}_sha256"] = file_sha256(p) if p.is_file() else folder_sha256(p) if p.is_dir() else _NOT_RECORDED
    ident.update({k: v for k, v in options.items() if v is not None})
    return ident


def claim_run(record: str | os.PathLike, identity: Mapping[str, Any], *, has_work: bool = True,
              info: Mapping[str, Any] | None = None, what: str = "a run",
              fix: str = "use another --out, or rerun with the same settings") -> None:
    """Write ``identity`` (and ``info``, recorded but never compared) to the ``record`` file
    on a first run; on a rerun, refuse when any field of ``identity`` differs from the record,
    both ways: a field the record has and ``identity`` lacks (a run made with a model, resumed
    by one that names none) is a difference as much as the reverse.

    The record lists its identity's fields (``identity_fields``), so ``info`` is never taken
    for identity; of a record written before that list, every field but this call's ``info``
    and ``versions`` is identity. The package versions of the run (:func:`package_versions`)
    are recorded too, but not compared: a resume under other versions goes on, says so on
    stderr, and adds them to ``versions_resumed`` in the record.

    Args:
        record: the record file (``OUT/run.json``, or a sidecar such as ``scored.options.json``).
        identity: what decides the results (see :func:`run_identity`); compared field by field.
        has_work: whether the folder holds finished work a rerun would resume. Without work
            the record is simply rewritten.
        info: recorded for people (paths, notes); not compared.
        what: what the folder holds, with its article ("a profile"), for the message.
        fix: what the user can do, for the message.

    Raises:
        RunMismatch: the record differs (each differing field named, old -> new), or there is
            work but no record of what made it.
    """
    path = Path(record)
    ident = json.loads(json.dumps(dict(identity)))  # compared as JSON reads it back (tuples -> lists)
    versions = package_versions()
    if has_work and path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8") or "null")
        except json.JSONDecodeError:
            old = None
        if not isinstance(old, dict):
            raise RunMismatch(f"{path.parent} holds {what}, but its record {path.name} is unreadable; {fix}")
        diff = _differences(old, ident, info or {})
        if diff:
            raise RunMismatch(f"{path.parent} holds {what} made with other settings ({'; '.join(diff)}); {fix}")
        _note_versions(path, old, versions, what)
        return
    if has_work:
        raise RunMismatch(f"{path.parent} holds {what} but no record of what made it ({path.name}); {fix}")
    # a named GGUF's upstream model, quantization and licence: recorded, never compared
    card = describe_identity(ident["model"]) if isinstance(ident.get("model"), str) else None
    about = {"model_card": card} if card else {}
    atomic_write_json(path, {**(info or {}), **about, **ident, IDENTITY_FIELDS: sorted(ident), VERSIONS: versions})


#: fields of a run record that are about the record, never identity
IDENTITY_FIELDS = "identity_fields"
VERSIONS = "versions"
_RECORD_ONLY = frozenset({IDENTITY_FIELDS, VERSIONS, "versions_resumed"})
_NOT_GIVEN = "(not given)"


def _differences(old: Mapping[str, Any], new: Mapping[str, Any], info: Mapping[str, Any]) -> list[str]:
    """Each field of the recorded identity (in record ``old``) and the new identity ``new``
    that differs, as ``field: old -> new``; a field only one side has is a difference too."""
    listed = old.get(IDENTITY_FIELDS)
    if isinstance(listed, list):
        recorded = {k for k in listed if isinstance(k, str)}
    else:  # a record from before the list: all but the call's info is identity
        recorded = {k for k in old if k not in info and k not in _RECORD_ONLY}
    diff = []
    for k, v in new.items():
        # a record made before commands recorded themselves has no "command": its files
        # already told run_folder which command made it
        if k == "command" and k not in old:
            continue
        if k not in recorded:
            diff.append(f"{k}: {_NOT_RECORDED} -> {v!r}")
        elif old.get(k) != v:
            diff.append(f"{k}: {old.get(k)!r} -> {v!r}")
    # the command names who made the folder (run_folder compares it); a library call names none
    diff += [f"{k}: {old.get(k)!r} -> {_NOT_GIVEN}" for k in sorted(recorded - set(new)) if k != "command"]
    return diff


def _note_versions(path: Path, old: Mapping[str, Any], versions: Mapping[str, str], what: str) -> None:
    """Say so when a run is resumed under other package versions than the ones that made it,
    and record them (``versions_resumed``)."""
    made = old.get(VERSIONS)
    if not isinstance(made, dict):
        return  # a record from before versions were recorded: nothing to compare with
    seen = [made, *[v for v in old.get("versions_resumed", []) if isinstance(v, dict)]]
    changed = {k: v for k, v in versions.items() if k in made and made[k] != v}
    if not changed or any(all(s.get(k) == v for k, v in changed.items()) for s in seen[1:]):
        return
    said = ", ".join(f"{k} {made[k]} -> {v}" for k, v in changed.items())
    print(f"note: {path.parent} holds {what} made with {said}; resuming it with these versions "
          f"(recorded in {path.name} as versions_resumed; versions are not part of a run's identity)",
          file=sys.stderr)
    atomic_write_json(path, {**old, "versions_resumed": [*old.get("versions_resumed", []), changed]})


#: the distributions whose versions decide results: always these two, the rest when imported
_ALWAYS = ("composition-rl", "math-verify")
_WHEN_IMPORTED = {"transformers": "transformers", "trl": "trl", "torch": "torch"}


def package_versions() -> dict[str, str]:
    """The versions of composition-rl and math-verify, and of transformers, trl and torch
    when this process imported them (a compose run uses none of the three), as a run records
    them in its ``run.json``.

    >>> sorted(package_versions())[:2]
    ['composition-rl', 'math-verify']
    """
    names = [*_ALWAYS, *(d for d, module in _WHEN_IMPORTED.items() if module in sys.modules)]
    return {d: _version(d) for d in names}


@functools.cache
def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "(not installed)"


# ---------------------------------------------------------------------------------------
# the run-folder contract: one lock per output, the folder's owner, no output onto an input
# ---------------------------------------------------------------------------------------
LOCK_FILE = ".crl.lock"

#: Files that say which command made a folder that holds no ``command`` in its run.json
#: (folders made before commands recorded themselves, or by a library call).
_MARKERS = {
    "composed.jsonl": "compose", "llm_journal.jsonl": "compose",
    "problems.jsonl": "export",
    "profile.jsonl": "profile",
    "report.md": "reproduce",  # before results.json: a reproduction writes one too
    "results.json": "eval", "samples": "eval",
    "qualified.jsonl": "grow", "trees.jsonl": "grow", "candidates.jsonl": "grow",
    "metrics.jsonl": "train", "checkpoints": "train",
    "build_info.json": "tiny-model",
    "launch.sh": "verl-recipe",
}
#: Files a run writes into its folder: no other command may write one of them there.
RUN_OUTPUTS = frozenset({
    *_MARKERS, RUN_FILE, "rejected.jsonl", "stats.json", "input_rejects.jsonl", "verl.parquet", "trl.parquet",
    "llm_run.json", "summary.json", "pass_rates.png", "kept.jsonl", "kept.rejects.jsonl", "results.md", "config.json",
    "recipe.json", "llm_cache.jsonl", "teacher_cache.jsonl", "transitions.jsonl", "pass_rates.jsonl", "rejects.jsonl",
    "probe_summary.json", "online.jsonl", "curriculum.jsonl", "solve_rates.png", "funnel.png", "fig_signal.png",
})


class RunBusy(RuntimeError):
    """Another live run holds the lock of an output."""


class RunClash(ValueError):
    """An output path is an input, or belongs to another command's run."""


def _lock_path(target: Path, folder: bool) -> Path:
    return target / LOCK_FILE if folder else target.with_name(f".{target.name}.lock")


@contextmanager
def hold_lock(target: str | os.PathLike, command: str, *, folder: bool = True, flag: str = "--out") -> Iterator[Path]:
    """Hold the lock of one output (a folder, or a single file) for the length of a run.

    The lock is an ``flock`` on ``TARGET/.crl.lock`` (a file output: ``.NAME.lock`` beside
    it, removed at the end). The kernel drops the lock of a process that dies, even by ``kill -9``, so the lock
    of a dead run is simply taken over; the file only names the holder for the message.

    A lock file is only ever removed by the run that holds it (a file output's at its end, a
    refused run's new folder with it), so a run that locks the file checks that the file it
    locked is still the one at the path (same inode) and otherwise starts again: a run that
    opened the file just before its holder removed it would hold a lock nobody else sees, and
    the next run would lock a new file beside it (two holders at once).

    Raises:
        RunBusy: one line naming the running command and its pid.
        ValueError: the output cannot be written there (one line naming ``flag``).

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> with hold_lock(d, "export"):
    ...     with hold_lock(d, "compose"):  # doctest: +ELLIPSIS
    ...         pass
    Traceback (most recent call last):
    ...
    composition_rl.io.runs.RunBusy: ... is in use by a running `crl export` (pid ...); wait for it to finish or choose another --out
    """
    target = Path(target)
    lock = _lock_path(target, folder)
    check = writable_dir if folder else writable_file
    # a folder that cannot be written is one line (ValueError naming the flag), not a traceback
    check(target, flag)
    for _ in range(100):
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # a refused run removed the folder it had made: make it again
            check(target, flag)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
            os.close(fd)
            who = f"`crl {holder[1]}` (pid {holder[0]})" if len(holder) >= 2 else "another run"
            raise RunBusy(f"{flag} {target} is in use by a running {who}; wait for it to finish or choose "
                          f"another {flag}") from None
        if _is_at(fd, lock):
            break
        os.close(fd)  # locked a file its holder removed meanwhile: that lock guards nothing
    else:  # pragma: no cover - a hundred removals in a row
        raise RunBusy(f"{flag} {target}: its lock file keeps being replaced; choose another {flag}")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
        try:
            yield lock
        finally:
            if not folder:  # no hidden file left beside a user's file; removed while still held
                with contextlib.suppress(OSError):
                    os.unlink(lock)
    finally:
        os.close(fd)  # releases the lock


def _is_at(fd: int, path: Path) -> bool:
    """Whether open file ``fd`` is the file at ``path`` (not one removed or replaced)."""
    try:
        st, at = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (at.st_dev, at.st_ino)


def folder_owner(folder: str | os.PathLike) -> str | None:
    """The command that made run folder ``folder``: the ``command`` its run.json records,
    else the one its characteristic files name (``composed.jsonl``: compose); None for a
    folder that holds no run."""
    folder = Path(folder)
    try:
        rec = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
        if isinstance(rec, dict) and isinstance(rec.get("command"), str):
            return rec["command"]
    except (OSError, ValueError):
        pass
    for name, command in _MARKERS.items():
        if (folder / name).exists():
            return command
    return None


def refuse_foreign(command: str, *, folders: Mapping[str, str | os.PathLike | None] = {},  # noqa: B006 - read only
                   files: Mapping[str, str | os.PathLike | None] = {},  # noqa: B006
                   inputs: Mapping[str, str | os.PathLike | None] = {}) -> None:  # noqa: B006
    """Refuse outputs that would destroy another run's work, this run's inputs or files crl
    did not make (the rules are listed in docs/runs.md, "What a run may write").

    Args:
        command: the command that writes (``"profile"``).
        folders: flag -> output folder (``{"--out": "runs/p"}``); refused when it is one of
            ``inputs``, holds another command's run, lies inside a run folder (a run's
            subfolders are its own), or holds files crl did not make (``--out .`` in a
            folder of one's own files).
        files: flag -> output file; refused when it is one of ``inputs``, an existing file
            crl did not write or another command's output file (:func:`crl_made`; flags named
            "its ..."/"the ...", a file's sidecars, are not asked), a file of a run
            (one of :data:`RUN_OUTPUTS` or a run's ``report.html`` in a run folder, this
            run's own included: ``--keep-out OUT/profile.jsonl``), or lies in a subfolder of
            a run (``RUN/samples/x.jsonl``).
        inputs: flag -> input file or folder this run reads.

    Raises:
        RunClash: one line naming the flag, the path and what it would overwrite.
    """
    ins = {flag: Path(p) for flag, p in inputs.items() if p is not None}
    own = [Path(p) for p in folders.values() if p is not None]
    for flag, out in folders.items():
        if out is None:
            continue
        if not str(out).strip():
            raise RunClash(f"{flag} is empty: name the output folder (`{flag} .` for the current one)")
        out = Path(out)
        for iflag, ip in ins.items():
            if _same_path(out, ip):
                raise RunClash(f"{flag} {out} is also {iflag}: a run never writes into what it reads; "
                               f"choose another {flag}")
        if out.is_dir() and not (out / RUN_FILE).is_file() and folder_owner(out) not in _NO_RECORD:
            # a run folder records itself in run.json (but those of _NO_RECORD, known by their files)
            alien = foreign_files(out)
            if alien:
                shown = ", ".join(alien[:3]) + (f" and {len(alien) - 3} more" if len(alien) > 3 else "")
                raise RunClash(f"{flag} {out} holds files crl did not make ({shown}); a run writes only into a new "
                               f"or empty folder or a crl run folder: choose another {flag}")
        refuse_other_owner(command, out, flag)
        run = _enclosing_run(out)
        if run is not None:
            raise RunClash(f"{flag} {out} is inside the `crl {run[1]}` run in {run[0]} (its subfolders are that "
                           f"run's): choose a folder outside it")
    for flag, out in files.items():
        if out is None:
            continue
        out = Path(out)
        for iflag, ip in ins.items():
            if _same_path(out, ip) or (ip.is_dir() and _same_path(out.parent, ip) and out.name in RUN_OUTPUTS):
                raise RunClash(f"{flag} {out} is also an input of this run ({iflag} {ip}); choose another {flag}")
        parent = out.parent
        mine = any(_same_path(parent, o) for o in own)
        owner = folder_owner(parent) if parent.is_dir() else None
        if mine and _run_file(out.name) and out.name not in _OWN_FILES.get(command, ()):
            raise RunClash(f"{flag} {out} is a file of this run's own folder ({parent}): the run writes it itself; "
                           f"choose another {flag}")
        if owner is not None and not mine and (_run_file(out.name) or (
                out.name == "report.html" and not (command == "browse" and any(
                    _same_path(parent, ip) for ip in ins.values())))):
            what = "" if owner == command else f"the `crl {owner}` run in "
            raise RunClash(f"{flag} {out} is a file of {what or 'the run in '}{parent}; writing it would "
                           f"destroy that run's output: choose another {flag}")
        run = _enclosing_run(out.parent)
        if run is not None:
            raise RunClash(f"{flag} {out} is inside the `crl {run[1]}` run in {run[0]} (its subfolders are that "
                           f"run's): choose a file outside it")
        maker = crl_made(out) if not flag.startswith(("its ", "the ")) and out.is_file() else ""
        if maker is None:
            raise RunClash(f"{flag} {out} is a file crl did not write; a run replaces only files crl made: "
                           f"choose another {flag} (or move the file away)")
        if maker and maker != command:
            raise RunClash(f"{flag} {out} is the output of a `crl {maker}` run; `crl {command}` would destroy it: "
                           f"choose another {flag}")


def refuse_other_owner(command: str, out: str | os.PathLike, flag: str = "--out") -> None:
    """Refuse folder ``out`` when it holds another command's run (:func:`folder_owner`); the
    check a run makes again once it holds the folder's lock (another run may have taken the
    folder between its first checks and the lock).

    Raises:
        RunClash: one line naming the flag, the folder and the command whose run it holds.
    """
    out = Path(out)
    owner = folder_owner(out) if out.is_dir() else None
    if owner is not None and owner != command:
        raise RunClash(f"{flag} {out} holds a `crl {owner}` run; `crl {command}` would overwrite or mix with "
                       f"its files: choose another {flag}")


#: the commands whose folders keep no run.json (known by their characteristic files)
_NO_RECORD = frozenset({"verl-recipe", "tiny-model"})
#: a file output a command may write into its own run folder under one of RUN_OUTPUTS' names
_OWN_FILES = {"profile": ("kept.jsonl", "kept.rejects.jsonl")}
#: what crl writes into a folder besides RUN_OUTPUTS (its lock, temporaries, staging folders)
_CRL_HIDDEN = (LOCK_FILE, ".crl-", ".compose-parts-")


def foreign_files(folder: str | os.PathLike) -> list[str]:
    """The names in ``folder`` that crl did not make: anything but a run's files
    (:data:`RUN_OUTPUTS`, a log's ``.quarantined`` lines, a ``report.html`` that ``crl
    browse`` wrote), its lock and its temporaries. Sorted.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "stats.json").write_text("{}"); _ = (d / "notes.txt").write_text("")
    >>> foreign_files(d)
    ['notes.txt']
    """
    alien = []
    for p in Path(folder).iterdir():
        name = p.name
        if _run_file(name) or name.startswith(_CRL_HIDDEN):
            continue
        if name == "report.html" and is_crl_page(p):
            continue
        if name.startswith(".") and name.endswith(".tmp") and name[1:].split(".")[0] in _STEMS:
            continue  # an atomic write's temporary (.composed.jsonl.x1y2.tmp)
        alien.append(name)
    return sorted(alien)


_STEMS = frozenset(n.split(".")[0] for n in RUN_OUTPUTS) | {"report", "kept"}


def _run_file(name: str) -> bool:
    """A name a run writes into its folder (:data:`RUN_OUTPUTS`, a log's quarantined lines)."""
    return name in RUN_OUTPUTS or name.endswith(".quarantined")


def _enclosing_run(path: Path) -> tuple[Path, str] | None:
    """The run folder strictly above ``path`` (its run.json names the command), if any.

    Only a recorded run.json counts here, not the characteristic files of
    :func:`folder_owner`: a home folder that holds a ``samples`` folder is not a run.
    """
    p = Path(os.path.abspath(path))
    for anc in p.parents:
        try:
            rec = json.loads((anc / RUN_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and isinstance(rec.get("command"), str):
            return anc, rec["command"]
    return None


def _same_path(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def make_folder(out: Path, flag: str = "--out") -> bool:
    """Create folder ``out`` (and its parents) if missing and prove it writable; whether
    this call made ``out`` itself (the test is the ``mkdir``, so two runs never both think
    they made it)."""
    try:
        out.mkdir(parents=True)
        made = True
    except FileExistsError:
        made = False
    except OSError:
        made = False  # writable_dir says why, in one line
    writable_dir(out, flag)
    return made


def drop_made_folder(out: Path, *, keep: tuple[str, ...] = (), work: tuple[str, ...] = (),
                     only_if_bare: bool = False) -> None:
    """Remove folder ``out``, which this run made and whose lock it holds, with what the run
    wrote there, unless one of ``work`` (glob patterns of finished work) is there
    (``only_if_bare``: unless anything but the lock is there); the files named in ``keep`` (a
    rejects file the error message points to) stay, with the folder. Call with the folder's
    lock held: no other run can be writing there."""
    if not out.is_dir() or any(any(out.glob(w)) for w in work):
        return
    if only_if_bare and [p.name for p in out.iterdir()] != [LOCK_FILE]:
        return
    kept = [n for n in keep if (out / n).exists()]
    for p in list(out.iterdir()) if out.is_dir() else []:
        if p.name in kept or p.name == LOCK_FILE:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                p.unlink()
    if not kept:
        with contextlib.suppress(OSError):
            os.unlink(out / LOCK_FILE)  # held by this run: see hold_lock on removing a lock file
        with contextlib.suppress(OSError):
            os.rmdir(out)


def crl_made(path: str | os.PathLike) -> str | None:
    """Which crl file output wrote file ``path``, so that only that command replaces it:
    ``browse`` (a page titled ``crl browse:``), ``audit`` (a form titled ``composition audit``
    or with its ``NAME.key.json`` beside it; ``--json`` figures, a JSON object with the keys of
    a scan or a score), ``score`` (its ``STEM.options.json`` beside it), ``profile`` (kept
    prompts, with ``STEM.rejects.jsonl`` beside them and no options file); ``""`` for an empty
    file (nothing to lose: any command); None for a file crl did not write."""
    p = Path(path)
    try:
        if p.stat().st_size == 0:
            return ""
        if p.with_name(f"{p.name}.key.json").exists():
            return "audit"
        if p.with_name(f"{p.stem}.options.json").exists():
            return "score"
        if p.with_name(f"{p.stem}.rejects.jsonl").exists():
            return "profile"
        with open(p, "rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    if b"<title>crl browse: " in head:
        return "browse"
    if b"<title>composition audit</title>" in head:
        return "audit"
    if head.lstrip().startswith(b"{") and p.stat().st_size < (16 << 20):
        try:
            d = json.loads(p.read_bytes())
        except ValueError:
            return None
        if isinstance(d, dict) and ({"records", "classes"} <= d.keys() or {"items", "invalid"} <= d.keys()):
            return "audit"
    return None


@contextmanager
def run_folder(out: str | os.PathLike, command: str, *, inputs: Mapping[str, str | os.PathLike | None] = {},  # noqa: B006
               files: Mapping[str, str | os.PathLike | None] = {}, flag: str = "--out",  # noqa: B006
               refusals: tuple[type[BaseException], ...] = (ValueError,), work: tuple[str, ...] = (),
               keep: tuple[str, ...] = ()) -> Iterator[Path]:
    """The run-folder contract around one run of ``command`` into folder ``out``.

    Before the run: ``out`` may not be an input, hold another command's run or files crl did
    not make, or lie inside a run folder, and no file output (``files``) may be an input or a
    run's file (:func:`refuse_foreign`); then ``out`` is locked (:func:`hold_lock`) until the
    run ends. A run that is refused (one of ``refusals`` raised) in a folder it created leaves
    no folder behind: files it wrote there before the refusal (a run record, a config) are
    removed with it, unless one of ``work`` (names or glob patterns of finished work a rerun
    resumes: ``checkpoints``) is there, and but the diagnostics of ``keep`` (the rejects file
    the refusal names; the folder stays with them); it is removed with the lock still held, so a run that
    finds the folder busy never removes it, and nothing another run made is removed. A
    ``report.html`` page of the folder that ``crl browse`` wrote is removed when the run starts:
    it describes what the run is about to change (a page crl did not write stays).
    Provenance (what made the folder) is recorded by :func:`claim_run` / :func:`record_run`,
    whole-file outputs are replaced on success only (:class:`composition_rl.io.files.StagedOutputs`).

    Yields:
        ``out`` as a Path.
    """
    if not str(out).strip():
        raise RunClash(f"{flag} is empty: name the output folder (`{flag} .` for the current one)")
    out = Path(out)
    refuse_foreign(command, folders={flag: out}, files=files, inputs=inputs)
    made = make_folder(out, flag)  # one line now (a file in the way, no permission), not a traceback later
    with hold_lock(out, command, flag=flag):
        try:
            refuse_other_owner(command, out, flag)  # a run that started meanwhile, now visible
            remove_stale_stages(out)  # a dead run's staged outputs: never to be committed
            page = out / "report.html"
            if page.is_file() and is_crl_page(page):
                page.unlink()
                print(f"note: removed {page} (it showed the folder before this run; `crl browse {out}` "
                      "writes it again)", file=sys.stderr)
            yield out
        except refusals:
            if made:
                drop_made_folder(out, work=work, keep=keep)  # refused before any work: what it wrote goes too
            raise
        except BaseException:
            if made:
                drop_made_folder(out, only_if_bare=True)  # interrupted: only a folder with nothing in it goes
            raise


def record_run(out: str | os.PathLike, command: str, identity: Mapping[str, Any] | None = None,
               info: Mapping[str, Any] | None = None) -> None:
    """Write ``out/run.json`` for a command whose every run replaces the folder's outputs as
    a whole (nothing is resumed, so nothing is compared but the command, by
    :func:`run_folder`): the command, its identity, ``info`` and the package versions
    (:func:`package_versions`)."""
    atomic_write_json(Path(out) / RUN_FILE, {**(info or {}), **json.loads(json.dumps(dict(identity or {}))),
                                             "command": command, VERSIONS: package_versions()})


# ---------------------------------------------------------------------------------------
# a model's content identity
# ---------------------------------------------------------------------------------------
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack", ".model", ".npz")
_MODEL_FILES = frozenset({"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                          "special_tokens_map.json", "vocab.json", "merges.txt", "chat_template.jinja"})
_WHOLE = 1 << 30  # files up to 1 GiB are hashed whole; larger ones by three 16 MiB windows
_WINDOW = 16 << 20


def _content_digest(p: Path) -> str:
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    hit = _DIGESTS.get(key)
    if hit is not None:
        return hit
    if st.st_size <= _WHOLE:
        hit = file_sha256(p)
    else:  # a multi-GB shard: head, middle and tail (a retrained model differs in all three)
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for start in (0, st.st_size // 2, st.st_size - _WINDOW):
                f.seek(start)
                h.update(f.read(_WINDOW))
        hit = h.hexdigest()[:16]
    _DIGESTS[key] = hit
    return hit


def model_content(model: str | os.PathLike) -> str | None:
    """The content identity of a local model: a hash of its weight, config and tokenizer
    files' names, sizes and contents (a ``.gguf`` file: of that file); None when ``model``
    is not a local folder or file (a hub or served name).

    New weights copied into the same folder give another identity, so a run folder made
    with the old ones is not resumed with them.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "model.safetensors").write_bytes(b"w1")
    >>> a = model_content(d); _ = (d / "model.safetensors").write_bytes(b"w2"); a == model_content(d)
    False
    """
    p = Path(model).expanduser()
    if p.is_file():
        files = [p]
    elif p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and (f.suffix in _WEIGHT_SUFFIXES or f.name in _MODEL_FILES))
    else:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.name}\0{f.stat().st_size}\0{_content_digest(f)}\n".encode())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------------------
# a model that cannot be loaded is refused before anything is written
# ---------------------------------------------------------------------------------------
def _truthy(v: str | None) -> bool:
    return (v or "").strip().lower() in ("1", "true", "yes", "on")


def check_model_source(model: str, what: str = "model") -> None:
    """Refuse, at once and in one line, a model that cannot be loaded: a local path that is
    not there, or a hub name that is neither in the local hub cache nor reachable.

    A name like ``runs/tiny`` is a hub id to transformers; on a machine without network its
    hub client retries for about a minute before it gives up. Here: a path (``./x``, ``/x``,
    ``~/x``, more than one ``/``, or a first folder that exists here) that is missing is
    refused; a hub id is looked up in the local cache; with ``HF_HUB_OFFLINE`` set a miss is
    refused, otherwise the hub is asked once with a short timeout.

    Raises:
        ValueError: the model and why it cannot be loaded.
    """
    p = Path(model).expanduser()
    if p.exists():
        return
    if is_gguf(model):
        if model.lower().endswith(".gguf"):
            raise ValueError(f"{what} {model!r}: no such GGUF file")
        return  # a named GGUF (``smollm2``): assembled from its pinned wheels when first loaded
    parts = model.split("/")
    looks_local = model.startswith((".", "/", "~")) or len(parts) > 2 or (len(parts) == 2 and Path(parts[0]).is_dir())
    tip = "`crl tiny-model --out runs/tiny` builds a small local one"
    if looks_local or not model.strip():
        raise ValueError(f"{what} {model!r}: no such model folder; {tip}")
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers brings it
        return
    try:
        cached = try_to_load_from_cache(model, "config.json")
    except Exception:  # noqa: BLE001 - an id the hub library rejects: let it go on to the loader's message
        cached = None
    if isinstance(cached, str):
        return
    if _truthy(os.environ.get("HF_HUB_OFFLINE")) or _truthy(os.environ.get("TRANSFORMERS_OFFLINE")):
        raise ValueError(f"{what} {model!r}: not a local folder, and not in the hub cache (HF_HUB_OFFLINE is set, so "
                         f"it cannot be downloaded); {tip}")
    try:
        from huggingface_hub import model_info

        model_info(model, timeout=10)
    except Exception as e:  # noqa: BLE001 - any failure here is the one line the user needs
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ValueError(f"{what} {model!r}: not a local folder, not in the hub cache, and the hub did not give it "
                         f"({first}); {tip}") from None
