"""Doctest collection for ``src/`` (``--doctest-modules`` in pyproject.toml): every ``>>>``
example in the package runs in the fast suite, each in a fresh temporary working folder so
that an example may write ``out/`` or ``toy.jsonl`` as a user would.

A module whose import needs a package only another environment has (verl's TransferQueue
lives in .venv-verl) is left out of collection when that package is missing here, rather
than failing collection; its examples run where the package is installed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from _pytest.doctest import DoctestItem

PKG = Path(__file__).resolve().parent / "src" / "composition_rl"
# module (relative to PKG) -> the top-level package its import needs
NEEDS = {"integrations/verl_online.py": "transfer_queue"}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    for rel, dep in NEEDS.items():
        if collection_path == PKG / rel and importlib.util.find_spec(dep) is None:
            return True
    return None


@pytest.fixture(autouse=True)
def _doctest_in_tmp(request: pytest.FixtureRequest) -> None:
    if isinstance(request.node, DoctestItem):
        request.getfixturevalue("monkeypatch").chdir(request.getfixturevalue("tmp_path"))
