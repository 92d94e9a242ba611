"""The store fails under a running run (issue 29, points 5 and 6): deleted, or its disk full.

Before the fix, a deleted store gave Prefect's "Crash detected" and two tracebacks, left an
empty DuckDB file at the path, and `--resume` on it printed a traceback although the journal
was intact; a full disk gave an uncaught traceback and no resume hint. Now each ends in one
line naming the fix and the resume command, and the resume completes the run exactly: every
pair judged once, no call made twice for a judgment the journal holds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from juryflow.standin.server import StubHandle
from juryflow.storage.journal import Journal, journal_path
from juryflow.storage.store import Store
from tests.test_interrupts import (
    ITEMS,
    JUDGES,
    assert_completed_exactly,
    slow_stub,
    start_run,
    wait_for_judgments,
)
from tests.test_resume import child_env

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

KEY = "sk-test-store-lost"


def _ended_in_one_line(child: subprocess.Popen[str], run_id: str, db: Path) -> str:
    out, err = child.communicate(timeout=300)
    text = out + err
    assert child.returncode == 2, text
    assert "Traceback" not in text and "ERROR" not in text, text
    # progress lines come and go with the machine's speed; the end is one line
    lines = err.strip().splitlines()
    assert [line for line in lines if line.startswith("error:")] == lines[-1:], err
    assert f"juryflow run --resume {run_id} --db {db}" in lines[-1], err
    return lines[-1]


def _resume_completes(stub: StubHandle, db: Path, run_id: str) -> subprocess.CompletedProcess[str]:
    journaled = {(j.item_id, j.judge_id) for j in Journal(journal_path(db, run_id)).replay()}
    stored = Store(db).judged_pairs(run_id) if db.exists() else set()
    before = stub.stats.requests()
    resumed = subprocess.run(
        [sys.executable, "-m", "juryflow", "run", "--resume", run_id, "--db", str(db)],
        env=child_env(JURYFLOW_TEST_KEY=KEY),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    # nothing the journal (or the store) held is asked for again
    assert stub.stats.requests() - before == ITEMS * len(JUDGES) - len(journaled | stored)
    assert_completed_exactly(db, run_id)
    return resumed


def test_a_store_deleted_mid_run_ends_in_one_line_and_resume_rebuilds_it(tmp_path: Path) -> None:
    db = tmp_path / "deleted.duckdb"
    with slow_stub() as stub:
        child = start_run(tmp_path, stub, db, child_env(JURYFLOW_TEST_KEY=KEY))
        run_id = wait_for_judgments(child, db, at_least=120)
        db.unlink()
        err = _ended_in_one_line(child, run_id, db)
        assert "deleted" in err and "rebuilds the store from the journal" in err, err
        # no empty DuckDB file made at the path in its place
        assert not db.exists()
        resumed = _resume_completes(stub, db, run_id)
    assert "restored from the run's journal" in resumed.stderr, resumed.stderr


@contextlib.contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A file system of its own (tmpfs) of ``size``, which a remount can grow."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """4 MB: a new store (1.8 MB) and the run's start fit, its judgments soon do not."""
    with _tmpfs(tmp_path / "disk", "4m") as where:
        yield where


def test_a_disk_too_full_to_start_a_run_ends_in_one_line(tmp_path: Path) -> None:
    """The store or the run's journal header cannot be written at the start: one line that
    names the disk and the fix, no traceback."""
    with _tmpfs(tmp_path / "disk", "4m") as where, slow_stub() as stub:
        Store(where / "full.duckdb").migrate()  # an existing store, then not a byte more
        with (where / "filler").open("wb", buffering=0) as filler, contextlib.suppress(OSError):
            while True:
                filler.write(b"\0" * 4096)
        child = start_run(tmp_path, stub, where / "full.duckdb", child_env(JURYFLOW_TEST_KEY=KEY))
        out, err = child.communicate(timeout=300)
    text = out + err
    assert child.returncode == 2, text
    assert "Traceback" not in text and "ERROR" not in text, text
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error: the run could not start: the disk of the store"), err
    assert "is full; free some space, then run it again" in lines[-1], err


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_full_disk_ends_in_one_line_and_resume_after_freeing_space_completes(
    tmp_path: Path, small_disk: Path, workers: str
) -> None:
    """With worker processes too: a worker that cannot journal stops the run the same way."""
    db = small_disk / "full.duckdb"
    with slow_stub() as stub:
        env = child_env(JURYFLOW_TEST_KEY=KEY)
        child = start_run(tmp_path, stub, db, env, "--workers", workers)
        run_id = wait_for_judgments(child, db, at_least=1, timeout=300)
        err = _ended_in_one_line(child, run_id, db)
        assert "is full" in err and "free some space" in err, err
        subprocess.run(["mount", "-o", "remount,size=256m", str(small_disk)], check=True)
        _resume_completes(stub, db, run_id)


def _chattr(flag: str, path: Path) -> bool:
    if shutil.which("chattr") is None or os.geteuid() != 0:
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


def test_a_store_made_immutable_mid_run_ends_in_one_line_and_resume_completes(
    tmp_path: Path,
) -> None:
    """Issue 29: a store that became immutable left the run `running` with a traceback."""
    db = tmp_path / "frozen.duckdb"
    with slow_stub() as stub:
        child = start_run(tmp_path, stub, db, child_env(JURYFLOW_TEST_KEY=KEY))
        run_id = wait_for_judgments(child, db, at_least=120)
        if not _chattr("+i", db):
            child.kill()
            child.communicate()
            pytest.skip("chattr +i is not available here (root on ext4/xfs needed)")
        try:
            err = _ended_in_one_line(child, run_id, db)
        finally:
            _chattr("-i", db)
        assert "can no longer be written" in err and "make it writable again" in err, err
        # Its row could not be told how it ended; the listing says it all the same.
        from juryflow.storage.reads.run_queries import list_runs

        listing = list_runs(Store(db), limit=5)
        at = listing.columns.index("status")
        assert {row[0]: row[at] for row in listing.rows}[run_id] == "interrupted"
        _resume_completes(stub, db, run_id)
