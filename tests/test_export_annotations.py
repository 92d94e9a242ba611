"""`juryflow export-annotations` (issue 13): a run's annotations as a labelled dataset that
`juryflow run` reads back as gold, on a real offline run; and the README's commands."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from juryflow.analysis.agreement_report import agreement_report
from juryflow.cli import app
from juryflow.planning.run_request import RunRequest
from juryflow.storage.annotations import (
    NewAnnotation,
    SpanDecision,
    latest_annotations,
    next_in_queue,
    save_annotation,
)
from juryflow.storage.store import Store

runner = CliRunner()
WIDE = {"COLUMNS": "220"}


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=WIDE)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def offline_run(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real run of the offline panel over the bundled sample, shared by the module."""
    from juryflow.flows.evaluate import evaluate

    db = tmp_path_factory.mktemp("export") / "offline.duckdb"
    asyncio.run(evaluate(RunRequest(db=str(db))))
    return db


def _annotate_queue(store: Store, run_id: str, n: int) -> list[str]:
    """Review the ``n`` most disputed items as a reviewer would: every kind of decision."""
    reviewed: list[str] = []
    for k in range(n):
        item_id = next_in_queue(store, run_id)
        assert item_id is not None
        _, rows = store.query(
            "SELECT char_start, char_end FROM consensus_spans WHERE run_id = ? AND item_id = ? "
            "ORDER BY span_index",
            [run_id, item_id],
        )
        _, text = store.query(
            "SELECT length(variables->>'response') FROM items WHERE run_id = ? AND item_id = ?",
            [run_id, item_id],
        )
        length = int(text[0][0])
        decisions = tuple(
            SpanDecision(int(a), int(b), j % 2 == k % 2) for j, (a, b) in enumerate(rows)
        )
        kind = k % 4
        if kind == 0:  # hallucinated, with a span the judges missed
            missed: tuple[tuple[int, int], ...] = ((0, min(12, length)),)
            verdict: bool | None = True
        elif kind == 1:  # clean: every consensus span rejected
            decisions = tuple(SpanDecision(d.char_start, d.char_end, False) for d in decisions)
            missed, verdict = (), False
        elif kind == 2:  # verdict left unset: the spans decide it
            missed, verdict = ((length - 5, length),), None
        else:  # hallucinated, no span marked
            decisions, missed, verdict = (), (), True
        save_annotation(
            store, NewAnnotation(run_id, item_id, "tester", decisions, missed, verdict, "")
        )
        reviewed.append(item_id)
    return reviewed


@pytest.fixture(scope="module")
def annotated_run(
    offline_run: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, str]]:
    db = tmp_path_factory.mktemp("annotated") / "store.duckdb"
    shutil.copy(offline_run, db)
    store = Store(db)
    run_id = store.latest_run_id()
    assert run_id is not None
    # enough for the README's `juryflow calibrate --gold annotations` (5 folds x 5 items)
    _annotate_queue(store, run_id, 25)
    yield db, run_id


def test_export_then_run_reads_back_exactly_the_annotations(
    annotated_run: tuple[Path, str], tmp_path: Path
) -> None:
    db, run_id = annotated_run
    store = Store(db)
    labels = tmp_path / "labels.jsonl"
    code, out = invoke("export-annotations", run_id, "--db", str(db), "-o", str(labels))
    assert code == 0, out
    assert "25 annotated items" in out and str(labels) in out.replace("\n", "")
    rows = [json.loads(line) for line in labels.read_text(encoding="utf-8").splitlines()]
    annotated = {a.item_id: a for a in latest_annotations(store, run_id)}
    assert [r["id"] for r in rows] == list(annotated)  # the run's item order
    for row in rows:
        a = annotated[row["id"]]
        assert row.get("hallucinated") == a.verdict
        for label in row.get("labels", []):
            assert row["response"][label["start"] : label["end"]] == label["text"]
    assert oct(labels.stat().st_mode & 0o777) == oct(0o600)

    # judged again with the same (offline) panel: the labels are the annotations
    code, out = invoke("run", str(labels), "--db", str(db))
    assert code == 0, out
    new_run = store.latest_run_id()
    assert new_run is not None and new_run != run_id
    _, new_gold = store.query(
        "SELECT item_id, gold_hallucinated, gold_spans::VARCHAR, has_span_labels "
        "FROM gold_labels WHERE run_id = ? ORDER BY item_id",
        [new_run],
    )
    _, annotation_gold = store.query(
        "SELECT item_id, gold_hallucinated, gold_spans::VARCHAR, has_span_labels "
        "FROM annotation_labels WHERE run_id = ? ORDER BY item_id",
        [run_id],
    )
    normal = [(i, h, json.loads(s) if s else [], u) for i, h, s, u in new_gold]
    expected = [(i, h, json.loads(s) if s else [], u) for i, h, s, u in annotation_gold]
    assert normal == expected

    against_annotations = agreement_report(store, run_id, gold="annotations")
    new_report = agreement_report(store, new_run)
    assert new_report.has_gold and against_annotations.has_gold
    assert new_report.accuracy == against_annotations.accuracy
    assert {a.n_items for a in new_report.accuracy} == {
        sum(a.verdict is not None or bool(a.spans) or bool(a.decisions) for a in annotated.values())
    }

    # the same through the command line, as the README shows it
    code, out = invoke("agreement", new_run, "--db", str(db), "-f", "json")
    assert code == 0, out
    code2, out2 = invoke(
        "agreement", run_id, "--db", str(db), "--gold", "annotations", "-f", "json"
    )
    assert code2 == 0, out2
    assert json.loads(out)["accuracy"] == json.loads(out2)["accuracy"]


def test_export_errors_are_one_line(annotated_run: tuple[Path, str], tmp_path: Path) -> None:
    db, run_id = annotated_run
    code, out = invoke("export-annotations", "no-such-run", "--db", str(db), "-o", "x.jsonl")
    assert code == 2 and "no-such-run" in out and "Traceback" not in out
    assert out.count("\n") <= 2

    empty = tmp_path / "empty.duckdb"
    shutil.copy(db, empty)
    with Store(empty).write() as con:
        con.execute("DELETE FROM annotations")
    code, out = invoke("export-annotations", run_id, "--db", str(empty), "-o", str(tmp_path / "l"))
    assert code == 2, out
    assert "no annotations yet" in out and "juryflow view" in out

    code, out = invoke("export-annotations", run_id, "--db", str(db), "-o", str(tmp_path))
    assert code == 2 and "is a directory" in out, out
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("", encoding="utf-8")
    code, out = invoke("export-annotations", run_id, "--db", str(db), "-o", str(a_file / "l.jsonl"))
    assert code == 2 and "cannot write" in out and "-o" in out, out
    assert "Traceback" not in out


def test_calibrate_against_annotations(annotated_run: tuple[Path, str], tmp_path: Path) -> None:
    db, run_id = annotated_run
    copy = tmp_path / "c.duckdb"
    shutil.copy(db, copy)
    code, out = invoke(
        "calibrate", run_id, "--db", str(copy), "--gold", "annotations", "--folds", "2",
        "-f", "json",
    )  # fmt: skip
    assert code == 0, out
    payload = json.loads(out)
    assert payload["gold_source"] == "annotations"
    code, out = invoke(
        "calibrate", run_id, "--db", str(copy), "--gold", "annotations", "--folds", "2"
    )
    assert code == 0 and "gold: annotations" in out, out


# The README's commands (issue 13's text, /tmp/h/readme_a.md), each run here as written,
# with `--db` added to point at the test's store.
README_SQL = (
    "SELECT judge_id, n_items, precision, recall, f1, span_f1 "
    "FROM judge_accuracy_annotations WHERE run_id = (SELECT max(run_id) FROM runs) "
    "ORDER BY judge_id",
    "SELECT judge_id, n_items, f1, span_f1 FROM judge_accuracy_adjudicated "
    "WHERE run_id = (SELECT max(run_id) FROM runs) ORDER BY judge_id",
    "SELECT item_id, gold_hallucinated, gold_spans FROM adjudicated_labels "
    "WHERE run_id = (SELECT max(run_id) FROM runs)",
    "SELECT reviewer, count(*) AS annotations, count(DISTINCT item_id) AS items "
    "FROM annotations GROUP BY reviewer",
)


def test_the_readme_commands_run(annotated_run: tuple[Path, str], tmp_path: Path) -> None:
    db, run_id = annotated_run
    copy = tmp_path / "readme.duckdb"
    shutil.copy(db, copy)
    # the annotated run must be the latest for `(SELECT max(run_id) FROM runs)`
    with Store(copy).write() as con:
        con.execute("DELETE FROM runs WHERE run_id <> ?", [run_id])
    here = Path.cwd()
    os.chdir(tmp_path)
    try:
        for args in (
            ["agreement", "--gold", "annotations"],
            ["agreement", "--gold", "both"],
            ["disagreements", "--gold", "both", "--top", "3"],
            ["report", "--gold", "both", "-o", "report.html"],
            ["calibrate", "--gold", "annotations"],
            ["export-annotations", run_id, "-o", "labels.jsonl"],
        ):
            code, out = invoke(*args, "--db", str(copy))
            assert code == 0, (args, out)
        assert (tmp_path / "labels.jsonl").exists() and (tmp_path / "report.html").exists()
        for sql in README_SQL:
            code, out = invoke("sql", sql, "--db", str(copy))
            assert code == 0, (sql, out)
    finally:
        os.chdir(here)
