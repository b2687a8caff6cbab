"""Screenshots of snnbench's HTML pages in a headless chromium (selenium + Debian's
chromium-driver), for docs/img/ and for looking at a change before committing it.

    python scripts/page_shots.py OUT.png PAGE.html [--height 2400] [--full]

Writes the page's top ``--height`` CSS pixels at 1200 px width (``--full``: the whole page, up
to 16000 px). Needs ``apt-get install chromium chromium-driver``.
"""

from __future__ import annotations

import argparse
import base64
import shutil
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("page", type=Path)
    parser.add_argument("--height", type=int, default=2400)
    parser.add_argument("--full", action="store_true")
    args = parser.parse_args()
    browser, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not browser or not driver_path:
        print("needs chromium and chromedriver (apt-get install chromium chromium-driver)",
              file=sys.stderr)
        return 2
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1200,1000", "--hide-scrollbars"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        driver.get(args.page.resolve().as_uri())
        height = int(driver.execute_script("return document.documentElement.scrollHeight"))
        height = min(height, 16000) if args.full else min(height, args.height)
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": 1200, "height": height, "scale": 1}})
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_bytes(base64.b64decode(shot["data"]))
    finally:
        driver.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
