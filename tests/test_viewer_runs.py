"""`juryflow view`'s runs, run and comparison pages, over real HTTP against stores made by
real offline runs: every page answers, shows the numbers `juryflow agreement` computes, and
renders hostile data as text."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

import juryflow
from juryflow.analysis.agreement_report import agreement_report
from juryflow.flows.regression import compare_runs
from juryflow.maths.regression_stats import Thresholds
from juryflow.storage.store import Store
from juryflow.viewer.server import RunningViewer, start_in_thread
from juryflow.viewer.state import ViewerState
from tests.headless_chromium import headless_chromium

HOSTILE_ID = "<script>alert(1)</script>"
HOSTILE_DATASET = '"><img src=x onerror=alert(2)>.jsonl'
CAFE = {"name": "Blue Door Cafe", "city": "Portland", "stars": 4.5, "opens": "7:00"}
CLEAN = "Blue Door Cafe in Portland is rated 4.5 stars and opens at 7:00."
WRONG = "Blue Door Cafe in Portland is rated 3.5 stars and opens at 9:00."


def _row(item_id: str, response: str) -> str:
    wrong = [w for w in ("3.5", "9:00") if w in response]
    labels = [{"start": response.index(w), "end": response.index(w) + len(w)} for w in wrong]
    return json.dumps(
        {
            "id": item_id,
            "reference": json.dumps(CAFE),
            "response": response,
            "labels": labels,
            "hallucinated": bool(wrong),
        }
    )


def _dataset(path: Path, rows: dict[str, str]) -> Path:
    path.write_text("".join(_row(i, r) + "\n" for i, r in rows.items()), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Runs:
    db: Path
    sample: str
    """A run of the bundled sample (human labels, three offline detectors)."""
    baseline: str
    changed: str
    """Run of the same items as ``baseline``, some answers changed (and a hostile dataset
    name and item id); compared with it by `juryflow regression`'s own comparison."""
    comparison_id: str


@pytest.fixture(scope="module")
def runs(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    folder = tmp_path_factory.mktemp("viewer-runs")
    db = folder / "evals.duckdb"
    sample = juryflow.run(db=db, limit=12, progress=False).run_id
    before = {"cafe-1": CLEAN, HOSTILE_ID: CLEAN, "cafe-3": WRONG, "cafe-4": WRONG}
    after = {"cafe-1": CLEAN, HOSTILE_ID: WRONG, "cafe-3": CLEAN, "cafe-4": WRONG}
    baseline = juryflow.run(
        _dataset(folder / "cafes.jsonl", before), db=db, suite="cafes", progress=False
    ).run_id
    changed = juryflow.run(
        _dataset(folder / HOSTILE_DATASET, after), db=db, suite="cafes", progress=False
    ).run_id
    result = compare_runs(Store(db), changed, baseline, Thresholds())
    return Runs(db, sample, baseline, changed, result["comparison_id"])


@pytest.fixture(scope="module")
def viewer(runs: Runs) -> Iterator[RunningViewer]:
    running = start_in_thread(ViewerState(Store(runs.db), "tester"))
    yield running
    running.stop()


@pytest.fixture
def client(viewer: RunningViewer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=viewer.url, timeout=30) as c:
        yield c


# -- reading pages -------------------------------------------------------------------------


class _Tables(HTMLParser):
    """Every table's rows as cell texts, by the table's id; and every tag seen."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "table":
            self._table = dict(attrs).get("id") or f"table{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _page(client: httpx.Client, path: str, status: int = 200) -> _Tables:
    response = client.get(path)
    assert response.status_code == status, response.text
    parsed = _Tables()
    parsed.feed(response.text)
    return parsed


def _run_path(run_id: str) -> str:
    return f"/runs/{quote(run_id, safe='')}"


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


# -- the tests -----------------------------------------------------------------------------


def test_runs_page_lists_every_run_and_the_stored_comparison(
    runs: Runs, client: httpx.Client
) -> None:
    page = _page(client, "/")
    rows = {row[2]: row for row in page.tables["runs"][1:]}
    assert set(rows) == {runs.sample, runs.baseline, runs.changed}
    header = page.tables["runs"][0]
    sample = dict(zip(header, rows[runs.sample], strict=True))
    assert sample["kind"] == "evaluate" and sample["status"] == "completed"
    assert sample["panel"] == "offline-default" and sample["judges"] == "3"
    assert sample["items"] == "12" and sample["dataset"] == "ragtruth_data2txt_sample.jsonl"
    assert "median" in sample["consensus rule"]
    assert dict(zip(header, rows[runs.changed], strict=True))["dataset"] == HOSTILE_DATASET
    # the radio columns pick A and B for /compare
    radios = [a for tag, a in page.tags if tag == "input" and a.get("type") == "radio"]
    assert {a["name"] for a in radios} == {"a", "b"} and len(radios) == 6
    forms = [a for tag, a in page.tags if tag == "form"]
    assert forms[0]["action"] == "/compare" and forms[0]["method"] == "get"
    listed = page.tables["comparison-list"][1]
    assert listed[0] == runs.comparison_id and listed[1:3] == [runs.changed, runs.baseline]
    links = {a.get("href") for tag, a in page.tags if tag == "a"}
    assert f"/comparisons/{quote(runs.comparison_id, safe='')}" in links


def test_run_page_shows_the_agreement_report_figures(runs: Runs, client: httpx.Client) -> None:
    report = agreement_report(Store(runs.db), runs.sample)
    page = _page(client, _run_path(runs.sample))
    everyone = report.groups[0]
    metrics = {row[0]: row[1:] for row in page.tables["panel-agreement"][1:]}
    assert metrics["Krippendorff α, interval (scores)"][0] == everyone.alpha_interval.show()
    assert metrics["Fleiss κ (verdicts)"][0] == everyone.fleiss_kappa.show()
    assert metrics["percent agreement (verdicts)"][0] == everyone.percent_agreement.show()
    assert metrics["mean pairwise Cohen κ"][0] == everyone.mean_cohen_kappa.show()
    pairs = page.tables["pairs"][1:]
    assert [
        (p.judge_a, p.judge_b, str(p.n_items), p.cohen_kappa.show(), p.span_f1.show())
        for p in everyone.pairs
    ] == [(r[0], r[1], r[2], r[4], r[6]) for r in pairs]
    judges = {row[0]: row for row in page.tables["judges"][1:]}
    for summary in report.judge_summaries:
        row = judges[summary.judge_id]
        assert row[2] == f"{summary.n_scored}/{summary.n_items}"
        assert row[3] == _num(summary.mean_score)
        assert row[6] == summary.consensus_verdict_agreement.show()
    # accuracy against the human labels: precision, recall and F1 beside each other
    assert report.has_gold and report.accuracy
    accuracy = {row[0]: row for row in page.tables["accuracy-table"][1:]}
    for a in report.accuracy:
        row = accuracy[a.predictor]
        assert a.response is not None
        assert row[3:6] == [
            _num(a.response.precision),
            _num(a.response.recall),
            _num(a.response.f1),
        ]
        assert row[2] == str(a.n_items)
    # histograms (one per judge and the consensus) and the two pairwise heatmaps
    svgs = [a.get("class") for tag, a in page.tags if tag == "svg"]
    assert svgs.count("hist") == len(report.judges) + 1 and svgs.count("heatmap") == 2
    facts = dict(row for row in page.tables["facts"] if len(row) == 2)
    assert facts["items"].startswith(f"{report.n_items} ")


def test_run_page_links_to_items_disputed_split_and_queue(runs: Runs, client: httpx.Client) -> None:
    page = _page(client, _run_path(runs.sample))
    base = _run_path(runs.sample)
    links = {a.get("href") for tag, a in page.tags if tag == "a"}
    assert {
        f"{base}/items",
        f"{base}/items?sort=disagreement&order=desc",
        f"{base}/items?split=1",
        f"{base}/queue",
    } <= links


def test_a_unique_prefix_names_a_run(runs: Runs, client: httpx.Client) -> None:
    response = client.get(_run_path(runs.sample[:-2]))
    assert response.status_code == 200 and runs.sample in response.text


def test_comparison_pages_show_deltas_flips_and_drift(runs: Runs, client: httpx.Client) -> None:
    stored = _page(client, f"/comparisons/{quote(runs.comparison_id, safe='')}")
    picked = _page(client, f"/compare?a={runs.baseline}&b={runs.changed}")
    for page in (stored, picked):
        deltas = dict(page.tables["deltas"])
        assert deltas["flips to hallucinated"] == "1" and deltas["flips to clean"] == "1"
        assert deltas["paired items"] == "4"
        links = {a.get("href") for tag, a in page.tags if tag == "a"}
        item = f"{_run_path(runs.changed)}/item?id="
        assert item + quote(HOSTILE_ID, safe="") in links  # clean -> hallucinated
        assert item + "cafe-3" in links  # hallucinated -> clean
        drift = {row[0]: row for row in page.tables["drift-table"][1:]}
        assert set(drift) == {"numbers", "names", "content"}
        assert drift["numbers"][2] == "4"
        assert any(a.get("class") == "drift" for tag, a in page.tags if tag == "svg")
    # the page made from the two runs finds the comparison regression stored of them
    assert f"/comparisons/{quote(runs.comparison_id, safe='')}" in {
        a.get("href") for tag, a in picked.tags if tag == "a"
    }


def test_hostile_dataset_name_and_item_id_render_as_text(runs: Runs, client: httpx.Client) -> None:
    for path in ("/", _run_path(runs.changed), f"/compare?a={runs.baseline}&b={runs.changed}"):
        response = client.get(path)
        assert response.status_code == 200
        parsed = _Tables()
        parsed.feed(response.text)
        names = [tag for tag, _ in parsed.tags]
        assert "img" not in names and "script" not in names, path
        assert not any(key.startswith("on") for _, attrs in parsed.tags for key in attrs), path
    assert "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;.jsonl" in client.get("/").text
    compared = client.get(f"/compare?a={runs.baseline}&b={runs.changed}").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in compared


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/runs/no-such-run", 404, "no run 'no-such-run'"),
        ("/comparisons/nope", 404, "no comparison 'nope'"),
        ("/compare?a=x", 400, "pick two runs"),
        ("/compare?a=x&b=y&c=1", 400, "unknown parameter 'c'"),
        ("/compare?a=no-such&b=no-such-either", 404, "no run 'no-such'"),
        ("/no/such/page", 404, "Not Found"),
    ],
)
def test_a_bad_request_is_one_line(client: httpx.Client, path: str, status: int, says: str) -> None:
    response = client.get(path)
    assert response.status_code == status
    message = re.search(r'<p class="error" role="alert">(.*?)</p>', response.text, re.S)
    assert message is not None and "\n" not in message.group(1)
    assert says.replace("'", "&#39;") in message.group(1)
    assert "Traceback" not in response.text


# -- in a real browser ---------------------------------------------------------------------


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """Headless Chromium driven by selenium, with no network."""
    with headless_chromium(tmp_path / "profile", "1280,2000") as driver:
        yield driver


@pytest.mark.browser
def test_pick_two_runs_compare_them_and_follow_a_flip(
    runs: Runs, viewer: RunningViewer, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    browser.get(viewer.url)
    browser.find_element(By.CSS_SELECTOR, f'input[name="a"][value="{runs.baseline}"]').click()
    browser.find_element(By.CSS_SELECTOR, f'input[name="b"][value="{runs.changed}"]').click()
    browser.find_element(By.CSS_SELECTOR, "#pick button[type=submit]").click()
    WebDriverWait(browser, 20).until(lambda d: "/compare?" in d.current_url)
    heading = browser.find_element(By.TAG_NAME, "h1").text
    assert runs.changed in heading and runs.baseline in heading
    flip = browser.find_element(By.CSS_SELECTOR, "#flips-to-hallucinated a")
    assert flip.text == HOSTILE_ID  # shown as text, never run
    flip.click()
    item = f"{_run_path(runs.changed)}/item?id="
    WebDriverWait(browser, 20).until(lambda d: item in d.current_url)
    # the run page's charts render, and nothing the pages load breaks the CSP
    browser.get(viewer.url.rstrip("/") + _run_path(runs.sample))
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.hist")) == 4
    problems = [
        entry["message"]
        for entry in browser.get_log("browser")
        if entry["level"] == "SEVERE" or "Content Security Policy" in entry["message"]
    ]
    assert problems == []
