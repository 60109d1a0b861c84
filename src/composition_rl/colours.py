"""The colours of the bands and curves, one table for every picture the project draws.

``crl browse`` (``jobs/browse/assets/browse.js``, its ``COLORS``), the training plot of ``crl
train`` and ``crl demo`` (:func:`composition_rl.jobs.train.metrics.plot_solve_rates`) and the
pass-rate histogram of ``crl profile`` use these, so a band has one colour wherever it is
seen: solve_all green, goldilocks amber, solve_none red, informative groups blue.
``tests/test_browse.py`` holds browse.js to this table.

>>> COLOURS["solve_none"]
'#c92a2a'
"""

from __future__ import annotations

__all__ = ["COLOURS"]

COLOURS = {
    "solve_all": "#2b8a3e",
    "goldilocks": "#e8a33d",
    "solve_none": "#c92a2a",
    "informative": "#1c7ed6",
    "reward": "#6741d9",
    "length": "#495057",
    "kept": "#1c7ed6",
}
