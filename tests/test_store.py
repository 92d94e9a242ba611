"""The store against real DuckDB files."""

from __future__ import annotations

from pathlib import Path

from juryflow.maths.records import Judgment, Span
from juryflow.storage.journal import Journal
from juryflow.storage.schema import LATEST_VERSION
from juryflow.storage.store import Store


def judgment(item: str, judge: str, score: float | None = 0.5, key: str | None = None) -> Judgment:
    if score is None:
        return Judgment(item, judge, "spans", None, unscored_reason="boom", cache_key=key)
    return Judgment(
        item, judge, "spans", score, (Span(0, 3, "abc", "exact", "abc"),), cache_key=key
    )


def test_migrate_is_idempotent(db_path: Path) -> None:
    store = Store(db_path)
    assert store.migrate() == LATEST_VERSION
    assert store.migrate() == LATEST_VERSION
    _, rows = store.query("SELECT count(*) FROM schema_version")
    assert rows[0][0] == LATEST_VERSION


def test_a_session_holds_one_connection_for_many_writes(db_path: Path) -> None:
    store = Store(db_path)
    store.migrate()
    with store.session():
        for batch in range(5):
            store.insert_judgments("r", [judgment(f"{batch}-{i}", "j") for i in range(10)])
        _, rows = store.query("SELECT count(*) FROM judgments")  # reads see the writes
        assert rows[0][0] == 50
    assert Store(db_path).judged_pairs("r") == {
        (f"{b}-{i}", "j") for b in range(5) for i in range(10)
    }


def test_judgments_round_trip_with_spans(db_path: Path) -> None:
    store = Store(db_path)
    store.migrate()
    written = [judgment("a", "x"), judgment("b", "x", None)]
    store.insert_judgments("r", written)
    assert sorted(store.load_judgments("r"), key=lambda j: j.item_id) == written


def test_cache_returns_only_scored_judgments(db_path: Path) -> None:
    store = Store(db_path)
    store.migrate()
    store.insert_judgments(
        "r1", [judgment("a", "x", 0.2, key="k1"), judgment("b", "x", None, key="k2")]
    )
    found = store.cached_judgments(["k1", "k2", "k3"])
    assert set(found) == {"k1"} and found["k1"].score == 0.2


def test_journal_round_trips_and_skips_a_torn_last_line(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j" / "run.jsonl")
    first, second = judgment("a", "x"), judgment("b", "x", None)
    journal.append(first)
    journal.append(second)
    journal.close()
    with (tmp_path / "j" / "run.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"item_id": "c", "judge_')  # what a SIGKILL mid-write leaves
    assert sorted(journal.replay(), key=lambda j: j.item_id) == [first, second]
    journal.remove()
    assert not (tmp_path / "j").exists()


def test_journal_replays_only_the_judgments_asked_for(tmp_path: Path) -> None:
    """A resume keeps in memory only what the store lacks, not the whole journal."""
    journal = Journal(tmp_path / "j" / "run.jsonl")
    for item in ("a", "b", "c"):
        journal.append(judgment(item, "x"))
    journal.append(judgment("b", "y"))
    journal.append(judgment("b", "y", None))  # a retry's later line wins, as without keep
    journal.close()
    kept = journal.replay(keep=lambda item, judge: item == "b")
    assert sorted((j.item_id, j.judge_id, j.score) for j in kept) == [
        ("b", "x", judgment("b", "x").score),
        ("b", "y", None),
    ]
    assert journal.replay(keep=lambda item, judge: False) == []
