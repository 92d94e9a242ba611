"""Calls paid twice (issue 44): `juryflow run` as real subprocesses against the stand-in
over real HTTP, counting what the stand-in was sent.

- A journal that cannot grow (a full disk) ends the run in one line and Prefect does not
  run the chunk again: each prompt reaches the stand-in once, and the resume sends only
  what the journal does not hold.
- Two `--resume` of one run at once: the second is refused in one line naming the first's
  process, before any call.
- A run killed at any step of creating its batches resumes without a second batch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from juryflow.standin.server import StubConfig, StubHandle, prompt_of, running_stub_server
from juryflow.storage.journal import journal_path, run_header_path
from juryflow.storage.store import Store
from tests.test_faults import synthetic_dataset
from tests.test_interrupts import done_pairs
from tests.test_resume import child_env

pytestmark = [pytest.mark.usefixtures("prefect_harness")]
# Long (a killed run and its resumes, 30-40 s each), yet in the default run that CI runs:
# no other test shows that nothing is paid twice. The other kill steps of a batch's creation
# are `slow`: "one-batch-made" meets both providers' adoption paths at once.

KEY = "sk-test-paid-once"
KILLED_KEY = "sk-test-killed-run"
"""The killed run's key: its calls still in flight when it died may reach the stand-in after
the kill, so each process sends its own key and the tests count each one's calls apart."""
FINISH_KEY = "sk-test-finishing-resume"
ITEMS = 60
FILE_LIMIT = 16 * 2**20
"""The child's largest file (RLIMIT_FSIZE): far above its store, at its journal's size."""


def _panel(path: Path, stub: StubHandle) -> Path:
    path.write_text(
        "name: paid-once\njudges:\n"
        f"  - {{id: slow, provider: openai, model: stub-spans-good, prompt: data2txt_spans, "
        f"base_url: '{stub.openai_base_url}', api_key_env: JURYFLOW_TEST_KEY, "
        # a timeout no wait of these tests comes near (a resume stopped with SIGSTOP)
        "max_concurrency: 10, timeout: 3600}\n",
        encoding="utf-8",
    )
    return path


def _command(db: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "juryflow", "run", "--db", str(db), *extra]


def _with_file_limit(command: list[str], limit: int) -> list[str]:
    """``command`` (``python -m ...``) run with no file past ``limit`` bytes: a write beyond
    it fails with EFBIG, as a write to a full disk fails with ENOSPC (Python ignores the
    SIGXFSZ that comes with it)."""
    launcher = (
        "import os, resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); "
        "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
    )
    return [sys.executable, "-c", launcher, *command[1:]]


def _killed_at_its_first_call(tmp_path: Path, stub: StubHandle, db: Path) -> str:
    """A run of ITEMS items killed with SIGKILL once its first call reached the stand-in:
    the run's id (its row `running`, its journal beside the store)."""
    dataset = synthetic_dataset(tmp_path / "items.jsonl", ITEMS)
    panel = _panel(tmp_path / "panel.yaml", stub)
    child = subprocess.Popen(
        _command(db, str(dataset), "--panel", str(panel), "--chunk-size", "10"),
        env=child_env(JURYFLOW_TEST_KEY=KILLED_KEY),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_for(child, lambda: stub.stats.requests() >= 1)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)
    run_id = Store(db).latest_run_id()
    assert run_id is not None
    return run_id


def _wait_for(child: subprocess.Popen[str], done: Callable[[], bool], timeout: float = 180) -> None:
    """Until ``done()``; the child must not end first (the timeout only ends a stuck test)."""
    deadline = time.monotonic() + timeout
    while not done():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the child did not get there in time"
        time.sleep(0.02)


def _prompts_sent_with(stub: StubHandle, key: str) -> list[str]:
    """The prompts of the chat calls that carried ``key``, in the order they arrived."""
    return [
        prompt_of(json.loads(wire.body))
        for wire in stub.stats.wire_requests()
        if wire.headers.get("authorization") == f"Bearer {key}"
        and wire.target.endswith("/chat/completions")
    ]


def _fill_journal(journal: Path, size: int) -> None:
    """Grow the journal to ``size`` bytes with a hole (no disk used) and a newline, so that
    its next line starts at ``size``: past the child's file limit."""
    with journal.open("ab") as handle:
        handle.truncate(size - 1)
        handle.seek(0, os.SEEK_END)
        handle.write(b"\n")


def test_a_journal_that_cannot_grow_stops_the_run_without_sending_a_prompt_twice(
    tmp_path: Path,
) -> None:
    """Before the fix, Prefect ran the failed chunk again 5 s later (`retries=1`): every
    prompt of it reached the stand-in twice, and none of the answers could be kept."""
    db = tmp_path / "store.duckdb"
    config = StubConfig(latency_ms=300, seed=11)
    with running_stub_server(config) as stub:
        run_id = _killed_at_its_first_call(tmp_path, stub, db)
        assert run_header_path(journal_path(db, run_id)).exists()
        journal = journal_path(db, run_id)
        _fill_journal(journal, FILE_LIMIT)

        resume = _command(db, "--resume", run_id)
        failed = subprocess.run(
            _with_file_limit(resume, FILE_LIMIT),
            env=child_env(JURYFLOW_TEST_KEY=KEY),
            capture_output=True,
            text=True,
            timeout=300,
        )
        sent = Counter(_prompts_sent_with(stub, KEY))
        left = ITEMS - len(done_pairs(db, run_id))

        finished = subprocess.run(
            resume, env=child_env(JURYFLOW_TEST_KEY=FINISH_KEY), capture_output=True,
            text=True, timeout=300,
        )  # fmt: skip
        resent = len(_prompts_sent_with(stub, FINISH_KEY))

    # each prompt was sent once: no chunk was run again after its calls went out
    twice = sum(n > 1 for n in sent.values())
    assert sent and not twice, f"{twice} of {len(sent)} prompts were sent more than once"
    text = failed.stdout + failed.stderr
    assert failed.returncode == 2, text
    assert "Traceback" not in text, text
    lines = failed.stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("error:")] == lines[-1:], text
    assert str(journal) in lines[-1] and f"--resume {run_id}" in lines[-1], text

    assert finished.returncode == 0, finished.stdout + finished.stderr
    # the resume judged exactly what neither the journal nor the store held
    assert resent == left
    store = Store(db)
    assert store.get_run(run_id).status == "completed"  # type: ignore[union-attr]
    _, counts = store.query(
        "SELECT count(*), count(DISTINCT item_id) FROM judgments WHERE run_id = ?", [run_id]
    )
    assert counts == [(ITEMS, ITEMS)]


def test_a_second_resume_of_a_run_being_resumed_is_refused_in_one_line(tmp_path: Path) -> None:
    """Before the fix both resumes judged the run: one ended with 387 lines and DuckDB's
    duplicate-key error, and the prompts both sent were paid twice."""
    db = tmp_path / "store.duckdb"
    config = StubConfig(latency_ms=300, seed=12)
    with running_stub_server(config) as stub:
        run_id = _killed_at_its_first_call(tmp_path, stub, db)
        left = ITEMS - len(done_pairs(db, run_id))
        resume = _command(db, "--resume", run_id)
        env = child_env(JURYFLOW_TEST_KEY=KEY)
        first = subprocess.Popen(
            resume, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            # Its calls go out: it holds the run. Stopped there, it is still judging the run
            # however long the second takes to start, on however slow a machine.
            _wait_for(first, lambda: bool(_prompts_sent_with(stub, KEY)))
            first.send_signal(signal.SIGSTOP)
            try:
                second = subprocess.run(
                    resume, env=env, capture_output=True, text=True, timeout=300
                )
            finally:
                first.send_signal(signal.SIGCONT)
            out, err = first.communicate(timeout=300)
        finally:
            if first.poll() is None:
                first.kill()
        sent = Counter(_prompts_sent_with(stub, KEY))

    assert second.returncode == 2, second.stdout + second.stderr
    assert second.stdout == ""
    assert second.stderr.strip() == (
        f"error: run {run_id} is being resumed by process {first.pid}; wait for it or stop it"
    )
    assert first.returncode == 0, out + err
    # every prompt went out once, all of them from the first resume
    assert sum(sent.values()) == len(sent) == left
    store = Store(db)
    assert store.get_run(run_id).status == "completed"  # type: ignore[union-attr]
    assert len(store.judged_pairs(run_id)) == ITEMS


BATCH_ITEMS = 12
BATCH_JUDGES = 2
KILL_STEPS = {
    # the create requests reached the provider, which made nothing yet
    "before-anything-made": ("openai:upload", "anthropic:create"),
    # OpenAI's input file stored (no batch), Anthropic's create not yet done
    "file-uploaded": ("openai:uploaded", "anthropic:create"),
    # OpenAI's create request arrived, Anthropic's batch made but its id never answered
    "one-batch-made": ("openai:create", "anthropic:created"),
    # both batches made at the provider, neither id answered: nothing journaled of them
    "both-batches-made": ("openai:created", "anthropic:created"),
    # both batches made, answered and journaled, their first poll not answered
    "both-journaled": ("openai:poll", "anthropic:poll"),
}


@pytest.mark.parametrize(
    "step",
    [step if step == "one-batch-made" else pytest.param(step, marks=pytest.mark.slow)
     for step in KILL_STEPS],
)  # fmt: skip
def test_a_run_killed_at_any_step_of_creating_its_batches_pays_for_no_second_batch(
    tmp_path: Path, step: str
) -> None:
    """Before the fix, a run killed after the provider made its batches but before their ids
    were journaled created new ones on --resume: 3 or 4 batches for 2 judges, the orphans
    billed at a real provider."""
    from juryflow.standin.batch_state import store_of
    from tests.test_batch_interrupts import KEY as BATCH_KEY
    from tests.test_batch_interrupts import write_panel

    db = tmp_path / "store.duckdb"
    dataset = synthetic_dataset(tmp_path / "items.jsonl", BATCH_ITEMS)
    env = child_env(**{BATCH_KEY: "sk-batch-kill", "JURYFLOW_BATCH_POLL_SECONDS": "0.02"})
    with running_stub_server(StubConfig()) as stub:
        panel = write_panel(tmp_path / "panel.yaml", stub.base_url)
        batches = store_of(stub.server)
        held = KILL_STEPS[step]
        batches.hold = set(held)
        command = [str(dataset), "--panel", str(panel)]
        child = subprocess.Popen(
            _command(db, *command),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            # killed once each judge's request is held where the step says
            _wait_for(child, lambda: all(batches.stats.get(f"held:{s}") for s in held))
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
        before = batches.stats.snapshot()
        batches.hold = set()  # the provider answers the resume

        run_id = Store(db).latest_run_id()
        assert run_id is not None
        resumed = subprocess.run(
            _command(db, "--resume", run_id),
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        after = batches.stats.snapshot()

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    made_before = {"before-anything-made": 0, "file-uploaded": 0, "one-batch-made": 1}
    assert before["batches_created"] == made_before.get(step, BATCH_JUDGES)
    # one batch per judge in all, each request answered (and paid for) once
    assert after["batches_created"] == BATCH_JUDGES
    assert after["batch_requests"] == BATCH_ITEMS * BATCH_JUDGES
    store = Store(db)
    assert store.get_run(run_id).status == "completed"  # type: ignore[union-attr]
    _, counted = store.query(
        "SELECT count(*), count(score), count(DISTINCT batch_id) FROM judgments WHERE run_id = ?",
        [run_id],
    )
    assert counted == [(BATCH_ITEMS * BATCH_JUDGES, BATCH_ITEMS * BATCH_JUDGES, BATCH_JUDGES)]
