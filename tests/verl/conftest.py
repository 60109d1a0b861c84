"""Fixtures shared by the verl interop tests (run in .venv-verl: ``pytest -m verl tests/verl``)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory):
    """A local byte-level BPE tokenizer trained on the built-in arithmetic task (no hub)."""
    from transformers import AutoTokenizer

    from composition_rl.jobs.tiny_model import build_tokenizer
    from composition_rl.jobs.train.arithmetic import make_problem

    corpus = [make_problem(2, 0, i)[1] for i in range(200)]
    folder = tmp_path_factory.mktemp("tok")
    build_tokenizer(corpus, 300).save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)
