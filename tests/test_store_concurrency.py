"""Several processes on one DuckDB file: short write transactions, lock retries, readers."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from juryflow.storage.connection import StoreLockedError, connect
from juryflow.storage.store import Store

WRITER = textwrap.dedent(
    """
    import sys
    from juryflow.maths.records import Judgment
    from juryflow.storage.store import Store

    store = Store(sys.argv[1])
    run_id = sys.argv[2]
    for batch in range(40):
        store.insert_judgments(run_id, [
            Judgment(item_id=f"{batch}-{i}", judge_id="j", output_kind="score", score=0.5)
            for i in range(50)
        ])
    print("done")
    """
)


def test_two_writer_processes_and_a_reader_share_one_file(db_path: Path) -> None:
    Store(db_path).migrate()
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db_path), run_id],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for run_id in ("run-a", "run-b")
    ]
    reads = 0
    while any(w.poll() is None for w in writers):
        # what `juryflow sql` does: a read-only connection between the writers' transactions
        Store(db_path).query("SELECT count(*) FROM judgments")
        reads += 1
    for writer in writers:
        out, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err
        assert out.strip() == "done"
    _, rows = Store(db_path).query(
        "SELECT run_id, count(*) FROM judgments GROUP BY run_id ORDER BY run_id"
    )
    assert rows == [("run-a", 2000), ("run-b", 2000)]
    assert reads > 0


HOLDER = textwrap.dedent(
    """
    import sys, time, duckdb
    con = duckdb.connect(sys.argv[1])
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
    """
)


def test_a_store_that_stays_locked_gives_a_clear_error(db_path: Path) -> None:
    Store(db_path).migrate()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db_path), "20"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        # raised, not connected: it gave up after lock_wait, not at the holder's 20 s release
        with (
            pytest.raises(StoreLockedError, match=r"stayed locked.*--db"),
            connect(db_path, lock_wait=1.0),
        ):
            pass
    finally:
        holder.kill()
        holder.wait()
