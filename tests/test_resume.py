"""Crash and resume: a run killed with SIGKILL continues with --resume RUN, and ends with
the same store as an uninterrupted run, without repeating any call that had completed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from juryflow.flows.evaluate import evaluate
from juryflow.planning.run_request import RunRequest
from juryflow.standin.server import StubConfig, running_stub_server
from juryflow.storage.journal import Journal, journal_path
from juryflow.storage.store import Store
from tests.test_faults import synthetic_dataset

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]

ROWS = (
    "SELECT item_id, judge_id, score, unscored_reason, raw_output FROM judgments "
    "WHERE run_id = ? ORDER BY item_id, judge_id"
)
CONSENSUS = (
    "SELECT item_id, status, score_median, hallucinated, n_scored FROM consensus "
    "WHERE run_id = ? ORDER BY item_id"
)


def child_env(**extra: str) -> dict[str, str]:
    from prefect.settings import get_current_settings

    env = dict(os.environ)
    env["PREFECT_API_URL"] = str(get_current_settings().api.url)
    env.update(extra)
    return env


def test_a_killed_run_resumes_without_repeating_completed_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JURYFLOW_TEST_KEY", "sk-test-resume")
    dataset = synthetic_dataset(tmp_path / "items.jsonl", 300)
    killed_db = tmp_path / "killed.duckdb"
    clean_db = tmp_path / "clean.duckdb"
    with running_stub_server(StubConfig(latency_ms=80, seed=3)) as stub:
        panel = tmp_path / "panel.yaml"
        panel.write_text(
            "name: resumable\njudges:\n"
            f"  - {{id: a, provider: anthropic, model: stub-spans-good, prompt: data2txt_spans, "
            f"base_url: '{stub.anthropic_base_url}', api_key_env: JURYFLOW_TEST_KEY, "
            "max_concurrency: 4}\n"
            f"  - {{id: b, provider: openai, model: gpt-x, prompt: data2txt_spans, "
            f"base_url: '{stub.openai_base_url}', api_key_env: JURYFLOW_TEST_KEY, "
            "max_concurrency: 4}\n"
            "  - {id: n, provider: offline, detector: numbers}\n",
            encoding="utf-8",
        )
        command = [sys.executable, "-m", "juryflow", "run", str(dataset), "--panel", str(panel)]
        child = subprocess.Popen(
            [*command, "--db", str(killed_db), "--chunk-size", "50"],
            env=child_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        # Kill it once some judgments are in the journal and some are in the store.
        deadline = time.monotonic() + 120
        run_id = None
        while time.monotonic() < deadline and child.poll() is None:
            if killed_db.exists() and run_id is None:
                try:
                    run_id = Store(killed_db).latest_run_id()
                except Exception:
                    run_id = None
            if run_id is not None:
                journal = Journal(journal_path(killed_db, run_id))
                if sum(j.judge_id != "n" for j in journal.replay()) >= 150:
                    break
            time.sleep(0.05)
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert run_id is not None
        calls_before_resume = stub.stats.requests()

        store = Store(killed_db)
        judged = store.judged_pairs(run_id)
        journaled = {
            (j.item_id, j.judge_id) for j in Journal(journal_path(killed_db, run_id)).replay()
        }
        done = {p for p in judged | journaled if p[1] != "n"}
        assert 0 < len(done) < 600
        assert store.get_run(run_id).status == "running"  # type: ignore[union-attr]

        resumed = subprocess.run(
            [*command, "--db", str(killed_db), "--resume", run_id],
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert resumed.returncode == 0, resumed.stderr + resumed.stdout
        # Only what had not completed was called again: no completed call is repeated.
        assert stub.stats.requests() - calls_before_resume == 600 - len(done)

        calls_before_clean = stub.stats.requests()
        clean = asyncio.run(
            evaluate(
                RunRequest(dataset=str(dataset), panel=str(panel), db=str(clean_db), chunk_size=50)
            )
        )
        assert stub.stats.requests() - calls_before_clean == 600

    killed, reference = Store(killed_db), Store(clean_db)
    assert killed.get_run(run_id).status == "completed"  # type: ignore[union-attr]
    assert killed.query(ROWS, [run_id])[1] == reference.query(ROWS, [clean["run_id"]])[1]
    assert killed.query(CONSENSUS, [run_id])[1] == reference.query(CONSENSUS, [clean["run_id"]])[1]
    _, counts = killed.query(
        "SELECT count(*), count(DISTINCT (item_id, judge_id)) FROM judgments WHERE run_id = ?",
        [run_id],
    )
    assert counts == [(900, 900)]
    assert not journal_path(killed_db, run_id).exists()
