"""Issue 10, "inputs checked up front": every numeric option is range-checked before any
work starts, and --resume refuses a dataset that changed since the run started.

Each test first reproduces the attack: ``--chunk-size 0`` used to complete with 0 items and
exit 0; ``--resume`` silently mixed edited, deleted and added rows into the run.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.planning.run_request import RunRequest
from juryflow.planning.run_setup import RunSetupError, preflight_resume
from juryflow.storage.datasets import dataset_fingerprint
from juryflow.storage.store import Store
from tests.conftest import SAMPLE

runner = CliRunner()


def _one_clear_failure(args: list[str], *needles: str) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    for needle in needles:
        assert needle in result.output, result.output
    return result.output


# -- numeric options, every command -----------------------------------------------------

BAD_NUMBERS: list[tuple[list[str], str]] = [
    (["run", "--chunk-size", "0"], "--chunk-size"),
    (["run", "--chunk-size", "-5"], "--chunk-size"),
    (["run", "--chunk-size", "99999999999999999999999"], "--chunk-size"),
    (["run", "--max-chars", "0"], "--max-chars"),
    (["run", "--max-chars", "-1"], "--max-chars"),
    (["regression", "--max-mean-increase", "1.5"], "--max-mean-increase"),
    (["regression", "--max-mean-increase", "-0.1"], "--max-mean-increase"),
    (["regression", "--max-judge-drift", "-1"], "--max-judge-drift"),
    (["regression", "--max-agreement-drop", "3"], "--max-agreement-drop"),
    (["regression", "--p-value-alpha", "2"], "--p-value-alpha"),
    (["regression", "--p-value-alpha", "-0.05"], "--p-value-alpha"),
    (["regression", "--max-flips-to-hallucinated", "-1"], "--max-flips-to-hallucinated"),
    (["regression", "--quorum", "0"], "--quorum"),
    (["reaggregate", "r", "--quorum", "0"], "--quorum"),
    (["reaggregate", "r", "--min-votes", "0"], "--min-votes"),
    (["calibrate", "--folds", "1"], "--folds"),
    (["calibrate", "--seed", "-1"], "--seed"),
    (["disagreements", "--top", "0"], "--top"),
    (["disagreements", "--top", "10000000000"], "--top"),
    (["sql", "SELECT 1", "--limit", "0"], "--limit"),
    (["sql", "SELECT 1", "--limit", "-3"], "--limit"),
    (["stub-server", "--port", "0"], "--port"),
    (["stub-server", "--port", "65536"], "--port"),
    (["stub-server", "--port", "-1"], "--port"),
    (["stub-server", "--fault-429", "1.5"], "--fault-429"),
    (["stub-server", "--malformed", "-0.2"], "--malformed"),
    (["stub-server", "--latency-ms", "-10"], "--latency-ms"),
    (["stub-server", "--fault-500", "0.6", "--fault-drop", "0.6"], "at most 1"),
    (["report", "--top", "0"], "--top"),
]


@pytest.mark.parametrize(
    ("args", "named"), BAD_NUMBERS, ids=lambda v: " ".join(v) if isinstance(v, list) else v
)
def test_a_number_out_of_range_is_refused_before_any_work(
    tmp_path: Path, args: list[str], named: str
) -> None:
    db = tmp_path / "never.duckdb"
    if args[0] != "stub-server":
        args = [*args, "--db", str(db)]
    _one_clear_failure(args, named)
    assert not db.exists(), "the store was touched before the input was checked"


def test_chunk_size_zero_used_to_finish_with_no_items(tmp_path: Path) -> None:
    """The attack as reported, at the flow's own door: a flow called directly (a deployment,
    a script) gets the same refusal as the command line, before the store is opened. The
    refusal is the request's own: ``RunRequest.of`` says it in one line, and the flow's
    parameter validation refuses the same request before the flow body starts."""
    from prefect.exceptions import ParameterTypeError

    from juryflow.flows.evaluate import evaluate

    db = tmp_path / "s.duckdb"
    for chunk_size, max_chars, flag in ((0, 10, "--chunk-size 0"), (5, 0, "--max-chars 0")):
        settings = dict(db=str(db), chunk_size=chunk_size, max_chars=max_chars)
        with pytest.raises(RunSetupError, match=flag):
            RunRequest.of(dataset=str(SAMPLE), **settings)
        with pytest.raises(ParameterTypeError, match=flag):
            asyncio.run(evaluate(request=settings))  # type: ignore[arg-type]  # a deployment's
    assert not db.exists()


# -- --resume and the dataset's fingerprint ---------------------------------------------


def _small_dataset(path: Path, rows: int = 6) -> Path:
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()[:rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _run_offline(dataset: Path, db: Path) -> str:
    result = runner.invoke(app, ["run", str(dataset), "--db", str(db), "--chunk-size", "2"])
    assert result.exit_code == 0, result.output
    run_id = Store(db).latest_run_id()
    assert run_id is not None
    return run_id


def _judgment_count(db: Path, run_id: str) -> int:
    _, rows = Store(db).query("SELECT count(*) FROM judgments WHERE run_id = ?", [run_id])
    return int(rows[0][0])


@pytest.fixture
def finished_run(tmp_path: Path, prefect_harness: None) -> tuple[Path, Path, str]:
    dataset = _small_dataset(tmp_path / "items.jsonl")
    db = tmp_path / "store.duckdb"
    return dataset, db, _run_offline(dataset, db)


def test_a_run_records_the_fingerprint_of_its_dataset(
    finished_run: tuple[Path, Path, str],
) -> None:
    dataset, db, run_id = finished_run
    run = Store(db).get_run(run_id)
    assert run is not None
    assert run.dataset_fingerprint == dataset_fingerprint(dataset)
    assert run.dataset_fingerprint.endswith(f":{dataset.stat().st_size}")


def _edit_first_response(dataset: Path) -> None:
    rows = [json.loads(line) for line in dataset.read_text(encoding="utf-8").splitlines()]
    rows[0]["response"] = rows[0]["response"].replace("a", "o", 1)  # same length
    dataset.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")


def _delete_a_row(dataset: Path) -> None:
    lines = dataset.read_text(encoding="utf-8").splitlines()
    dataset.write_text("\n".join(lines[:2] + lines[3:]) + "\n", encoding="utf-8")


def _add_a_row(dataset: Path) -> None:
    extra = SAMPLE.read_text(encoding="utf-8").splitlines()[20]
    with dataset.open("a", encoding="utf-8") as handle:
        handle.write(extra + "\n")


@pytest.mark.parametrize("change", [_edit_first_response, _delete_a_row, _add_a_row])
def test_resume_refuses_a_dataset_that_changed(
    finished_run: tuple[Path, Path, str], change: object
) -> None:
    dataset, db, run_id = finished_run
    before = _judgment_count(db, run_id)
    assert callable(change)
    change(dataset)
    out = _one_clear_failure(
        ["run", "--resume", run_id, "--db", str(db)], "changed since the run started"
    )
    assert str(dataset) in out.replace("\n", "")
    assert _judgment_count(db, run_id) == before
    run = Store(db).get_run(run_id)
    assert run is not None and run.status == "completed"  # not marked running again


def test_resume_refuses_a_dataset_that_is_gone(finished_run: tuple[Path, Path, str]) -> None:
    dataset, db, run_id = finished_run
    dataset.unlink()
    _one_clear_failure(["run", "--resume", run_id, "--db", str(db)], "is gone")


def test_an_unchanged_dataset_resumes(finished_run: tuple[Path, Path, str]) -> None:
    _, db, run_id = finished_run
    before = _judgment_count(db, run_id)
    result = runner.invoke(app, ["run", "--resume", run_id, "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output
    assert _judgment_count(db, run_id) == before  # nothing judged twice


def test_a_run_from_before_fingerprints_resumes_with_a_warning(
    finished_run: tuple[Path, Path, str],
) -> None:
    _, db, run_id = finished_run
    con = duckdb.connect(str(db))
    con.execute("UPDATE runs SET dataset_fingerprint = NULL WHERE run_id = ?", [run_id])
    con.close()
    assert any("cannot tell" in w for w in preflight_resume(RunRequest(db=str(db), resume=run_id)))
    result = runner.invoke(app, ["run", "--resume", run_id, "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output and "cannot tell" in result.output


def test_an_unknown_calibration_is_one_line_before_any_run(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    result = runner.invoke(app, ["run", str(SAMPLE), "--calibration", "nope", "--db", str(db)])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "no calibration 'nope'" in text and "juryflow calibrate" in text
    assert "Traceback" not in result.output
    assert Store(db).query("SELECT count(*) FROM runs")[1] == [(0,)]
