"""What made a run folder, and the refusal to resume it with anything else.

Every resumable command (``profile``, ``eval``, ``grow``, ``score``, ``compose --engine
llm/auto``) keeps finished work and a rerun continues from it. That is only right when the
rerun is the same run: another model, another input file or other options would mix two
runs' results in one folder and report them as one (issue 25: ``crl eval --model B`` into a
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

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from composition_rl.io.files import atomic_write_json
from composition_rl.io.gguf import MODELS, is_gguf, read_gguf_metadata

__all__ = ["RUN_FILE", "RunMismatch", "claim_run", "file_sha256", "model_identity", "run_identity"]

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
    if model in MODELS and not model.endswith(".gguf"):
        m = MODELS[model]
        return f"{m.name} (GGUF sha256 {m.sha256[:16]})"
    p = Path(model).expanduser()
    if not p.is_file():
        return str(p.resolve())  # the load fails later, naming the missing file
    return f"{read_gguf_metadata(p).get('general.name', p.name)} (GGUF sha256 {file_sha256(p)})"


def run_identity(model: str | None = None, backend: str | None = None,
                 inputs: Mapping[str, str | os.PathLike | None] | None = None, **options: Any) -> dict[str, Any]:
    """The identity of a run: ``model`` (a local folder by its absolute path, an endpoint's
    model by its name), ``backend``, each named input file by its content hash, and any
    further ``options`` as given. ``None`` values are left out.

    >>> run_identity(model="Qwen3-4B", backend="openai", n=8)
    {'model': 'Qwen3-4B', 'backend': 'openai', 'n': 8}
    """
    ident: dict[str, Any] = {}
    if model is not None:
        ident["model"] = model_identity(model)
    if backend is not None:
        ident["backend"] = backend
    for name, path in (inputs or {}).items():
        if path is not None:
            ident[f"{name}_sha256"] = file_sha256(path) if Path(path).is_file() else _NOT_RECORDED
    ident.update({k: v for k, v in options.items() if v is not None})
    return ident


def claim_run(record: str | os.PathLike, identity: Mapping[str, Any], *, has_work: bool = True,
              info: Mapping[str, Any] | None = None, what: str = "a run",
              fix: str = "use another --out, or rerun with the same settings") -> None:
    """Write ``identity`` (and ``info``, recorded but never compared) to the ``record`` file
    on a first run; on a rerun, refuse when any field of ``identity`` differs from the record.

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
    if has_work and path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8") or "null")
        except json.JSONDecodeError:
            old = None
        if not isinstance(old, dict):
            raise RunMismatch(f"{path.parent} holds {what}, but its record {path.name} is unreadable; {fix}")
        diff = [f"{k}: {old.get(k, _NOT_RECORDED)!r} -> {v!r}" for k, v in ident.items() if old.get(k, _NOT_RECORDED) != v]
        if diff:
            raise RunMismatch(f"{path.parent} holds {what} made with other settings ({'; '.join(diff)}); {fix}")
        return
    if has_work:
        raise RunMismatch(f"{path.parent} holds {what} but no record of what made it ({path.name}); {fix}")
    atomic_write_json(path, {**(info or {}), **ident})
