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
:func:`claim_run`. The folder itself (its lock, its owner, what may be written into it) is
:mod:`composition_rl.io.runs`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from composition_rl.io.files import atomic_write_json
from composition_rl.io.gguf import describe_identity, find_model, is_gguf, read_gguf_metadata

__all__ = ["IDENTITY_FIELDS", "RunMismatch", "VERSIONS", "claim_run", "file_sha256", "folder_sha256",
           "model_content", "model_identity", "package_versions", "run_identity"]

log = logging.getLogger(__name__)

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
    are recorded too, but not compared: a resume under other versions goes on, says so (a
    warning on this module's logger), and adds them to ``versions_resumed`` in the record.

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
    atomic_write_json(path, {**(info or {}), **_model_cards(ident), **ident, IDENTITY_FIELDS: sorted(ident),
                             VERSIONS: versions})


def _model_cards(ident: Mapping[str, Any]) -> dict[str, Any]:
    """A named GGUF's upstream model, quantization and licence for each model a run names
    (``model``; a grow run's ``policy`` and ``students``): recorded, never compared.

    >>> one = "Qwen2.5 Coder 0.5B Instruct AWQ (GGUF sha256 1d9614638d18024d)"
    >>> sorted(_model_cards({"model": one})), sorted(_model_cards({"policy": one, "students": [one, "x"]})["model_cards"])
    (['model_card'], ['policy', 'students[0]'])
    """
    cards = {k: describe_identity(v) for k, v in ident.items() if isinstance(v, str)}
    cards.update({f"{k}[{i}]": describe_identity(x) for k, v in ident.items() if isinstance(v, list)
                  for i, x in enumerate(v) if isinstance(x, str)})
    cards = {k: c for k, c in cards.items() if c}
    about: dict[str, Any] = {}
    if "model" in cards:
        about["model_card"] = cards.pop("model")
    if cards:
        about["model_cards"] = cards
    return about


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
    log.warning("note: %s holds %s made with %s; resuming it with these versions (recorded in %s as "
                "versions_resumed; versions are not part of a run's identity)", path.parent, what, said, path.name)
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
