"""Issue 43: the end-of-run figures say what happened. An unpriced model's calls make the
run's cost unknown (not $0.0000); a judge's repeated samples are calls asked for, not
retries; a finished run leaves no lock file beside its journal."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from juryflow.analysis.run_figures import spent_text
from juryflow.flows.evaluate import evaluate
from juryflow.planning.run_request import RunRequest
from juryflow.standin.server import StubConfig, running_stub_server
from juryflow.storage.journal import journal_path
from juryflow.storage.store.liveness import liveness_path
from tests.conftest import SAMPLE

pytestmark = [pytest.mark.usefixtures("prefect_harness")]

KEY_ENV = "JURYFLOW_FIGURES_KEY"


def _run(tmp_path: Path, judges: str, prices: str = "") -> dict[str, Any]:
    with running_stub_server(StubConfig(latency_ms=1)) as stub:
        panel = tmp_path / "panel.yaml"
        panel.write_text(
            prices
            + "judges:\n"
            + judges.format(url=stub.openai_base_url, key=KEY_ENV)
            + "  - {id: numbers, provider: offline, detector: numbers}\n",
            encoding="utf-8",
        )
        request = RunRequest(dataset=str(SAMPLE), panel=str(panel), db=str(tmp_path / "s.duckdb"))
        return asyncio.run(evaluate(request.model_copy(update={"limit": 4, "use_cache": False})))


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-figures")


UNPRICED = (
    "  - {{id: tuned, provider: openai, model: my-finetune-v2, prompt: data2txt_spans, "
    "base_url: '{url}', api_key_env: {key}, temperature: 0.7, samples: 3}}\n"
)


def test_an_unpriced_models_calls_make_the_cost_unknown_and_samples_are_not_retries(
    tmp_path: Path,
) -> None:
    summary = _run(tmp_path, UNPRICED)
    assert summary["unpriced_calls"] == 4 and summary["unpriced_models"] == ["my-finetune-v2"]
    assert isinstance(summary["unlocalised"], int)
    assert spent_text(summary) == (
        "unknown: 4 calls to my-finetune-v2 have no price (add the model under prices: in the "
        "panel); $0.0000 spent on the priced calls"
    )
    # three samples per item, each answered at the first attempt: no retry
    assert summary["retries"] == 0


def test_a_priced_run_says_what_it_spent_and_leaves_no_lock_file(tmp_path: Path) -> None:
    prices = "prices:\n  my-finetune-v2: {input: 1.0, output: 2.0}\n"
    summary = _run(tmp_path, UNPRICED, prices)
    assert summary["unpriced_calls"] == 0 and summary["cost_spent_usd"] > 0
    assert spent_text(summary) == f"${summary['cost_spent_usd']:.4f} spent in this run"
    db = tmp_path / "s.duckdb"
    assert journal_path(db, summary["run_id"]).parent.is_dir()
    assert not liveness_path(db, summary["run_id"]).exists()


def test_a_judge_that_never_answered_shows_no_f1_rather_than_zero(tmp_path: Path) -> None:
    """Its all-items F1 is 0 (it flagged nothing), which read as a judge always wrong."""
    from rich.console import Console

    from juryflow.terminal.judge_table import judges_of_run

    failing = (
        "  - {{id: broken, provider: openai, model: 'stub-spans-good+400', "
        "prompt: data2txt_spans, base_url: '{url}', api_key_env: {key}, max_attempts: 1}}\n"
    )
    summary = _run(tmp_path, failing)
    console = Console(record=True, width=120)
    console.print(judges_of_run(summary))
    cells = [line.split("│") for line in console.export_text().splitlines()]
    rows = {row[1].strip(): row[-2].strip() for row in cells if len(row) > 2}
    assert rows["broken"] == "n/a (no answer)"
    assert rows["numbers"] == "0.000"  # it answered every item, and flagged none


def test_the_summary_says_how_many_items_are_unlocalised() -> None:
    """Issue 43: judges that all flag an item, with a consensus calling it clean, were
    explained only by `juryflow agreement`; the run's summary says it too."""
    import io

    from rich.console import Console

    from juryflow.terminal.output import print_run_summary

    summary = {
        "run_id": "r1", "items": 186, "judges": 2, "scored": 372, "unscored": 0,
        "hallucination_rate": 0.145, "mean_spread": 0.1, "db": "s.duckdb", "unlocalised": 159,
    }  # fmt: skip
    out = io.StringIO()
    print_run_summary(Console(file=out, width=200), summary)
    (line,) = [line for line in out.getvalue().splitlines() if line.startswith("unlocalised")]
    assert "159 of 186 items: the judges agree something is wrong, not where" in line
    quiet = io.StringIO()
    print_run_summary(Console(file=quiet, width=200), {**summary, "unlocalised": 0})
    assert "unlocalised" not in quiet.getvalue()
