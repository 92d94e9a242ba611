"""A run that talks (issue 11, point 3) and counts only what it paid for (point 5).

Before: outside a terminal a run printed nothing until its end, the run id (needed for
``--resume``) came only with the summary, and a cached re-run and ``reaggregate`` reported
the full cost again. The runs here are real subprocesses (stdout and stderr are pipes, not a
terminal) against the stub server with slow answers; the terminal bar is drawn on a rich
console forced to be a terminal.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from juryflow.flows.artifacts import run_markdown
from juryflow.flows.runtime import progress
from juryflow.maths.records import Judgment, Usage
from juryflow.report.html import load_report_data, summary_section
from juryflow.runner import _listener
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.storage.store import Store
from juryflow.terminal.progress_view import PlainTicker, Tally, live_bar, progress_seconds
from tests.test_faults import synthetic_dataset
from tests.test_resume import child_env

ITEMS = 60
PROGRESS_LINE = re.compile(
    r"^judged ([\d,]+)/([\d,]+) · [\d,.]+/s · ETA \S+ · \$[\d,.]+ · unscored (\d+)"
)
START_LINE = re.compile(r"^run (\S+) · store (.+) · (http\S+/runs/flow-run/\S+|flow run \S+)$")


def write_panel(path: Path, stub: StubHandle, judges: dict[str, str]) -> Path:
    lines = ["name: talkative", "prices:"]
    lines += [f"  {model}: {{input: 1.0, output: 4.0}}" for model in sorted(set(judges.values()))]
    lines.append("judges:")
    lines += [
        f"  - {{id: {judge}, provider: openai, model: {model}, prompt: data2txt_spans, "
        f"base_url: '{stub.openai_base_url}', api_key_env: JURYFLOW_TEST_KEY, "
        "max_concurrency: 3}"
        for judge, model in judges.items()
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def juryflow(*args: str, seconds: str = "0.5") -> subprocess.CompletedProcess[str]:
    env = child_env(JURYFLOW_TEST_KEY="sk-test-talks", JURYFLOW_PROGRESS_SECONDS=seconds)
    env["COLUMNS"] = "250"
    return subprocess.run(
        [sys.executable, "-m", "juryflow", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def summary_cost(out: str) -> str:
    match = re.search(r"^cost\s+(.+?)\s*$", out, re.MULTILINE)
    assert match, out
    return match.group(1)


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.slow
def test_a_piped_run_says_where_it_is_while_it_runs_and_what_it_paid(tmp_path: Path) -> None:
    dataset = synthetic_dataset(tmp_path / "items.jsonl", ITEMS)
    db = tmp_path / "talks.duckdb"
    config = StubConfig(latency_ms=120, seed=11, retry_after=0.05)
    with running_stub_server(config) as stub:
        # 'good' is slowed by two rate limits (two retries); 'prose' never answers in JSON
        panel = write_panel(
            tmp_path / "panel.yaml", stub, {"good": "stub-spans-good+429x2", "prose": "stub-prose"}
        )
        run = juryflow("run", str(dataset), "--panel", str(panel), "--db", str(db),
                       "--chunk-size", "20", "--quorum", "1")  # fmt: skip
        assert run.returncode == 0, run.stderr
        lines = run.stderr.splitlines()

        # the run id, the store and the flow run come first, before any judgment
        start = START_LINE.match(lines[0])
        assert start, lines[:3]
        run_id = start.group(1)
        assert start.group(2) == str(db)

        counts = [int(m.group(1).replace(",", "")) for m in map(PROGRESS_LINE.match, lines) if m]
        totals = {m.group(2) for m in map(PROGRESS_LINE.match, lines) if m}
        assert len(counts) >= 3, run.stderr
        assert totals == {f"{2 * ITEMS}"}
        assert counts == sorted(counts) and counts[0] < counts[-1] == 2 * ITEMS
        # judged per judgment, not per 200-item chunk: intermediate counts were seen
        assert any(0 < c < 2 * ITEMS for c in counts), counts
        last = [line for line in lines if PROGRESS_LINE.match(line)][-1]
        assert last.endswith(f"· items {ITEMS}/{ITEMS}"), last
        assert "Traceback" not in run.stderr

        out = run.stdout
        assert run_id in out
        assert re.search(r"^duration\s+\d+\.\d s", out, re.MULTILINE), out
        assert re.search(r"^throughput\s+\d+\.\d judgments/s", out, re.MULTILINE), out
        assert re.search(r"^retries\s+2\b", out, re.MULTILINE), out
        assert "unscored by judge:" in out
        prose = re.search(rf"^  prose: {ITEMS} \((.+)\)$", out, re.MULTILINE)
        assert prose and "×" in prose.group(1), out
        assert not re.search(r"^  good:", out, re.MULTILINE)
        first_cost = summary_cost(out)
        assert re.fullmatch(r"\$0\.\d{4} spent in this run", first_cost), first_cost
        spent = float(first_cost.split()[0][1:])
        assert spent > 0

        # The same items again with the judge whose answers are stored: nothing is called,
        # nothing is spent, and what the answers cost once shows as reused.
        cached_panel = write_panel(
            tmp_path / "cached.yaml", stub, {"good": "stub-spans-good+429x2"}
        )
        calls = stub.stats.requests()
        again = juryflow("run", str(dataset), "--panel", str(cached_panel), "--db", str(db))
        assert again.returncode == 0, again.stderr
        restart = START_LINE.match(again.stderr.splitlines()[0])
        assert restart, again.stderr
        assert stub.stats.requests() == calls
        cost = summary_cost(again.stdout)
        assert cost.startswith("$0.0000 spent in this run · $"), cost
        assert "reused from the cache" in cost
        assert float(cost.split("·")[1].split()[0][1:]) > 0
        assert re.search(r"^cache hits\s+60\b", again.stdout, re.MULTILINE)
        assert re.search(r"^tokens in / out\s+0 / 0\b", again.stdout, re.MULTILINE)
        progress_lines = [m for m in map(PROGRESS_LINE.match, again.stderr.splitlines()) if m]
        assert all("$0.00 " in m.group(0) for m in progress_lines), again.stderr

    # re-aggregating calls no judge and shows no model cost
    regrouped = juryflow("reaggregate", run_id, "--db", str(db), "--quorum", "1")
    assert regrouped.returncode == 0, regrouped.stderr
    assert re.search(r"^model cost\s+none: no judge was called", regrouped.stdout, re.MULTILINE)
    assert not re.search(r"^cost\s", regrouped.stdout, re.MULTILINE), regrouped.stdout
    assert "spent" not in regrouped.stdout

    # the HTML report and the flow run's artifact count the same way
    store = Store(db)
    for rerun_id in (restart.group(1), store.latest_run_id()):
        assert rerun_id is not None and rerun_id != run_id
        report = summary_section(load_report_data(store, rerun_id))
        assert "0.0000 spent in this run;" in report
        assert "$0.0000 spent in this run" in run_markdown(store, rerun_id)
    report = summary_section(load_report_data(store, run_id))
    assert f"{spent:.4f} spent in this run; 0.0000 reused" in report


def judgment(
    item: str, cost: float | None, *, cached: bool = False, score: float | None = 0.5
) -> Judgment:
    return Judgment(
        item, "j", "spans", score, unscored_reason=None if score is not None else "no JSON",
        usage=Usage(10, 5, cost), cached=cached,
    )  # fmt: skip


def test_a_cached_judgment_costs_nothing_in_the_progress() -> None:
    tally = Tally()
    progress.add_listener(tally.take)
    try:
        progress.judged([judgment("1", 0.25), judgment("2", 0.5, cached=True)])
        progress.judged([judgment("3", 0.125, score=None), judgment("4", None)])
    finally:
        progress.remove_listener(tally.take)
    assert (tally.judged, tally.cached, tally.unscored) == (4, 1, 1)
    assert tally.cost_usd == pytest.approx(0.375)


def test_the_terminal_bar_moves_per_judgment_with_rate_eta_cost_and_unscored() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=200, color_system=None)
    tally = Tally()
    bar = live_bar(console, tally, redirect_stderr=False)
    listen = _listener(tally, bar, None)
    with bar:
        listen(progress.Started("RUN-1", "/tmp/store.duckdb", "abc", None))
        listen(progress.Total(3, 2))
        listen(progress.Judged(1, cost_usd=0.02))
        listen(progress.Judged(1, unscored=1))
        listen(progress.ItemsDone(1))
        bar.refresh()
        assert bar.tasks[0].completed == 2 and bar.tasks[0].total == 6
    text = buffer.getvalue()
    assert "run RUN-1 · store /tmp/store.duckdb · flow run abc" in text
    assert re.search(r"judged 2/6 · [\d,.]+/s · ETA \S+ · \$0\.02 · unscored 1 · items 1/3", text)


def test_plain_lines_come_on_a_timer_and_a_bad_interval_is_one_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    warnings = io.StringIO()
    monkeypatch.setenv("JURYFLOW_PROGRESS_SECONDS", "soon")
    assert progress_seconds(warnings) == 5.0
    assert (
        warnings.getvalue().count("\n") == 1 and "JURYFLOW_PROGRESS_SECONDS" in warnings.getvalue()
    )
    monkeypatch.setenv("JURYFLOW_PROGRESS_SECONDS", "0.05")
    assert progress_seconds(warnings) == 0.05

    out = io.StringIO()
    tally = Tally()
    ticker = PlainTicker(tally, out, 0.05)
    listen = _listener(tally, None, ticker)
    listen(progress.Started("RUN-2", "s.duckdb", None, None))
    listen(progress.Total(10, 1))
    listen(progress.Judged(4, cost_usd=1.5))
    ticker.stop.wait(0.3)
    ticker.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "run RUN-2 · store s.duckdb · no Prefect flow run"
    assert len(lines) >= 3
    assert PROGRESS_LINE.match(lines[-1]) and "judged 4/10" in lines[-1] and "$1.50" in lines[-1]
