"""The TRL adapter fails loudly when the pinned TRL changes under it."""

from __future__ import annotations

import pytest

trl = pytest.importorskip("trl")

from composition_rl.train import trl_adapter  # noqa: E402
from composition_rl.train.trl_adapter import (  # noqa: E402
    PINNED_TRL,
    TRLCompatError,
    check_batch_keys,
    check_trl_compat,
)


def test_installed_trl_is_the_pinned_one_and_has_the_hooks_we_override():
    assert trl.__version__ == PINNED_TRL
    check_trl_compat()


def test_a_different_trl_version_is_refused(monkeypatch):
    monkeypatch.setattr(trl_adapter.trl, "__version__", "1.17.0")
    with pytest.raises(TRLCompatError, match=r"written for trl 1\.16\.x"):
        check_trl_compat()


def test_a_patch_release_of_the_same_series_is_accepted(monkeypatch):
    monkeypatch.setattr(trl_adapter.trl, "__version__", "1.16.3")
    check_trl_compat()


def test_a_changed_hook_signature_is_refused(monkeypatch):
    def changed(self, inputs, extra):  # pragma: no cover - never called
        return {}

    monkeypatch.setattr(trl_adapter.GRPOTrainer, "_generate_and_score_completions", changed)
    with pytest.raises(TRLCompatError, match="takes"):
        check_trl_compat()


def test_unknown_batch_keys_are_refused():
    check_batch_keys({"prompt_ids": object(), "advantages": object(), "old_per_token_logps": None})
    with pytest.raises(TRLCompatError, match="pixel_values"):
        check_batch_keys({"prompt_ids": object(), "pixel_values": object()})
