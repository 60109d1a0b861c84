"""The run-folder contract under random faults (tests/fault_harness.py): a short seeded run
in the fast suite, a long one in ``make test``, and proof that the harness fails when the
contract breaks (a harness that cannot fail tests nothing).

Long runs: ``PYTHONPATH=src python scripts/fault_harness.py --seed S --ops N`` (docs/first_hour.md).
"""

from __future__ import annotations

import pytest
from fault_harness import format_violation, harness


def _run(seed: int, ops: int, **kw) -> None:
    with harness(seed, **kw) as h:
        found = h.run(ops)
        assert not found, "\n\n".join(format_violation(v, seed, h.history) for v in found)
        assert sum(h.counts.values()) == ops


def test_a_short_seeded_run_breaks_no_invariant():
    # ~20 s on 2 cores: every kind of operation but kills (a subprocess each, ~2.5 s)
    _run(0, 30, kill_share=0.0)


@pytest.mark.slow
def test_a_long_seeded_run_breaks_no_invariant():
    # ~1.5 min on 2 cores (CI has little room left); 1,000+ operations: scripts/fault_harness.py,
    # their seed and result in docs/notes/run_contract_log.md
    _run(52, 150)


def test_the_harness_sees_a_run_that_writes_over_the_users_files(monkeypatch):
    from composition_rl.io import runs

    monkeypatch.setattr(runs, "foreign_files", lambda folder: [])  # the check that refuses --out user
    with harness(0) as h:
        found = h.check(["export", "--input", "in/qa.jsonl", "--out", "user"])
        assert [v.invariant for v in found] == ["no file crl did not make changed"], found
        assert "user/problems.jsonl changed" in found[0].detail


def test_the_harness_sees_a_log_that_loses_the_rows_after_a_bad_line(monkeypatch):
    from composition_rl.io.files import JsonlLog

    def truncating(self):  # the log as it was before issue 52: stop at the bad line, cut the rest
        good = 0
        with open(self.path, "rb") as f:
            for raw in f:
                try:
                    self.done.add(str(__import__("json").loads(raw)[self.key]))
                except (ValueError, KeyError, TypeError):
                    break
                good += len(raw)
        with open(self.path, "r+b") as f:
            f.truncate(good)

    monkeypatch.setattr(JsonlLog, "_read_back", truncating)
    with harness(5) as h:
        for n in range(3):
            h._damage(n)
        assert any(v.invariant == "no finished row lost" for v in h.violations), h.violations
