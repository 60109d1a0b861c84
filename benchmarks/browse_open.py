"""How long a `crl browse` page takes to build and to open in headless Chromium, and its size.

    python benchmarks/browse_open.py RUN_DIR [--repeat 5] [--out page.html]

Open time is from `page.goto(file://...)` to the page's script marking `body[data-ready]`
(data inflated and parsed, every section rendered, charts drawn), best and median of
`--repeat` fresh pages in one browser. The browser is Debian's chromium (CRL_CHROMIUM to
override), headless, background networking off, as in tests/test_browse_page.py.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--out", help="page to write (default: RUN_DIR/report.html)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    from composition_rl.jobs.browse import build_report

    t0 = time.perf_counter()
    c0 = time.process_time()
    path = build_report(args.run_dir, args.out)
    build_s, build_cpu = time.perf_counter() - t0, time.process_time() - c0
    size = path.stat().st_size
    times = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=os.environ.get("CRL_CHROMIUM", "/usr/bin/chromium"), headless=True,
                              args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for _ in range(args.repeat):
            page = b.new_page(viewport={"width": 1400, "height": 1000})
            t = time.perf_counter()
            page.goto(path.resolve().as_uri())
            page.wait_for_selector("body[data-ready]", timeout=120_000)
            times.append(time.perf_counter() - t)
            if page.get_attribute("body", "data-ready") != "1":
                print("the page reported an error:", page.inner_text("#app")[:500], file=sys.stderr)
                return 1
            records = page.inner_text(".view-compose .rec-count") if page.query_selector(".view-compose") else ""
            page.close()
        b.close()
    print(f"page      {path}  {size / 1e6:.2f} MB ({size:,} bytes)")
    print(f"build     {build_s:.1f} s wall, {build_cpu:.1f} s CPU")
    print(f"open      best {min(times):.2f} s, median {statistics.median(times):.2f} s over {len(times)} "
          f"({', '.join(f'{t:.2f}' for t in times)})")
    if records:
        print(f"records   {records}")
    print(f"load      {os.getloadavg()[0]:.1f} (1-min load average at the end; {os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
