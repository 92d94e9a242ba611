"""`juryflow regression` names its baseline and warns when it is not comparable (issue 28,
point 4).

A user ran `juryflow regression` with the default baseline; it chose the suite's newest
successful run, a 10-item `--limit` run that also used a calibration, and printed only "no
regression" (10 of 60 items paired). Now the line names the baseline and the paired count,
and one warning line each says that few items paired and that the calibration differs.
The warnings themselves: :func:`juryflow.analysis.regression_baseline.baseline_warnings`.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from juryflow.analysis.regression_baseline import baseline_warnings
from juryflow.cli import app
from juryflow.storage.store import RunRecord, Store

runner = CliRunner()
WIDE = {"COLUMNS": "250"}

_JUDGE = {"id": "numbers", "provider": "offline", "detector": "numbers", "max_concurrency": 8}
BASE = RunRecord(
    run_id="run-new",
    kind="evaluate",
    suite="sample:offline",
    status="completed",
    started_at=datetime(2026, 1, 2, tzinfo=UTC),
    finished_at=None,
    dataset="sample.jsonl",
    panel_name="offline",
    panel={"name": "offline", "judges": [_JUDGE, {**_JUDGE, "id": "names"}]},
    prompts=[],
    quorum=2,
    n_judges=2,
    parameters={"calibration": None, "limit": None, "sample": None},
    consensus={"score": "median", "spans": "union", "verdict": "spans"},
)


def _baseline(**changes: Any) -> RunRecord:
    return dataclasses.replace(BASE, run_id="run-old", **changes)


def test_a_comparable_baseline_warns_of_nothing() -> None:
    # pacing settings do not change what a judge answers
    paced = {**BASE.panel, "judges": [{**_JUDGE, "max_concurrency": 2}, {**_JUDGE, "id": "names"}]}
    assert baseline_warnings(BASE, _baseline(panel=paced), 60, 60) == []
    assert baseline_warnings(BASE, _baseline(), 60, 49) == []  # 82 % paired


def test_few_pairs_are_warned_of_naming_the_limit() -> None:
    small = _baseline(parameters={**(BASE.parameters or {}), "limit": 10})
    (warning,) = baseline_warnings(BASE, small, 60, 10)
    assert warning.startswith("only 10 of the 60 items run run-new judged pair with baseline ")
    assert "run-old (a --limit 10 run) (17 %)" in warning and "--baseline RUN" in warning


def test_another_panel_calibration_or_rule_is_one_line_each() -> None:
    other_panel = {"name": "x", "judges": [{**_JUDGE, "detector": "content"}]}
    (panel,) = baseline_warnings(BASE, _baseline(panel=other_panel), 60, 60)
    assert "another panel (judges added: names; judges configured otherwise: numbers)" in panel

    calibrated = _baseline(
        parameters={**(BASE.parameters or {}), "calibration": "mine"},
        consensus={**(BASE.consensus or {}), "spans": "majority", "name": "mine"},
    )
    (calibration,) = baseline_warnings(BASE, calibrated, 60, 60)
    assert "baseline run-old used calibration 'mine', run run-new no calibration" in calibration

    ruled = _baseline(consensus={**(BASE.consensus or {}), "spans": "majority"}, quorum=1)
    (rule,) = baseline_warnings(BASE, ruled, 60, 60)
    assert "another rule (quorum 1, now 2; spans majority, now union)" in rule


def _invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env=WIDE)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.usefixtures("prefect_harness")
def test_the_default_baseline_a_calibrated_limit_run_is_named_and_warned_of(
    db_path: Path,
) -> None:
    db = str(db_path)
    code, out, err = _invoke("run", "--db", db)
    assert code == 0, out + err
    full = Store(db_path).latest_run_id()
    code, out, err = _invoke("calibrate", "--db", db, "--name", "mine")
    assert code == 0, out + err
    code, out, err = _invoke("run", "--db", db, "--limit", "10", "--calibration", "mine")
    assert code == 0, out + err
    small = Store(db_path).latest_run_id()
    assert small is not None and small != full

    code, out, err = _invoke("regression", "--db", db)
    assert code in (0, 1), out + err  # a calibrated baseline may differ enough to regress
    said = " ".join((out + err).split())
    assert f"vs baseline {small} (the suite's last successful run): 10 of 60 items paired" in said
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 2, err
    assert "only 10 of the 60 items" in warnings[0] and "(a --limit 10 run)" in warnings[0]
    assert "used calibration 'mine'" in warnings[1] and "no calibration" in warnings[1]

    # the full run, pinned: all items pair, same panel and rule, nothing to warn of
    code, out, err = _invoke("regression", "--db", db, "--baseline", str(full))
    assert code == 0, out + err
    assert f"vs baseline {full} (pinned): 60 of 60 items paired; no regression" in " ".join(
        out.split()
    )
    assert "warning:" not in err


@pytest.mark.usefixtures("prefect_harness")
def test_a_regression_names_its_baseline_on_stderr_too(tmp_path: Path, db_path: Path) -> None:
    from tests.test_regression import PANEL, SAMPLE

    subset = tmp_path / "subset.jsonl"
    subset.write_text(
        "\n".join(SAMPLE.read_text(encoding="utf-8").splitlines()[:30]) + "\n", encoding="utf-8"
    )
    good, changed = tmp_path / "good.yaml", tmp_path / "changed.yaml"
    good.write_text(PANEL.format(numbers="numbers"), encoding="utf-8")
    # same judge ids and panel name (so the same suite), but 'numbers' runs another detector
    changed.write_text(PANEL.format(numbers="content"), encoding="utf-8")
    common = ["regression", str(subset), "--db", str(db_path)]
    code, out, err = _invoke(*common, "--panel", str(good))
    assert code == 0 and "is the baseline" in out, out + err
    baseline = Store(db_path).latest_run_id()

    code, out, err = _invoke(*common, "--panel", str(changed))
    assert code == 1, out + err
    said = " ".join(err.split())
    chosen = f"vs baseline {baseline} (the suite's last successful run)"
    assert f"{chosen}: 30 of 30 items paired; regressed: " in said
    assert "judge 'numbers' drifted" in said
    assert "warning: baseline " in said and "judges configured otherwise: numbers" in said
