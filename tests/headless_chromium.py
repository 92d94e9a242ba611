"""Headless Chromium driven by selenium (Debian's chromium and chromium-driver), offline.

One place for the flags this machine needs (no network: background networking off) and for
the one retry a loaded machine needs to start Chromium; the browser tests' fixtures call it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_PATH = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM: Path | None = Path(CHROMIUM_PATH) if Path(CHROMIUM_PATH).exists() else None
MISSING = "chromium/chromedriver not installed (apt install chromium chromium-driver)"
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@contextmanager
def headless_chromium(profile: Path, window: str, extra_flags: Sequence[str] = ()) -> Iterator[Any]:
    """A selenium driver of a fresh Chromium with its profile in ``profile`` (skips the test
    when Chromium, chromedriver or selenium is missing); the browser's console log is kept."""
    if not CHROMEDRIVER.exists() or CHROMIUM is None:
        pytest.skip(MISSING)
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed")
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for flag in (*FLAGS, *extra_flags, f"--window-size={window}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.binary_location = str(CHROMIUM)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    except WebDriverException:
        # Chromium sometimes fails to start on a loaded machine (no DevTools port in time)
        driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
