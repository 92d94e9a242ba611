"""``items`` without its primary key (schema migration 7): the writers keep one row per
(run_id, item_id) themselves, an older store migrates with its rows, and writers of
different runs sharing the file stay correct."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb

from juryflow.maths.records import GoldLabels, Item
from juryflow.storage.schema import LATEST_VERSION, MIGRATIONS
from juryflow.storage.store import Store


def _items(prefix: str, n: int, start: int = 0) -> list[Item]:
    return [Item(f"{prefix}{k}", {"response": f"text {k}"}, row_number=k) for k in range(start, n)]


def _counts(store: Store) -> list[tuple[str, int, int]]:
    _, rows = store.query(
        "SELECT run_id, count(*), count(DISTINCT item_id) FROM items GROUP BY run_id ORDER BY 1"
    )
    return [(str(r), int(n), int(d)) for r, n, d in rows]


def _primary_keys(store: Store) -> int:
    _, rows = store.query(
        "SELECT count(*) FROM duckdb_constraints() WHERE table_name = 'items' "
        "AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')"
    )
    return int(rows[0][0])


def test_a_new_store_has_items_without_a_key(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.duckdb")
    assert store.migrate() == LATEST_VERSION >= 7
    assert _primary_keys(store) == 0


def test_a_resumed_chunk_does_not_duplicate_items(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.duckdb")
    store.migrate()
    chunk = _items("i", 10)
    store.write_chunk("r", chunk, [], [])
    # a resumed run writes the chunk again, with the items after it
    store.write_chunk("r", [*chunk, *_items("i", 15, start=10)], [], [])
    store.insert_items("r", chunk[:3])
    assert _counts(store) == [("r", 15, 15)]
    # the same ids in another run are that run's own rows
    store.write_chunk("other", chunk, [], [])
    assert _counts(store) == [("other", 10, 10), ("r", 15, 15)]


def test_an_id_given_twice_in_one_chunk_is_stored_once_the_first(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.duckdb")
    store.migrate()
    first, second = Item("a", {"response": "first"}), Item("a", {"response": "second"})
    store.write_chunk("r", [first, second, Item("b", {"response": "b"})], [], [])
    assert _counts(store) == [("r", 2, 2)]
    assert store.load_items("r")[0].variables == {"response": "first"}


def test_gold_span_sets_are_not_recorded_twice_for_a_resumed_chunk(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.duckdb")
    store.migrate()
    gold = GoldLabels(hallucinated=True, spans=((0, 4),))
    chunk = [Item("g", {"response": "text here"}, gold=gold)]
    store.write_chunk("r", chunk, [], [])
    store.write_chunk("r", chunk, [], [])
    _, rows = store.query("SELECT kind, n_chars FROM span_sets WHERE run_id = 'r'")
    assert rows == [("gold", 4)]


def _version_6_store(path: Path) -> None:
    """A store as schema version 6 left it: ``items`` with its primary key."""
    con = duckdb.connect(str(path))
    try:
        con.execute(
            "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, "
            "applied_at TIMESTAMPTZ DEFAULT current_timestamp)"
        )
        for version, ddl in MIGRATIONS:
            if version <= 6:
                con.execute(ddl)
                con.execute("INSERT INTO schema_version (version) VALUES (?)", [version])
        con.execute(
            "INSERT INTO items VALUES "
            "('old', 'x', 0, '{\"response\": \"abc def\"}', true, '[[0, 3]]', '{\"k\": \"v\"}'), "
            "('old', 'y', 1, '{\"response\": \"ghi\"}', NULL, NULL, '{}'), "
            "('older', 'x', 0, '{\"response\": \"other\"}', false, '[]', NULL)"
        )
    finally:
        con.close()


def test_a_version_6_store_migrates_and_keeps_its_items(tmp_path: Path) -> None:
    path = tmp_path / "v6.duckdb"
    _version_6_store(path)
    con = duckdb.connect(str(path))
    before = con.execute("SELECT * FROM items ORDER BY ALL").fetchall()
    columns = con.execute("DESCRIBE items").fetchall()
    con.close()
    store = Store(path)
    assert store.migrate() == LATEST_VERSION
    assert store.migrate() == LATEST_VERSION  # a second open has nothing to do
    _, after = store.query("SELECT * FROM items ORDER BY ALL")
    assert after == before
    _, described = store.query("DESCRIBE items")
    # same names, types and nullability in the same order; only the key is gone
    assert [c[:3] for c in described] == [c[:3] for c in columns]
    assert _primary_keys(store) == 0
    _, version = store.query("SELECT max(version) FROM schema_version")
    assert version == [(LATEST_VERSION,)]
    # the migrated table still gets one row per item
    store.write_chunk("old", [Item("x", {"response": "new"}), Item("z", {"response": "z"})], [], [])
    assert _counts(store) == [("old", 3, 3), ("older", 1, 1)]
    assert store.load_items("old")[0].variables == {"response": "abc def"}
    # the views (recreated over the new table) read it
    _, labels = store.query("SELECT item_id FROM gold_labels WHERE run_id = 'old' ORDER BY 1")
    assert labels == [("x",)]


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from juryflow.maths.records import Item
    from juryflow.storage.store import Store

    store = Store(Path(sys.argv[1]))
    run = sys.argv[2]
    for chunk in range(15):
        items = [
            Item(f"item-{chunk}-{k}", {"response": f"{run} {chunk} {k}"}, row_number=k)
            for k in range(40)
        ]
        store.write_chunk(run, items, [], [])
        # each chunk written twice, as a resumed run does, interleaved with the other run
        store.write_chunk(run, items[::-1], [], [])
    """
)


def test_concurrent_writers_of_different_runs_each_store_every_item_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.duckdb"
    store = Store(path)
    store.migrate()
    # both runs share item ids: only (run_id, item_id) together must be unique
    store.write_chunk("b", _items("item-0-", 40), [], [])
    script = tmp_path / "writer.py"
    script.write_text(WRITER, encoding="utf-8")
    writers = [
        subprocess.Popen(
            [sys.executable, str(script), str(path), run],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for run in ("a", "b")
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=240)
        assert writer.returncode == 0, err[-2000:]
    assert _counts(Store(path)) == [("a", 600, 600), ("b", 600, 600)]
    _, texts = Store(path).query(
        "SELECT count(*) FROM items WHERE run_id = 'a' "
        "AND NOT starts_with(json_extract_string(variables, '$.response'), 'a ')"
    )
    assert texts == [(0,)]
