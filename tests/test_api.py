"""`import juryflow`: the Python API runs, lists and reads runs as the CLI does."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import juryflow
from juryflow.storage.reads.run_queries import RunIdError
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
        "RunRequest",
        "Thresholds",
        "__version__",
        "estimate",
        "import_judgments",
        "open_store",
        "run",
    }
    for name in juryflow.__all__:
        value = getattr(juryflow, name)
        assert name == "__version__" or value.__doc__, f"{name} has no docstring"
    assert juryflow.__version__ == "0.1.0"
    # a subpackage import does not pay for Prefect (the API loads it on first use)
    probe = (
        "import sys, juryflow, juryflow.maths.consensus; "
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


def test_estimate_is_the_dry_run_as_a_table(tmp_path: Path) -> None:
    from juryflow.cli.init_project import write_starter

    write_starter(tmp_path)
    guess = juryflow.estimate(tmp_path / "data.jsonl", panel=tmp_path / "panel_llm.yaml")
    rows = {r["judge_id"]: r for r in guess.table().to_pylist()}
    assert rows["claude"]["calls"] == 6 and rows["claude"]["cost_usd_est"] > 0
    assert rows["numbers"]["calls"] == 0 and rows["numbers"]["cost_usd_est"] == 0
    assert not (tmp_path / "juryflow.duckdb").exists()


def test_max_cost_stops_an_api_run_that_resumes(prefect_harness: None, tmp_path: Path) -> None:
    from juryflow.standin.server import running_stub_server

    with running_stub_server() as stub:
        panel = tmp_path / "panel.yaml"
        panel.write_text(
            "name: priced\nprices: {stub-spans-good: {input: 3.0, output: 15.0}}\njudges:\n"
            "  - {id: a, provider: anthropic, model: stub-spans-good, prompt: data2txt_spans,"
            f" base_url: '{stub.anthropic_base_url}', api_key_env: JURYFLOW_API_TEST_KEY,"
            " max_concurrency: 1}\n",
            encoding="utf-8",
        )
        db = tmp_path / "budget.duckdb"
        with pytest.MonkeyPatch.context() as env:
            env.setenv("JURYFLOW_API_TEST_KEY", "anything")
            with pytest.raises(juryflow.RunInterrupted, match="budget reached") as stopped:
                juryflow.run(panel=panel, db=db, limit=6, max_cost=0.001, progress=False)
        assert stopped.value.exit_code == 3
        runs = juryflow.open_store(db).runs().to_pylist()
        assert runs[0]["status"] == "interrupted" and runs[0]["judgments"] < 6


def test_a_dataframe_without_pandas_says_which_extra_to_install(tmp_path: Path) -> None:
    """README, Python API: the quick start does not install pandas. A fresh interpreter in
    which ``import pandas`` fails as it does where pandas is missing."""
    missing = tmp_path / "without" / "pandas"
    missing.mkdir(parents=True)
    (missing / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pandas'\", name='pandas')\n"
    )
    script = (
        "import pyarrow as pa\n"
        "from juryflow.api import _table\n"
        "table = pa.table({'a': [1]})\n"
        "assert _table(table, 'arrow') is table\n"
        "try:\n"
        "    _table(table, 'pandas')\n"
        "except ModuleNotFoundError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(missing.parent)},
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'juryflow[pandas]'" in done.stdout, done.stdout + done.stderr


@pytest.mark.slow
def test_a_script_shows_its_progress_and_none_of_prefects_info_lines(
    tmp_path: Path,
) -> None:
    """Issue 28: the API in a script printed Prefect's INFO log lines beside its progress."""
    script = (
        "import juryflow\n"
        f"run = juryflow.run(db={str(tmp_path / 'api.duckdb')!r}, limit=2)\n"
        "print(run.run_id)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_LOGGING")}
    env.pop("PREFECT_API_URL", None)  # the script's own server, as a user's script has
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, done.stderr
    assert "| INFO" not in done.stderr, done.stderr
    assert "judged 6/6" in done.stderr, done.stderr  # the progress itself stays
