"""The HTML report: structure, escaping of hostile text, and rendering in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from juryflow.judges.consensus import item_consensus
from juryflow.judges.records import GoldLabels, Item, Judgment, Span
from juryflow.judges.regression_stats import (
    Thresholds,
    check_thresholds,
    compare,
    regression_message,
)
from juryflow.report import render_report, write_report
from juryflow.storage.comparisons import save_comparison
from juryflow.storage.store import RunRecord, Store

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)> & "quotes" </mark>'
RESPONSE = f"The tower opened in 1889 in Paris and cost 7 million. {HOSTILE} It is 300 m tall."
JUDGES = ("numbers", "names", 'evil"><script>j</script>')


def _span(text: str, needle: str) -> Span:
    start = text.index(needle)
    return Span(start, start + len(needle), needle, "exact")


def _judgments(item_id: str, text: str, shift: bool) -> list[Judgment]:
    flagged = {
        "numbers": [_span(text, "1889"), _span(text, "7 million")],
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


def test_report_sections_charts_and_highlights(store: Store) -> None:
    _compare(store)
    document = render_report(store, "run-1")
    tags = _tags(document)
    names = [t for t, _ in tags]
    for section in ("summary", "regression", "distributions", "agreement", "disputed"):
        assert f'<section id="{section}"' in document or f'id="{section}"' in document
    # one histogram per judge + the consensus, two heatmaps, the drift chart
    assert names.count("svg") == len(JUDGES) + 1 + 2 + 1
    marks = [attrs.get("class") or "" for t, attrs in tags if t == "mark"]
    assert any("consensus" in c for c in marks)
    assert any(c == "judge j0" for c in marks) and any(c == "judge j2" for c in marks)
    assert any("gold" in c for c in marks)
    # "names" flags nothing in run-1 (it flagged Paris in the baseline): the items are
    # disputed, and each judge's spans are marked in the text with its own class
    assert '<mark class="judge j0" title="numbers">7 million</mark>' in document
    assert 'title="names">' not in document
    # the consensus of 1889 (two of three judges) is highlighted
    assert '<mark class="consensus" title="consensus">1889</mark>' in document
    assert "Regression vs baseline" in document and "regressed:" in document
    assert "judge &#x27;names&#x27; drifted" in document


def test_hostile_text_is_escaped(store: Store) -> None:
    document = render_report(store, "run-1")
    tags = _tags(document)
    names = [t for t, _ in tags]
    assert "script" not in names and "img" not in names
    assert "b" not in names and "i" not in names and "u" not in names
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in document
    assert "evil&quot;&gt;&lt;script&gt;" in document
    # a </mark> in the data cannot close a highlight early
    assert "&lt;/mark&gt;" in document


def test_report_is_self_contained(store: Store) -> None:
    document = render_report(store, "run-1")
    assert "<script" not in document and "<link" not in document
    attributes = {name for _, attrs in _tags(document) for name in attrs}
    assert not attributes & {"src", "href", "xlink:href", "srcset", "action"}
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
    marks = [attrs.get("class") or "" for t, attrs in rendered if t == "mark"]
    assert sum("consensus" in c for c in marks) >= 3
    assert sum(c.startswith("judge ") for c in marks) >= 6
    assert "script" not in names and "img" not in names
