"""The files under tests/fixtures are faithful cuts of the shared data they name."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_math300_is_the_first_300_rows_of_math_train(shared_data):
    rows = json.loads((shared_data / "train" / "math_train.json").read_text())[:300]
    assert (FIXTURES / "math300.jsonl").read_text() == "".join(json.dumps(r) + "\n" for r in rows)


def test_bench30_is_the_first_5_rows_of_each_eval_file(shared_data):
    import pyarrow.parquet as pq

    expect = []
    for name in ["math500.parquet", "aime24.json", "aime25.json", "amc.json", "minerva.json", "olympiad_bench.json"]:
        path = shared_data / "eval" / name
        rows = pq.read_table(path).to_pylist() if name.endswith(".parquet") else json.loads(path.read_text())
        expect += [{"file": f"eval/{name}", "row": i, "problem": rows[i]["problem"], "answer": rows[i]["answer"]}
                   for i in range(5)]
    assert (FIXTURES / "bench30.jsonl").read_text() == "".join(json.dumps(r) + "\n" for r in expect)
