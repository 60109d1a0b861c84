"""``crl score`` end to end on rows built from MATH500: outputs, counts, rejects, resume."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from composition_rl.cli import main


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
