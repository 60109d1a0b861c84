"""Loading problems: field detection, every answer type, rejects that add up."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from composition_rl.io.readers import (
    InputError,
    ReaderConfig,
    last_boxed,
    load_problems,
    load_reasoning_gym,
)


def _write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_bad_rows_are_rejected_with_reasons_and_counts_add_up(tmp_path):
    rows = [
        {"problem": "What is $1+1$?", "answer": "2"},
        {"problem": "What is $2+2$?", "answer": 4},
        {"question": "Halve 3.", "final_answer": 1.5},
        {"prompt": "Name the forms of one half.", "ground_truth": ["\\frac12", "0.5\n"]},
        {"problem": "", "answer": "1"},
        {"problem": "No answer here."},
        {"problem": "Bool answer?", "answer": True},
        {"problem": "What is $1+1$?", "answer": "2"},
        {"problem": "x" * 9000, "answer": "1"},
        "{not json",
        [1, 2],
        {"problem": "Worked only.", "solution": "so it is \\boxed{\\frac{1}{2}}."},
    ]
    res = load_problems(_write_jsonl(tmp_path / "p.jsonl", rows))
    assert res.rows == 12 and res.counts_add_up
    assert [p.answers for p in res.problems] == [("2",), ("4",), ("1.5",), ("\\frac12", "0.5"), ("\\frac{1}{2}",)]
    reasons = [r["reason"] for r in res.rejects]
    assert reasons == ["empty_field", "missing_field", "wrong_type", "duplicate_question", "over_long", "bad_json", "wrong_type"]
    assert all(r["detail"].startswith(f"row {r['row']}") for r in res.rejects)
    assert "'problem'" in res.rejects[0]["detail"] and "'answer'" in res.rejects[2]["detail"]


def test_ids_are_content_hashes_stable_across_formats(tmp_path):
    rows = [{"problem": "What is $3+4$?", "answer": "7", "level": 1}]
    a = load_problems(_write_jsonl(tmp_path / "a.jsonl", rows)).problems[0]
    (tmp_path / "b.json").write_text(json.dumps(rows))
    b = load_problems(tmp_path / "b.json").problems[0]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "c.parquet")
    c = load_problems(tmp_path / "c.parquet").problems[0]
    assert a.id == b.id == c.id and a.metadata["level"] == 1
    # the id format is part of the contract (resumed runs and rejects refer to it): sha1 of
    # question and each answer, each followed by a unit separator, 16 hex chars
    assert a.id == "9695f63d2e2107e7"  # sha1(b"What is $3+4$?\x1f7\x1f")[:16]


def test_field_overrides_and_errors_name_the_field(tmp_path):
    path = _write_jsonl(tmp_path / "q.jsonl", [{"text": "What is 5?", "gold": "5"}])
    res = load_problems(path, ReaderConfig(question_field="text", answer_field="gold"))
    assert res.problems[0].question == "What is 5?"
    with pytest.raises(InputError, match="'nope'"):
        load_problems(path, ReaderConfig(question_field="nope"))
    with pytest.raises(InputError, match="no such file"):
        load_problems(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(InputError, match="not valid JSON"):
        load_problems(tmp_path / "bad.json")


def test_last_boxed_handles_nesting():
    assert last_boxed(r"first \boxed{1} then \boxed{\frac{1}{\sqrt{2}}}.") == r"\frac{1}{\sqrt{2}}"
    assert last_boxed("no box") is None


def test_reasoning_gym_default_is_reproducible_and_numeric():
    a = load_reasoning_gym(seed=0, scale=60)
    b = load_reasoning_gym(seed=0, scale=60)
    assert [p.id for p in a.problems] == [p.id for p in b.problems]
    assert a.counts_add_up and len(a.problems) >= 50
    gens = {p.metadata["generator"] for p in a.problems}
    assert {"chain_sum", "basic_arithmetic", "products", "simple_equations", "lcm", "gsm_symbolic"} <= gens
    from composition_rl.values import parse_answer_value

    assert all(parse_answer_value(p.answer) is not None for p in a.problems)


SHARED_FILES = [
    ("train/math_train.json", 7474),
    ("train/aime_1983_2023.json", 975),
    ("eval/math500.parquet", 500),
    ("eval/aime24.json", 30),
    ("eval/aime25.json", 30),
    ("eval/amc.json", 83),
    ("eval/minerva.json", 272),
    ("eval/olympiad_bench.json", 675),
]


@pytest.mark.shared_data
@pytest.mark.parametrize("name,rows", SHARED_FILES)
def test_every_shared_file_loads_in_its_own_schema(shared_data, name, rows):
    res = load_problems(shared_data / name)
    assert res.rows == rows and res.counts_add_up
    assert len(res.problems) >= rows - 10
    assert all(p.answers and all(a == a.strip() for a in p.answers) for p in res.problems)


@pytest.mark.shared_data
def test_list_answers_keep_every_accepted_form(shared_data):
    res = load_problems(shared_data / "eval/minerva.json")
    multi = [p for p in res.problems if len(p.answers) > 1]
    assert multi and all(len(set(p.answers)) == len(p.answers) for p in multi)


def test_problem_records_are_read_whole(tmp_path):
    from composition_rl.jobs.compose import ComposeConfig, compose_problems
    from composition_rl.records import Problem

    q1 = Problem.new("What is $3+4$?", "7")
    q2 = Problem.new("A box holds 12 apples. How many apples do $3$ boxes hold?", "36")
    c = compose_problems([q1, q2], ComposeConfig(depth=2, pool_size=1)).accepted[0]
    path = _write_jsonl(tmp_path / "composed.jsonl", [c.to_dict(), q1.to_dict(), {**q2.to_dict(), "question": "  "}])
    res = load_problems(path)
    assert res.problems[0] == c and res.problems[0].links and res.problems[1] == q1
    assert [r["reason"] for r in res.rejects] == ["empty_field"] and res.counts_add_up


@pytest.mark.parametrize("answer", [None, "", "  "], ids=["null", "empty", "blank"])
def test_a_missing_answer_falls_back_to_the_boxed_solution_whether_null_or_blank(tmp_path, answer):
    """``answer: ""`` was rejected while ``answer: null`` took the box: a table writes a
    missing value as an empty cell, so the two are one case."""
    rows = [{"problem": "Halve 1.", "answer": answer, "solution": "Half of 1 is \\boxed{\\frac12}."},
            {"problem": "Halve 3.", "answer": answer}]
    res = load_problems(_write_jsonl(tmp_path / "p.jsonl", rows))
    assert [p.answers for p in res.problems] == [("\\frac12",)] and res.counts_add_up
    reason = "missing_field" if answer is None else "empty_field"
    assert [r["reason"] for r in res.rejects] == [reason]


def test_an_empty_answer_cell_of_a_csv_takes_the_box(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text('problem,answer,solution\nHalve 1.,,"so \\boxed{\\frac12}"\nDouble 2.,4,\n')
    res = load_problems(path)
    assert [p.answers for p in res.problems] == [("\\frac12",), ("4",)] and not res.rejects


def test_a_semicolon_csv_is_read(tmp_path):
    """The CSV that spreadsheets write where the comma is the decimal mark."""
    path = tmp_path / "p.csv"
    path.write_text("question;answer\nWhat is 1,5 + 1?;2,5\nWhat is 2+2?;4\n")
    res = load_problems(path)
    assert [(p.question, p.answers) for p in res.problems] == [("What is 1,5 + 1?", ("2,5",)), ("What is 2+2?", ("4",))]


@pytest.mark.parametrize("name", ["p.txt", "p.jsonl", "p"])
def test_a_table_under_a_json_name_is_one_error_naming_it_not_bad_json_rows(tmp_path, name):
    """A semicolon table named .txt was rejected row by row as ``bad_json``."""
    path = tmp_path / name
    path.write_text("question;answer\nWhat is 1+1?;2\nWhat is 2+2?;4\n")
    with pytest.raises(InputError, match=r"not JSON or JSONL; it looks like CSV with ';' separators"):
        load_problems(path)


def test_a_latin1_row_is_rejected_by_line_and_a_misnamed_table_gets_a_hint(tmp_path):
    from composition_rl.io.readers import InputError, load_problems

    rows = [{"problem": f"What is {i}+1?", "answer": str(i + 1)} for i in range(4)]
    lat = tmp_path / "lat.jsonl"
    lat.write_bytes(b"".join(json.dumps(r, ensure_ascii=False).replace("What", "Wh\u00e9t" if i == 2 else "What")
                             .encode("latin-1") + b"\n" for i, r in enumerate(rows)))
    res = load_problems(lat)
    assert len(res.problems) == 3 and len(res.rejects) == 1
    assert "line 3 is not UTF-8 text (byte 0xe9 at column 16" in res.rejects[0]["detail"]
    tab = tmp_path / "t.csv"
    tab.write_text("problem\tanswer\n" + "".join(f"{r['problem']}\t{r['answer']}\n" for r in rows))
    with pytest.raises(InputError, match="tab-separated: rename it .tsv"):
        load_problems(tab)
    named_json = tmp_path / "c.json"
    named_json.write_text("problem,answer\n" + "".join(f"{r['problem']},{r['answer']}\n" for r in rows))
    with pytest.raises(InputError, match=r"looks like CSV \(.csv\)"):
        load_problems(named_json)


@pytest.mark.parametrize("head, kind", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01", "a PNG image"),
    (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00", "a JPEG image"),
    (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "a PDF document"),
    (b"GIF89a\x01\x00\x01\x00", "a GIF image"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00", "binary data"),
    ("\ufeff{\"question\": \"q\"}\n".encode("utf-16-le"), "UTF-16 text"),
])
@pytest.mark.parametrize("name", ["in.jsonl", "in.json", "in.txt", "in"])
def test_a_binary_file_is_named_for_what_it_is_not_asked_if_it_is_latin1(tmp_path, head, kind, name):
    p = tmp_path / name
    p.write_bytes(head + bytes(range(256)))
    with pytest.raises(InputError, match=f"{re.escape(str(p))}: {kind}") as e:
        load_problems(str(p))
    assert "Latin-1" not in str(e.value)
