"""`juryflow calibrate` refuses too few labelled items (issue 28, point 5).

A user annotated one item, ran `juryflow calibrate --gold annotations`, and got a rule fitted
and stored from that one item with only an "unstable" note. Below
``MIN_LABELLED_PER_FOLD`` labelled items per fold the command now says so in one line,
naming the minimum and how to add labels, exits 2 and stores nothing. On a real offline run
of the bundled sample, annotated as a reviewer would (tests/test_export_annotations.py).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from juryflow.analysis.calibrate import MIN_LABELLED_PER_FOLD
from juryflow.cli import app
from juryflow.planning.run_request import RunRequest
from juryflow.storage.store import Store
from tests.test_export_annotations import _annotate_queue

runner = CliRunner()
WIDE = {"COLUMNS": "220"}


@pytest.fixture(scope="module")
def offline_run(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from juryflow.flows.evaluate import evaluate

    db = tmp_path_factory.mktemp("minimum") / "offline.duckdb"
    asyncio.run(evaluate(RunRequest(db=str(db))))
    return db


def _annotated(offline_run: Path, tmp_path: Path, n: int) -> tuple[Path, str]:
    db = tmp_path / f"annotated-{n}.duckdb"
    shutil.copy(offline_run, db)
    store = Store(db)
    run_id = store.latest_run_id()
    assert run_id is not None
    _annotate_queue(store, run_id, n)
    return db, run_id


def test_one_annotated_item_is_refused_in_one_line_naming_the_minimum(
    offline_run: Path, tmp_path: Path
) -> None:
    db, _ = _annotated(offline_run, tmp_path, 1)
    result = runner.invoke(app, ["calibrate", "--gold", "annotations", "--db", str(db)], env=WIDE)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    needed = 5 * MIN_LABELLED_PER_FOLD
    assert "has 1 item labelled by --gold annotations" in lines[0]
    assert f"at least {MIN_LABELLED_PER_FOLD} per fold, {needed} for --folds 5" in lines[0]
    assert "juryflow view" in lines[0] and "--folds 2" in lines[0]
    assert "Traceback" not in result.output
    assert Store(db).get_calibration("default") is None  # nothing stored


def test_the_minimum_follows_the_folds(offline_run: Path, tmp_path: Path) -> None:
    needed = 2 * MIN_LABELLED_PER_FOLD
    short, _ = _annotated(offline_run, tmp_path, needed - 1)
    args = ["calibrate", "--gold", "annotations", "--folds", "2", "--name", "two"]
    refused = runner.invoke(app, [*args, "--db", str(short)], env=WIDE)
    assert refused.exit_code == 2, refused.output
    assert f"has {needed - 1} items" in refused.stderr and f"{needed} for --folds 2" in (
        refused.stderr
    )
    assert Store(short).get_calibration("two") is None

    enough, run_id = _annotated(offline_run, tmp_path, needed)
    fitted = runner.invoke(app, [*args, "--db", str(enough)], env=WIDE)
    assert fitted.exit_code == 0, fitted.output
    stored = Store(enough).get_calibration("two")
    assert stored is not None and stored.run_id == run_id


def test_the_dataset_gold_names_its_own_way_to_add_labels(
    offline_run: Path, tmp_path: Path
) -> None:
    # the bundled sample is labelled throughout: 50 folds would need far more than it has
    db = tmp_path / "dataset.duckdb"
    shutil.copy(offline_run, db)
    result = runner.invoke(app, ["calibrate", "--folds", "50", "--db", str(db)], env=WIDE)
    assert result.exit_code == 2, result.output
    assert f"{50 * MIN_LABELLED_PER_FOLD} for --folds 50" in result.stderr
    assert "label more rows of its dataset" in result.stderr


def test_help_names_the_minimum() -> None:
    result = runner.invoke(app, ["calibrate", "--help"], env=WIDE)
    assert result.exit_code == 0
    text = " ".join(result.output.replace("│", " ").split())
    assert f"at least {MIN_LABELLED_PER_FOLD} labelled items" in text
    assert f"{5 * MIN_LABELLED_PER_FOLD} for 5 folds" in text
