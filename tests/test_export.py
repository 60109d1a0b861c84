"""jobs/export.py: the trainer exports are written from batches of an iterable, with the same
bytes as from the whole list at once."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from composition_rl.io.readers import load_problems
from composition_rl.jobs.export import export


@pytest.mark.parametrize("name", ["verl", "trl"])
def test_an_export_in_batches_is_the_bytes_of_one_export_of_the_whole_list(math300, tmp_path, name):
    problems = load_problems(math300["math300.jsonl"]).problems
    whole = export(problems, name, tmp_path / "whole", batch=len(problems))
    for batch in (1, 7, 128):
        part = export(iter(problems), name, tmp_path / str(batch), batch=batch)  # a generator, read once
        assert part.read_bytes() == whole.read_bytes(), batch
    rows = pq.read_table(whole).to_pylist()
    assert len(rows) == len(problems)
    if name == "verl":  # the index counts the whole set, not each batch
        assert [r["extra_info"]["index"] for r in rows] == list(range(len(problems)))


def test_an_empty_iterable_writes_no_export(tmp_path):
    with pytest.raises(ValueError, match="refusing to write an empty trl.parquet"):
        export(iter([]), "trl", tmp_path)
    assert not (tmp_path / "trl.parquet").exists()
