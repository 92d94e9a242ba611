"""A `running` row is listed as it is: a run whose process is gone (killed, or its store
failed under it so that its end could not be written) is `interrupted` (issue 29)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from juryflow.storage.reads.run_queries import list_runs
from juryflow.storage.store import RunRecord, Store
from juryflow.storage.store.liveness import hold, is_live, liveness_path, release

HOLDER = """
import sys, time
from pathlib import Path
from juryflow.storage.store.liveness import hold
assert hold(Path(sys.argv[1]), sys.argv[2])
print("held", flush=True)
sys.stdin.readline()  # until the test says so
"""


@contextmanager
def _held(db_path: Path, run_id: str, script: str = HOLDER) -> Iterator[int]:
    """A process holding the run's lock (and whatever else ``script`` holds) until the
    block ends, when it is killed as SIGKILL leaves a run: no end recorded. Yields its PID."""
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(db_path), run_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


def _running(store: Store, run_id: str) -> None:
    store.create_run(
        RunRecord(
            run_id=run_id,
            kind="evaluate",
            suite="default",
            status="running",
            started_at=datetime.now(UTC),
            finished_at=None,
            dataset="hand-built",
            panel_name="hand",
            panel={"name": "hand", "judges": [{"id": "a"}]},
            prompts=[],
            quorum=1,
            n_judges=1,
        )
    )


def _statuses(store: Store, status: str | None = None) -> dict[str, str]:
    listing = list_runs(store, limit=10, status=status)
    at = listing.columns.index("status")
    return {str(row[0]): str(row[at]) for row in listing.rows}


def test_a_run_whose_process_is_gone_is_listed_interrupted(db_path: Path) -> None:
    store = Store(db_path)
    store.migrate()
    _running(store, "r-killed")
    _running(store, "r-old")  # no lock file: an older juryflow's run, left as stored
    with _held(db_path, "r-killed"):
        assert is_live(db_path, "r-killed") is True
        assert _statuses(store) == {"r-killed": "running", "r-old": "running"}
    assert liveness_path(db_path, "r-killed").exists()
    assert is_live(db_path, "r-killed") is False
    assert is_live(db_path, "r-old") is None
    assert _statuses(store) == {"r-killed": "interrupted", "r-old": "running"}
    assert _statuses(store, "running") == {"r-old": "running"}


def test_the_lock_is_dropped_once_the_end_is_recorded(db_path: Path) -> None:
    store = Store(db_path)
    store.migrate()
    _running(store, "r1")
    assert hold(db_path, "r1")
    assert hold(db_path, "r1")  # taken again by the same process: still one lock
    assert is_live(db_path, "r1") is True
    store.finish_run("r1", "completed")
    # issue 43: the lock file goes with the lock, once the end is recorded
    assert not liveness_path(db_path, "r1").exists()
    assert is_live(db_path, "r1") is None
    release(db_path, "r1")  # nothing left to release


def test_a_second_process_claiming_a_held_run_is_refused_naming_the_holder(
    db_path: Path,
) -> None:
    """Issue 44: the lock keeps a run to one process; the refusal names that process."""
    from juryflow.storage.store.liveness import RunHeld, claim

    with _held(db_path, "r-busy") as pid:
        try:
            claim(db_path, "r-busy", "resume")
        except RunHeld as held:
            refusal = str(held)
        else:
            raise AssertionError("claimed a run another process holds")
    assert refusal == f"run r-busy is being run by process {pid}; wait for it or stop it"
    claim(db_path, "r-busy", "resume")  # its holder gone, the run is this process's
    assert is_live(db_path, "r-busy") is True
    assert liveness_path(db_path, "r-busy").read_text() == f"{os.getpid()} resume\n"
    release(db_path, "r-busy")


HOLDER_OF_THE_STORE_TOO = """
import sys, duckdb
from pathlib import Path
from juryflow.storage.store.liveness import hold
assert hold(Path(sys.argv[1]), sys.argv[2])
con = duckdb.connect(sys.argv[1])  # as a chunk being written holds it
print("held", flush=True)
sys.stdin.readline()  # until the test says so
"""


def test_a_second_resume_is_refused_while_the_first_holds_the_store(db_path: Path) -> None:
    """Seen in CI: the first `--resume` stopped while it wrote a chunk (it held the store),
    and the second waited for the store, without end, before it looked at the run's lock.
    The lock is now looked at first."""
    store = Store(db_path)
    store.migrate()
    _running(store, "r-writing")
    with _held(db_path, "r-writing", HOLDER_OF_THE_STORE_TOO) as pid:
        second = subprocess.run(
            [sys.executable, "-m", "juryflow", "run", "--resume", "r-writing", "--db",
             str(db_path)],
            capture_output=True, text=True, timeout=300,  # only ends a stuck test
        )  # fmt: skip
    assert second.returncode == 2, second.stdout + second.stderr
    assert second.stderr.strip().splitlines()[-1] == (
        f"error: run r-writing is being run by process {pid}; wait for it or stop it"
    )
