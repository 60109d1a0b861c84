"""`crl audit`: a blind, seeded sample of a composed set, and the score of the filled form."""

from __future__ import annotations

import csv
import json
import re

import pytest
from cli_run import crl, one_error_line

from composition_rl.cli import main
from composition_rl.jobs.audit import score
from composition_rl.jobs.compose import ComposeConfig, run_compose
from composition_rl.records import Problem

QUESTIONS = [
    ("What is $3 + 4$?", "7"),
    ("Compute $2 \\cdot 6$.", "12"),
    ("If $x + 5 = 9$, what is $x$?", "4"),
    ("A box holds 8 red and 3 blue balls. How many balls are there?", "11"),
    ("What is $\\sqrt 5 \\cdot \\sqrt 5 + 1$?", "6"),
    ("Solve \\begin{align*} y &= 2x + 3 \\end{align*} for $x$ when $y = 11$.", "4"),
]


@pytest.fixture()
def run_dir(tmp_path):
    probs = [Problem.new(q, a) for q, a in QUESTIONS]
    run_compose(probs, ComposeConfig(pool_size=6, seed=0), tmp_path / "run", progress=False)
    return tmp_path / "run"


def _rows(path):
    return list(csv.DictReader(path.read_text(encoding="utf-8").splitlines(keepends=True)))


def test_sample_is_blind_seeded_and_marks_the_change(run_dir, tmp_path, capsys):
    out = tmp_path / "a.csv"
    assert main(["audit", str(run_dir), "--sample", "5", "--seed", "1", "--out", str(out)]) == 0
    rows = _rows(out)
    assert [r["item"] for r in rows] == ["A001", "A002", "A003", "A004", "A005"]
    records = {json.loads(line)["id"]: json.loads(line) for line in (run_dir / "composed.jsonl").open()}
    key = json.loads((tmp_path / "a.csv.key.json").read_text())["items"]
    for r in rows:
        rec = records[key[r["item"]]]
        text = out.read_text()
        assert rec["id"] not in text and "symbolic" not in text and "v2_offset" not in text  # blind
        y = rec["links"][0]["y"]
        assert "[[" in r["later_problems"] and y in r["later_problems"].split("[[")[1]
        assert r["answer"] == rec["answer"] and rec["question"].startswith(r["first_problem"])
        assert all(r[q] == "" for q in ("valid", "shortcut", "natural"))
    again = tmp_path / "b.csv"
    main(["audit", str(run_dir), "--sample", "5", "--seed", "1", "--out", str(again)])
    assert again.read_bytes() == out.read_bytes()
    other = tmp_path / "c.csv"
    main(["audit", str(run_dir), "--sample", "5", "--seed", "2", "--out", str(other)])
    assert other.read_bytes() != out.read_bytes()
    page = tmp_path / "a.html"
    assert main(["audit", str(run_dir), "--sample", "3", "--out", str(page)]) == 0
    html = page.read_text()
    assert html.count('class="item"') == 3 and "<mark>" in html and 'name="A001-natural"' in html


def test_score_counts_with_wilson_intervals(run_dir, tmp_path, capsys):
    out = tmp_path / "a.csv"
    main(["audit", str(run_dir), "--sample", "10", "--out", str(out)])
    rows = _rows(out)
    assert len(rows) == 10
    for i, r in enumerate(rows):
        r.update(valid="y" if i else "n", shortcut="n", natural="y" if i < 8 else "n")
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    d = score(out).to_dict()
    assert d["invalid"]["count"] == 1 and d["invalid"]["answered"] == 10
    assert d["natural"]["yes"] == 8 and d["shortcut"]["yes"] == 0
    lo, hi = d["natural"]["wilson95"]
    assert lo < 0.8 < hi and 0.44 < lo < 0.5  # Wilson 8/10: 0.490 .. 0.943
    capsys.readouterr()
    assert main(["audit", "--score", str(out)]) == 0
    assert re.search(r"natural\s+8 of 10\s+80\.0%", capsys.readouterr().out)


def test_bad_answers_name_the_item_and_field(run_dir, tmp_path, capsys):
    out = tmp_path / "a.csv"
    main(["audit", str(run_dir), "--sample", "2", "--out", str(out)])
    text = out.read_text().replace("\r\n", "\n")
    rows = _rows(out)
    rows[1]["natural"] = "maybe"
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert text
    assert main(["audit", "--score", str(out)]) == 2
    err = capsys.readouterr().err
    assert "A002" in err and "'natural'" in err and "maybe" in err
    assert main(["audit", str(tmp_path), "--out", str(tmp_path / "x.csv")]) == 2
    assert "no composed.jsonl" in capsys.readouterr().err
    assert main(["audit", str(run_dir), "--out", str(tmp_path / "x.txt")]) == 2


def test_classes_form_counts_shortcuts_by_class_and_refuses_a_shortcut_without_one(run_dir, tmp_path, capsys):
    out = tmp_path / "h.csv"
    assert main(["audit", str(run_dir), "--sample", "6", "--classes", "--out", str(out)]) == 0
    rows = _rows(out)
    assert list(rows[0])[-2:] == ["class", "hint"] and all(r["class"] == r["hint"] == "" for r in rows)
    labels = ["answer_independent", "visible", "answer_independent", "", "", ""]
    for r, c in zip(rows, labels):
        r.update(valid="y", natural="y", shortcut="y" if c else "n", **{"class": c})
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    d = score(out).to_dict()
    assert d["shortcut"]["yes"] == 3 and d["shortcut_classes"] == {"answer_independent": 2, "visible": 1}
    capsys.readouterr()
    assert main(["audit", "--score", str(out)]) == 0
    assert re.search(r"shortcut class answer_independent\s+2", capsys.readouterr().out)
    # a shortcut with no class (or an unknown one) is refused, naming the item and the field
    rows[1]["class"] = "vissible"
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert main(["audit", "--score", str(out)]) == 2
    err = capsys.readouterr().err
    assert "A002" in err and "'class'" in err and "vissible" in err
    # the plain form has no class column, and its score no classes
    assert "shortcut_classes" not in score_plain(run_dir, tmp_path)
    assert main(["audit", str(run_dir), "--classes", "--out", str(tmp_path / "h.html")]) == 2


def score_plain(run_dir, tmp_path):
    out = tmp_path / "p.csv"
    main(["audit", str(run_dir), "--sample", "2", "--out", str(out)])
    rows = _rows(out)
    assert "class" not in rows[0]
    for r in rows:
        r.update(valid="y", shortcut="y", natural="y")
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return score(out).to_dict()


def test_audit_refuses_to_score_an_unfilled_form_and_a_sample_beyond_the_records(math300, tmp_path):
    run = tmp_path / "run"
    assert crl("compose", "--input", str(math300["math300.jsonl"]), "--out", str(run), "--max-candidates", "200",
               "--no-progress").returncode == 0
    n = sum(1 for _ in open(run / "composed.jsonl"))
    r = crl("audit", str(run), "--sample", "100000000", "--out", str(tmp_path / "a.html"))
    assert r.returncode == 2 and f"more than the {n:,} records" in one_error_line(r)
    assert not (tmp_path / "a.html").exists()
    r = crl("audit", str(run), "--sample", "5", "--out", str(tmp_path / "a.csv"))
    assert r.returncode == 0 and " MB; record ids in " in r.stdout
    r = crl("audit", "--score", str(tmp_path / "a.csv"))
    assert r.returncode == 2 and "none of its 5 items has an answer yet" in one_error_line(r)
