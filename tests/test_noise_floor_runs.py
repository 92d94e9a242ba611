"""The A/A check end to end: a noisy simulated panel on the stand-in, judged twice.

Three score judges that flip their verdict with chance 0.2 on every draw
(``stub-sim-score-F0.2``, temperature 0.7: each identical request is a new draw of the
stand-in). The baseline is judged, then the suite again with the cache off, and the new run
is compared with it: nothing changed but the judges' draws. Today's gate (thresholds alone)
flags that; `juryflow regression --noise-floor` re-judges a seeded sample of the baseline
(an A/A check, one more draw), and the gate with the measured floor does not.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, cast

import duckdb
import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.maths.regression_stats import Thresholds, check_thresholds
from juryflow.planning.run_request import RunRequest
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.standin.simulator import load_gold
from juryflow.storage.comparisons import compare_stored
from juryflow.storage.store import Store
from tests.conftest import REPO, SAMPLE

KEY_ENV = "JURYFLOW_STUB_KEY"
SHIPPED = REPO / "examples" / "panel.sim-noisy.yaml"
N_JUDGES = 3


def _noisy_panel(path: Path, stub: StubHandle) -> Path:
    """README: examples/panel.sim-noisy.yaml as shipped, on this test's stand-in (started
    as `juryflow stub-server --gold examples/ragtruth_data2txt_sample.jsonl` is)."""
    shipped = SHIPPED.read_text(encoding="utf-8")
    assert "http://127.0.0.1:8765/v1" in shipped
    path.write_text(shipped.replace("http://127.0.0.1:8765/v1", stub.openai_base_url), "utf-8")
    return path


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_aa_of_a_noisy_panel_is_not_flagged_with_the_noise_floor(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from juryflow.flows.regression import regression

    monkeypatch.setenv(KEY_ENV, "anything")
    with running_stub_server(StubConfig(gold=load_gold(SAMPLE))) as stub:
        panel = _noisy_panel(tmp_path / "noisy.yaml", stub)
        common = dict(dataset=str(SAMPLE), panel=str(panel), db=str(db_path), suite="aa")
        first: Any = asyncio.run(cast(Any, regression(RunRequest(**common), return_state=True)))
        assert first.is_completed() and "is the baseline" in (first.message or "")
        # README: JURYFLOW_STUB_KEY=anything juryflow regression --panel
        # examples/panel.sim-noisy.yaml --no-cache --noise-floor --noise-sample 40
        result = CliRunner().invoke(
            app,
            [
                "regression",
                str(SAMPLE),
                "--panel",
                str(panel),
                "--db",
                str(db_path),
                "--suite",
                "aa",
                "--no-cache",
                "--noise-floor",
                "--noise-sample",
                "40",
            ],
            env={"COLUMNS": "250"},
        )
    print(result.output)
    assert result.exit_code == 0, result.output
    assert "no regression" in result.output
    assert "95% bootstrap CI" in result.output and "Wilcoxon p=" in result.output
    assert "noise floor +" in result.output

    con = duckdb.connect(str(db_path), read_only=True)
    try:
        runs = dict(con.execute("SELECT suite, count(*) FROM runs GROUP BY suite").fetchall())
        run_id, baseline_id, regressed, thresholds = con.execute(
            "SELECT run_id, baseline_run_id, regressed, thresholds FROM comparisons"
        ).fetchone() or (None, None, None, None)
        aa_items = con.execute(
            "SELECT count(*) FROM judgments j JOIN runs r USING (run_id) WHERE r.suite = 'aa~aa'"
        ).fetchone()
    finally:
        con.close()
    # the baseline, the new run, and the A/A re-judge in a suite of its own
    assert runs == {"aa": 2, "aa~aa": 1}
    assert aa_items == (40 * N_JUDGES,)
    assert regressed is False
    floor = json.loads(thresholds)["noise_floor"]
    assert floor["aa_items"] == 40 and floor["n_paired"] == 60
    assert floor["mean_delta"] > 0 and floor["flips_to_hallucinated"] >= 3
    assert floor["checks"] == 3 + N_JUDGES

    # the floor on the comparison page and in the run's artifacts
    from juryflow.flows.artifacts import comparison_markdown
    from juryflow.storage.comparisons import latest_comparison
    from juryflow.viewer.compare_model import load_stored

    store = Store(db_path)
    stored = latest_comparison(store, run_id)
    assert stored is not None
    markdown = "\n".join(comparison_markdown(stored))
    assert "- noise floor (A/A check of 40 baseline items" in markdown
    page = load_stored(store, stored["comparison_id"])
    assert page is not None
    figures = dict(page.figures)
    assert figures["noise floor of the mean change (A/A check)"].endswith(
        "for 60 items, from 40 baseline items re-judged (false-alarm rate 0.05)"
    )
    # and in the run's HTML report, in the compare page's words
    from juryflow.report.html import render_report

    document = render_report(store, run_id)
    for label, text in page.figures:
        if label.startswith("noise floor"):
            assert f"{label}</th><td>{text}</td>" in document.replace("\n", ""), label

    # The judges did answer differently (the stand-in's draws), and today's gate, the
    # thresholds alone, calls that a regression.
    comparison = compare_stored(Store(db_path), baseline_id, run_id)
    assert comparison.flips_to_hallucinated + comparison.flips_to_clean > 0
    today = check_thresholds(comparison, Thresholds())
    print("today's gate:", "; ".join(today))
    assert today, "the noise alone should cross a threshold"
