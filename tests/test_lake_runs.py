"""Many `juryflow run` processes on one DuckLake (PostgreSQL catalog), as on many machines.

Every test starts real `juryflow` processes against a real PostgreSQL (tests/pg_server.py)
and checks what issue 14 asks: every (item, judge) stored exactly once, consensus
identical to the same run on a DuckDB file, readers always on a consistent snapshot.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.storage.connection import StoreError, close_lakes
from juryflow.storage.store import Store
from tests.pg_server import PgServer, pg_server
from tests.prefect_server import shared_prefect_api
from tests.test_faults import synthetic_dataset

# the fixtures, imported so that pytest finds them here
__all__ = ["pg_server", "shared_prefect_api"]
pytestmark = pytest.mark.usefixtures("shared_prefect_api")

REPO = Path(__file__).resolve().parents[1]
_databases = iter(range(10_000))
# What the store's consensus is made of, item by item; identical across stores.
CONSENSUS = (
    "SELECT item_id, status, n_judges, n_answered, n_scored, score_median, score, "
    "hallucinated, chars_any, chars_all, "
    "(SELECT list((char_start, char_end, votes) ORDER BY span_index) FROM consensus_spans s "
    " WHERE s.run_id = c.run_id AND s.item_id = c.item_id) AS spans "
    "FROM consensus c WHERE run_id = ? ORDER BY item_id"
)
TWICE = (
    "SELECT count(*) FROM (SELECT item_id, judge_id FROM judgments WHERE run_id = ? "
    "GROUP BY ALL HAVING count(*) > 1)"
)


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> Iterator[str]:
    """``--db`` of a new lake (its data path in JURYFLOW_DATA_PATH of the children)."""
    dsn = pg_server.create_database(f"runs_{os.getpid()}_{next(_databases)}")
    yield f"ducklake:postgres:{dsn}"
    close_lakes()


def lake_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)  # PREFECT_API_URL: the module's one server
    env["JURYFLOW_DATA_PATH"] = str(tmp_path / "lake-data")
    env["JURYFLOW_JOURNAL_DIR"] = str(tmp_path / "journals")
    env["JURYFLOW_TEST_KEY"] = "sk-test-lake"
    return env


def juryflow(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "juryflow", *args],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(child: subprocess.Popen[str], timeout: float = 240) -> str:
    out, err = child.communicate(timeout=timeout)
    assert child.returncode == 0, f"exit {child.returncode}\n{out[-2000:]}\n{err[-3000:]}"
    return out


def rows(db: str | Path, sql: str, *parameters: object) -> list[tuple[object, ...]]:
    return Store(db).query(sql, parameters)[1]


def file_run(tmp_path: Path, env: dict[str, str], *args: str) -> list[tuple[object, ...]]:
    """The same evaluation on a DuckDB file: the consensus a lake must reproduce."""
    db = tmp_path / "reference.duckdb"
    finished(juryflow(env, "run", *args, "--db", str(db)))
    return rows(db, CONSENSUS, Store(db).latest_run_id())


@pytest.fixture(scope="module")
def sample_reference(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[object, ...]]:
    """The consensus of the bundled sample with the offline panel, run on a DuckDB file."""
    directory = tmp_path_factory.mktemp("reference")
    return file_run(directory, lake_env(directory))


@pytest.mark.slow
def test_three_runs_and_a_sql_reader_share_one_lake(
    lake: str, tmp_path: Path, sample_reference: list[tuple[object, ...]]
) -> None:
    env = lake_env(tmp_path)
    runs = [juryflow(env, "run", "--db", lake, "--suite", f"suite-{n}") for n in range(3)]
    # A fourth process reads all along; each answer is one statement, so one snapshot, in
    # which a chunk (its judgments and their consensus, one transaction) is whole or absent.
    reader_script = (
        "import subprocess, sys, pathlib\n"
        "stop = pathlib.Path(sys.argv[2])\n"
        "query = ('SELECT run_id, (SELECT count(*) FROM judgments j WHERE j.run_id = r.run_id),'"
        " ' (SELECT count(*) FROM consensus c WHERE c.run_id = r.run_id) FROM runs r')\n"
        "n = 0\n"
        "while not stop.exists() or n < 2:\n"
        "    out = subprocess.run([sys.executable, '-m', 'juryflow', 'sql', query, '--db',"
        " sys.argv[1], '--format', 'csv'], capture_output=True, text=True)\n"
        "    if out.returncode != 0 and n == 0 and ('no DuckLake store at' in out.stderr"
        " or 'does not exist' in out.stderr):\n"
        "        continue  # the runs have not created the lake (or its tables) yet\n"
        "    if out.returncode != 0:\n"
        "        sys.exit('sql failed: ' + out.stderr)\n"
        "    for line in out.stdout.splitlines()[1:]:\n"
        "        run, judgments, items = line.split(',')\n"
        "        if int(judgments) != 3 * int(items):\n"
        "            sys.exit('torn snapshot: ' + line)\n"
        "    n += 1\n"
        "print(n)\n"
    )
    stop = tmp_path / "stop-reading"
    reader = subprocess.Popen(
        [sys.executable, "-c", reader_script, lake, str(stop)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for child in runs:
            finished(child)
    finally:
        stop.touch()
    reads = int(finished(reader).strip())
    assert reads >= 2
    reference = sample_reference
    run_ids = [str(r[0]) for r in rows(lake, "SELECT run_id FROM runs ORDER BY run_id")]
    assert len(run_ids) == 3
    for run_id in run_ids:
        assert rows(lake, "SELECT status FROM runs WHERE run_id = ?", run_id) == [("completed",)]
        assert rows(lake, "SELECT count(*) FROM judgments WHERE run_id = ?", run_id) == [(180,)]
        assert rows(lake, TWICE, run_id) == [(0,)]
        assert rows(lake, CONSENSUS, run_id) == reference
        snapshot = rows(lake, "SELECT finished_snapshot FROM runs WHERE run_id = ?", run_id)
        assert snapshot[0][0] is not None


@pytest.mark.slow
def test_a_run_in_three_shards_from_three_processes(
    lake: str, tmp_path: Path, sample_reference: list[tuple[object, ...]]
) -> None:
    env = lake_env(tmp_path)
    shards = [
        juryflow(env, "run", "--db", lake, "--shard", f"{i}/3", "--run-id", "nightly")
        for i in (1, 2, 3)
    ]
    for child in shards:
        finished(child)
    owners = rows(lake, "SELECT shard, owner, finished_at IS NOT NULL FROM run_shards")
    assert sorted(shard for shard, _, _ in owners) == [1, 2, 3]
    assert len({owner for _, owner, _ in owners}) == 3  # three processes
    assert all(done for _, _, done in owners)
    assert rows(lake, "SELECT status FROM runs WHERE run_id = 'nightly'") == [("completed",)]
    assert rows(lake, "SELECT count(*) FROM judgments WHERE run_id = 'nightly'") == [(180,)]
    assert rows(lake, TWICE, "nightly") == [(0,)]
    # each shard judged only its own items: every item's judges sit in one shard
    split = rows(lake, "SELECT count(DISTINCT item_id) FROM items WHERE run_id = 'nightly'")
    assert split == [(60,)]
    assert rows(lake, CONSENSUS, "nightly") == sample_reference
    out = finished(juryflow(env, "finish", "nightly", "--db", lake))
    assert "completed; 3 shards finished, 60 items, 180 judgments" in out


def write_panel(path: Path, stub: StubHandle, concurrency: int) -> Path:
    path.write_text(
        "name: lake-stub\njudges:\n"
        + "".join(
            f"  - {{id: {judge}, provider: openai, model: gpt-{judge}, prompt: data2txt_spans, "
            f"base_url: '{stub.openai_base_url}', api_key_env: JURYFLOW_TEST_KEY, "
            f"max_concurrency: {concurrency}}}\n"
            for judge in ("a", "b", "c")
        ),
        encoding="utf-8",
    )
    return path


def stored_judgments(lake: str) -> int:
    try:
        count = rows(lake, "SELECT count(*) FROM judgments WHERE run_id = 'r'")[0][0]
    except (StoreError, duckdb.Error):  # the lake may not exist yet
        count = 0
    finally:
        close_lakes()
    return count if isinstance(count, int) else 0


@pytest.mark.slow
def test_a_killed_shard_and_a_shard_taken_over_elsewhere_end_in_one_complete_run(
    lake: str, tmp_path: Path
) -> None:
    """Shard 1 is killed with SIGKILL; shard 2's claim, lapsed, is taken over from another
    machine while it runs. Shard 2 learns it at its next renewal, stops and stores nothing
    more; shard 1, run again, takes over from its dead owner; nothing is stored twice."""
    env = {**lake_env(tmp_path), "JURYFLOW_SHARD_LEASE_SECONDS": "3"}
    # Enough items that shard 2 is still judging when the takeover lands, however slowly a
    # loaded machine gets there (with 150 it once finished first, under two CPU hogs).
    dataset = synthetic_dataset(tmp_path / "items.jsonl", 300)
    with running_stub_server(StubConfig(latency_ms=200, seed=3)) as stub:
        slow = write_panel(tmp_path / "slow.yaml", stub, concurrency=2)
        common = [str(dataset), "--panel", str(slow), "--db", lake, "--chunk-size", "10"]
        first, second = (
            juryflow(env, "run", *common, "--shard", f"{i}/3", "--run-id", "r") for i in (1, 2)
        )
        deadline = time.monotonic() + 120
        while stored_judgments(lake) < 60 and time.monotonic() < deadline:
            assert first.poll() is None, first.communicate()
            assert second.poll() is None, second.communicate()
            time.sleep(0.2)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)

        def take_over(con: duckdb.DuckDBPyConnection) -> None:
            con.execute(
                "UPDATE run_shards SET owner = 'elsewhere:7', claimed_at = now(), "
                "renewed_at = now() WHERE run_id = 'r' AND shard = 2"
            )

        Store(lake).transact(take_over, "take shard 2 over")
        close_lakes()
        out, err = second.communicate(timeout=60)
        assert second.returncode == 2, out + err
        said = " ".join(err.split())
        assert "shard 2/3 of run r was taken over by elsewhere:7" in said, said
        assert "Traceback" not in err
        stopped_at = stored_judgments(lake)
        assert 60 <= stopped_at < 600
        assert rows(lake, "SELECT shard, owner <> '', finished_at FROM run_shards ORDER BY 1") == [
            (1, True, None),  # killed: its claim stays, its process is gone
            (2, True, None),  # the new owner's: the stopped process left it alone
            (3, False, None),
        ]
        assert rows(lake, "SELECT owner FROM run_shards WHERE shard = 2") == [("elsewhere:7",)]
        # ... and it left the run's status alone too: the run is the new owner's
        assert rows(lake, "SELECT status FROM runs WHERE run_id = 'r'") == [("running",)]
        close_lakes()
        # shard 3; shard 1 again (its owner is dead, so it is taken over); shard 2 from here,
        # as its new owner would, with --take-over
        rest = [
            juryflow(env, "run", *common, "--shard", "3/3", "--run-id", "r"),
            juryflow(env, "run", *common, "--shard", "1/3", "--run-id", "r"),
            juryflow(env, "run", *common, "--shard", "2/3", "--run-id", "r", "--take-over"),
        ]
        for child in rest:
            finished(child)
        fast = write_panel(tmp_path / "fast.yaml", stub, concurrency=32)
        reference = file_run(tmp_path, env, str(dataset), "--panel", str(fast))
    assert rows(lake, "SELECT count(*) FROM judgments WHERE run_id = 'r'") == [(900,)]
    assert rows(lake, TWICE, "r") == [(0,)]
    assert rows(lake, "SELECT status FROM runs WHERE run_id = 'r'") == [("completed",)]
    assert rows(lake, CONSENSUS, "r") == reference
