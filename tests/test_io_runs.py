"""io/runs.py: a run folder knows what made it; profile and eval refuse to resume a folder made
with another model or input, and one helper records and compares every run's identity."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from cli_run import REPO, one_error_line
from fakes.openai_server import FakeOpenAIServer


def _numbered(body: dict) -> list[str]:
    return [f"The answer is \\boxed{{{i}}}" for i in range(int(body.get("n") or 1))]


@pytest.mark.slow
def test_profile_and_eval_refuse_a_folder_made_with_another_model(tmp_path):
    from composition_rl.cli import main

    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"problem": f"What is {i}+0?", "answer": str(i)}) + "\n" for i in range(3)))
    with FakeOpenAIServer(_numbered) as srv:
        for cmd, flag in (("profile", "--input"), ("eval", "--benchmark")):
            base = [cmd, flag, str(data), "--base-url", srv.url, "-n", "2", "--no-progress", "--out",
                    str(tmp_path / cmd)]
            assert main([*base, "--model", "A"]) == 0
            sent = srv.requests
            r = subprocess.run([sys.executable, "-m", "composition_rl.cli", *base, "--model", "B"],
                               capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
            assert r.returncode == 2, r.stderr
            assert "model: 'A' -> 'B'" in one_error_line(r)
            assert srv.requests == sent  # nothing sent, nothing reported as B's
            # the same model from another URL (the endpoint moved) resumes
            assert main([*base[:4], srv.url.replace("127.0.0.1", "localhost"), *base[5:], "--model", "A"]) == 0
            # an edited input is another run too
            data.write_text(data.read_text() + json.dumps({"problem": "What is 9+0?", "answer": "9"}) + "\n")
            r = subprocess.run([sys.executable, "-m", "composition_rl.cli", *base, "--model", "A"],
                               capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
            assert r.returncode == 2 and "_sha256" in one_error_line(r)
            data.write_text("".join(data.read_text().splitlines(keepends=True)[:3]))


def test_one_helper_records_and_compares_every_run_identity(tmp_path):
    from composition_rl.io.runs import RunMismatch, claim_run, run_identity

    f = tmp_path / "in.jsonl"
    f.write_text("a\n")
    rec = tmp_path / "run.json"
    ident = run_identity(model="m", backend="openai", inputs={"input": f}, n=8)
    claim_run(rec, ident, has_work=False)
    claim_run(rec, ident)  # the same run resumes
    with pytest.raises(RunMismatch, match=r"n: 8 -> 4; backend: 'openai' -> 'hf'|backend: 'openai' -> 'hf'; n: 8 -> 4"):
        claim_run(rec, {**ident, "n": 4, "backend": "hf"})
    rec.unlink()
    with pytest.raises(RunMismatch, match="no record of what made it"):
        claim_run(rec, ident)  # work without a record is never adopted
