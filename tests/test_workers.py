"""``--workers N``: chunks judged on N processes of Prefect's process pool, one writer.

The runs are real ``python -m juryflow run`` subprocesses against the stand-in over HTTP.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from juryflow.flows.workers import share
from juryflow.judges.panel import JudgeSpec, PanelSpec
from juryflow.planning.worker_count import (
    auto_workers,
    check_workers,
    default_workers,
    parse_workers,
)
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.storage.store import Store
from tests.test_faults import synthetic_dataset
from tests.test_interrupts import (
    assert_interrupted_cleanly,
    descendants,
    signal_and_watch,
    standalone_env,
    wait_for_judgments,
    wait_gone,
)
from tests.test_resume import child_env

ITEMS = 120
JUDGES = ("a", "b", "c")
KEY = "sk-test-workers"


def spec(judge_id: str, concurrency: int, rpm: float | None = None) -> JudgeSpec:
    return JudgeSpec(
        id=judge_id,
        provider="openai",
        model="m",
        prompt="data2txt_score",
        max_concurrency=concurrency,
        requests_per_minute=rpm,
    )


@given(
    concurrency=st.integers(min_value=1, max_value=500),
    workers=st.integers(min_value=1, max_value=16),
    rpm=st.none() | st.floats(min_value=1, max_value=1e5),
)
def test_the_workers_shares_add_up_to_the_judges_limits(
    concurrency: int, workers: int, rpm: float | None
) -> None:
    parts = [share(spec("j", concurrency, rpm), k, workers) for k in range(workers)]
    # every worker may call (at least one at a time); together they keep the judge's limit
    assert all(p.max_concurrency >= 1 for p in parts)
    assert sum(p.max_concurrency for p in parts) == max(concurrency, workers)
    if rpm is not None:
        assert sum(p.requests_per_minute or 0 for p in parts) == pytest.approx(rpm)


def test_default_workers_follow_the_panels_concurrency_and_the_cores() -> None:
    def panel(*concurrency: int) -> PanelSpec:
        judges = [spec(f"j{n}", c) for n, c in enumerate(concurrency)]
        return PanelSpec(name="p", judges=judges)

    assert default_workers(panel(64, 64, 64), cpus=8) == 1
    assert default_workers(panel(200, 200), cpus=8) == 2
    assert default_workers(panel(200, 200, 200, 200, 200), cpus=2) == 2
    assert default_workers(panel(1000), cpus=1) == 1
    offline = PanelSpec(
        name="o", judges=[JudgeSpec(id="d", provider="offline", detector="overlap")]
    )
    assert default_workers(offline, cpus=8) == 1


def test_auto_workers_take_every_core_unless_the_panel_would_leave_one_idle() -> None:
    def panel(*judges: JudgeSpec) -> PanelSpec:
        return PanelSpec(name="p", judges=list(judges))

    three = panel(spec("a", 64), spec("b", 64), spec("c", 64))
    assert auto_workers(three, cpus=2).describe() == "2 call processes (--workers auto: 2 cores)"
    # 192 calls keep at most 6 processes busy (32 each)
    assert auto_workers(three, cpus=8).describe() == (
        "6 call processes (--workers auto: 192 concurrent calls)"
    )
    # rate limits of 3 x 6,000 a minute = 300 calls/s: one process keeps up with 500
    slow = panel(spec("a", 64, 6000), spec("b", 64, 6000), spec("c", 64, 6000))
    assert auto_workers(slow, cpus=8).describe() == (
        "1 call process (--workers auto: rate limits of 300 calls/s)"
    )
    assert auto_workers(panel(spec("a", 8)), cpus=8).count == 1
    offline = panel(JudgeSpec(id="d", provider="offline", detector="overlap"))
    assert auto_workers(offline, cpus=8).reason == "the panel makes no model calls"
    budget = auto_workers(three, cpus=8, max_cost=1.0)
    assert (budget.count, budget.reason) == (1, "--max-cost is kept by one process")


@pytest.mark.parametrize(("given", "meant"), [("auto", "auto"), (" AUTO", "auto"), ("3", 3)])
def test_workers_read_a_count_or_auto(given: str, meant: object) -> None:
    assert parse_workers(given) == meant


@pytest.mark.parametrize("given", ["0", "65", "many", "-1", "2.5"])
def test_other_workers_values_are_refused_naming_the_choices(given: str) -> None:
    with pytest.raises(ValueError, match=r"a number of processes \(1-64\) or 'auto'"):
        parse_workers(given)
    # auto goes with a budget (it picks one process); a count above one does not
    check_workers("auto", distributed=False, max_cost=1.0)
    with pytest.raises(ValueError, match="keep one"):
        check_workers("auto", distributed=True, max_cost=None)


@pytest.mark.parametrize(
    ("distributed", "max_cost", "fix"),
    [(True, None, "keep one"), (False, 1.0, "drop --workers or --max-cost")],
)
def test_workers_are_refused_with_what_they_cannot_go_with(
    distributed: bool, max_cost: float | None, fix: str
) -> None:
    check_workers(1, distributed=distributed, max_cost=max_cost)
    check_workers(None, distributed=distributed, max_cost=max_cost)
    with pytest.raises(ValueError, match=fix):
        check_workers(2, distributed=distributed, max_cost=max_cost)


@pytest.mark.parametrize(
    ("options", "line"),
    [
        (
            ["--workers", "2", "--max-cost", "1"],
            "error: --max-cost is kept by one process counting every call: "
            "drop --workers or --max-cost",
        ),
        (
            ["--workers", "lots"],
            "error: --workers takes a number of processes (1-64) or 'auto', not 'lots'",
        ),
    ],
)
def test_the_command_line_refuses_workers_it_cannot_use_in_one_line(
    tmp_path: Path, options: list[str], line: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "juryflow", "run", *options, "--db", str(tmp_path / "x.duckdb")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [line], done.stderr
    assert not (tmp_path / "x.duckdb").exists()


@pytest.mark.usefixtures("prefect_harness")
def test_workers_auto_says_its_choice_in_the_start_line_and_judges_everything(
    tmp_path: Path,
) -> None:
    dataset = synthetic_dataset(tmp_path / "items.jsonl", 30)
    with running_stub_server(StubConfig(seed=3)) as stub:
        panel = write_panel(tmp_path / "panel.yaml", stub, concurrency=32)
        done = juryflow_run(dataset, panel, tmp_path / "auto.duckdb", "--workers", "auto")
        assert stub.stats.requests() == 30 * len(JUDGES)  # each call once
    assert done.returncode == 0, done.stdout + done.stderr
    expected = auto_workers(
        PanelSpec(name="p", judges=[spec(judge, 32) for judge in JUDGES])
    ).describe()
    start = next(line for line in done.stderr.splitlines() if line.startswith("run "))
    assert f" · {expected} · " in start, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    judged = "SELECT count(*) FROM judgments WHERE unscored_reason IS NULL"
    assert rows(tmp_path / "auto.duckdb", judged) == [(30 * len(JUDGES),)]


def write_panel(path: Path, stub: StubHandle, concurrency: int = 8) -> Path:
    path.write_text(
        "name: workers\njudges:\n"
        + "".join(
            f"  - {{id: {judge}, provider: openai, model: gpt-{judge}, prompt: data2txt_spans, "
            f"base_url: '{stub.openai_base_url}', api_key_env: JURYFLOW_TEST_KEY, "
            f"max_concurrency: {concurrency}}}\n"
            for judge in JUDGES
        ),
        encoding="utf-8",
    )
    return path


def juryflow_run(
    dataset: Path, panel: Path, db: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "juryflow", "run", str(dataset), "--panel", str(panel),
         "--db", str(db), "--chunk-size", "20", "--no-cache", *extra],
        env=child_env(JURYFLOW_TEST_KEY=KEY), capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    _, found = Store(db).query(sql)
    return sorted(found, key=repr)


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_two_workers_store_what_one_process_stores(tmp_path: Path) -> None:
    dataset = synthetic_dataset(tmp_path / "items.jsonl", ITEMS)
    with running_stub_server(StubConfig(latency_ms=20, seed=3)) as stub:
        panel = write_panel(tmp_path / "panel.yaml", stub)
        one = juryflow_run(dataset, panel, tmp_path / "one.duckdb", "--workers", "1")
        assert one.returncode == 0, one.stdout + one.stderr
        before = stub.stats.requests()
        two = juryflow_run(dataset, panel, tmp_path / "two.duckdb", "--workers", "2")
        assert two.returncode == 0, two.stdout + two.stderr
        assert stub.stats.requests() - before == ITEMS * len(JUDGES)  # each call once
    assert "Traceback" not in two.stderr, two.stderr
    judgments = "SELECT item_id, judge_id, score, unscored_reason, raw_output FROM judgments"
    consensus = "SELECT item_id, status, score_median, hallucinated FROM consensus"
    spans = "SELECT item_id, span_index, char_start, char_end FROM consensus_spans"
    for sql in (judgments, consensus, spans):
        assert rows(tmp_path / "one.duckdb", sql) == rows(tmp_path / "two.duckdb", sql)
    assert len(rows(tmp_path / "two.duckdb", judgments)) == ITEMS * len(JUDGES)


def start_run(dataset: Path, panel: Path, db: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "juryflow", "run", str(dataset), "--panel", str(panel),
         "--db", str(db), "--chunk-size", "20", *extra],
        env=child_env(JURYFLOW_TEST_KEY=KEY), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip


def worker_processes(pid: int) -> list[psutil.Process]:
    """The flow's process-pool workers (spawned interpreters)."""
    return [p for p in descendants(pid) if "spawn_main" in " ".join(p.cmdline())]


def wait_for_workers(pid: int, count: int, timeout: float = 60) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = worker_processes(pid)
        if len(found) >= count:
            return found
        time.sleep(0.1)
    raise AssertionError("the worker processes did not start")


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_ctrl_c_stops_every_worker_and_the_run_resumes(tmp_path: Path) -> None:
    dataset = synthetic_dataset(tmp_path / "items.jsonl", ITEMS)
    db = tmp_path / "stopped.duckdb"
    with running_stub_server(StubConfig(latency_ms=250, seed=5)) as stub:
        panel = write_panel(tmp_path / "panel.yaml", stub, concurrency=4)
        child = start_run(dataset, panel, db, "--workers", "2")
        run_id = wait_for_judgments(child, db, at_least=60)
        workers = wait_for_workers(child.pid, 2)

        _, _, late_calls, out, err = signal_and_watch(child, stub, signal.SIGINT, group=True)

        assert child.returncode == 130, out + err
        assert late_calls == 0
        assert_interrupted_cleanly(db, run_id, out, err)
        assert wait_gone(workers) == []
        done = Store(db).judged_pairs(run_id)
        before = stub.stats.requests()
        resumed = subprocess.run(
            [sys.executable, "-m", "juryflow", "run", "--resume", run_id, "--db", str(db),
             "--workers", "2"],
            env=child_env(JURYFLOW_TEST_KEY=KEY), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert stub.stats.requests() - before == ITEMS * len(JUDGES) - len(done)
    assert rows(db, "SELECT count(*), count(DISTINCT (item_id, judge_id)) FROM judgments") == [
        (ITEMS * len(JUDGES), ITEMS * len(JUDGES))
    ]
    assert rows(db, "SELECT count(*) FROM consensus") == [(ITEMS,)]


@pytest.mark.usefixtures("prefect_harness")
def test_killed_with_sigkill_the_run_leaves_no_worker_calling(tmp_path: Path) -> None:
    dataset = synthetic_dataset(tmp_path / "items.jsonl", ITEMS)
    db = tmp_path / "killed.duckdb"
    with running_stub_server(StubConfig(latency_ms=250, seed=5)) as stub:
        panel = write_panel(tmp_path / "panel.yaml", stub, concurrency=4)
        child = start_run(dataset, panel, db, "--workers", "2")
        wait_for_judgments(child, db, at_least=20)
        workers = wait_for_workers(child.pid, 2)
        child.kill()
        child.communicate(timeout=30)
        assert wait_gone(workers, timeout=60.0) == []
        calls = stub.stats.requests()
        time.sleep(1.0)
        assert stub.stats.requests() == calls


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_worker_killed_under_the_run_fails_it_in_one_line(tmp_path: Path) -> None:
    dataset = synthetic_dataset(tmp_path / "items.jsonl", ITEMS)
    db = tmp_path / "broken.duckdb"
    with running_stub_server(StubConfig(latency_ms=250, seed=5)) as stub:
        panel = write_panel(tmp_path / "panel.yaml", stub, concurrency=4)
        child = start_run(dataset, panel, db, "--workers", "2")
        run_id = wait_for_judgments(child, db, at_least=20)
        workers = wait_for_workers(child.pid, 2)
        workers[0].kill()
        out, err = child.communicate(timeout=120)
        assert child.returncode == 2, out + err
        assert "a judge worker process ended before the run did" in err, err
        assert "Traceback" not in err, err
        assert f"--resume {run_id}" in err, err
        run = Store(db).get_run(run_id)
        assert run is not None and run.status == "failed"
        assert wait_gone(workers) == []
        resumed = subprocess.run(
            [sys.executable, "-m", "juryflow", "run", "--resume", run_id, "--db", str(db),
             "--workers", "2"],
            env=child_env(JURYFLOW_TEST_KEY=KEY), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert rows(db, "SELECT count(*), count(DISTINCT (item_id, judge_id)) FROM judgments") == [
        (ITEMS * len(JUDGES), ITEMS * len(JUDGES))
    ]


def prefect_servers(pid: int) -> list[psutil.Process]:
    return [
        p
        for p in descendants(pid)
        if any(s in " ".join(p.cmdline()) for s in ("prefect.server.api", "prefect_server"))
    ]


@pytest.mark.slow
def test_workers_share_the_runs_ephemeral_prefect_server(tmp_path: Path) -> None:
    """With no PREFECT_API_URL, juryflow starts one ephemeral server; the workers must use it
    rather than start one each (seconds and ~250 MB apiece)."""
    dataset = synthetic_dataset(tmp_path / "items.jsonl", 60)
    db = tmp_path / "ephemeral.duckdb"
    env = standalone_env()
    env["JURYFLOW_TEST_KEY"] = KEY
    with running_stub_server(StubConfig(latency_ms=100, seed=5)) as stub:
        panel = write_panel(tmp_path / "panel.yaml", stub, concurrency=4)
        child = subprocess.Popen(
            [sys.executable, "-m", "juryflow", "run", str(dataset), "--panel", str(panel),
             "--db", str(db), "--chunk-size", "20", "--workers", "2"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_for_judgments(child, db, at_least=30)
        wait_for_workers(child.pid, 2)
        servers = prefect_servers(child.pid)
        out, err = child.communicate(timeout=300)
    assert child.returncode == 0, out + err
    assert len(servers) == 1, [" ".join(p.cmdline())[:120] for p in servers]
