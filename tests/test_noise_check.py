"""The A/A check's choices before it judges anything: which panel file re-judges the
baseline as it was judged, and refusals that name the fix (no Prefect, no model call)."""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from juryflow.flows.noise_check import (
    NoiseCheckError,
    baseline_panel,
    noise_check,
    runnable_copy,
)
from juryflow.judges.panel import DEFAULT_PANEL, load_panel
from juryflow.planning.run_request import RunRequest
from juryflow.storage.datasets import dataset_fingerprint
from juryflow.storage.store import RunRecord, Store
from tests.conftest import REPO, SAMPLE

OFFLINE = REPO / "examples" / "panel.offline.yaml"


def _baseline(panel: dict[str, object], dataset: Path = SAMPLE) -> RunRecord:
    return RunRecord(
        run_id="base",
        kind="evaluate",
        suite="s",
        status="completed",
        started_at=datetime.now(UTC),
        finished_at=None,
        dataset=str(dataset),
        panel_name=str(panel.get("name")),
        panel=panel,
        prompts=[],
        quorum=2,
        n_judges=3,
        dataset_fingerprint=dataset_fingerprint(dataset),
    )


def test_the_given_panel_is_used_when_it_is_the_baselines() -> None:
    run = _baseline(load_panel(OFFLINE).public_dict())
    with baseline_panel(str(OFFLINE), run) as chosen:
        assert chosen == str(OFFLINE)
    with baseline_panel(None, _baseline(DEFAULT_PANEL.public_dict())) as chosen:
        assert chosen is None  # the embedded default, as the baseline was judged


def test_another_panel_re_judges_with_the_baselines_stored_copy() -> None:
    stored = load_panel(OFFLINE).public_dict()
    run = _baseline({**stored, "name": "the-baseline's"})
    with baseline_panel(str(OFFLINE), run) as chosen:
        assert chosen is not None and chosen != str(OFFLINE)
        assert load_panel(chosen).public_dict() == run.panel
    assert not Path(chosen).exists()  # a temporary file


def test_a_stored_copy_with_masked_secrets_is_refused_naming_the_fix() -> None:
    stored = load_panel(OFFLINE).public_dict()
    judges = [dict(j) for j in stored["judges"]]
    judges[0]["headers"] = {"X-Key": "<redacted>"}
    run = _baseline({**stored, "judges": judges})
    with (
        pytest.raises(NoiseCheckError, match="pass that panel's file with --panel"),
        baseline_panel(None, run),
    ):
        pass


def test_a_changed_dataset_is_refused_before_judging(tmp_path: Path) -> None:
    copy = tmp_path / "data.jsonl"
    shutil.copy(SAMPLE, copy)
    run = _baseline(DEFAULT_PANEL.public_dict(), copy)
    copy.write_text(SAMPLE.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    store = Store(tmp_path / "store.duckdb")
    store.migrate()
    store.create_run(replace(run, status="completed"))
    with pytest.raises(NoiseCheckError, match="changed since"):
        asyncio.run(noise_check(store, RunRequest(), "base", sample=5, seed=0))
    with pytest.raises(NoiseCheckError, match="no such run"):
        asyncio.run(noise_check(store, RunRequest(), "nope", sample=5, seed=0))


def test_the_stored_copy_is_yaml_the_panel_loader_reads(tmp_path: Path) -> None:
    stored = load_panel(OFFLINE).public_dict()
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(runnable_copy(stored), sort_keys=False), encoding="utf-8")
    assert load_panel(path).public_dict() == stored


def test_serve_noise_floor_makes_regression_serve_run_the_aa_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import signal

    from typer.testing import CliRunner

    import juryflow.flows.serve as served
    from juryflow.cli import app

    built: list[Any] = []

    def serve_nightly(**options: Any) -> None:
        built.extend(served.build_deployments(**options))
        raise KeyboardInterrupt  # as Ctrl-C ends serving

    monkeypatch.setattr(served, "check_no_collision", lambda: None)
    monkeypatch.setattr(served, "serve_nightly", serve_nightly)
    before = signal.getsignal(signal.SIGTERM)  # serve installs its own SIGTERM handler
    try:
        result = CliRunner().invoke(app, ["serve", "--noise-floor"])
    finally:
        signal.signal(signal.SIGTERM, before)
    assert result.exit_code == 130, result.output
    regression = next(d for d in built if d.name == "regression-serve")
    assert regression.parameters == {"baseline": "last", "noise_floor": True}
