"""Screenshots of each `crl browse` view for the README (docs/img/browse_*.png).

    python scripts/browse_screenshots.py PAGE.html [PAGE.html ...] --out docs/img

Each page is opened in headless Chromium (Debian's chromium); for every section found, the
view is scrolled into place and a viewport-sized PNG is written as browse_<view>.png (the
compose view gives two: the funnel and reasons, and the record diff view).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="+")
    ap.add_argument("--out", default="docs/img")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=760)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=os.environ.get("CRL_CHROMIUM", "/usr/bin/chromium"), headless=True,
                              args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for page_path in args.pages:
            page = b.new_page(viewport={"width": args.width, "height": args.height})
            page.goto(Path(page_path).resolve().as_uri())
            page.wait_for_selector("body[data-ready='1']", timeout=120_000)
            done = set()
            for sec in page.query_selector_all("section.view"):
                view = sec.get_attribute("data-view")
                if view in done:
                    continue
                done.add(view)
                # the header is sticky: scroll so the section starts just under it
                page.evaluate("(el) => window.scrollTo(0, el.getBoundingClientRect().top + window.scrollY"
                              " - document.querySelector('header').offsetHeight - 8)", sec)
                page.screenshot(path=str(out / f"browse_{view}.png"))
                if view == "compose":
                    page.evaluate("(el) => window.scrollTo(0, el.querySelector('.filters').getBoundingClientRect().top"
                                  " + window.scrollY - document.querySelector('header').offsetHeight - 8)", sec)
                    page.screenshot(path=str(out / "browse_compose_record.png"))
            page.close()
        b.close()
    for f in sorted(out.glob("browse_*.png")):
        print(f, f"{f.stat().st_size / 1e3:.0f} KB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
