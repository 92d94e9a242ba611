"""Store.reading(): one held read-only connection for a block of reads (a report's dozens
of queries), which no write may use; the store is writable again after the block."""

from __future__ import annotations

from pathlib import Path

import pytest

from juryflow.storage.connection import StoreError
from juryflow.storage.store import Store


def test_reads_in_a_reading_block_share_one_connection_and_writes_are_refused(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "s.duckdb")
    store.migrate()
    with store.reading():
        with store.read() as first:
            pass
        with store.read() as second:
            assert second is first
            assert second.execute("SELECT count(*) FROM runs").fetchone() == (0,)
        with pytest.raises(StoreError, match="open for reading only"), store.write():
            pass
    # After the block, a write opens its own read-write connection.
    with store.write() as con:
        con.execute("CREATE TABLE scratch (x INTEGER)")
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM scratch").fetchone() == (0,)


def test_a_reading_block_inside_a_session_uses_the_sessions_connection(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.duckdb")
    store.migrate()
    with store.session(), store.reading(), store.write() as con:
        # The session's read-write connection is held: the block writes through it.
        con.execute("CREATE TABLE scratch (x INTEGER)")
