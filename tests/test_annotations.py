"""The ``annotations`` table (issue 13): saving, reading back, the review queue, migration,
and a save while another process holds the store."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.maths.records import GoldLabels
from juryflow.storage.annotations import (
    NewAnnotation,
    SpanDecision,
    annotated_item_ids,
    annotation_count,
    latest_annotation,
    latest_annotations,
    merge_spans,
    next_in_queue,
    resolve_reviewer,
    save_annotation,
)
from juryflow.storage.connection import StoreError, StoreLockedError
from juryflow.storage.schema import LATEST_VERSION, MIGRATIONS
from juryflow.storage.store import Store
from tests.test_views import HAND, HAND_GOLD, TEXT, build_store, score_judgment, spans_judgment

runner = CliRunner()


@pytest.fixture
def hand(tmp_path: Path) -> Store:
    return build_store(tmp_path / "hand.duckdb", ["A", "B", "C"], HAND, HAND_GOLD)


def _consensus_spans(store: Store, item_id: str) -> list[tuple[int, int]]:
    _, rows = store.query(
        "SELECT char_start, char_end FROM consensus_spans WHERE run_id = 'run-1' "
        "AND item_id = ? ORDER BY span_index",
        [item_id],
    )
    return [(int(a), int(b)) for a, b in rows]


def _items(store: Store) -> list[tuple[object, ...]]:
    _, rows = store.query("SELECT * FROM items ORDER BY ALL")
    return rows


# -- saving and reading back ------------------------------------------------------------


def test_save_then_latest_round_trips(hand: Store) -> None:
    consensus = _consensus_spans(hand, "i1")
    assert consensus, "the hand-built i1 has a consensus span to decide on"
    saved = save_annotation(
        hand,
        NewAnnotation(
            run_id="run-1",
            item_id="i1",
            reviewer=" ada ",
            decisions=(SpanDecision(*consensus[0], accepted=False),),
            missed=((0, 2), (1, 3)),
            verdict=True,
            note="two marks, one consensus span rejected",
        ),
    )
    assert saved.annotation_id == 1 and saved.reviewer == "ada"
    assert saved.spans == ((0, 3),)  # the rejected consensus span is not a label
    assert latest_annotation(hand, "run-1", "i1") == saved
    assert latest_annotation(hand, "run-1", "i2") is None
    again = save_annotation(
        hand, NewAnnotation("run-1", "i1", "bob", (), (), verdict=False, note="")
    )
    assert again.annotation_id == 2
    assert latest_annotation(hand, "run-1", "i1") == again  # newest wins, any reviewer
    assert annotation_count(hand, "run-1") == 1 and annotated_item_ids(hand, "run-1") == {"i1"}
    assert [a.annotation_id for a in latest_annotations(hand, "run-1")] == [2]


def test_annotations_never_touch_the_dataset_labels(hand: Store) -> None:
    before = _items(hand)
    for item_id in ("i1", "i2", "i3"):
        save_annotation(hand, NewAnnotation("run-1", item_id, "ada", (), ((0, 1),), True))
    assert _items(hand) == before
    _, gold = hand.query("SELECT item_id, gold_hallucinated FROM gold_labels ORDER BY item_id")
    assert gold == [("i1", True), ("i2", False), ("i3", True)]


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        (NewAnnotation("nope", "i1", "ada", (), (), True), "no run 'nope'"),
        (NewAnnotation("run-1", "i9", "ada", (), (), True), "has no item 'i9'"),
        (NewAnnotation("run-1", "i1", "ada", (), ((5, 5),), True), "0 <= start < end"),
        (NewAnnotation("run-1", "i1", "ada", (), ((-1, 2),), True), "not within the judged"),
        (NewAnnotation("run-1", "i1", "ada", (), ((0, len(TEXT) + 1),), True), "characters"),
        (
            NewAnnotation("run-1", "i1", "ada", (SpanDecision(0, 1, True),), (), True),
            "not a consensus span",
        ),
        (NewAnnotation("run-1", "i1", "  ", (), (), True), "--reviewer"),
    ],
)
def test_bad_annotations_are_one_line_errors(
    hand: Store, annotation: NewAnnotation, message: str
) -> None:
    with pytest.raises(StoreError, match=message) as raised:
        save_annotation(hand, annotation)
    assert "\n" not in str(raised.value)
    assert annotation_count(hand, "run-1") == 0  # nothing half-written


def test_a_span_decided_twice_is_refused(hand: Store) -> None:
    start, end = _consensus_spans(hand, "i1")[0]
    twice = (SpanDecision(start, end, True), SpanDecision(start, end, False))
    with pytest.raises(StoreError, match="decided twice"):
        save_annotation(hand, NewAnnotation("run-1", "i1", "ada", twice, (), True))


_TEXT_LENGTH = 40
_LONG_TEXT = "The tower is 330 m tall and opened 1889."
assert len(_LONG_TEXT) == _TEXT_LENGTH


@pytest.fixture(scope="module")
def property_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """One item whose consensus has three spans, for the Hypothesis property."""
    judgments = [
        spans_judgment("p", judge, [(4, 9), (13, 18), (30, 34)]) for judge in ("A", "B")
    ] + [score_judgment("p", "C", 0.8)]
    return build_store(
        tmp_path_factory.mktemp("prop") / "p.duckdb",
        ["A", "B", "C"],
        judgments,
        {"p": GoldLabels(True, ((13, 18),))},
        texts={"p": _LONG_TEXT},
    )


_SPAN = st.tuples(st.integers(-3, _TEXT_LENGTH + 3), st.integers(-3, _TEXT_LENGTH + 3)).filter(
    lambda s: s[0] != s[1]
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    accepted=st.lists(st.booleans(), min_size=3, max_size=3),
    decided=st.lists(st.booleans(), min_size=3, max_size=3),
    missed=st.lists(_SPAN, max_size=4),
    verdict=st.sampled_from([True, False, None]),
)
def test_stored_spans_are_accepted_plus_missed_merged_and_inside_the_text(
    property_store: Store,
    accepted: list[bool],
    decided: list[bool],
    missed: list[tuple[int, int]],
    verdict: bool | None,
) -> None:
    consensus = _consensus_spans(property_store, "p")
    assert len(consensus) == 3
    decisions = tuple(
        SpanDecision(s, e, a)
        for (s, e), a, d in zip(consensus, accepted, decided, strict=True)
        if d
    )
    annotation = NewAnnotation("run-1", "p", "ada", decisions, tuple(missed), verdict)
    valid = all(0 <= s < e <= _TEXT_LENGTH for s, e in missed)
    if not valid:
        before = latest_annotation(property_store, "run-1", "p")
        with pytest.raises(StoreError, match="not within the judged text"):
            save_annotation(property_store, annotation)
        assert latest_annotation(property_store, "run-1", "p") == before
        return
    saved = save_annotation(property_store, annotation)
    latest = latest_annotation(property_store, "run-1", "p")
    assert latest == saved
    # the labelled characters are exactly the accepted consensus spans and the missed ones
    expected_chars = {
        c for d in decisions if d.accepted for c in range(d.char_start, d.char_end)
    } | {c for s, e in missed for c in range(s, e)}
    got_chars = {c for s, e in latest.spans for c in range(s, e)}
    assert got_chars == expected_chars
    assert latest.spans == merge_spans(latest.spans)  # sorted, disjoint, not touching
    assert all(0 <= s < e <= _TEXT_LENGTH for s, e in latest.spans)
    assert latest.decisions == decisions and latest.verdict is verdict
    _, stored = property_store.query(
        "SELECT spans FROM annotations WHERE annotation_id = ?", [saved.annotation_id]
    )
    assert [tuple(p) for p in json.loads(stored[0][0])] == list(saved.spans)


def test_merge_spans_joins_overlapping_and_touching() -> None:
    assert merge_spans([(5, 7), (0, 2), (2, 3), (6, 9), (4, 4)]) == ((0, 3), (5, 9))


# -- the review queue --------------------------------------------------------------------


def test_queue_walks_the_most_disputed_unreviewed_first(hand: Store) -> None:
    _, ranked = hand.query(
        "SELECT item_id FROM item_disagreement WHERE run_id = 'run-1' ORDER BY disagreement_rank"
    )
    order = [str(r[0]) for r in ranked]
    assert next_in_queue(hand, "run-1") == order[0]
    assert next_in_queue(hand, "run-1", after=order[0]) == order[1]
    for n, item_id in enumerate(order):
        assert next_in_queue(hand, "run-1") == item_id
        save_annotation(hand, NewAnnotation("run-1", item_id, "ada", (), (), None, f"#{n}"))
    assert next_in_queue(hand, "run-1") is None
    assert next_in_queue(hand, "no-such-run") is None


def test_items_without_a_disagreement_come_last_in_the_queue(tmp_path: Path) -> None:
    judgments = [
        score_judgment("calm", "A", 0.1),
        score_judgment("calm", "B", 0.1),
        score_judgment("alone", "A", 0.9),  # one rating: NULL disagreement
        score_judgment("split", "A", 0.9),
        score_judgment("split", "B", 0.1),
    ]
    store = build_store(tmp_path / "q.duckdb", ["A", "B"], judgments)
    seen = []
    while (item := next_in_queue(store, "run-1")) is not None:
        seen.append(item)
        save_annotation(store, NewAnnotation("run-1", item, "ada", (), (), None))
    assert seen == ["split", "calm", "alone"]


def test_reviewer_comes_from_the_option_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JURYFLOW_REVIEWER", "env-name")
    assert resolve_reviewer(" opt ") == "opt"
    assert resolve_reviewer(None) == "env-name"
    monkeypatch.delenv("JURYFLOW_REVIEWER")
    assert resolve_reviewer(None)  # the login name


# -- schema -------------------------------------------------------------------------------


def test_an_older_store_migrates_and_sql_reads_the_table(tmp_path: Path) -> None:
    db = tmp_path / "v5.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ)")
    for version, ddl in MIGRATIONS:
        if version <= 5:
            con.execute(ddl)
            con.execute("INSERT INTO schema_version VALUES (?, now())", [version])
    con.execute(
        "INSERT INTO runs (run_id, kind, suite, status, started_at, dataset, panel_name, panel, "
        "prompts, quorum, n_judges) VALUES ('old', 'evaluate', 's', 'completed', now(), "
        "'/d.jsonl', 'p', '{\"judges\": []}', '[]', 1, 1)"
    )
    con.execute(
        "INSERT INTO items VALUES ('old', 'x', 0, '{\"response\": \"abc def\"}', NULL, NULL, '{}')"
    )
    con.close()
    store = Store(db)
    # reads of a store before migration 6: nothing annotated, nothing fails
    assert latest_annotation(store, "old", "x") is None and annotation_count(store, "old") == 0
    # the first save brings the store up to date, then writes
    saved = save_annotation(Store(db), NewAnnotation("old", "x", "ada", (), ((0, 3),), True))
    _, version = Store(db).query("SELECT max(version) FROM schema_version")
    assert version[0][0] == LATEST_VERSION
    assert Store(db).migrate() == LATEST_VERSION
    result = runner.invoke(
        app,
        ["sql", "SELECT item_id, reviewer, spans FROM annotations", "--db", str(db), "-f", "csv"],
    )
    assert result.exit_code == 0, result.output
    assert 'x,ada,"[[0, 3]]"' in result.output
    assert latest_annotation(Store(db), "old", "x") == saved


# -- concurrency ------------------------------------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys, time, duckdb
    con = duckdb.connect(sys.argv[1])
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
    con.close()
    """
)


def _hold(db: Path, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
    return holder


def test_a_save_waits_for_another_process_then_succeeds(hand: Store) -> None:
    """The viewer's write waits out a run's hold on the file (the documented lock wait)."""
    holder = _hold(hand.path, 1.5)
    try:
        started = time.monotonic()
        saved = save_annotation(hand, NewAnnotation("run-1", "i2", "ada", (), (), False))
        waited = time.monotonic() - started
    finally:
        holder.wait(timeout=30)
    assert waited >= 1.0, "the save should have waited for the holder"
    assert latest_annotation(hand, "run-1", "i2") == saved


def test_a_save_past_the_lock_wait_is_one_line(
    hand: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JURYFLOW_LOCK_WAIT_SECONDS", "0.5")
    holder = _hold(hand.path, 5)
    try:
        with pytest.raises(StoreLockedError, match=r"stayed locked.*--db") as raised:
            save_annotation(hand, NewAnnotation("run-1", "i2", "ada", (), (), False))
        assert "\n" not in str(raised.value)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    monkeypatch.delenv("JURYFLOW_LOCK_WAIT_SECONDS")
    assert annotation_count(hand, "run-1") == 0
