"""Deleting and pruning runs (issue 43): `juryflow runs delete RUN...` and `juryflow store
prune --keep N`, on real runs in a real DuckDB file.

Every row of a deleted run goes, in every table that has a ``run_id`` (read from the
catalogue, so none is forgotten), and comparisons on either side of it; the other runs keep
theirs. A suite's baseline, a run with reviewers' annotations and a run others were
reaggregated from are refused in one line unless --force.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

import juryflow
from juryflow.cli import app
from juryflow.storage.store import Store
from juryflow.storage.store.deletion import DeletionRefused

RUN_TABLES = (
    "SELECT DISTINCT table_name FROM duckdb_columns() WHERE column_name = 'run_id' "
    "AND database_name = current_database() AND NOT internal"
)


@pytest.fixture(scope="module")
def three_runs(
    prefect_harness: None, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[str]]:
    """Three runs of one suite on the bundled sample (oldest first)."""
    db = tmp_path_factory.mktemp("delete") / "store.duckdb"
    ids = [juryflow.run(db=db, progress=False, limit=6).run_id for _ in range(3)]
    return db, ids


def _copy(three_runs: tuple[Path, list[str]], tmp_path: Path) -> tuple[Path, list[str]]:
    db = tmp_path / "store.duckdb"
    shutil.copy(three_runs[0], db)
    return db, three_runs[1]


def _rows_of(db: Path, run_id: str) -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute(RUN_TABLES).fetchall()]
        return {
            t: int(con.execute(f'SELECT count(*) FROM "{t}" WHERE run_id = ?', [run_id])
                   .fetchone()[0])  # type: ignore[index]
            for t in tables
        }  # fmt: skip
    finally:
        con.close()


def test_a_deleted_run_leaves_no_row_and_the_others_keep_theirs(
    three_runs: tuple[Path, list[str]], tmp_path: Path
) -> None:
    db, (oldest, middle, _newest) = _copy(three_runs, tmp_path)
    before = _rows_of(db, middle)
    assert before["judgments"] > 0 and before["items"] == 6
    deleted = Store(db).delete_runs([oldest])
    assert deleted.run_ids == (oldest,) and deleted.rows["items"] == 6
    assert not any(_rows_of(db, oldest).values())
    assert _rows_of(db, middle) == before


def test_the_baseline_and_annotated_runs_are_refused_unless_forced(
    three_runs: tuple[Path, list[str]], tmp_path: Path
) -> None:
    db, (oldest, middle, newest) = _copy(three_runs, tmp_path)
    store = Store(db)
    with pytest.raises(DeletionRefused, match=r"is the baseline of suite .*--force deletes"):
        store.delete_runs([newest])
    with pytest.raises(DeletionRefused, match="no run nope"):
        store.delete_runs(["nope"])
    con = duckdb.connect(str(db))
    try:
        con.execute(
            "INSERT INTO annotations VALUES (1, ?, 'x', 'me', now(), true, '[]', '[]', '[]', '')",
            [middle],
        )
    finally:
        con.close()
    with pytest.raises(DeletionRefused, match="1 reviewers' annotations"):
        store.delete_runs([middle])
    assert store.delete_runs([middle, newest], force=True).run_ids == (middle, newest)
    assert [f.run_id for f in store.run_facts()] == [oldest]


def test_the_readme_delete_and_prune_commands(
    three_runs: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """README: `juryflow runs delete RUN` and `juryflow store prune --keep 1` (a dry run
    first)."""
    db, (oldest, middle, newest) = _copy(three_runs, tmp_path)
    runner = CliRunner()
    refused = runner.invoke(app, ["runs", "delete", newest, "--db", str(db)])
    assert refused.exit_code == 2 and "baseline" in refused.output
    done = runner.invoke(app, ["runs", "delete", oldest[:-2], "--db", str(db)])
    assert done.exit_code == 0, done.output
    assert f"deleted 1 run(s) ({oldest})" in " ".join(done.output.split())
    dry = runner.invoke(app, ["store", "prune", "--keep", "1", "--dry-run", "--db", str(db)])
    assert dry.exit_code == 0 and f"would delete 1 run(s): {middle}" in dry.output
    pruned = runner.invoke(app, ["store", "prune", "--keep", "1", "--db", str(db)])
    assert pruned.exit_code == 0, pruned.output
    assert [f.run_id for f in Store(db).run_facts()] == [newest]
    listed = runner.invoke(app, ["runs", "--db", str(db), "--format", "csv"])
    assert newest in listed.output and middle not in listed.output
