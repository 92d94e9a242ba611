"""`juryflow agreement`, `disagreements` and `sql`: on a real offline run, on hand-built stores."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from juryflow.analysis.agreement_report import agreement_report
from juryflow.cli import app
from juryflow.maths.records import GoldLabels
from juryflow.planning.run_request import RunRequest
from juryflow.storage.store import Store
from tests.test_views import HAND, HAND_GOLD, build_store, failed, score_judgment

runner = CliRunner()
WIDE = {"COLUMNS": "220"}


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=WIDE)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def offline_db(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real run of the offline panel over the bundled sample, shared by the module."""
    from juryflow.flows.evaluate import evaluate

    db = tmp_path_factory.mktemp("cli") / "offline.duckdb"
    asyncio.run(evaluate(RunRequest(db=str(db))))
    yield str(db)


# -- agreement ------------------------------------------------------------------------


def test_agreement_table_on_the_offline_run(offline_db: str) -> None:
    code, out = invoke("agreement", "--db", offline_db)
    assert code == 0, out
    for expected in (
        "Krippendorff α, interval",
        "Krippendorff α, ordinal",
        "Fleiss κ (verdicts)",
        "percent agreement",
        "effective panel size",
        "Judge pairs",
        "Judges against the panel",
        "Error correlation",
        "Against the human labels",
        "consensus",
        "numbers",
        "names",
        "content",
    ):
        assert expected in out, expected


def test_agreement_json_is_the_report(offline_db: str) -> None:
    code, out = invoke("agreement", "--db", offline_db, "--format", "json")
    assert code == 0, out
    payload = json.loads(out)
    report = agreement_report(Store(offline_db))
    assert payload == report.model_dump(mode="json")
    assert payload["n_items"] == 60 and payload["judges"] == ["numbers", "names", "content"]
    assert [a["predictor"] for a in payload["accuracy"]][-1] == "consensus"
    assert len(payload["groups"][0]["pairs"]) == 3


def test_agreement_takes_a_run_id_and_defaults_to_the_latest(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    db = tmp_path / "two.duckdb"
    build_store(db, ["A", "B", "C"], HAND, HAND_GOLD, run_id="old")
    later = datetime.now(UTC) + timedelta(seconds=5)
    build_store(db, ["A", "B", "C"], HAND, None, run_id="new", started_at=later)
    code, out = invoke("agreement", "--db", str(db), "--format", "json")
    assert code == 0 and json.loads(out)["run_id"] == "new"
    code, out = invoke("agreement", "old", "--db", str(db), "--format", "json")
    assert code == 0 and json.loads(out)["run_id"] == "old"
    code, out = invoke("agreement", "nope", "--db", str(db))
    assert code == 2 and "no run 'nope'" in out


def test_agreement_without_a_store_or_a_run(tmp_path: Path) -> None:
    code, out = invoke("agreement", "--db", str(tmp_path / "missing.duckdb"))
    assert code == 2 and "no juryflow store" in out
    empty = tmp_path / "empty.duckdb"
    Store(empty).migrate()
    code, out = invoke("agreement", "--db", str(empty))
    assert code == 2 and "no run in" in out
    code, out = invoke("agreement", "--db", str(empty), "--format", "xml")
    assert code == 2 and "--format must be table or json" in out


# -- the edge cases, visibly ----------------------------------------------------------


def test_one_judge_has_no_pairwise_metrics(tmp_path: Path) -> None:
    judgments = [score_judgment(f"i{n}", "solo", n / 10) for n in range(5)]
    db = tmp_path / "solo.duckdb"
    build_store(db, ["solo"], judgments)
    code, out = invoke("agreement", "--db", str(db))
    assert code == 0, out
    assert "one judge: pairwise metrics n/a" in out
    assert "n/a (one judge: nothing to compare)" in out
    assert "Judge pairs" not in out


def test_no_gold_omits_accuracy_with_a_note(tmp_path: Path) -> None:
    db = tmp_path / "nogold.duckdb"
    build_store(db, ["A", "B", "C"], HAND)
    code, out = invoke("agreement", "--db", str(db))
    assert code == 0, out
    assert "Against the human labels" not in out and "effective panel size" not in out
    assert "no human labels in this run: accuracy against gold omitted" in out


def test_judge_with_no_scored_item(tmp_path: Path) -> None:
    judgments = [
        j
        for n in range(4)
        for j in (
            score_judgment(f"i{n}", "A", 0.2 * n),
            score_judgment(f"i{n}", "B", 0.25 * n),
            failed(f"i{n}", "broken", "score"),
        )
    ]
    db = tmp_path / "broken.duckdb"
    build_store(db, ["A", "B", "broken"], judgments)
    code, out = invoke("agreement", "--db", str(db))
    assert code == 0, out
    assert "judge 'broken' scored no item" in out
    assert "n/a (no scored item)" in out
    assert "0/4" in out
    report = agreement_report(Store(db))
    assert report.groups[0].alpha_interval.value is not None  # the other two still count
    pair = {(p.judge_a, p.judge_b): p for p in report.groups[0].pairs}
    assert pair["A", "broken"].cohen_kappa.note == "no item scored by both"


def test_all_ratings_identical(tmp_path: Path) -> None:
    judgments = [score_judgment(f"i{n}", j, 0.0) for n in range(3) for j in ("A", "B")]
    db = tmp_path / "same.duckdb"
    build_store(db, ["A", "B"], judgments, {f"i{n}": GoldLabels(False) for n in range(3)})
    code, out = invoke("agreement", "--db", str(db))
    assert code == 0, out
    assert "n/a (all ratings identical)" in out
    assert "n/a (all verdicts identical)" in out
    assert "n/a (both gave one and the same verdict throughout)" in out
    report = agreement_report(Store(db))
    assert report.groups[0].percent_agreement.value == 1.0


def test_items_with_fewer_than_two_ratings(tmp_path: Path) -> None:
    judgments = [
        j
        for n in range(3)
        for j in (score_judgment(f"i{n}", "A", 0.5), failed(f"i{n}", "B", "score"))
    ] + [score_judgment("i3", "B", 0.1), failed("i3", "A", "score")]
    db = tmp_path / "sparse.duckdb"
    build_store(db, ["A", "B"], judgments, quorum=1)
    report = agreement_report(Store(db))
    assert report.groups[0].alpha_interval.note == "no item has two ratings"
    assert report.groups[0].percent_agreement.note == "no item has two verdicts"
    code, out = invoke("agreement", "--db", str(db))
    assert code == 0 and "n/a (no item has two ratings)" in out


# -- disagreements --------------------------------------------------------------------


def test_disagreements_on_the_offline_run(offline_db: str) -> None:
    code, out = invoke("disagreements", "--db", offline_db, "--top", "3")
    assert code == 0, out
    assert "#1 " in out and "#3 " in out and "#4 " not in out
    assert out.count("consensus") >= 3 and out.count("gold (human)") == 3
    for judge in ("numbers", "names", "content"):
        assert out.count(judge) >= 3
    code, out = invoke("disagreements", "--db", offline_db, "--top", "5", "--format", "json")
    items = json.loads(out)
    assert [i["rank"] for i in items] == [1, 2, 3, 4, 5]
    values = [i["disagreement"] for i in items]
    assert values == sorted(values, reverse=True)
    first = items[0]
    assert {j["judge_id"] for j in first["judges"]} == {"numbers", "names", "content"}
    for judge in first["judges"]:
        for span in judge["spans"]:
            assert first["text"][span["start"] : span["end"]] == span["text"]


def test_disagreements_shows_spans_side_by_side(tmp_path: Path) -> None:
    db = tmp_path / "hand.duckdb"
    build_store(db, ["A", "B", "C"], HAND, HAND_GOLD)
    code, out = invoke("disagreements", "--db", str(db), "--top", "1")
    assert code == 0, out
    # i2 is the most disputed: A flags nothing, B flags [0,4), C scores 0.9
    assert "#1 i2" in out
    assert "«a.b.» 0–4" in out and "(none)" in out and "(score only)" in out
    code, out = invoke("disagreements", "--db", str(db), "--format", "json", "--top", "3")
    items = json.loads(out)
    assert [i["item_id"] for i in items] == ["i2", "i1", "i3"]
    i1 = items[1]
    assert i1["consensus_spans"] == [
        {"start": 4, "end": 6, "text": "c.", "match": None, "votes": 2}
    ]
    assert i1["gold_spans"][0]["text"] == "b.c.d."
    i3 = items[2]
    assert [j["score"] for j in i3["judges"]] == [None, 0.0, 0.1]
    assert i3["judges"][0]["unscored_reason"] == "timeout"
    code, out = invoke("disagreements", "--db", str(db), "--top", "0")
    assert code == 2 and "--top must be at least 1" in out


# -- sql ------------------------------------------------------------------------------


def test_sql_table_csv_and_json(offline_db: str) -> None:
    query = "SELECT judge_id, count(*) AS n FROM judgments GROUP BY judge_id ORDER BY judge_id"
    code, out = invoke("sql", query, "--db", offline_db)
    assert code == 0 and "judge_id" in out and "content" in out
    code, out = invoke("sql", query, "--db", offline_db, "--format", "csv")
    assert code == 0
    assert list(csv.reader(io.StringIO(out))) == [
        ["judge_id", "n"],
        ["content", "60"],
        ["names", "60"],
        ["numbers", "60"],
    ]
    code, out = invoke("sql", query, "--db", offline_db, "--format", "json")
    assert code == 0
    assert json.loads(out) == [
        {"judge_id": "content", "n": 60},
        {"judge_id": "names", "n": 60},
        {"judge_id": "numbers", "n": 60},
    ]


def test_sql_over_the_views(offline_db: str) -> None:
    code, out = invoke(
        "sql",
        "SELECT judge_id, n_items, f1 FROM judge_accuracy ORDER BY judge_id",
        "--db",
        offline_db,
        "--format",
        "json",
    )
    assert code == 0, out
    assert [r["judge_id"] for r in json.loads(out)] == ["consensus", "content", "names", "numbers"]


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM judgments",
        "UPDATE consensus SET hallucinated = true",
        "CREATE TABLE x (a INTEGER)",
        "DROP VIEW item_disagreement",
    ],
)
def test_sql_is_read_only(offline_db: str, statement: str) -> None:
    code, out = invoke("sql", statement, "--db", offline_db)
    assert code == 2
    assert "error:" in out and "read-only" in out
    code, out = invoke(
        "sql", "SELECT count(*) AS n FROM judgments", "--db", offline_db, "-f", "csv"
    )
    assert out.splitlines() == ["n", "180"]


def test_sql_bad_query_and_format(offline_db: str) -> None:
    code, out = invoke("sql", "SELECT nope FROM judgments", "--db", offline_db)
    assert code == 2 and "BinderException" in out
    code, out = invoke("sql", "SELECT 1", "--db", offline_db, "--format", "xml")
    assert code == 2 and "--format must be table, csv or json" in out


def test_a_run_that_mixes_prompts_is_also_reported_per_prompt(tmp_path: Path) -> None:
    from dataclasses import replace

    prompt_of = {"A": "data2txt_spans", "B": "data2txt_spans", "C": "hallucination_score"}
    judgments = [replace(j, prompt_name=prompt_of[j.judge_id]) for j in HAND]
    db = tmp_path / "mixed.duckdb"
    build_store(db, ["A", "B", "C"], judgments, HAND_GOLD)
    report = agreement_report(Store(db))
    assert [g.name for g in report.groups] == [
        "all judges",
        "prompt data2txt_spans",
        "prompt hallucination_score",
    ]
    spans_group, score_group = report.groups[1], report.groups[2]
    assert spans_group.judges == ["A", "B"] and spans_group.prompt == "data2txt_spans"
    assert [(p.judge_a, p.judge_b) for p in spans_group.pairs] == [("A", "B")]
    assert spans_group.mean_span_f1.value == 0.25
    assert score_group.alpha_interval.note == "one judge: nothing to compare"
    assert {j.judge_id: j.prompt for j in report.judge_summaries} == prompt_of
    code, out = invoke("agreement", "--db", str(db))
    assert code == 0 and "prompt data2txt_spans (2)" in out
    assert "prompt hallucination_score (1)" in out
