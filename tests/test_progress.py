"""The one progress display: a bar on a terminal, plain lines in a log (``make demo > log``)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from composition_rl.jobs.train.step_progress import step_progress
from composition_rl.progress import ProgressBar

REPO = Path(__file__).resolve().parents[1]


def test_a_log_gets_a_line_per_interval_and_a_last_line():
    """Breaks when the display draws nothing off a terminal (SFT was silent for 20 minutes)."""
    log = io.StringIO()
    with ProgressBar("scoring", total=10, interval=0, stream=log, fields={"acc": 0}) as bar:
        for i in range(10):
            bar.advance(1, acc=i)
    lines = log.getvalue().splitlines()
    assert len(lines) == 10
    assert lines[4].startswith("scoring 5/10 (50%), acc 4 [0:00:00 elapsed")
    assert lines[-1].startswith("scoring 10/10 (100%), acc 9")


def test_a_short_loop_stays_silent_and_disabled_prints_nothing():
    log = io.StringIO()
    with ProgressBar("scoring", total=3, interval=3600, stream=log) as bar:
        bar.update(3)
    with ProgressBar("scoring", total=3, enabled=False, interval=0, stream=log) as bar:
        bar.update(3)
    assert log.getvalue() == ""


def test_the_interval_comes_from_the_environment(monkeypatch, capsys):
    """Step loops (training, SFT) go through the same display, into stdout when it is a pipe."""
    monkeypatch.setenv("CRL_PROGRESS_INTERVAL", "0")
    with step_progress("SFT warm-up", 3) as advance:
        for step in range(3):
            advance(f"loss {1 / (step + 1):.2f}")
    lines = capsys.readouterr().out.splitlines()
    assert [x.split(" [")[0] for x in lines] == [
        "SFT warm-up 1/3 (33%), loss 1.00", "SFT warm-up 2/3 (67%), loss 0.50", "SFT warm-up 3/3 (100%), loss 0.33"]


@pytest.mark.slow
def test_tiny_model_sft_writes_lines_into_a_pipe(tmp_path):
    """``crl tiny-model > log``: the SFT warm-up shows in the log, step by step."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "CRL_PROGRESS_INTERVAL": "0"}
    run = subprocess.run([sys.executable, "-m", "composition_rl.cli", "tiny-model", "--out", str(tmp_path / "m"),
                          "--sft-steps", "3"], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    sft = [x for x in run.stdout.splitlines() if x.startswith("SFT warm-up")]
    assert [x.split(",")[0].split(" (")[0] for x in sft] == ["SFT warm-up 1/3", "SFT warm-up 2/3", "SFT warm-up 3/3"]
