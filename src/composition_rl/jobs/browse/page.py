"""One self-contained HTML page for a run folder: data, script, styles and the chart library
are all inside the file, so it opens by double-click with no server and no network.

The data is one JSON document, gzip-compressed and base64-encoded in a ``<script>`` element
of an inert type; the page's script inflates it with the browser's ``DecompressionStream``.
A 131K-record compose run is about 20 MB of JSON and a few MB in the page that way.
"""

from __future__ import annotations

import base64
import gzip
import json
from importlib import resources
from pathlib import Path
from typing import Any

from composition_rl.jobs.browse.views import VIEWS, BrowseConfig, find_runs

__all__ = ["build_report", "collect_report"]

# uPlot (MIT, see assets/uPlot.LICENSE), vendored from the npm package uplot@1.6.32 dist/
UPLOT_VERSION = "1.6.32"


def _asset(name: str) -> str:
    return (resources.files("composition_rl.jobs.browse") / "assets" / name).read_text(encoding="utf-8")


def collect_report(run_dir: str | Path, cfg: BrowseConfig | None = None) -> dict[str, Any]:
    """The page's data: one section per run folder found under ``run_dir``.

    Raises:
        FileNotFoundError: ``run_dir`` is not a folder.
        ValueError: no folder under it is a run any view shows (the message lists the views
            and the files each needs), or a run file is malformed (the message names it).
    """
    cfg = cfg or BrowseConfig()
    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a folder")
    runs = find_runs(root, cfg.max_depth)
    if not runs:
        known = "; ".join(f"{n}: {', '.join(VIEWS.get(n).needs)}" for n in VIEWS)
        raise ValueError(f"{root}: no run found (looked {cfg.max_depth} folders deep for the files of a view: {known})")
    sections = []
    for folder, names in runs:
        rel = folder.relative_to(root).as_posix()
        for name in names:
            v = VIEWS.get(name)
            sections.append({"view": name, "title": v.title, "path": "." if rel == "." else rel,
                             "data": v.collect(folder, cfg)})
    return {"root": root.resolve().name, "sections": sections, "config": {"max_records": cfg.max_records,
            "max_rejects": cfg.max_rejects, "seed": cfg.seed}}


def render_html(report: dict[str, Any]) -> str:
    """The page for ``report`` (as :func:`collect_report` returns it)."""
    payload = json.dumps(report, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode("utf-8")
    data = base64.b64encode(gzip.compress(payload, compresslevel=6, mtime=0)).decode("ascii")
    title = f"crl browse: {report['root']}".replace("&", "&amp;").replace("<", "&lt;")
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{title}</title>\n"
        f"<style>{_asset('uPlot.min.css')}</style>\n<style>{_asset('browse.css')}</style>\n"
        f"<!-- uPlot {UPLOT_VERSION} (MIT licence, (c) Leon Sorokin): -->\n"
        f"<script>{_asset('uPlot.iife.min.js')}</script>\n"
        "</head><body><div id=\"app\"><p id=\"loading\">Loading…</p></div>\n"
        f"<script id=\"crl-data\" type=\"application/x-gzip-base64\">{data}</script>\n"
        f"<script>{_asset('browse.js')}</script>\n</body></html>\n"
    )


def build_report(run_dir: str | Path, out: str | Path | None = None, cfg: BrowseConfig | None = None) -> Path:
    """Write the page for ``run_dir`` to ``out`` (default ``run_dir/report.html``).

    Example (not run here: it needs a run folder; tests/test_browse.py builds pages):
        >>> build_report("runs/math_d2")  # doctest: +SKIP
        PosixPath('runs/math_d2/report.html')
    """
    from composition_rl.io.files import atomic_open

    report = collect_report(run_dir, cfg)  # no timestamps: the same run gives the same bytes
    path = Path(out) if out is not None else Path(run_dir) / "report.html"
    with atomic_open(path) as f:
        f.write(render_html(report))
    return path
