"""``crl score`` end to end on rows built from MATH500: outputs, counts, rejects, resume."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from cli_run import crl, one_error_line

from composition_rl.cli import main

# the module of the crl score job (the package attribute ``score`` is the verb)
score_job = importlib.import_module("composition_rl.jobs.score")


def _rows(shared_data, n=30):
    gold = pq.read_table(shared_data / "eval/math500.parquet").to_pylist()[:n]
    rows = []
    for i, r in enumerate(gold):
        kind = i % 3
        if kind == 0:
            resp = rf"... so the answer is $\boxed{{{r['answer']}}}$."
        elif kind == 1:
            resp = rf"... so the answer is $\boxed{{{r['answer']}}}+1$ or maybe \boxed{{-1000}}."
        else:
            resp = "Let me think about this step by step and I ran out of"
        rows.append({"id": r["unique_id"], "response": resp, "answer": r["answer"]})
    rows.append({"id": "broken", "response": None, "answer": "1"})
    return rows


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.shared_data
def test_score_writes_outcomes_in_order_and_counts_add_up(tmp_path, shared_data, capsys):
    rows = _rows(shared_data)
    _write(tmp_path / "in.jsonl", rows)
    out = tmp_path / "scored.jsonl"
    assert main(["score", "--input", str(tmp_path / "in.jsonl"), "--out", str(out), "--no-progress"]) == 0
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert [g["id"] for g in got] == [r["id"] for r in rows[:-1]]
    expected = ["correct", "incorrect", "no_answer"] * 10
    assert [g["outcome"] for g in got] == expected
    assert [g["score"] for g in got] == [1.0 if e == "correct" else 0.0 for e in expected]
    rejects = [json.loads(x) for x in (tmp_path / "scored.rejects.jsonl").read_text().splitlines()]
    assert rejects == [{"line": 31, "reason": "no text in field 'response'", "row": rows[-1]}]
    printed = capsys.readouterr().out
    assert "correct 10, incorrect 10, no_answer 10, timeout 0, error 0" in printed
    assert "rejected 1 rows" in printed


@pytest.mark.shared_data
def test_score_resumes_after_a_torn_write(tmp_path, shared_data):
    rows = _rows(shared_data)
    _write(tmp_path / "in.jsonl", rows)
    args = ["score", "--input", str(tmp_path / "in.jsonl"), "--no-progress", "--timeout", "3"]
    assert main([*args, "--out", str(tmp_path / "full.jsonl")]) == 0
    full = (tmp_path / "full.jsonl").read_bytes()
    lines = full.splitlines(keepends=True)
    # as if killed mid-line after 12 rows
    (tmp_path / "part.jsonl").write_bytes(b"".join(lines[:12]) + lines[12][:20])
    # the killed run had recorded its options first (a rerun under other options refuses)
    (tmp_path / "part.options.json").write_bytes((tmp_path / "full.options.json").read_bytes())
    assert main([*args, "--out", str(tmp_path / "part.jsonl")]) == 0
    assert (tmp_path / "part.jsonl").read_bytes() == full
    assert (tmp_path / "part.rejects.jsonl").read_bytes() == (tmp_path / "full.rejects.jsonl").read_bytes()


def test_score_usage_errors(tmp_path, capsys):
    assert main(["score", "--input", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o.jsonl")]) == 2
    # a line that is not JSON is rejected with its number; the other rows are scored
    (tmp_path / "bad.jsonl").write_text('{"response": "x", "answer": "1"}\nnot json\n')
    assert main(["score", "--input", str(tmp_path / "bad.jsonl"), "--out", str(tmp_path / "b.jsonl"),
                 "--no-progress"]) == 0
    assert json.loads((tmp_path / "b.rejects.jsonl").read_text())["reason"].startswith("line 2 is not valid JSON")
    assert len((tmp_path / "b.jsonl").read_text().splitlines()) == 1
    (tmp_path / "ok.jsonl").write_text('{"response": "x", "answer": "1"}\n')
    assert main(["score", "--input", str(tmp_path / "ok.jsonl"), "--out", str(tmp_path / "o.jsonl"), "--timeout", "0"]) == 2
    assert main(["score", "--input", str(tmp_path / "ok.jsonl"), "--out", str(tmp_path / "o.jsonl"), "--fallback", "nope"]) == 2


def _math_pairs(shared_data, n_prompts=40):
    """Responses for MATH train golds, as the reward benchmark builds them: some boxed right,
    some an equivalent form, some another problem's answer, some cut off before any answer."""
    rows = [r for r in json.loads((shared_data / "train/math_train.json").read_text()) if isinstance(r.get("answer"), str)]
    picked = rows[:: len(rows) // n_prompts][:n_prompts]
    out = []
    for i, p in enumerate(picked):
        other = picked[(i + 7) % len(picked)]["answer"]
        plain = p["answer"].replace(r"\dfrac", r"\frac")
        for j, resp in enumerate((
            rf"Let's see. {p['problem'][:200]} So the answer is $\boxed{{{p['answer']}}}$.",
            rf"So the answer is $\boxed{{{plain}}}$.",
            rf"Therefore, the final answer is $\boxed{{{other}}}$.",
            "Let's think step by step. " + p["problem"][:120],
        )):
            out.append({"id": f"{i}-{j}", "response": resp, "answer": p["answer"]})
    return out


@pytest.mark.shared_data
def test_score_writes_the_same_bytes_chunk_by_chunk_as_in_one_batch(tmp_path, shared_data, monkeypatch):
    """The command queues the next chunk before it writes the one before; with chunks of 7 rows
    (23 chunks of real MATH pairs) the output is byte for byte what one chunk of all the rows
    gives, and each row's verdict is what the library's ``score_batch`` says for it."""
    from composition_rl.grading import Verifier, VerifyConfig
    from composition_rl.io.files import dumps

    rows = _math_pairs(shared_data)
    _write(tmp_path / "in.jsonl", rows)
    args = ["score", "--input", str(tmp_path / "in.jsonl"), "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "whole.jsonl")]) == 0
    monkeypatch.setattr(score_job, "CHUNK", 7)
    assert main([*args, "--out", str(tmp_path / "chunked.jsonl")]) == 0
    whole = (tmp_path / "whole.jsonl").read_bytes()
    assert (tmp_path / "chunked.jsonl").read_bytes() == whole
    with Verifier(VerifyConfig()) as v:
        results = v.score_batch([(r["response"], r["answer"]) for r in rows])
    expected = "".join(
        dumps({**r, "outcome": x.outcome.value, "score": x.score, "extracted": x.extracted}) + "\n"
        for r, x in zip(rows, results)
    )
    assert whole.decode("utf-8") == expected
    outcomes = {json.loads(x)["outcome"] for x in whole.splitlines()}
    assert outcomes == {"correct", "incorrect", "no_answer"}  # every kind of verdict is in there


def test_score_process_never_imports_torch_transformers_or_trl(tmp_path):
    """The whole ``crl score`` run, in a process of its own: neither the command nor the
    verifier it drives loads the training stack (or, in this process, sympy and Math-Verify:
    those live in the workers)."""
    _write(tmp_path / "in.jsonl", [{"response": r"so $\boxed{7}$", "answer": "7"}])
    code = (
        "import sys; from composition_rl.cli import main; "
        f"rc = main(['score', '--input', {str(tmp_path / 'in.jsonl')!r}, '--out', {str(tmp_path / 'o.jsonl')!r}, "
        "'--no-progress']); "
        "print(sorted(m for m in ('torch', 'transformers', 'trl', 'sympy', 'math_verify') if m in sys.modules)); "
        "sys.exit(rc)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout
    assert json.loads((tmp_path / "o.jsonl").read_text())["outcome"] == "correct"


def _responses(tmp_path: Path) -> Path:
    f = tmp_path / "responses.jsonl"
    f.write_text(
        json.dumps({"response": "So $\\boxed{4}$.", "answer": "4"}) + "\n"
        + "{this line is not JSON\n"
        + json.dumps({"response": "The answer is 5", "answer": "5"}) + "\n"
    )
    return f


def test_score_with_wrong_field_names_exits_1_naming_the_fields(tmp_path):
    r = crl("score", "--input", str(_responses(tmp_path)), "--out", str(tmp_path / "s.jsonl"),
            "--response-field", "completion", "--no-progress", "--workers", "1")
    assert r.returncode == 1
    assert "no row of" in r.stderr and "--response-field (now 'completion')" in r.stderr
    assert "fields seen: response, answer" in r.stderr


def test_score_rejects_a_bad_json_line_by_number_and_scores_the_rest(tmp_path):
    out = tmp_path / "s.jsonl"
    r = crl("score", "--input", str(_responses(tmp_path)), "--out", str(out), "--no-progress", "--workers", "1")
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["outcome"] for x in open(out)][0] == "correct" and sum(1 for _ in open(out)) == 2
    (rej,) = [json.loads(x) for x in open(tmp_path / "s.rejects.jsonl")]
    assert rej["line"] == 2 and "line 2 is not valid JSON" in rej["reason"]


@pytest.mark.slow
def test_score_rerun_with_other_options_refuses_and_fresh_rescores(tmp_path):
    inp, out = _responses(tmp_path), tmp_path / "s.jsonl"
    base = ("score", "--input", str(inp), "--out", str(out), "--no-progress", "--workers", "1")
    assert crl(*base).returncode == 0
    r = crl(*base, "--fallback", "none")
    assert r.returncode == 2
    line = one_error_line(r)
    assert "made with other settings (fallbacks: ['answer_line'] -> [])" in line and "--fresh" in line
    r = crl(*base, "--fallback", "none", "--fresh")
    assert r.returncode == 0 and "scored 2 rows" in r.stdout
    r = crl(*base, "--fallback", "none")  # same options: the resume check says so
    assert r.returncode == 0 and "same options: nothing to do" in r.stdout


def test_score_refuses_an_out_that_is_its_input_and_leaves_it_whole(tmp_path):
    inp = tmp_path / "r.jsonl"
    inp.write_text(json.dumps({"response": "So $\\boxed{4}$.", "answer": "4"}) + "\n")
    before = inp.read_bytes()
    for extra in ((), ("--fresh",)):
        r = crl("score", "--input", str(inp), "--out", str(inp), "--workers", "1", "--no-progress", *extra)
        assert r.returncode == 2
        assert f"--input {inp} is also an output of this run" in one_error_line(r)
        assert inp.read_bytes() == before
    # through another spelling of the same path
    r = crl("score", "--input", str(inp), "--out", str(tmp_path / "." / "r.jsonl"), "--workers", "1", "--fresh")
    assert r.returncode == 2 and inp.read_bytes() == before


@pytest.mark.parametrize("argv, flag", [
    (["score", "--workers", "0"], "--workers"),
    (["score", "--timeout", "-1"], "--timeout"),
    (["profile", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--verify-timeout", "0"], "--verify-timeout"),
    (["probe", "--probe-model", "m", "--verify-timeout", "0"], "--verify-timeout"),
    (["grow", "--teacher", "program", "--policy", "p", "--verify-timeout", "0"], "--verify-timeout"),
])
def test_a_bad_verifier_setting_is_named_by_its_flag(tmp_path, capsys, argv, flag):
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"question": "What is 1+1?", "answer": "2", "completion": "\\boxed{2}"}) + "\n")
    assert main([*argv, "--input", str(inp), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"{flag} must be" in err, err
    assert "timeout_s" not in err and "None or an int" not in err
