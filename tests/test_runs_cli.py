"""`juryflow runs`, `juryflow export`, run ids by unique prefix in every command, wrong run
ids as one line (exit 2), and a resumed run that keeps its own options.

One store with two real offline runs of the bundled sample is shared by the module; tests
that change a store work on a copy of it.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.planning.run_request import RunRequest
from juryflow.planning.run_setup import plan_run, resume_conflicts
from juryflow.storage.reads.run_queries import RunIdError, resolve_run_id
from juryflow.storage.store import Store
from tests.conftest import REPO, SAMPLE

runner = CliRunner()
WIDE = {"COLUMNS": "250"}


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=WIDE)
    return result.exit_code, result.output


@dataclass(frozen=True)
class TwoRuns:
    db: str
    cached: str
    """Run with the default options (uses the cache, chunk size 200)."""
    uncached: str
    """Run started with --no-cache --chunk-size 20."""


@pytest.fixture(scope="module")
def two_runs(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> TwoRuns:
    db = str(tmp_path_factory.mktemp("runs") / "runs.duckdb")
    first = runner.invoke(app, ["run", str(SAMPLE), "--db", db, "--no-cache", "--chunk-size", "20"])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, ["run", str(SAMPLE), "--db", db])
    assert second.exit_code == 0, second.output
    _, rows = Store(db).query("SELECT run_id FROM runs ORDER BY started_at")
    uncached, cached = (str(r[0]) for r in rows)
    return TwoRuns(db, cached=cached, uncached=uncached)


def copy_store(runs: TwoRuns, tmp_path: Path) -> str:
    target = tmp_path / "copy.duckdb"
    shutil.copyfile(runs.db, target)
    return str(target)


def one_line_error(code: int, out: str) -> str:
    """The output of a refused command: exit 2, a single `error:` line, no traceback."""
    assert code == 2, out
    assert "Traceback" not in out, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    return lines[0]


# -- juryflow runs --------------------------------------------------------------------------


def test_runs_lists_both_runs_newest_first(two_runs: TwoRuns) -> None:
    code, out = invoke("runs", "--db", two_runs.db, "--format", "json")
    assert code == 0, out
    listed = json.loads(out)
    assert [r["run_id"] for r in listed] == [two_runs.cached, two_runs.uncached]
    for row in listed:
        assert row["status"] == "completed" and row["kind"] == "evaluate"
        assert row["panel"] == "offline-default" and row["dataset"] == str(SAMPLE)
        assert row["items"] == 60 and row["judgments"] == 180 and row["unscored"] == 0
        assert row["duration_s"] > 0 and row["started_at"]
        assert "cost_usd" in row


def test_runs_table_csv_limit_and_status(two_runs: TwoRuns) -> None:
    code, out = invoke("runs", "--db", two_runs.db)
    assert code == 0, out
    for expected in (two_runs.cached, two_runs.uncached, "completed", "offline", SAMPLE.name):
        assert expected in out, expected
    code, out = invoke("runs", "--db", two_runs.db, "--format", "csv", "--limit", "1")
    assert code == 0, out
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["run_id"] for r in rows] == [two_runs.cached]
    code, out = invoke("runs", "--db", two_runs.db, "--status", "failed")
    assert code == 0 and "no runs with status 'failed'" in out, out


def test_runs_on_a_missing_store_is_one_line(tmp_path: Path) -> None:
    line = one_line_error(*invoke("runs", "--db", str(tmp_path / "none.duckdb")))
    assert "no juryflow store" in line
    one_line_error(*invoke("runs", "--db", str(tmp_path / "x"), "--format", "xml"))


# -- run ids by unique prefix -----------------------------------------------------------------


def test_resolve_run_id_exact_prefix_ambiguous_and_unknown(two_runs: TwoRuns) -> None:
    store = Store(two_runs.db)
    assert resolve_run_id(store, two_runs.cached) == two_runs.cached
    assert resolve_run_id(store, two_runs.cached[:-2]) == two_runs.cached
    with pytest.raises(RunIdError, match="ambiguous") as ambiguous:
        resolve_run_id(store, two_runs.cached[:4])
    assert two_runs.cached in str(ambiguous.value) and two_runs.uncached in str(ambiguous.value)
    with pytest.raises(RunIdError, match="`juryflow runs` lists them"):
        resolve_run_id(store, "nope")
    # a LIKE wildcard is a character here, not "any run"
    with pytest.raises(RunIdError, match="no run"):
        resolve_run_id(store, "%")


def test_agreement_and_disagreements_take_a_prefix(two_runs: TwoRuns) -> None:
    prefix = two_runs.uncached[:-2]
    code, out = invoke("agreement", prefix, "--db", two_runs.db, "--format", "json")
    assert code == 0, out
    assert json.loads(out)["run_id"] == two_runs.uncached
    code, out = invoke("disagreements", prefix, "--db", two_runs.db, "--format", "json", "-n", "2")
    assert code == 0, out
    assert len(json.loads(out)) == 2


def test_report_takes_a_prefix(two_runs: TwoRuns, tmp_path: Path) -> None:
    target = tmp_path / "r.html"
    code, out = invoke("report", two_runs.uncached[:-2], "--db", two_runs.db, "-o", str(target))
    assert code == 0, out
    assert two_runs.uncached in out and target.is_file()


def test_reaggregate_takes_a_prefix(two_runs: TwoRuns, tmp_path: Path) -> None:
    db = copy_store(two_runs, tmp_path)
    code, out = invoke("reaggregate", two_runs.uncached[:-2], "--db", db)
    assert code == 0, out
    assert f"re-aggregates {two_runs.uncached}" in " ".join(out.split())


def test_an_ambiguous_prefix_names_the_candidates(two_runs: TwoRuns) -> None:
    line = one_line_error(*invoke("agreement", two_runs.cached[:4], "--db", two_runs.db))
    assert "ambiguous" in line and two_runs.cached in line and two_runs.uncached in line


RUN_COMMANDS = [
    pytest.param(["agreement", "nope"], id="agreement"),
    pytest.param(["disagreements", "nope"], id="disagreements"),
    pytest.param(["calibrate", "nope"], id="calibrate"),
    pytest.param(["reaggregate", "nope"], id="reaggregate"),
    pytest.param(["report", "nope", "-o", "{tmp}/r.html"], id="report"),
    pytest.param(["regression", str(SAMPLE), "--baseline", "nope"], id="regression-baseline"),
    pytest.param(["run", "--resume", "nope"], id="run-resume"),
    pytest.param(["export", "nope", "-o", "{tmp}/x.parquet"], id="export"),
]


@pytest.mark.parametrize("command", RUN_COMMANDS)
def test_a_wrong_run_id_is_one_line_and_exit_2(
    two_runs: TwoRuns, tmp_path: Path, command: list[str]
) -> None:
    db = copy_store(two_runs, tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    line = one_line_error(*invoke(*args, "--db", db))
    assert "no run 'nope'" in line and "juryflow runs" in line, line
    _, rows = Store(db).query("SELECT count(*) FROM runs")
    assert rows == [(2,)]  # nothing was started


# -- juryflow export --------------------------------------------------------------------------


def test_export_in_three_formats_reads_back(
    two_runs: TwoRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run = two_runs.uncached
    prefix = run[:-2]
    for fmt in ("parquet", "csv", "jsonl"):
        code, out = invoke("export", prefix, "--format", fmt, "--db", two_runs.db)
        assert code == 0, out
        assert "180 rows" in out
    table = pq.read_table(tmp_path / f"{run}.parquet")
    assert table.num_rows == 180
    assert set(table.column("judge_id").to_pylist()) == {"numbers", "names", "content"}
    assert set(table.column("run_id").to_pylist()) == {run}
    con = duckdb.connect()
    csv_rows = con.execute(
        "SELECT count(*), count(DISTINCT item_id), count(consensus_score) FROM read_csv(?)",
        [str(tmp_path / f"{run}.csv")],
    ).fetchone()
    assert csv_rows == (180, 60, 180)
    lines = (tmp_path / f"{run}.jsonl").read_text().splitlines()
    assert len(lines) == 180
    first = json.loads(lines[0])
    assert isinstance(first["judge_spans"], list | None)
    assert {"item_id", "judge_id", "score", "consensus_score", "consensus_hallucinated"} <= set(
        first
    )
    # the export agrees with the store, judgment for judgment
    _, stored = Store(two_runs.db).query(
        "SELECT item_id, judge_id, score FROM judgments WHERE run_id = ? ORDER BY ALL", [run]
    )
    exported = con.execute(
        "SELECT item_id, judge_id, score FROM read_parquet(?) ORDER BY ALL",
        [str(tmp_path / f"{run}.parquet")],
    ).fetchall()
    assert exported == stored


def test_export_refuses_to_overwrite_without_force(two_runs: TwoRuns, tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("keep me\n")
    args = ("export", two_runs.cached, "--format", "jsonl", "-o", str(target), "--db", two_runs.db)
    line = one_line_error(*invoke(*args))
    assert "--force" in line
    assert target.read_text() == "keep me\n"
    code, out = invoke(*args, "--force")
    assert code == 0, out
    assert len(target.read_text().splitlines()) == 180
    assert not list(tmp_path.glob(".*.partial"))


def test_export_refuses_an_unknown_format(two_runs: TwoRuns, tmp_path: Path) -> None:
    line = one_line_error(
        *invoke("export", two_runs.cached, "--format", "xlsx", "--db", two_runs.db)
    )
    assert "parquet, csv or jsonl" in line


# -- resume keeps the run's options ---------------------------------------------------------


CONFLICTS = [
    pytest.param(["--no-cache"], "cached", "--no-cache", id="no-cache"),
    pytest.param(["--chunk-size", "50"], "uncached", "--chunk-size 50", id="chunk-size"),
    pytest.param(["--max-chars", "10"], "uncached", "--max-chars 10", id="max-chars"),
    pytest.param(["--map", "response=reference"], "uncached", "--map", id="map"),
    pytest.param(["--suite", "other"], "uncached", "--suite other", id="suite"),
    pytest.param(
        ["--panel", str(REPO / "examples" / "panel.stub.yaml")], "uncached", "--panel", id="panel"
    ),
    pytest.param([str(REPO / "README.md")], "uncached", "DATASET", id="dataset"),
]


@pytest.mark.parametrize(("option", "which", "named"), CONFLICTS)
def test_resume_refuses_options_that_conflict_with_the_run(
    two_runs: TwoRuns, tmp_path: Path, option: list[str], which: str, named: str
) -> None:
    db = copy_store(two_runs, tmp_path)
    run_id = getattr(two_runs, which)
    line = one_line_error(*invoke("run", *option, "--resume", run_id[:-2], "--db", db))
    assert named in line and "drop" in line, line
    assert Store(db).get_run(run_id).status == "completed"  # type: ignore[union-attr]


def test_resume_accepts_the_runs_own_options(two_runs: TwoRuns) -> None:
    run = Store(two_runs.db).get_run(two_runs.uncached)
    assert run is not None
    same = RunRequest(
        dataset=str(SAMPLE),
        panel=str(REPO / "examples" / "panel.offline.yaml"),
        mapping={},
        chunk_size=20,
        max_chars=200_000,
        use_cache=False,
        suite=run.suite,
    )
    assert resume_conflicts(run, same) == []


def test_a_resumed_run_takes_its_options_from_the_store(two_runs: TwoRuns, tmp_path: Path) -> None:
    db = copy_store(two_runs, tmp_path)
    # The flow called with other options still uses the run's: no cache, chunks of 20.
    plan = plan_run(
        RunRequest(
            dataset=None,
            panel=None,
            db=db,
            resume=two_runs.uncached,
            suite=None,
            chunk_size=200,
            quorum=None,
            mapping={"response": "reference"},
            use_cache=True,
            max_chars=5,
        )
    )
    assert plan.use_cache is False
    assert (plan.chunk_size, plan.max_chars, plan.mapping) == (20, 200_000, {})


def test_resume_by_prefix_finishes_the_run_without_new_judgments(
    two_runs: TwoRuns, tmp_path: Path
) -> None:
    db = copy_store(two_runs, tmp_path)
    code, out = invoke("run", "--resume", two_runs.uncached[:-2], "--db", db)
    assert code == 0, out
    _, rows = Store(db).query(
        "SELECT count(*) FROM judgments WHERE run_id = ?", [two_runs.uncached]
    )
    assert rows == [(180,)]
    assert Store(db).get_run(two_runs.uncached).status == "completed"  # type: ignore[union-attr]


def test_export_to_dash_writes_standard_output(
    two_runs: TwoRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43: `export -o -` wrote a file named `-`; it is standard output, as for most
    command-line tools, and the row count goes to standard error."""
    monkeypatch.chdir(tmp_path)
    run = two_runs.uncached
    result = runner.invoke(app, ["export", run, "-f", "csv", "-o", "-", "--db", two_runs.db])
    assert result.exit_code == 0, result.output
    assert list(tmp_path.iterdir()) == []
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 180 and {row["run_id"] for row in rows} == {run}
    assert "180 rows" in result.stderr and "standard output" in result.stderr
