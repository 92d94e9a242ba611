"""`juryflow view` driven in a real headless Chromium (Debian's chromium + chromium-driver,
through selenium): open the runs list, the run, its items; filter to split items; open one;
toggle a judge's layer off; mark a missed span by selecting text; accept and reject the
consensus spans; set the verdict; save; and see `juryflow agreement --gold annotations`
count the annotation.

Screenshots of the item and items pages go to ``tests/screenshots/`` with
``JURYFLOW_SCREENSHOTS=1`` (the README shows them), else to the test's tmp folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

import juryflow
from juryflow.cli import app as cli_app
from juryflow.storage.annotations import latest_annotation
from juryflow.storage.store import Store
from juryflow.viewer.server import RunningViewer, start_in_thread
from juryflow.viewer.state import ViewerState
from tests.conftest import REPO
from tests.headless_chromium import CHROMEDRIVER, CHROMIUM, headless_chromium

REVIEWER = "browser-tester"
WAIT_SECONDS = 20

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMEDRIVER.exists() or CHROMIUM is None,
        reason="needs Debian's chromium and chromium-driver (/usr/bin/chromedriver); "
        "install them with `apt-get install chromium chromium-driver`",
    ),
]


@pytest.fixture(scope="module")
def store(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("viewer-browser") / "evals.duckdb"
    run_id = juryflow.run(db=db, progress=False).run_id
    return db, run_id


@pytest.fixture(scope="module")
def viewer(store: tuple[Path, str]) -> Iterator[RunningViewer]:
    running = start_in_thread(ViewerState(Store(store[0]), REVIEWER))
    yield running
    running.stop()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    with headless_chromium(tmp_path / "chromium", "1400,1600") as driver:
        yield driver


def _screenshots(tmp_path: Path) -> Path:
    if os.environ.get("JURYFLOW_SCREENSHOTS") == "1":
        folder = REPO / "tests" / "screenshots"
    else:
        folder = tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _wait(driver: Any, condition: Any) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_SECONDS).until(condition)


def _first_split_item_with_spans(db: Path, run_id: str) -> tuple[str, list[tuple[int, int]]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute(
            "SELECT d.item_id FROM item_disagreement d WHERE d.run_id = ? AND d.split_verdict "
            "AND (SELECT count(*) FROM consensus_spans s WHERE s.run_id = d.run_id "
            "AND s.item_id = d.item_id) >= 2 ORDER BY d.disagreement_rank LIMIT 1",
            [run_id],
        ).fetchone()
        assert row is not None, "the sample run has a split item with two consensus spans"
        spans = con.execute(
            "SELECT char_start, char_end FROM consensus_spans WHERE run_id = ? AND item_id = ? "
            "ORDER BY span_index",
            [run_id, row[0]],
        ).fetchall()
    finally:
        con.close()
    return str(row[0]), [(int(a), int(b)) for a, b in spans]


# Selects the text from `from` code points into the first segment to `to` code points into
# the last (segments of one copy of the text: their data-start are the server's offsets).
SELECT_JS = """
const segs = Array.from(document.querySelectorAll('#item-text .overlay-text .seg'));
const first = segs.at(arguments[0]), last = segs.at(arguments[1]);
const range = document.createRange();
const units = (node, points) => Array.from(node.data).slice(0, points).join('').length;
range.setStart(first.firstChild, units(first.firstChild, arguments[2]));
range.setEnd(last.firstChild, units(last.firstChild, arguments[3]));
const selection = window.getSelection();
selection.removeAllRanges();
selection.addRange(range);
return [parseInt(first.dataset.start), parseInt(last.dataset.start)];
"""


def test_adjudicate_an_item_in_the_browser(
    store: tuple[Path, str], viewer: RunningViewer, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    db, run_id = store
    item_id, consensus_spans = _first_split_item_with_spans(db, run_id)
    shots = _screenshots(tmp_path)
    url = viewer.url.rstrip("/")

    # the runs list -> the run -> its items
    browser.get(url + "/")
    browser.find_element(By.CSS_SELECTOR, f'a[href="/runs/{run_id}"]').click()
    _wait(browser, ec.url_to_be(f"{url}/runs/{run_id}"))
    browser.find_element(By.CSS_SELECTOR, f'a[href^="/runs/{run_id}/items"]').click()
    _wait(browser, ec.presence_of_element_located((By.ID, "items-filters")))

    # filter to the items the panel split on
    browser.find_element(By.CSS_SELECTOR, '#items-filters input[name="split"]').click()
    browser.find_element(By.CSS_SELECTOR, '#items-filters button[type="submit"]').click()
    _wait(browser, ec.url_contains("split=1"))
    rows = browser.find_elements(By.CSS_SELECTOR, "#items-table tbody tr")
    assert rows and all("hallucinated" in r.text and "clean" in r.text for r in rows), (
        "every split item has both verdicts among its judges"
    )
    browser.save_screenshot(str(shots / "items.png"))

    # open one; prev/next keep the filter
    browser.find_element(By.CSS_SELECTOR, f'tr[data-item="{item_id}"] a').click()
    _wait(browser, ec.presence_of_element_located((By.ID, "annotation-form")))
    assert "split=1" in browser.current_url
    next_link = browser.find_elements(By.ID, "next-item")
    assert not next_link or "split=1" in next_link[0].get_attribute("href")

    # toggle off a judge that flagged something: its spans lose their underline
    key = browser.execute_script(
        "const el = document.querySelector('#item-text .overlay-text .L[class*=\"L-j\"]');"
        "return el ? Array.from(el.classList).find(c => /^L-j\\d+$/.test(c)).slice(2) : null;"
    )
    assert key is not None, "some judge flagged a span of this item"
    colour_js = (
        "return getComputedStyle(document.querySelector("
        f"'#item-text .overlay-text .L-{key}')).borderBottomColor;"
    )
    before = browser.execute_script(colour_js)
    assert before not in ("rgba(0, 0, 0, 0)", "transparent")
    toggle = browser.find_element(By.ID, f"item-text-toggle-{key}")
    assert toggle.is_selected()
    toggle.click()
    assert not toggle.is_selected()
    assert browser.execute_script(colour_js) == "rgba(0, 0, 0, 0)"
    toggle.click()
    assert browser.execute_script(colour_js) == before

    # select text across segments and mark it missed: the list shows it, a hidden input
    # carries its offsets (code points, as the server counts them); then remove it again
    segments = browser.find_elements(By.CSS_SELECTOR, "#item-text .overlay-text .seg")
    assert len(segments) >= 3
    first_start, last_start = browser.execute_script(SELECT_JS, 0, 2, 2, 3)
    browser.find_element(By.ID, "mark-missed").click()
    across = f"{first_start + 2}-{last_start + 3}"
    _wait(browser, ec.presence_of_element_located((By.CSS_SELECTOR, f'li[data-span="{across}"]')))
    hidden = browser.find_elements(By.CSS_SELECTOR, '#missed-list input[name="missed"]')
    assert [h.get_attribute("value") for h in hidden] == [across]
    browser.find_element(By.CSS_SELECTOR, "#missed-list .remove-missed").click()
    assert not browser.find_elements(By.CSS_SELECTOR, "#missed-list li")
    # a short phrase of the last segment, marked with the keyboard, is kept
    last_start = browser.execute_script(SELECT_JS, -1, -1, 10, 40)[1]
    browser.find_element(By.TAG_NAME, "body").send_keys("m")
    missed = f"{last_start + 10}-{last_start + 40}"
    _wait(browser, ec.presence_of_element_located((By.CSS_SELECTOR, f'li[data-span="{missed}"]')))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#missed-list li")) == 1

    # accept the first consensus span, reject the second; the verdict; a note
    (a0, b0), (a1, b1) = consensus_spans[:2]
    browser.find_element(By.CSS_SELECTOR, f'input[name="span-{a0}-{b0}"][value="accept"]').click()
    browser.find_element(By.CSS_SELECTOR, f'input[name="span-{a1}-{b1}"][value="reject"]').click()
    browser.find_element(By.CSS_SELECTOR, 'input[name="verdict"][value="hallucinated"]').click()
    browser.find_element(By.CSS_SELECTOR, 'textarea[name="note"]').send_keys("checked by hand")
    browser.find_element(By.ID, "save-annotation").click()
    _wait(browser, ec.text_to_be_present_in_element((By.ID, "latest-annotation"), REVIEWER))
    assert "split=1" in browser.current_url
    browser.save_screenshot(str(shots / "item.png"))

    saved = latest_annotation(Store(db), run_id, item_id)
    assert saved is not None and saved.reviewer == REVIEWER and saved.verdict is True
    start, end = (int(x) for x in missed.split("-"))
    assert saved.missed == ((start, end),)
    assert {(d.char_start, d.char_end, d.accepted) for d in saved.decisions} >= {
        (a0, b0, True),
        (a1, b1, False),
    }
    assert saved.note == "checked by hand"
    # the annotation is a layer of the overlay now
    assert browser.find_elements(By.ID, "item-text-toggle-annotation")

    # `juryflow agreement --gold annotations` counts it
    result = CliRunner().invoke(
        cli_app,
        ["agreement", run_id, "--gold", "annotations", "--format", "json", "--db", str(db)],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["gold_source"] == "annotations"
    consensus = next(a for a in report["accuracy"] if a["predictor"] == "consensus")
    assert consensus["n_items"] == 1
    assert (shots / "item.png").stat().st_size > 10_000
    assert (shots / "items.png").stat().st_size > 10_000


def test_items_table_fits_a_1400_px_window(
    store: tuple[Path, str], viewer: RunningViewer, browser: Any
) -> None:
    """The items table was 1,441 px wide in a 1,400 px window: the gold column was cut."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    _, run_id = store
    browser.get(f"{viewer.url.rstrip('/')}/runs/{run_id}/items")
    _wait(browser, ec.presence_of_element_located((By.ID, "items-table")))
    right, viewport, heading = browser.execute_script(
        "const th = Array.from(document.querySelectorAll('#items-table thead th')).at(-1);"
        "return [th.getBoundingClientRect().right, document.documentElement.clientWidth,"
        " th.textContent.trim()];"
    )
    assert heading.startswith("gold")
    assert right <= viewport, f"the gold column ends at {right} px, the window at {viewport}"


def _rgb(css: str) -> tuple[int, ...]:
    return tuple(int(v) for v in css[css.index("(") + 1 : css.index(")")].split(",")[:3])


def test_gold_outline_is_told_apart_from_every_judge_and_the_reference_sits_beside_the_text(
    store: tuple[Path, str], viewer: RunningViewer, browser: Any
) -> None:
    """Gold was a solid green outline, near the `content` judge's green underline; the
    reference was a Python repr far below the text."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    db, run_id = store
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute(
            "SELECT item_id FROM items WHERE run_id = ? AND json_array_length(gold_spans) > 0 "
            "ORDER BY item_id LIMIT 1",
            [run_id],
        ).fetchone()
    finally:
        con.close()
    assert row is not None, "the sample has gold spans"
    browser.get(f"{viewer.url.rstrip('/')}/runs/{run_id}/item?id={row[0]}")
    _wait(browser, ec.presence_of_element_located((By.ID, "item-text")))
    gold = browser.execute_script(
        "const s = getComputedStyle(document.querySelector('#item-text .swatch.L-gold'));"
        "return [s.outlineStyle, s.outlineColor];"
    )
    judges = browser.execute_script(
        "return Array.from(document.querySelectorAll('#item-text .legend .swatch'))"
        ".filter(e => /L-j\\d/.test(e.className))"
        ".map(e => getComputedStyle(e).borderBottomColor);"
    )
    assert gold[0] == "dashed", gold
    assert len(judges) == 3
    for colour in judges:
        distance = sum((a - b) ** 2 for a, b in zip(_rgb(colour), _rgb(gold[1]), strict=True))
        assert distance**0.5 > 100, f"gold {gold[1]} is too near a judge's {colour}"
    text, reference = browser.execute_script(
        "return ['text-heading', 'reference-heading'].map(id => "
        "document.getElementById(id).closest('section').getBoundingClientRect().toJSON());"
    )
    assert reference["left"] >= text["right"], "the reference stands beside the judged text"
    assert abs(reference["top"] - text["top"]) < 2
    shown = browser.find_element(By.CSS_SELECTOR, ".reference pre").text
    assert '"name": ' in shown and "'name'" not in shown and "True" not in shown
