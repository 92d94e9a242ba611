"""DuckDB's progress bar is off on every connection juryflow opens (issue 28, point 2).

DuckDB draws the bar on stdout once a query runs past two seconds: on a loaded machine it
landed in the JSON a test parsed. No query can be made reliably slow enough to draw it, so
these tests read the setting on each kind of connection instead, and parse `juryflow sql
--format json` and `--format csv` output. They run in a child process: under pytest DuckDB
starts with the bar off anyway, in a command-line process it starts with it on.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from juryflow.storage.connection import close_lakes
from juryflow.storage.store import Store

REPO = Path(__file__).resolve().parents[1]
_SETTING = "SELECT current_setting('enable_progress_bar') AS bar"

# Each kind of connection the store, the lake and `juryflow sql` open, with its setting.
_CHILD = textwrap.dedent(
    """
    import json, sys, duckdb
    from pathlib import Path
    from juryflow.storage.connection import close_lakes, connect
    from juryflow.storage.lake.attach import open_lake, parse_lake_target
    from juryflow.storage.sql_guard import confined_connection
    from juryflow.storage.store import Store

    store_file, lake_db, data = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    query = "SELECT current_setting('enable_progress_bar')"
    seen = {}
    def note(name, con):
        seen[name] = con.execute(query).fetchone()[0]
    plain = duckdb.connect()
    note("plain duckdb", plain)
    plain.close()
    for kind, db in (("file", store_file), ("lake", lake_db)):
        store = Store(db, data_path=data if kind == "lake" else None)
        with store.read() as con:
            note(kind + " read", con)
        with store.write() as con:
            note(kind + " write", con)
        with store.session(), store.read() as con:
            note(kind + " session", con)
    with connect(store_file, read_only=True) as con:
        note("connect", con)
    close_lakes()  # a DuckDB catalog file is attached once per process
    own = open_lake(parse_lake_target(lake_db, data), read_only=True)
    note("open_lake", own)
    own.close()
    for kind, target in (("file", store_file), ("lake", parse_lake_target(lake_db))):
        with confined_connection(target) as con:
            note("sql " + kind, con)
    print(json.dumps(seen))
    """
)


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    path = tmp_path / "store.duckdb"
    Store(path).migrate()
    return path


@pytest.fixture
def lake_db(tmp_path: Path) -> Iterator[str]:
    """A lake with a DuckDB catalog (no PostgreSQL needed), migrated."""
    db = f"ducklake:{tmp_path / 'catalog.ducklake'}"
    Store(db, data_path=str(tmp_path / "data")).migrate()
    close_lakes()  # the child opens the catalog file; this process lets it go
    yield db


def _child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )


def test_every_connection_of_the_store_the_lake_and_sql_has_the_bar_off(
    store_file: Path, lake_db: str, tmp_path: Path
) -> None:
    done = _child("-c", _CHILD, str(store_file), lake_db, str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    # DuckDB's own default in a command-line process: what the others must not keep
    assert seen.pop("plain duckdb") is True
    assert seen == dict.fromkeys(seen, False)
    assert len(seen) == 10


def test_juryflow_sql_json_and_csv_output_parse_with_the_bar_off(store_file: Path) -> None:
    sql = ["-m", "juryflow", "sql", _SETTING, "--db", str(store_file), "--format"]
    as_json = _child(*sql, "json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == [{"bar": False}]
    as_csv = _child(*sql, "csv")
    assert as_csv.returncode == 0, as_csv.stderr
    assert list(csv.DictReader(io.StringIO(as_csv.stdout))) == [{"bar": "False"}]
