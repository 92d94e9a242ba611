"""The HTML report: structure, escaping of hostile text, and rendering in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from typer.testing import CliRunner

from juryflow.maths.consensus import item_consensus
from juryflow.maths.records import GoldLabels, Item, Judgment, Span
from juryflow.maths.regression_stats import (
    Thresholds,
    check_thresholds,
    compare,
    regression_message,
)
from juryflow.report.html import render_report, write_report
from juryflow.storage.comparisons import save_comparison
from juryflow.storage.store import RunRecord, Store
from tests.headless_chromium import headless_chromium

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)> & "quotes" </mark>'
RESPONSE = f"The tower opened in 1889 in Paris and cost 7 million. {HOSTILE} It is 300 m tall."
JUDGES = ("numbers", "names", 'evil"><script>j</script>')


def _span(text: str, needle: str) -> Span:
    start = text.index(needle)
    return Span(start, start + len(needle), needle, "exact")


def _judgments(item_id: str, text: str, shift: bool) -> list[Judgment]:
    flagged = {
        # "Eiffel" is not in the text: a span that did not anchor
        "numbers": [
            _span(text, "1889"),
            _span(text, "7 million"),
            Span(None, None, "Eiffel", "unmatched"),
        ],
        "names": [] if shift else [_span(text, "Paris")],
        JUDGES[2]: [_span(text, "1889"), _span(text, "<script>")],
    }
    return [
        Judgment(item_id, judge, "spans", 1.0 if spans else 0.0, spans=tuple(spans))
        for judge, spans in flagged.items()
    ]


def _make_run(store: Store, run_id: str, shift: bool) -> None:
    store.create_run(
        RunRecord(
            run_id=run_id,
            kind="evaluate",
            suite="report-test",
            status="completed",
            started_at=datetime.now(UTC),
            finished_at=datetime.now(UTC),
            dataset="data<b>.jsonl",
            panel_name="panel <i>x</i>",
            panel={"name": "p", "judges": [{"id": j} for j in JUDGES]},
            prompts=[],
            quorum=2,
            n_judges=3,
        )
    )
    items = [
        Item(
            f"item-{k}<u>",
            {"reference": "The tower opened in 1889.", "response": RESPONSE},
            GoldLabels(hallucinated=True, spans=((RESPONSE.index("7 million"), 52),)),
            row_number=k,
        )
        for k in range(3)
    ]
    store.insert_items(run_id, items)
    all_judgments = [j for item in items for j in _judgments(item.item_id, RESPONSE, shift)]
    store.insert_judgments(run_id, all_judgments)
    store.insert_consensus(
        run_id,
        [
            item_consensus(
                item.item_id,
                [j for j in all_judgments if j.item_id == item.item_id],
                3,
                RESPONSE,
            )
            for item in items
        ],
    )


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "report.duckdb")
    store.migrate()
    _make_run(store, "base", shift=False)
    _make_run(store, "run-1", shift=True)
    return store


def _compare(store: Store) -> None:
    from juryflow.storage.comparisons import load_run_scores

    before, after = load_run_scores(store, "base"), load_run_scores(store, "run-1")
    comparison = compare(
        before.consensus,
        after.consensus,
        before.verdicts,
        after.verdicts,
        before.judges,
        after.judges,
    )
    problems = check_thresholds(comparison, Thresholds())
    save_comparison(
        store, "run-1", "base", comparison, Thresholds(), problems, regression_message(problems)
    )


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(document: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Collector()
    parser.feed(document)
    return parser.tags


class _Overlay(HTMLParser):
    """Per item article: its text segments, each with the layers (``L-<key>``) around it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.items: dict[str, list[tuple[str, frozenset[str]]]] = {}
        self._item: str | None = None
        self._depth = 0
        self._stack: list[str | None] = []
        self._in_seg = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "article" and "item" in classes:
            self._item = str(a.get("id")).removeprefix("item-")
            self.items[self._item] = []
        elif tag == "div" and "overlay-text" in classes:
            self._depth = 1
        elif self._depth and tag == "span":
            layer = next((c[2:] for c in classes if c.startswith("L-")), None)
            self._stack.append(layer)
            self._in_seg = "seg" in classes

    def handle_endtag(self, tag: str) -> None:
        if self._depth and tag == "span":
            self._stack.pop()
            self._in_seg = False
        elif self._depth and tag == "div":
            self._depth = 0

    def handle_data(self, data: str) -> None:
        if self._in_seg and self._item is not None:
            layers = frozenset(k for k in self._stack if k is not None)
            self.items[self._item].append((data, layers))


def _overlays(document: str) -> dict[str, list[tuple[str, frozenset[str]]]]:
    parser = _Overlay()
    parser.feed(document)
    return parser.items


def _layers_of(segments: list[tuple[str, frozenset[str]]], needle: str) -> frozenset[str]:
    return next(layers for text, layers in segments if needle in text)


def test_report_sections_charts_and_one_overlaid_text(store: Store) -> None:
    _compare(store)
    document = render_report(store, "run-1")
    tags = _tags(document)
    names = [t for t, _ in tags]
    for section in ("summary", "regression", "distributions", "agreement", "disputed"):
        assert f'<section id="{section}"' in document
    # one histogram per judge + the consensus, two heatmaps, the drift chart
    assert names.count("svg") == len(JUDGES) + 1 + 2 + 1
    overlays = _overlays(document)
    assert len(overlays) == 3
    for segments in overlays.values():
        # the judged text, once, cut into segments that put it back together exactly
        assert "".join(text for text, _ in segments) == RESPONSE
        # "numbers" (j0) and the hostile judge (j2) flagged 1889: the consensus; "names"
        # (j1) flags nothing in run-1 (it flagged Paris in the baseline)
        assert _layers_of(segments, "1889") == {"j0", "j2", "consensus"}
        assert _layers_of(segments, "7 million") == {"j0", "gold"}
        assert _layers_of(segments, "<script>") == {"j2"}
        assert _layers_of(segments, "Paris") == frozenset()
        assert all("j1" not in layers for _, layers in segments)
    # one legend per item: every span judge, the consensus and the human label, checked
    toggles = [a for t, a in tags if t == "input" and a.get("type") == "checkbox"]
    assert len(toggles) == 3 * 5 and all("checked" in a for a in toggles)
    assert {a.get("data-layer") for a in toggles} == {"j0", "j1", "j2", "consensus", "gold"}
    assert "Regression vs baseline" in document and "regressed:" in document
    assert "judge &#39;names&#39; drifted" in document


def test_each_item_shows_its_reference_data_and_one_copy_of_the_text(store: Store) -> None:
    document = render_report(store, "run-1")
    articles = re.findall(r'<article class="item".*?</article>', document, re.DOTALL)
    assert len(articles) == 3
    for article in articles:
        # the reference the judges were given, apart from the judged text
        reference = re.search(r'<details class="reference".*?</details>', article, re.DOTALL)
        assert reference is not None
        assert "<dt>reference</dt><dd>The tower opened in 1889.</dd>" in reference.group(0)
        assert "response" not in reference.group(0)
        assert "Judged text (<code>response</code>)" in article
        # one copy of the response per item, where there used to be one per judge
        assert article.count("It is 300 m tall.") == 1
        assert article.count("overlay-text") == 1
        # the span that did not anchor is listed apart, not drawn in the text
        unanchored = re.search(r'<div class="unanchored">.*?</div>', article, re.DOTALL)
        assert unanchored is not None and "«Eiffel»" in unanchored.group(0)
        assert "(unmatched)" in unanchored.group(0)
        # each judge's answer, its name linking to its row
        assert '<a href="#judge-numbers">numbers</a>' in article
        assert "2 span(s) in the text, 1 not found in it" in article
    assert document.count("It is 300 m tall.") == 3


def test_precision_and_recall_stand_beside_f1(store: Store) -> None:
    document = render_report(store, "run-1")
    table = re.search(r'<table id="accuracy">.*?</table>', document, re.DOTALL)
    assert table is not None
    header = re.findall(r"<th>(.*?)</th>", table.group(0).split("</tr>")[0])
    for f1, precision, recall in (("F1", "precision", "recall"), ("span F1", "span P", "span R")):
        assert header.index(precision) + 2 == header.index(recall) + 1 == header.index(f1)
    rows = re.findall(r"<tr>(.*?)</tr>", table.group(0), re.DOTALL)[1:]
    assert len(rows) == len(JUDGES) + 1  # each judge and the consensus
    for row in rows:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)
        assert all(
            re.fullmatch(r"\d\.\d{3}|n/a", cells[header.index(h)])
            for h in ("precision", "recall", "F1")
        )


def test_drift_chart_has_axes_ticks_and_values(store: Store) -> None:
    _compare(store)
    document = render_report(store, "run-1")
    svg = re.search(r'<svg class="drift".*?</svg>', document, re.DOTALL)
    assert svg is not None
    chart = svg.group(0)
    texts = re.findall(r"<text[^>]*>([^<]*)", chart)
    # an x axis with tick values either side of zero, and a caption saying what it measures
    assert {"-1.00", "-0.50", "+0.00", "+0.50", "+1.00"} <= set(texts)
    assert any(t.startswith("drift: mean score change") for t in texts)
    # each judge's bar with its value; "names" went from flagging Paris to flagging nothing
    assert "-1.000 over" in texts and texts.count("+0.000") == 2
    assert "allowed ±0.10" in texts


def _ids(document: str) -> set[str]:
    return {str(a["id"]) for _, a in _tags(document) if a.get("id")}


def test_sections_link_to_each_other(store: Store) -> None:
    _compare(store)
    document = render_report(store, "run-1")
    ids = _ids(document)
    links = [str(a["href"]) for t, a in _tags(document) if t == "a" and a.get("href")]
    assert links and all(link.startswith("#") for link in links)
    # every link lands: a browser finds the element whose id is the decoded fragment
    assert {unquote(link[1:]) for link in links} <= ids
    # a table of contents for every section
    toc = re.search(r'<nav class="toc".*?</nav>', document, re.DOTALL)
    assert toc is not None
    for section in ("summary", "regression", "distributions", "agreement", "disputed"):
        assert f'href="#{section}"' in toc.group(0)
    # item ids in the index of disputed items link to their article, judges to their row
    index = re.search(r'<table id="disputed-index">.*?</table>', document, re.DOTALL)
    assert index is not None
    assert index.group(0).count('href="#item-item-') == 3
    for judge in JUDGES:
        assert f"judge-{judge}" in ids
    pairs = re.search(r'<table id="pairs">.*?</table>', document, re.DOTALL)
    assert pairs is not None and 'href="#judge-numbers"' in pairs.group(0)


def test_hostile_text_is_escaped(store: Store) -> None:
    document = render_report(store, "run-1")
    tags = _tags(document)
    names = [t for t, _ in tags]
    assert "script" not in names and "img" not in names
    # The bias table bolds the effects whose interval excludes 0 (its own markup, as on the
    # run's page); nowhere else does the report make a b, i or u element.
    outside_bias = re.sub(r'<section id="bias">.*?</section>', "", document, flags=re.S)
    names = [t for t, _ in _tags(outside_bias)]
    assert "b" not in names and "i" not in names and "u" not in names
    # (the hostile judge flagged "<script>": it is a segment of its own in the overlay)
    assert "&lt;script&gt;</span>" in document
    assert "alert(&#34;x&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in document
    assert "evil&#34;&gt;&lt;script&gt;" in document
    # a </mark> in the data cannot close an element early
    assert "&lt;/mark&gt;" in document


def test_report_is_self_contained(store: Store) -> None:
    document = render_report(store, "run-1")
    assert "<script" not in document and "<link" not in document
    tags = _tags(document)
    attributes = {name for _, attrs in tags for name in attrs}
    assert not attributes & {"src", "xlink:href", "srcset", "action", "formaction"}
    # links only within the page
    assert all(str(a["href"]).startswith("#") for _, a in tags if "href" in a)
    assert "@import" not in document and "url(" not in document
    urls = set(re.findall(r"https?://[^\s\"'<>]+", document))
    assert urls <= {"http://www.w3.org/2000/svg"}  # the SVG namespace, never fetched


def test_report_without_comparison(tmp_path: Path) -> None:
    store = Store(tmp_path / "calm.duckdb")
    store.migrate()
    _make_run(store, "base", shift=False)
    document = render_report(store, "base")
    assert "has not been compared with a baseline" in document


def test_report_of_a_run_with_no_judgments_yet(tmp_path: Path) -> None:
    store = Store(tmp_path / "early.duckdb")
    store.migrate()
    store.create_run(
        RunRecord(
            run_id="early",
            kind="evaluate",
            suite="report-test",
            status="running",
            started_at=datetime.now(UTC),
            finished_at=None,
            dataset=None,
            panel_name="p",
            panel={"name": "p", "judges": [{"id": "numbers"}]},
            prompts=[],
            quorum=1,
            n_judges=1,
        )
    )
    store.insert_items("early", [Item("only", {"response": RESPONSE})])
    document = render_report(store, "early")
    # every statistic is n/a with the agreement report's reason, nothing is made up
    assert 'n/a <small class="note">(no judgments yet)</small>' in document
    assert "the run has no judgments yet" in document
    assert 'id="item-only"' in document and "<svg" in document


def test_cli_report_defaults_to_the_latest_run(store: Store, tmp_path: Path) -> None:
    from juryflow.cli import app

    out = tmp_path / "out" / "report.html"
    result = CliRunner().invoke(app, ["report", "-o", str(out), "--db", str(store.path)])
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    missing = CliRunner().invoke(app, ["report", "nope", "--db", str(store.path)])
    assert missing.exit_code == 2 and "no run" in missing.output


def test_cli_report_with_adjudicated_gold(store: Store, tmp_path: Path) -> None:
    """`juryflow report RUN --gold annotations`: a reviewer's labels are the gold layer."""
    from juryflow.cli import app
    from juryflow.storage.annotations import NewAnnotation, save_annotation

    paris = RESPONSE.index("Paris")
    save_annotation(
        store,
        NewAnnotation("run-1", "item-0<u>", "ann", (), ((paris, paris + 5),), verdict=True),
    )
    out = tmp_path / "adjudicated.html"
    db = str(store.path)
    args = ["report", "run-1", "--gold", "annotations", "-o", str(out), "--db", db]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    document = out.read_text(encoding="utf-8")
    assert "adjudicated label (1)" in document
    overlays = _overlays(document)
    # the reviewer marked Paris, which no judge flagged; the dataset's 7 million is not gold
    assert _layers_of(overlays["item-0<u>"], "Paris") == {"gold"}
    assert "gold" not in _layers_of(overlays["item-0<u>"], "7 million")
    wrong = CliRunner().invoke(app, ["report", "run-1", "--gold", "nope", "--db", db])
    assert wrong.exit_code == 2 and "--gold" in wrong.output


CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        # no name resolves: a page that needed the network would show it
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)


@pytest.mark.browser
@pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (apt install chromium)"
)
def test_report_renders_in_headless_chromium(store: Store, tmp_path: Path) -> None:
    _compare(store)
    report = write_report(store, "run-1", tmp_path / "report.html")
    screenshot = tmp_path / "report.png"
    shot = _chromium(
        tmp_path, f"--screenshot={screenshot}", "--window-size=1280,2000", report.as_uri()
    )
    assert screenshot.exists(), shot.stderr[-2000:]
    data = screenshot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    dom = _chromium(tmp_path, "--dump-dom", report.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = _tags(dom.stdout)
    names = [t for t, _ in rendered]
    assert names.count("svg") == len(JUDGES) + 4
    assert names.count("rect") > 20  # histogram bars and heatmap cells
    layers = [attrs.get("class") or "" for t, attrs in rendered if t == "span"]
    assert sum(c == "L L-consensus" for c in layers) >= 3
    assert sum(re.fullmatch(r"L L-j\d", c) is not None for c in layers) >= 6
    assert "script" not in names and "img" not in names


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    """Headless Chromium driven by selenium, with no network."""
    with headless_chromium(
        tmp_path / "selenium-profile", "1280,3000", ["--host-resolver-rules=MAP * ~NOTFOUND"]
    ) as driver:
        yield driver


TRANSPARENT = "rgba(0, 0, 0, 0)"


@pytest.mark.browser
def test_unchecking_a_layer_hides_it_without_script(
    store: Store, tmp_path: Path, browser: object
) -> None:
    from selenium.webdriver.common.by import By

    _compare(store)
    report = write_report(store, "run-1", tmp_path / "report.html")
    driver: Any = browser
    driver.get(report.as_uri())
    assert driver.execute_script("return document.scripts.length") == 0
    first = driver.find_element(By.CSS_SELECTOR, "article.item")
    driver.execute_script("arguments[0].scrollIntoView()", first)
    first.screenshot(str(tmp_path / "report-item.png"))
    judge = first.find_element(By.CSS_SELECTOR, ".overlay-text .L-j0")
    consensus = first.find_element(By.CSS_SELECTOR, ".overlay-text .L-consensus")
    gold = first.find_element(By.CSS_SELECTOR, ".overlay-text .L-gold")
    assert judge.value_of_css_property("border-bottom-color") == "rgba(0, 114, 178, 1)"
    assert judge.value_of_css_property("border-bottom-style") == "solid"
    background = consensus.value_of_css_property("background-color")
    assert background != TRANSPARENT
    # dashed: told apart from the judges' underlines (j2's green was near gold's green)
    assert gold.value_of_css_property("outline-style") == "dashed"
    # stacked: a judge's underline sits at its own depth, so overlapping judges both show
    other = first.find_element(By.CSS_SELECTOR, ".overlay-text .L-j2")
    assert judge.value_of_css_property("padding-bottom") != other.value_of_css_property(
        "padding-bottom"
    )
    toggle = first.find_element(By.CSS_SELECTOR, 'input[data-layer="j0"]')
    first.find_element(By.CSS_SELECTOR, f"label:has(#{toggle.get_attribute('id')})").click()
    assert not toggle.is_selected()
    assert judge.value_of_css_property("border-bottom-color") == TRANSPARENT
    # the other layers and the other items keep theirs
    assert consensus.value_of_css_property("background-color") == background
    assert other.value_of_css_property("border-bottom-color") != TRANSPARENT
    second = driver.find_elements(By.CSS_SELECTOR, "article.item")[1]
    assert (
        second.find_element(By.CSS_SELECTOR, ".overlay-text .L-j0").value_of_css_property(
            "border-bottom-color"
        )
        != TRANSPARENT
    )
    first.find_element(By.CSS_SELECTOR, 'input[data-layer="consensus"]').click()
    assert consensus.value_of_css_property("background-color") == TRANSPARENT
    first.find_element(By.CSS_SELECTOR, 'input[data-layer="gold"]').click()
    assert gold.value_of_css_property("outline-style") == "none"
    toggle.click()
    assert judge.value_of_css_property("border-bottom-color") == "rgba(0, 114, 178, 1)"
    # the whole page, for the README
    driver.execute_script("window.scrollTo(0, 0)")
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1280, min(int(height) + 100, 16000))
    screenshot = tmp_path / "report-page.png"
    assert driver.save_screenshot(str(screenshot))
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
