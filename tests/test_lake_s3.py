"""A lake whose data path is an S3 bucket (`--data-path s3://...`), over real HTTP.

The bucket is moto's S3 server on 127.0.0.1 (a stand-in: there is no network here), the
catalog a real PostgreSQL; DuckDB reaches the bucket through its httpfs extension, loaded
from the `duckdb-extension-httpfs` wheel, with the AWS_* variables as credentials.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.pg_server import PgServer, pg_server

__all__ = ["pg_server"]  # the fixture, imported so that pytest finds it here

REPO = Path(__file__).resolve().parents[1]
BUCKET = "juryflow-lake"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    pytest.importorskip("moto", reason="moto[server] (the dev extra) is not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(endpoint, timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "moto's S3 server did not start"
                time.sleep(0.1)
        assert httpx.put(f"{endpoint}/{BUCKET}", timeout=10).status_code == 200
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=10)


def juryflow(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "juryflow", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.slow
def test_a_lake_with_its_data_in_an_s3_bucket(
    pg_server: PgServer, s3_endpoint: str, tmp_path: Path
) -> None:
    dsn = pg_server.create_database(f"s3_{os.getpid()}")
    db = f"ducklake:postgres:{dsn}"
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "JURYFLOW_DB")}
    env |= {
        "AWS_ACCESS_KEY_ID": "test-key",
        "AWS_SECRET_ACCESS_KEY": "test-secret",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": s3_endpoint,
        "JURYFLOW_JOURNAL_DIR": str(tmp_path / "journals"),
    }
    run = juryflow(env, "run", "--db", db, "--data-path", f"s3://{BUCKET}/lake/")
    assert run.returncode == 0, run.stderr[-3000:]
    listing = httpx.get(f"{s3_endpoint}/{BUCKET}?list-type=2&prefix=lake/", timeout=10).text
    assert listing.count(".parquet</Key>") >= 5  # the run's rows are Parquet in the bucket
    # a later command finds the data path in the catalog: no --data-path needed
    agreement = juryflow(env, "agreement", "--db", db, "--format", "json")
    assert agreement.returncode == 0, agreement.stderr[-3000:]
    assert json.loads(agreement.stdout)["n_items"] == 60
    # juryflow sql reads the bucket's lake files, and nothing else in it
    counted = juryflow(env, "sql", "SELECT count(*) AS n FROM judgments", "--db", db, "-f", "csv")
    assert counted.returncode == 0, counted.stderr[-3000:]
    assert counted.stdout.split() == ["n", "180"]
    outside = juryflow(env, "sql", f"SELECT * FROM 's3://{BUCKET}/other/x.parquet'", "--db", db)
    assert outside.returncode == 2 and "Traceback" not in outside.stderr
    assert "file, network and extension access is off" in outside.stderr
