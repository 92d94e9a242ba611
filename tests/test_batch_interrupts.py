"""Batch mode's stops (issue 24, point 1): `juryflow run --batch` as a real subprocess, the
stand-in's batch APIs over real HTTP with both SDKs.

A run killed with SIGKILL while its batches are in flight resumes by polling the same
batches from its journal, and the stand-in answers every request once (`/_stats`); Ctrl-C
leaves the batches running at the provider, says so in one line, and `--resume` reads them
once they finish.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from juryflow.standin.server import StubConfig, running_stub_server
from juryflow.storage.journal import journal_path
from juryflow.storage.store import Store
from tests.test_faults import synthetic_dataset
from tests.test_resume import child_env

pytestmark = [pytest.mark.usefixtures("prefect_harness")]

KEY = "JURYFLOW_BATCH_KILL_KEY"
ITEMS = 12
JUDGES = 2


def write_panel(path: Path, base_url: str) -> Path:
    """One judge on each provider's batch API; ``batch: true`` in the panel."""
    path.write_text(
        "name: batched\nbatch: true\njudges:\n"
        f"  - {{id: a, provider: anthropic, model: stub-spans-good, prompt: data2txt_spans, "
        f"base_url: '{base_url}', api_key_env: {KEY}}}\n"
        f"  - {{id: o, provider: openai, model: stub-spans-nearmiss, prompt: data2txt_spans, "
        f"base_url: '{base_url}/v1', api_key_env: {KEY}}}\n",
        encoding="utf-8",
    )
    return path


@contextmanager
def stand_in_process(*options: str) -> Iterator[str]:
    """`python -m juryflow.standin.server` on a free port; yields its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "juryflow.standin.server", "--port", "0", *options],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield process.stdout.readline().split()[4]
    finally:
        process.terminate()
        process.wait(10)


def start_run(tmp_path: Path, base_url: str, poll_seconds: str) -> subprocess.Popen[str]:
    dataset = synthetic_dataset(tmp_path / "items.jsonl", ITEMS)
    panel = write_panel(tmp_path / "panel.yaml", base_url)
    return subprocess.Popen(
        [sys.executable, "-m", "juryflow", "run", str(dataset), "--panel", str(panel),
         "--db", str(tmp_path / "store.duckdb")],
        env=child_env(**{KEY: "sk-batch-kill", "JURYFLOW_BATCH_POLL_SECONDS": poll_seconds}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a terminal's foreground job: Ctrl-C signals its group
    )  # fmt: skip


def resume(tmp_path: Path, run_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "juryflow", "run", "--resume", run_id,
         "--db", str(tmp_path / "store.duckdb")],
        env=child_env(**{KEY: "sk-batch-kill", "JURYFLOW_BATCH_POLL_SECONDS": "0.02"}),
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip


def wait_until(
    child: subprocess.Popen[str], done: Callable[[], bool], timeout: float = 180
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return
        assert child.poll() is None, child.communicate()
        time.sleep(0.05)
    raise AssertionError("the run sent no batches in time")


def batch_stats(base_url: str) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(f"{base_url}/_stats", timeout=10).json()["batches"]
    return stats


def test_a_run_killed_mid_batch_resumes_by_polling_the_same_batches(tmp_path: Path) -> None:
    with stand_in_process("--batch-polls-to-finish", "3") as url:
        # A first poll answers half of each batch; the next waits 30 s: killed in between.
        child = start_run(tmp_path, url, poll_seconds="30")
        wait_until(child, lambda: batch_stats(url)["polls"] >= JUDGES)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)
        before = batch_stats(url)
        assert before["batches_created"] == JUDGES
        assert before["batch_requests"] == ITEMS  # half of each judge's batch

        store = Store(tmp_path / "store.duckdb")
        run_id = store.latest_run_id()
        assert run_id is not None
        assert store.get_run(run_id).status == "running"  # type: ignore[union-attr]
        journal = journal_path(store.path, run_id).read_text(encoding="utf-8")  # type: ignore[arg-type]
        assert journal.count('{"batch":') == JUDGES  # journaled as they were created

        resumed = resume(tmp_path, run_id)
        assert resumed.returncode == 0, resumed.stderr
        after = batch_stats(url)
    # no new batch: the same two were polled to their end and read, each request once
    assert after["batches_created"] == JUDGES
    assert after["batch_requests"] == ITEMS * JUDGES
    store = Store(tmp_path / "store.duckdb")
    assert store.get_run(run_id).status == "completed"  # type: ignore[union-attr]
    _, counted = store.query(
        "SELECT count(*), count(score), count(DISTINCT batch_id), count(batch_id) "
        "FROM judgments WHERE run_id = ?",
        [run_id],
    )
    assert counted == [(ITEMS * JUDGES, ITEMS * JUDGES, JUDGES, ITEMS * JUDGES)]
    assert len(store.consensus_item_ids(run_id)) == ITEMS


def test_ctrl_c_leaves_the_batches_running_and_resume_reads_them(tmp_path: Path) -> None:
    with running_stub_server(StubConfig(batch_never_finishes=True)) as stub:
        child = start_run(tmp_path, stub.base_url, poll_seconds="0.05")
        wait_until(child, lambda: batch_stats(stub.base_url)["polls"] >= 2 * JUDGES)
        os.killpg(child.pid, signal.SIGINT)
        _, stderr = child.communicate(timeout=120)
        assert child.returncode == 130, stderr
        line = stderr.strip().splitlines()[-1]
        run_id = Store(tmp_path / "store.duckdb").latest_run_id()
        assert run_id is not None
        assert line.startswith(f"juryflow: run {run_id} interrupted (SIGINT): 0 judgments stored")
        assert (
            "2 batches are left running at the provider (not cancelled); --resume reads their "
            f"answers and pays for no request twice. Continue it with: juryflow run --resume "
            f"{run_id}" in line
        )
        stats = batch_stats(stub.base_url)
        assert stats["batches_created"] == JUDGES and stats["cancels"] == 0
        assert stats["batch_requests"] == 0

        stub.server.config.batch_never_finishes = False  # the provider gets to them
        resumed = resume(tmp_path, run_id)
        assert resumed.returncode == 0, resumed.stderr
        stats = batch_stats(stub.base_url)
    assert stats["batches_created"] == JUDGES
    assert stats["batch_requests"] == ITEMS * JUDGES
    store = Store(tmp_path / "store.duckdb")
    assert store.get_run(run_id).status == "completed"  # type: ignore[union-attr]
    assert len(store.judged_pairs(run_id)) == ITEMS * JUDGES


def test_the_readme_batch_run_ends_with_its_batches_in_the_progress_line(
    tmp_path: Path,
) -> None:
    """`JURYFLOW_STUB_KEY=anything juryflow run --panel examples/panel.stub.yaml --batch`"""
    from tests.conftest import REPO

    with running_stub_server(StubConfig()) as stub:
        text = (REPO / "examples" / "panel.stub.yaml").read_text(encoding="utf-8")
        panel = tmp_path / "panel.stub.yaml"
        panel.write_text(text.replace("http://127.0.0.1:8765", stub.base_url), encoding="utf-8")
        result = subprocess.run(
            [sys.executable, "-m", "juryflow", "run", "--panel", str(panel), "--batch",
             "--limit", "5", "--db", str(tmp_path / "store.duckdb")],
            env=child_env(JURYFLOW_STUB_KEY="anything", JURYFLOW_BATCH_POLL_SECONDS="0.02"),
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # the last progress line: the two batches (one per LLM judge), ended
    assert "batches 2 completed (10/10 requests done)" in result.stderr
