"""A run answered from the cache costs $0 (issue 28, point 6).

A user ran the README's stand-in example, then its `--max-cost` example on the same store:
every answer came from the response cache, the budget was never reached, and `juryflow
runs` listed the cached run at the cost of the calls that first made its answers. Now
`juryflow runs` (and the API's listing, and the viewer's) says what the run paid, $0 here,
with what the cache saved beside it; and the README's `--max-cost` example passes
`--no-cache`, so that it reaches its budget whatever ran before. Real runs of the command
line against the stand-in server, as a user runs them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from juryflow.judges.budget import BUDGET_EXIT_CODE
from juryflow.standin.server import StubConfig, running_stub_server
from juryflow.storage.reads.run_queries import list_runs
from juryflow.storage.store import Store
from tests.conftest import REPO
from tests.test_faults import synthetic_dataset
from tests.test_max_cost import child_env, run_cli, write_panel

ITEMS = 20


def _runs(db: Path) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "juryflow", "runs", "--db", str(db), "--format", "json"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def _paid(store: Store, run_id: str) -> float:
    _, rows = store.query(
        "SELECT coalesce(sum(cost_usd), 0) FROM judgments WHERE run_id = ? AND NOT cached",
        [run_id],
    )
    return float(rows[0][0])


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_cached_run_costs_nothing_and_a_no_cache_budget_is_reached(tmp_path: Path) -> None:
    dataset = synthetic_dataset(tmp_path / "items.jsonl", ITEMS)
    db = tmp_path / "store.duckdb"
    with running_stub_server(StubConfig(latency_ms=5, seed=3)) as stub:
        panel = write_panel(tmp_path / "panel.yaml", stub, concurrency=2)
        base = [str(dataset), "--panel", str(panel), "--db", str(db)]
        first = run_cli(*base)
        assert first.returncode == 0, first.stderr
        store = Store(db)
        paid_run = store.latest_run_id()
        assert paid_run is not None
        full_cost = _paid(store, paid_run)
        assert full_cost > 0
        calls = stub.stats.requests()

        # the README's order: the same panel again, with a budget below what the calls cost
        budget = round(full_cost / 2, 4)
        cached = run_cli(*base, "--max-cost", str(budget))
        assert cached.returncode == 0, cached.stderr  # never reached: nothing was paid
        assert stub.stats.requests() == calls
        cached_run = store.latest_run_id()
        assert cached_run is not None and cached_run != paid_run
        assert "$0.0000 spent in this run" in cached.stdout

        listed = {str(row["run_id"]): row for row in _runs(db)}
        assert listed[cached_run]["cost_usd"] == 0
        assert listed[cached_run]["saved_usd"] == pytest.approx(full_cost)
        assert listed[paid_run]["cost_usd"] == pytest.approx(full_cost)
        assert listed[paid_run]["saved_usd"] is None
        # the Python API and the viewer read the same listing
        listing = list_runs(store, limit=5)
        costs = {row[0]: row[listing.columns.index("cost_usd")] for row in listing.rows}
        assert costs[cached_run] == 0

        # the README's example as it now reads: --no-cache calls again and meets the budget
        stopped = run_cli(*base, "--max-cost", str(budget), "--no-cache")
        assert stopped.returncode == BUDGET_EXIT_CODE, stopped.stderr
        assert "budget reached" in stopped.stderr
        assert stub.stats.requests() > calls


def test_the_readme_max_cost_example_passes_no_cache() -> None:
    readme = (REPO / "docs" / "how-to" / "llm-judges.md").read_text(encoding="utf-8")
    stub_example = "JURYFLOW_STUB_KEY=anything juryflow run --panel examples/panel.stub.yaml\n"
    budget_example = (
        "JURYFLOW_STUB_KEY=anything juryflow run --panel examples/panel.stub.yaml "
        "--max-cost 0.25 --no-cache\n"
    )
    # the stand-in example comes first, and fills the cache the budget example would use
    assert readme.index(stub_example) < readme.index(budget_example)
