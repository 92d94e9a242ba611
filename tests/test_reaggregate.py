"""Re-aggregation: `min_votes` in the consensus maths, and the flow that calls no judge."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from typer.testing import CliRunner

from juryflow.maths.consensus import item_consensus, majority_runs
from juryflow.maths.records import Judgment, Span
from juryflow.planning.run_request import RunRequest
from tests.conftest import SAMPLE

ITEM = "item-1"
TEXT = "born in 1889 in Paris, died 1950"


def span_judge(judge_id: str, offsets: list[tuple[int, int]]) -> Judgment:
    spans = tuple(Span(s, e, TEXT[s:e], "exact") for s, e in offsets)
    return Judgment(ITEM, judge_id, "spans", 1.0 if spans else 0.0, spans=spans)


# -- min_votes in juryflow.maths.consensus ----------------------------------------------------


def test_majority_runs_min_votes_replaces_the_strict_majority() -> None:
    votes = np.array([0, 1, 1, 2, 3, 2, 0, 1])
    assert majority_runs(votes, 3) == [(3, 6)]
    assert majority_runs(votes, 3, min_votes=1) == [(1, 6), (7, 8)]
    assert majority_runs(votes, 3, min_votes=3) == [(4, 5)]
    # two voters: a majority needs both, min_votes=1 is the union
    assert majority_runs(np.array([1, 2, 1]), 2) == [(1, 2)]
    assert majority_runs(np.array([1, 2, 1]), 2, min_votes=1) == [(0, 3)]


def test_min_votes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="min_votes"):
        majority_runs(np.array([1]), 1, min_votes=0)


def test_item_consensus_with_min_votes() -> None:
    year, city, died = (8, 12), (16, 21), (28, 32)
    judgments = [
        span_judge("a", [year, city]),
        span_judge("b", [year]),
        span_judge("c", [year, died]),
    ]
    default = item_consensus(ITEM, judgments, 3, TEXT)
    assert [s.text for s in default.spans] == ["1889"]
    union = item_consensus(ITEM, judgments, 3, TEXT, min_votes=1)
    assert [s.text for s in union.spans] == ["1889", "Paris", "1950"]
    assert [(s.votes, s.min_votes) for s in union.spans] == [(3, 3), (1, 1), (1, 1)]
    unanimous = item_consensus(ITEM, judgments, 3, TEXT, min_votes=3)
    assert [s.text for s in unanimous.spans] == ["1889"]
    # the score consensus does not depend on min_votes
    assert union.score_median == default.score_median == 1.0


# -- the flow -------------------------------------------------------------------------


@pytest.fixture
def evaluated(tmp_path: Path, db_path: Path, prefect_harness: None) -> str:
    from juryflow.flows.evaluate import evaluate

    rows = SAMPLE.read_text(encoding="utf-8").splitlines()[:20]
    subset = tmp_path / "subset.jsonl"
    subset.write_text("\n".join(rows) + "\n", encoding="utf-8")
    summary = asyncio.run(evaluate(RunRequest(dataset=str(subset), db=str(db_path))))
    return str(summary["run_id"])


@pytest.fixture
def no_judges(evaluated: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the source run is judged, any attempt to build or run a judge fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("reaggregate called a judge")

    import juryflow.flows.tasks
    import juryflow.judges.detectors.registry
    import juryflow.judges.factory

    monkeypatch.setattr(juryflow.flows.tasks, "judge_for", refuse)
    monkeypatch.setattr(juryflow.judges.detectors.registry, "get_detector", refuse)
    for name in dir(juryflow.judges.factory):
        factory = juryflow.judges.factory
        if name.startswith(("build", "make", "judge")) and callable(getattr(factory, name)):
            monkeypatch.setattr(juryflow.judges.factory, name, refuse)


def _rows(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def _consensus(db: Path, run_id: str) -> list[tuple[Any, ...]]:
    return _rows(
        db,
        "SELECT item_id, status, score_median, hallucinated FROM consensus "
        "WHERE run_id = ? ORDER BY item_id",
        [run_id],
    )


def _span_chars(db: Path, run_id: str) -> int:
    row = _rows(
        db,
        "SELECT coalesce(sum(char_end - char_start), 0) FROM consensus_spans WHERE run_id = ?",
        [run_id],
    )
    return int(row[0][0])


@pytest.mark.usefixtures("no_judges")
def test_reaggregate_with_the_same_rules_reproduces_the_consensus(
    evaluated: str, db_path: Path
) -> None:
    from juryflow.flows.reaggregate import reaggregate

    summary = asyncio.run(reaggregate(run_id=evaluated, db=str(db_path)))
    new = summary["run_id"]
    assert new != evaluated and summary["parent_run_id"] == evaluated
    assert _consensus(db_path, new) == _consensus(db_path, evaluated)
    assert _rows(
        db_path,
        "SELECT char_start, char_end, votes FROM consensus_spans WHERE run_id = ? "
        "ORDER BY item_id, span_index",
        [new],
    ) == _rows(
        db_path,
        "SELECT char_start, char_end, votes FROM consensus_spans WHERE run_id = ? "
        "ORDER BY item_id, span_index",
        [evaluated],
    )


@pytest.mark.usefixtures("no_judges")
def test_reaggregate_min_votes_and_quorum_into_a_new_run(evaluated: str, db_path: Path) -> None:
    from juryflow.flows.reaggregate import reaggregate

    summary = asyncio.run(reaggregate(run_id=evaluated, db=str(db_path), quorum=3, min_votes=1))
    new = summary["run_id"]
    run = _rows(
        db_path,
        "SELECT kind, parent_run_id, quorum, status, parameters->>'min_votes', suite "
        "FROM runs WHERE run_id = ?",
        [new],
    )[0]
    source_suite = _rows(db_path, "SELECT suite FROM runs WHERE run_id = ?", [evaluated])[0][0]
    assert run == ("reaggregate", evaluated, 3, "completed", "1", source_suite)
    # items, judgments and spans are copied under the new run id: every view works on it
    for table in ("items", "judgments", "judgment_spans"):
        counts = _rows(
            db_path,
            f"SELECT count(*) FILTER (WHERE run_id = ?), count(*) FILTER (WHERE run_id = ?) "
            f"FROM {table}",
            [evaluated, new],
        )[0]
        assert counts[0] == counts[1] > 0, table
    overview = _rows(db_path, "SELECT items, judgments FROM run_overview WHERE run_id = ?", [new])
    assert overview == [(20, 60)]
    # min_votes=1 takes every character any judge flagged: the union the offline panel
    # already uses, and more than a majority of characters
    assert _span_chars(db_path, new) == _span_chars(db_path, evaluated)
    assert len(_consensus(db_path, new)) == 20
    majority = asyncio.run(
        reaggregate(run_id=evaluated, db=str(db_path), consensus=["spans=majority"])
    )["run_id"]
    assert _span_chars(db_path, majority) < _span_chars(db_path, new)
    rule = _rows(db_path, "SELECT consensus->>'spans' FROM runs WHERE run_id = ?", [majority])
    assert rule == [("majority",)]


@pytest.mark.usefixtures("no_judges")
def test_reaggregate_rejects_what_does_not_fit(evaluated: str, db_path: Path) -> None:
    from juryflow.flows.reaggregate import ReaggregateError, reaggregate

    with pytest.raises(ValueError, match="quorum 4"):
        asyncio.run(reaggregate(run_id=evaluated, db=str(db_path), quorum=4))
    with pytest.raises(ReaggregateError, match="min-votes 5"):
        asyncio.run(reaggregate(run_id=evaluated, db=str(db_path), min_votes=5))
    with pytest.raises(ReaggregateError, match="no run"):
        asyncio.run(reaggregate(run_id="missing", db=str(db_path)))


@pytest.mark.usefixtures("no_judges")
def test_cli_reaggregate(evaluated: str, db_path: Path) -> None:
    from juryflow.cli import app

    result = CliRunner().invoke(
        app, ["reaggregate", evaluated, "--min-votes", "2", "--db", str(db_path)]
    )
    assert result.exit_code == 0, result.output
    assert f"re-aggregates {evaluated}" in result.output
    kinds = _rows(db_path, "SELECT kind, count(*) FROM runs GROUP BY kind ORDER BY kind")
    assert kinds == [("evaluate", 1), ("reaggregate", 1)]
