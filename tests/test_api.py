"""`import juryflow`: the Python API runs, lists and reads runs as the CLI does."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import juryflow
from juryflow.storage.run_queries import RunIdError
from tests.conftest import REPO


@pytest.fixture(scope="module")
def evaluated(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> juryflow.Run:
    db = tmp_path_factory.mktemp("api") / "evals.duckdb"
    return juryflow.run(db=db, limit=6, progress=False)


def test_the_api_is_small_documented_and_loads_lazily() -> None:
    assert set(juryflow.__all__) == {
        "AgreementReport",
        "JuryStore",
        "Run",
        "RunInterrupted",
        "Thresholds",
        "__version__",
        "open_store",
        "run",
    }
    for name in juryflow.__all__:
        value = getattr(juryflow, name)
        assert name == "__version__" or value.__doc__, f"{name} has no docstring"
    assert juryflow.__version__ == "0.1.0"
    # a subpackage import does not pay for Prefect (the API loads it on first use)
    probe = (
        "import sys, juryflow, juryflow.judges.consensus; "
        "print(json.dumps(['prefect' in sys.modules, 'scipy.stats' in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", f"import json; {probe}"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    assert json.loads(out.stdout) == [False, False]


def test_run_then_read_the_run_back_as_arrow_and_pandas(evaluated: juryflow.Run) -> None:
    assert evaluated.summary["items"] == 6 and evaluated.summary["judges"] == 3
    store = juryflow.open_store(evaluated.db)
    runs = store.runs()
    assert isinstance(runs, pa.Table)
    row = runs.to_pylist()[0]
    assert (row["run_id"], row["status"], row["items"]) == (evaluated.run_id, "completed", 6)
    prefix = evaluated.run_id[:10]
    judgments = store.judgments(prefix)
    assert isinstance(judgments, pa.Table) and judgments.num_rows == 6 * 3
    assert {"item_id", "judge_id", "score", "verdict", "spans", "prompt_hash"} <= set(
        judgments.column_names
    )
    frame = store.judgments(prefix, to="pandas")
    assert isinstance(frame, pd.DataFrame) and frame.shape == (18, judgments.num_columns)
    wide = frame.pivot(index="item_id", columns="judge_id", values="score")
    assert wide.shape == (6, 3)
    consensus = store.consensus()  # None: the newest run
    assert consensus.num_rows == 6 and set(consensus["status"].to_pylist()) <= {
        "ok",
        "insufficient",
    }
    assert store.items(to="pandas").shape[0] == 6


def test_agreement_tables_carry_the_reports_numbers(evaluated: juryflow.Run) -> None:
    store = evaluated.store
    report = store.agreement(evaluated.run_id)
    assert isinstance(report, juryflow.AgreementReport)
    judges = report.judges_table().to_pylist()
    assert [j["judge_id"] for j in judges] == report.judges
    for row, summary in zip(judges, report.judge_summaries, strict=True):
        assert row["n_scored"] == summary.n_scored
        assert row["bias"] == summary.bias.value
    pairs = report.pairs_table().to_pylist()
    panel_pairs = report.groups[0].pairs
    assert len(pairs) >= len(panel_pairs) == 3
    assert pairs[0]["cohen_kappa"] == panel_pairs[0].cohen_kappa.value
    accuracy = report.accuracy_table().to_pandas().set_index("predictor")
    consensus = next(a for a in report.accuracy if a.predictor == "consensus")
    assert consensus.response is not None
    assert accuracy.loc["consensus", "response_f1"] == pytest.approx(consensus.response.f1)
    assert store.disagreements(top=2)


def test_reaggregate_and_compare(evaluated: juryflow.Run) -> None:
    store = evaluated.store
    union = store.reaggregate(evaluated.run_id, consensus=["spans=union"])
    assert union.run_id != evaluated.run_id
    listed = {r["run_id"]: r for r in store.runs().to_pylist()}
    assert listed[union.run_id]["kind"] == "reaggregate"
    assert listed[union.run_id]["cost_usd"] in (None, 0)  # no judge was called
    comparison = store.compare(union.run_id, baseline=evaluated.run_id)
    assert comparison["baseline_run_id"] == evaluated.run_id
    assert comparison["n_paired"] == 6 and isinstance(comparison["regressed"], bool)


def test_run_from_inside_an_event_loop_as_in_a_notebook(
    prefect_harness: None, tmp_path: Path
) -> None:
    async def cell() -> juryflow.Run:
        # a Jupyter cell runs while the kernel's loop runs: asyncio.run would refuse
        return juryflow.run(db=tmp_path / "nb.duckdb", sample=3, seed=1, progress=False)

    finished = asyncio.run(cell())
    assert finished.summary["items"] == 3


def test_user_errors_are_one_line_exceptions(evaluated: juryflow.Run, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no juryflow store at .*give db="):
        juryflow.open_store(tmp_path / "missing.duckdb")
    store = evaluated.store
    with pytest.raises(RunIdError, match="no run 'nope'"):
        store.judgments("nope")
    with pytest.raises(ValueError, match="choose 'arrow' or 'pandas'"):
        store.judgments(to="polars")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"missing\.jsonl"):
        juryflow.run(tmp_path / "missing.jsonl", db=tmp_path / "x.duckdb")
