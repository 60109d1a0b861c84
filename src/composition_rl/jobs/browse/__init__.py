"""``crl browse``: one self-contained HTML page to look at a run folder.

Not run here (it needs a run folder, such as ``crl compose --out runs/math_d2`` makes):

>>> from composition_rl.jobs.browse import build_report
>>> build_report("runs/math_d2", "math_d2.html")  # doctest: +SKIP
"""

from composition_rl.jobs.browse.page import build_report, collect_report, render_html
from composition_rl.jobs.browse.views import VIEWS, BrowseConfig, detect, find_runs

__all__ = ["VIEWS", "BrowseConfig", "build_report", "collect_report", "detect", "find_runs", "render_html"]
