"""io/identity.py: a run folder knows what made it; profile and eval refuse to resume a folder made
with another model or input, and one helper records and compares every run's identity."""

from __future__ import annotations

import json
import logging
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
    from composition_rl.io.identity import RunMismatch, claim_run, run_identity

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


def test_a_field_on_one_side_only_is_a_difference_both_ways(tmp_path):
    """A run made with a model is not resumed by one that names none, nor the reverse; what a
    call records as ``info`` (paths, notes) is never compared, whichever side has it."""
    from composition_rl.io.identity import RunMismatch, claim_run, run_identity

    made_with = tmp_path / "with_model.json"
    claim_run(made_with, run_identity(model="Qwen3-4B", backend="openai"), has_work=False)
    with pytest.raises(RunMismatch, match=r"model: 'Qwen3-4B' -> \(not given\)"):
        claim_run(made_with, run_identity(backend="openai"))
    made_without = tmp_path / "without_model.json"
    claim_run(made_without, run_identity(backend="openai"), has_work=False)
    with pytest.raises(RunMismatch, match=r"model: \(not recorded\) -> 'Qwen3-4B'"):
        claim_run(made_without, run_identity(model="Qwen3-4B", backend="openai"))
    notes = tmp_path / "notes.json"
    claim_run(notes, {"n": 8}, info={"input": "a.jsonl"}, has_work=False)
    claim_run(notes, {"n": 8}, info={"input": "moved/a.jsonl"})
    claim_run(notes, {"n": 8})
    # a record written before records listed their identity's fields: the call's info is not identity
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"input": "a.jsonl", "n": 8, "model": "A"}))
    claim_run(old, {"n": 8, "model": "A"}, info={"input": "b.jsonl"})
    with pytest.raises(RunMismatch, match=r"model: 'A' -> \(not given\)"):
        claim_run(old, {"n": 8}, info={"input": "b.jsonl"})


def test_a_run_records_its_package_versions_and_a_resume_with_others_is_said_not_refused(tmp_path, caplog):
    """Versions are provenance, not identity: a patch release of a dependency would otherwise
    strand every long run, and a fixed bug must reach a resumed run (docs/first_hour.md)."""
    from importlib.metadata import version

    from composition_rl.io.identity import claim_run
    from composition_rl.io.runs import record_run

    rec = tmp_path / "run.json"
    claim_run(rec, {"n": 8}, has_work=False)
    made = json.loads(rec.read_text())
    assert made["versions"]["composition-rl"] == version("composition-rl")
    assert made["versions"]["math-verify"] == version("math-verify")
    made["versions"]["math-verify"] = "0.0.1"
    rec.write_text(json.dumps(made))
    with caplog.at_level(logging.INFO, logger="composition_rl"):
        claim_run(rec, {"n": 8})  # resumed, not refused
    said = caplog.text
    assert "math-verify 0.0.1" in said and version("math-verify") in said
    assert json.loads(rec.read_text())["versions_resumed"] == [{"math-verify": version("math-verify")}]
    claim_run(rec, {"n": 8})  # the same versions again: said once, recorded once
    assert json.loads(rec.read_text())["versions_resumed"] == [{"math-verify": version("math-verify")}]
    record_run(tmp_path / "o", "export", {"formats": ["trl"]})
    assert json.loads((tmp_path / "o" / "run.json").read_text())["versions"]["composition-rl"] == version("composition-rl")


def test_a_folder_input_is_hashed_by_its_content(tmp_path):
    from composition_rl.io.identity import run_identity

    prof = tmp_path / "prof"
    prof.mkdir()
    (prof / "profile.jsonl").write_text('{"id": "a", "class": "solve_none"}\n')
    (prof / "samples").mkdir()
    (prof / "samples" / "x.jsonl").write_text("1\n")
    first = run_identity(inputs={"from_profile": prof})["from_profile_sha256"]
    assert first != "(not recorded)" and len(first) == 16
    # the lock (it names its last holder), a page made from the folder and staging leftovers are not content
    (prof / ".crl.lock").write_text("123 profile\n")
    (prof / "report.html").write_text("<html>")
    (prof / ".crl-stage-x").mkdir()
    assert run_identity(inputs={"from_profile": prof})["from_profile_sha256"] == first
    (prof / "samples" / "x.jsonl").write_text("2\n")
    second = run_identity(inputs={"from_profile": prof})["from_profile_sha256"]
    assert second != first
    (prof / "profile.jsonl").write_text('{"id": "a", "class": "solve_all"}\n')
    assert run_identity(inputs={"from_profile": prof})["from_profile_sha256"] not in (first, second)
