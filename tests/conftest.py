"""Shared fixtures and the ``shared_data`` gate.

Tests that read ../shared/data carry ``@pytest.mark.shared_data``; they are skipped with a
clear reason when the folder is absent (CI always has it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO.parent / "shared" / "data").resolve()


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
        if "shared_data" in it.keywords and not SHARED_DATA.is_dir():
            it.add_marker(skip_data)
        if "gpu" in it.keywords and not have_gpu:
            it.add_marker(skip_gpu)
        if "real_llm" in it.keywords and not real_llm_asked:
            it.add_marker(skip_real_llm)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DATA}")
    return SHARED_DATA
