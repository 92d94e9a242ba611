"""Every face says which rule made each consensus number (issue 28, point 3; finding 8).

The offline panel's verdict comes from its spans (union) and its score from the median, so
an item can read "hallucinated" beside a score of 0.00; re-aggregated with a span majority,
an item reads "clean" with a score of 1.00 although 2 of 3 judges said hallucinated (the
judges agree something is wrong, not where: ``unlocalised``). Over a real offline run of
the bundled sample and its re-aggregation, the viewer, the HTML report, the command line
and the Prefect artifact's markdown must label the score with its reducer, the verdict
with its rule, and say why such an item is clean; the viewer counts and marks the
unlocalised items and shows the reference data pretty-printed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from html import unescape
from pathlib import Path
from urllib.parse import quote

import duckdb
import httpx
import pytest
from typer.testing import CliRunner

import juryflow
from juryflow.cli import app as cli_app
from juryflow.flows.artifacts import run_markdown
from juryflow.report.html import render_report
from juryflow.storage.store import Store
from juryflow.viewer.server import RunningViewer, start_in_thread
from juryflow.viewer.state import ViewerState


@dataclass(frozen=True)
class Runs:
    db: Path
    union: str
    """The offline panel's run: score median, spans union, verdict spans."""
    majority: str
    """The same judgments re-aggregated with ``spans=majority``."""
    unlocalised: list[str]
    """Items of ``majority`` that are unlocalised: clean, score 1.00, 2 of 3 said so."""


@pytest.fixture(scope="module")
def runs(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    db = tmp_path_factory.mktemp("rule-labels") / "evals.duckdb"
    union = juryflow.run(db=db, progress=False).run_id
    majority = juryflow.open_store(db).reaggregate(union, consensus=["spans=majority"]).run_id
    con = duckdb.connect(str(db), read_only=True)
    try:
        found = con.execute(
            "SELECT c.item_id FROM consensus c WHERE c.run_id = ? AND c.unlocalised "
            "AND NOT c.hallucinated AND c.score = 1.0 AND (SELECT count(*) FROM judgments j "
            "WHERE j.run_id = c.run_id AND j.item_id = c.item_id AND j.verdict) = 2 "
            "ORDER BY c.item_id",
            [majority],
        ).fetchall()
    finally:
        con.close()
    assert found, "the re-aggregated sample has an unlocalised item scored 1.00"
    return Runs(db, union, majority, [str(r[0]) for r in found])


@pytest.fixture(scope="module")
def client(runs: Runs) -> Iterator[httpx.Client]:
    running: RunningViewer = start_in_thread(ViewerState(Store(runs.db), "tester"))
    try:
        with httpx.Client(base_url=running.url, timeout=60) as c:
            yield c
    finally:
        running.stop()


def _text(html: str) -> str:
    """The page's words, tags dropped and whitespace collapsed."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _sql(db: Path, sql: str, params: list[object]) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def _hallucinated_scored_zero(runs: Runs) -> str:
    """An item of the union run that is hallucinated with a median score of 0.00."""
    rows = _sql(
        runs.db,
        "SELECT item_id FROM consensus WHERE run_id = ? AND hallucinated AND score = 0 "
        "ORDER BY item_id LIMIT 1",
        [runs.union],
    )
    assert rows, "the offline run has an item flagged by one specialist of three"
    return str(rows[0][0])


def _item(client: httpx.Client, run_id: str, item_id: str) -> str:
    response = client.get(f"/runs/{quote(run_id)}/item", params={"id": item_id})
    assert response.status_code == 200, response.text[-400:]
    return _text(response.text)


# -- the viewer ----------------------------------------------------------------------------


def test_item_page_labels_the_score_and_the_verdict_with_their_rules(
    runs: Runs, client: httpx.Client
) -> None:
    words = _item(client, runs.union, _hallucinated_scored_zero(runs))
    assert "median score 0.00" in words
    assert "hallucinated — spans: union" in words
    assert "consensus score" not in words


def test_unlocalised_item_says_the_rule_that_made_it_clean(
    runs: Runs, client: httpx.Client
) -> None:
    words = _item(client, runs.majority, runs.unlocalised[0])
    assert "median score 1.00" in words
    assert "clean — spans: majority overlap found no character marked by 2 of 3 judges" in words
    assert "unlocalised" in words


def test_run_page_counts_the_unlocalised_items(runs: Runs, client: httpx.Client) -> None:
    report = juryflow.open_store(runs.db).agreement(runs.majority)
    assert report.unlocalised >= len(runs.unlocalised)
    response = client.get(f"/runs/{quote(runs.majority)}")
    assert response.status_code == 200
    words = _text(response.text)
    assert f"unlocalised {report.unlocalised} of {report.n_items} items" in words


def test_items_page_labels_its_columns_and_marks_unlocalised_items(
    runs: Runs, client: httpx.Client
) -> None:
    response = client.get(f"/runs/{quote(runs.majority)}/items", params={"per_page": 500})
    assert response.status_code == 200
    html = response.text
    words = _text(html)
    assert "median score" in words
    assert "verdict (spans: majority)" in words
    marked = re.findall(r'<tr data-item="([^"]+)" class="[^"]*\bunlocalised\b', html)
    assert sorted(marked) == sorted(
        str(r[0])
        for r in _sql(
            runs.db,
            "SELECT item_id FROM consensus WHERE run_id = ? AND unlocalised",
            [runs.majority],
        )
    )


def test_reference_is_pretty_printed_beside_the_text(runs: Runs, client: httpx.Client) -> None:
    response = client.get(
        f"/runs/{quote(runs.union)}/item", params={"id": _hallucinated_scored_zero(runs)}
    )
    html = response.text
    reference = html[html.index('id="reference-heading"') :]
    assert "&#39;name&#39;:" not in reference  # no Python repr
    assert "&#34;name&#34;: " in reference or '"name": ' in unescape(reference)
    assert "True" not in unescape(reference.split("</section>")[0])
    assert 'class="text-and-reference"' in html


# -- the HTML report, the command line, the artifact -------------------------------------


def test_report_labels_the_score_and_the_verdict(runs: Runs) -> None:
    words = _text(render_report(Store(runs.db), runs.union))
    assert "median score" in words
    assert "spans: union" in words
    words = _text(render_report(Store(runs.db), runs.majority))
    assert "unlocalised" in words


def test_cli_disagreements_label_the_consensus_row(runs: Runs) -> None:
    result = CliRunner().invoke(
        cli_app, ["disagreements", runs.union, "--db", str(runs.db), "--top", "3"],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "median" in result.output
    assert "spans: union" in result.output


def test_artifact_labels_the_hallucination_rate_with_its_rule(runs: Runs) -> None:
    text = run_markdown(Store(runs.db), runs.majority)
    assert "hallucinated (consensus verdict, spans: majority)" in text
    assert "mean abs diff vs consensus median score" in text


# -- the pure pieces -------------------------------------------------------------------------


def test_reference_text_reads_literals_only_and_falls_back_to_the_raw_text() -> None:
    from juryflow.pages.reference_text import MAX_LITERAL_CHARS, reference_text

    shown = reference_text("{'name': 'Eatery', 'open': True, 'tags': {'b', 'a'}, 'n': None}")
    assert shown.splitlines() == [
        "{",
        '  "name": "Eatery",',
        '  "open": true,',
        '  "tags": [',
        '    "a",',
        '    "b"',
        "  ],",
        '  "n": null',
        "}",
    ]
    assert reference_text({"a": [1, 2]}) == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    for raw in (
        "{'a': __import__('os').getcwd()}",  # a call: never evaluated
        "{'a': 1",  # not a literal
        "[" * 100_000 + "]" * 100_000,  # too deep to parse safely
        "{'a': '" + "x" * MAX_LITERAL_CHARS + "'}",  # too long to parse
        "'just a string'",
        "Plain words, {'not': 'at the start'}",
    ):
        assert reference_text(raw) == raw


def test_verdict_reasons_name_the_rule_and_what_it_went_by() -> None:
    from juryflow.pages.rule_labels import RunRule, consensus_line, verdict_reason
    from juryflow.storage.reads.consensus_facts import ConsensusFacts

    def facts(hallucinated: bool, rule: str, said: int = 2, spans: int = 0) -> ConsensusFacts:
        return ConsensusFacts(hallucinated, rule, False, spans, 3, 3, said, 0.4)

    union = RunRule.of({"score": "median", "spans": "union", "verdict": "spans"})
    assert union.score_label() == "median score"
    assert verdict_reason(union, facts(True, "spans", 1, 2)).startswith(
        "hallucinated — spans: union marks 2 spans"
    )
    assert verdict_reason(union, facts(False, "spans", 0)) == (
        "clean — spans: union found no character marked by any of 3 judges"
    )
    votes = RunRule.of({"score": "mean", "verdict": "majority"})
    assert votes.score_label() == "mean score"
    assert verdict_reason(votes, facts(True, "majority")) == (
        "hallucinated — majority of verdicts: 2 of 3 judges said hallucinated"
    )
    at_least = RunRule.of({"spans": "at_least:2", "verdict": "spans"})
    assert verdict_reason(at_least, facts(False, "spans")) == (
        "clean — spans: at_least:2 found no character marked by 2 of 3 judges"
    )
    threshold = RunRule.of({"score": "mean", "verdict": "score:0.3"})
    assert verdict_reason(threshold, facts(True, "score:0.3")) == (
        "hallucinated — mean score 0.40 is at or above 0.3"
    )
    # a stored rule this version cannot read: the defaults, never an error
    assert RunRule.of({"spans": "no-such-rule"}) == RunRule("median", "majority", "auto")
    assert consensus_line(None, union, None) == "median score –"
