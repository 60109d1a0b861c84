"""jobs/compose/spill.py: accepted lines wait in per-process spill files and come back in any order."""

from __future__ import annotations

import io
import random

import pytest

from composition_rl.jobs.compose.spill import Spill, SpillIndex


def test_lines_from_several_spill_files_come_back_in_the_given_order(tmp_path):
    # two spills (as two forked workers have), their chunks interleaved in candidate order as
    # the parent receives them, one chunk with nothing accepted, one line not ASCII
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    spills = Spill(str(tmp_path / "a")), Spill(str(tmp_path / "b"))
    chunks = [["x0", "ü1"], [], ["x2"], ["x3", "x4", "x5"]]
    index = SpillIndex()
    for k, lines in enumerate(chunks):
        assert index.add(spills[k % 2].put(lines)) == sum(len(s.encode()) + 1 for s in lines)
    lines = [s for c in chunks for s in c]
    assert len(index) == len(lines) == 6
    order = list(range(6))
    random.Random(1).shuffle(order)
    out = io.BytesIO()
    index.write_in_order(out, order, batch=4)  # small batches: several writes
    assert out.getvalue() == b"".join((lines[i] + "\n").encode() for i in order)
    with pytest.raises(ValueError, match="an order of 5 lines for 6 spilled lines"):
        index.write_in_order(io.BytesIO(), order[:5])
    for s in spills:
        s.close()
