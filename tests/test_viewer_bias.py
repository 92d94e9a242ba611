"""The bias probes on `juryflow view`'s run page (issue 26, point 4), over real HTTP: the
run of examples/panel.sim-bias.yaml through the stand-in that tests/test_bias.py makes shows
the rows of `juryflow agreement --bias` cell for cell; a probe nobody could be measured on
is one line saying why; a run without human labels says why nothing is shown, and its page
does not compute the probes at all."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from typer.testing import CliRunner

from juryflow.analysis.bias_report import BiasReport
from juryflow.pages import bias_section as bias_model
from juryflow.planning.run_request import RunRequest
from juryflow.storage.store import Store
from juryflow.viewer.server import start_in_thread
from juryflow.viewer.state import ViewerState
from tests import sim_panels, test_bias
from tests.conftest import SAMPLE
from tests.test_viewer_runs import _Tables

# The run tests/test_bias.py measures (its fixture, shared rather than copied): the shipped
# sim-bias panel on the dev sample (else the bundled one) plus a length-biased and a
# self-preferring score judge.
bias_run = test_bias.bias_run
KEY_ENV = "JURYFLOW_VIEWER_BIAS_KEY"
PROBE_COLUMNS = ["judge", "probe", "effect", "interval", "n", "note"]


@contextmanager
def _client(db: Path) -> Iterator[httpx.Client]:
    running = start_in_thread(ViewerState(Store(db), "tester"))
    try:
        with httpx.Client(base_url=running.url, timeout=60) as client:
            yield client
    finally:
        running.stop()


def _run_page(client: httpx.Client, run_id: str) -> tuple[str, _Tables]:
    response = client.get(f"/runs/{quote(run_id, safe='')}")
    assert response.status_code == 200, response.text
    parsed = _Tables()
    parsed.feed(response.text)
    return response.text, parsed


def _list(html: str, list_id: str) -> list[str]:
    found = re.search(rf'<ul[^>]*id="{list_id}"[^>]*>(.*?)</ul>', html, re.S)
    if found is None:
        return []
    return [" ".join(re.sub(r"<[^>]+>", "", li).split()) for li in found.group(1).split("<li>")[1:]]


def _cli_rows(db: Path, run_id: str) -> tuple[list[str], list[list[str]]]:
    """`juryflow agreement --bias`'s title and rows, as the terminal shows them."""
    from juryflow.cli import app

    result = CliRunner().invoke(
        app, ["agreement", run_id, "--db", str(db), "--bias"], env={"COLUMNS": "250"}
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in lines if line.startswith("│")]
    return lines, rows


def _signed(value: float) -> str:
    """The report's number as the CLI prints it, written out here independently."""
    return "—" if math.isnan(value) else f"{value:+.3f}".replace("-0.000", "+0.000")


def test_the_html_report_shows_the_run_pages_bias_table(
    bias_run: tuple[Path, BiasReport],
) -> None:
    """`juryflow report` has the run page's bias section, rows, title and notes alike."""
    from juryflow.report.html import render_report

    db, report = bias_run
    with _client(db) as client:
        html, page = _run_page(client, report.run_id)
    document = render_report(Store(db), report.run_id)
    parsed = _Tables()
    parsed.feed(document)
    assert parsed.tables["bias-probes"] == page.tables["bias-probes"]
    assert len(parsed.tables["bias-probes"]) == len(report.probes) + 1
    for list_id in ("bias-notes", "bias-unmeasured"):
        assert _list(document, list_id) == _list(html, list_id)
    title = re.search(r'<p class="meta" id="bias-title">(.*?)</p>', document, re.S)
    assert title is not None and title.group(0) in html
    assert '<a href="#bias">Bias probes</a>' in document


def test_the_run_page_shows_the_cli_bias_table(bias_run: tuple[Path, BiasReport]) -> None:
    db, report = bias_run
    with _client(db) as client:
        html, page = _run_page(client, report.run_id)
    cli_lines, cli_rows = _cli_rows(db, report.run_id)
    table = page.tables["bias-probes"]
    assert table[0] == PROBE_COLUMNS
    # Every judge has a measured length probe, and the span judges a position probe, so no
    # probe is folded into one line: the page's rows are the terminal's, cell for cell.
    assert table[1:] == cli_rows
    assert len(cli_rows) == len(report.probes)
    for row, probe in zip(table[1:], report.probes, strict=True):
        effect = probe.effect
        assert row[:2] == [probe.judge_id, probe.probe]
        assert row[2] == _signed(effect.value)
        expected = (
            "—" if math.isnan(effect.low) else f"[{_signed(effect.low)}, {_signed(effect.high)}]"
        )
        assert row[3] == expected
        assert row[4] == (str(effect.n) if effect.n else "")
        assert row[5] == probe.note
    # Bold as in the terminal: the effects whose interval excludes 0.
    section = re.search(r'<table id="bias-probes">(.*?)</table>', html, re.S)
    assert section is not None
    bold = re.findall(r"<b>([^<]*)</b>", section.group(1))
    assert bold == [
        _signed(p.effect.value)
        for p in report.probes
        if p.effect.measured and not math.isnan(p.effect.low) and p.effect.excludes_zero
    ]
    lengthy = next(p for p in report.probes if (p.judge_id, p.probe) == ("lengthy", "length"))
    assert _signed(lengthy.effect.value) in bold
    # The title and notes are the CLI's words.
    title = re.search(r'<p class="meta" id="bias-title">(.*?) ·', html, re.S)
    assert title is not None and any(title.group(1) in line for line in cli_lines)
    for note in _list(html, "bias-notes"):
        assert f"note: {note}" in cli_lines
    # The two score judges have no position probe, and the page says why.
    assert _list(html, "bias-unmeasured") == ["position: for span judges only, not scorer, partial"]


@dataclass(frozen=True)
class Unlabelled:
    db: Path
    labelled: str
    """Span judges on items with labels but no ``model`` column."""
    bare: str
    """The same judges on the same items without labels."""


@pytest.fixture(scope="module")
def unlabelled(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Unlabelled:
    from juryflow.flows.evaluate import evaluate
    from juryflow.standin.server import StubConfig, running_stub_server
    from juryflow.standin.simulator import load_gold

    folder = tmp_path_factory.mktemp("viewer-bias")
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    rows = [{k: v for k, v in r.items() if k != "model"} for r in rows[:24]]
    labelled = folder / "no_writer.jsonl"
    labelled.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    bare = folder / "no_labels.jsonl"
    bare.write_text(
        "".join(
            json.dumps({k: v for k, v in r.items() if k not in ("labels", "hallucinated")}) + "\n"
            for r in rows
        ),
        encoding="utf-8",
    )
    db = folder / "store.duckdb"
    # Anthropic models are of a known family, so only the missing writer stops the probe.
    judges = (("strong", "anthropic", sim_panels.STRONG), ("weak", "anthropic", sim_panels.WEAK))
    ids = []
    with (
        pytest.MonkeyPatch.context() as env,
        running_stub_server(StubConfig(gold=load_gold(labelled))) as stub,
    ):
        env.setenv(KEY_ENV, "sk-viewer-bias")
        panel = sim_panels.sim_panel(folder / "panel.yaml", stub, judges, key_env=KEY_ENV)
        for dataset in (labelled, bare):
            summary = asyncio.run(
                evaluate(
                    RunRequest(dataset=str(dataset), panel=str(panel), db=str(db), use_cache=False)
                )
            )
            ids.append(str(summary["run_id"]))
    return Unlabelled(db, ids[0], ids[1])


def test_a_probe_no_judge_can_be_measured_on_is_one_line(unlabelled: Unlabelled) -> None:
    with _client(unlabelled.db) as client:
        html, page = _run_page(client, unlabelled.labelled)
    _, cli_rows = _cli_rows(unlabelled.db, unlabelled.labelled)
    shown = page.tables["bias-probes"][1:]
    # The terminal has a self-preference row per judge, each saying there is no writer.
    folded = [r for r in cli_rows if r[1] == "self-preference"]
    assert len(folded) == 2 and all("(no model column)" in r[5] for r in folded)
    assert shown == [r for r in cli_rows if r[1] != "self-preference"]
    assert {r[1] for r in shown} == {"length", "position"}
    assert _list(html, "bias-unmeasured") == [
        "self-preference: items do not name their writer (no model column)"
    ]


def test_a_run_without_labels_says_why_and_computes_no_probe(
    unlabelled: Unlabelled, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> BiasReport:
        raise AssertionError("the bias probes were computed for a run without labels")

    # The viewer serves from a thread of this process: the page calls this if it calls at all.
    monkeypatch.setattr(bias_model, "bias_report", refuse)
    with _client(unlabelled.db) as client:
        html, page = _run_page(client, unlabelled.bare)
    assert "bias-probes" not in page.tables
    reason = re.search(r'<p id="bias-reason">(.*?)</p>', html, re.S)
    assert reason is not None and "has no human labels" in reason.group(1)
    assert "juryflow agreement --bias" in reason.group(1)
