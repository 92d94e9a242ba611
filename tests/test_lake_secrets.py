"""A lake's catalog password never reaches Prefect (issue 44, point 1).

Before: `juryflow run --db "ducklake:postgres:... password=PGSECRET9931"` printed
`password=***`, yet Prefect's `/flow_runs/filter` returned the flow's `db` parameter with
the password, and `prefect.db-wal` held three copies. Now the command line moves a literal
password to its own environment (`$JURYFLOW_LAKE_PASSWORD`) and hands every flow
`password=${JURYFLOW_LAKE_PASSWORD}`, resolved only where DuckDB attaches the lake.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from juryflow.storage.connection import StoreError
from juryflow.storage.lake.attach import SEALED_PASSWORD_ENV, parse_lake_target, seal
from tests.pg_server import PgServer, pg_server
from tests.prefect_server import running_prefect_server

__all__ = ["pg_server"]
REPO = Path(__file__).resolve().parents[1]
SECRET = "PGSECRET9931"


def test_a_literal_password_is_moved_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SEALED_PASSWORD_ENV, raising=False)
    sealed = seal(f"ducklake:postgres:dbname=x host=h password='{SECRET} x' user=u")
    assert sealed is not None and SECRET not in sealed
    assert os.environ[SEALED_PASSWORD_ENV] == f"{SECRET} x"
    target = parse_lake_target(sealed)
    # Messages show the reference (no secret); only the ATTACH string holds the value.
    assert SECRET not in str(target) and "${JURYFLOW_LAKE_PASSWORD}" in str(target)
    assert f"password='{SECRET} x'" in target.attach_path
    # A reference, a DuckDB file and a file-backed lake pass through untouched.
    for same in ("ducklake:postgres:dbname=x password=${PGPW}", "store.duckdb", None,
                 "ducklake:catalog.ducklake"):  # fmt: skip
        assert seal(same) == same


def test_an_unset_reference_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("JURYFLOW_NOT_SET", raising=False)
    target = parse_lake_target("ducklake:postgres:dbname=x password=${JURYFLOW_NOT_SET}")
    with pytest.raises(StoreError, match=r"no JURYFLOW_NOT_SET: export it"):
        _ = target.attach_path


def test_a_quoted_password_keeps_its_quotes_and_backslashes() -> None:
    sealed = seal(r"ducklake:postgres:dbname=x password='it\'s \\ ok'")
    assert sealed is not None
    assert os.environ[SEALED_PASSWORD_ENV] == "it's \\ ok"
    assert parse_lake_target(sealed).attach_path.endswith(r"password='it\'s \\ ok'")


# a PostgreSQL server, a Prefect server and a lake run (about 30 s), in the default run:
# no other test reads Prefect's database for a secret
def test_a_lake_run_leaves_no_catalog_password_in_prefect(
    pg_server: PgServer, tmp_path: Path
) -> None:
    dsn = pg_server.create_database(f"secrets_{os.getpid()}")
    db = f"ducklake:postgres:{dsn} password={SECRET}"
    with running_prefect_server(tmp_path) as env:
        env = {**env, "JURYFLOW_DATA_PATH": str(tmp_path / "lake-data"),
               "JURYFLOW_JOURNAL_DIR": str(tmp_path / "journals")}  # fmt: skip
        env.pop(SEALED_PASSWORD_ENV, None)
        done = subprocess.run(
            [sys.executable, "-m", "juryflow", "run", "--limit", "3", "--db", db],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert SECRET not in done.stdout + done.stderr
        api = env["PREFECT_API_URL"]
        flow_runs = httpx.post(f"{api}/flow_runs/filter", json={}, timeout=30).json()
        assert flow_runs and all(SECRET not in str(run["parameters"]) for run in flow_runs)
        assert any("JURYFLOW_LAKE_PASSWORD" in str(run["parameters"]) for run in flow_runs)
        logs = httpx.post(f"{api}/logs/filter", json={}, timeout=30).text
        assert SECRET not in logs
    # The server is stopped: its database and write-ahead log hold no copy either.
    home = Path(env["PREFECT_HOME"])
    for path in home.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
