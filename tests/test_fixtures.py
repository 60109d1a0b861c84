"""The files under tests/fixtures are faithful cuts of the shared data they name."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_math300_is_the_first_300_rows_of_math_train(shared_data):
    rows = json.loads((shared_data / "train" / "math_train.json").read_text())[:300]
    assert (FIXTURES / "math300.jsonl").read_text() == "".join(json.dumps(r) + "\n" for r in rows)
