"""`juryflow run --dry-run`: calls, tokens and cost per judge from the rendered prompts and
the price table, with no model call, no API key, no Prefect and nothing written."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from juryflow.planning.dry_run import CHARS_PER_TOKEN, DEFAULT_OUTPUT_TOKENS, estimate_run
from juryflow.planning.run_request import RunRequest
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.storage.store import Store
from tests.test_faults import synthetic_dataset

KEY = "JURYFLOW_DRY_RUN_KEY"


def stub_panel(path: Path, stub: StubHandle, *, priced: bool = True) -> Path:
    prices = (
        "prices:\n  stub-spans-good: {input: 3.0, output: 15.0}\n"
        "  stub-score-0.6: {input: 1.0, output: 4.0}\n"
        if priced
        else ""
    )
    path.write_text(
        f"name: dry\n{prices}judges:\n"
        f"  - {{id: a, provider: anthropic, model: stub-spans-good, prompt: data2txt_spans, "
        f"base_url: '{stub.anthropic_base_url}', api_key_env: {KEY}, max_tokens: 500}}\n"
        f"  - {{id: b, provider: openai, model: stub-score-0.6, prompt: hallucination_score, "
        f"base_url: '{stub.openai_base_url}', api_key_env: {KEY}}}\n"
        "  - {id: n, provider: offline, detector: numbers}\n",
        encoding="utf-8",
    )
    return path


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "juryflow", "run", *args],
        env=env if env is not None else {k: v for k, v in os.environ.items() if k != KEY},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_dry_run_prints_each_judge_and_calls_nothing(tmp_path: Path) -> None:
    dataset = synthetic_dataset(tmp_path / "items.jsonl", 12)
    db = tmp_path / "store.duckdb"
    with running_stub_server(StubConfig()) as stub:
        panel = stub_panel(tmp_path / "panel.yaml", stub)
        # No key in the environment, no Prefect server: neither is needed.
        done = cli(str(dataset), "--panel", str(panel), "--db", str(db), "--dry-run",
                   "--limit", "10")  # fmt: skip
        assert stub.stats.requests() == 0
    assert done.returncode == 0, done.stderr
    assert not db.exists(), "a dry run must not create the store"
    out = done.stdout
    assert "dry run: 10 items" in out and "no model was called and nothing was written" in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if "│" in line}
    cells = {name: [c.strip() for c in line.split("│")[3:-1]] for name, line in rows.items()}
    assert cells["a"][:2] == ["10", "0"] and cells["b"][:2] == ["10", "0"]
    assert cells["n"] == ["0", "0", "0", "0", "$0.0000", "$0.0000"]  # a detector: no call
    assert cells["total"][0] == "20"
    assert "characters of each rendered prompt / 4" in out
    assert f"a guess of {DEFAULT_OUTPUT_TOKENS} per call" in out
    assert f"{KEY} is not set; the run would refuse to start" in out


@pytest.mark.usefixtures("prefect_harness")
def test_the_estimate_matches_the_run_and_sees_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Input tokens are estimated from the prompts the run renders: the stand-in counts
    its usage the same way (characters / 4), so estimate and run agree exactly."""
    from juryflow.flows.evaluate import evaluate

    dataset = synthetic_dataset(tmp_path / "items.jsonl", 9)
    db = tmp_path / "store.duckdb"
    monkeypatch.setenv(KEY, "sk-dry-run")
    with running_stub_server(StubConfig()) as stub:
        panel = stub_panel(tmp_path / "panel.yaml", stub)
        before = estimate_run(
            RunRequest(dataset=str(dataset), panel=str(panel), db=str(db), limit=6)
        )
        assert stub.stats.requests() == 0 and not db.exists()
        result = asyncio.run(
            evaluate(RunRequest(dataset=str(dataset), panel=str(panel), db=str(db), limit=6))
        )
        assert stub.stats.requests() == 12
        after = estimate_run(RunRequest(dataset=str(dataset), panel=str(panel), db=str(db)))
        assert stub.stats.requests() == 12
    _, rows = Store(db).query(
        "SELECT judge_id, sum(input_tokens), avg(output_tokens), sum(cost_usd) "
        "FROM judgments WHERE run_id = ? AND judge_id <> 'n' GROUP BY judge_id",
        [result["run_id"]],
    )
    spent = {judge: (int(tokens_in), float(out), float(cost or 0)) for judge, tokens_in, out, cost
             in rows}  # fmt: skip
    _, cache_rows = Store(db).query(
        "SELECT judge_id, sum(cache_write_tokens), sum(cache_read_tokens) FROM judgments "
        "WHERE run_id = ? AND judge_id = 'a' GROUP BY judge_id",
        [result["run_id"]],
    )
    spent_cache = {judge: (int(w or 0), int(r or 0)) for judge, w, r in cache_rows}
    estimates = {e.judge_id: e for e in before.judges}
    for judge in ("a", "b"):
        assert estimates[judge].calls == 6 and estimates[judge].cached == 0
        assert estimates[judge].input_tokens == spent[judge][0]
        assert estimates[judge].input_tokens > 6 * 500 // CHARS_PER_TOKEN
    assert estimates["a"].output_tokens_max == 6 * 500
    assert estimates["n"].calls == 0 and estimates["n"].cost_usd == 0.0
    # the price table: panel prices per million tokens; a's prompt has a static part over
    # Anthropic's minimum, written to the cache once (1.25x) and read by each later call (0.1x)
    a = estimates["a"]
    written, read = a.cache_tokens
    assert written > 1024 and read == 5 * written
    uncached = a.input_tokens - written - read
    assert a.cost_usd == pytest.approx(
        (uncached * 3.0 + written * 3.75 + read * 0.3 + a.output_tokens * 15.0) / 1e6
    )
    # what the run was billed for the same cache: the stand-in caches as Anthropic does
    assert spent_cache["a"] == (written, read)
    # b's prompt has no static part: every input token at the full rate
    b = estimates["b"]
    assert b.cache_tokens == (0, 0)
    assert b.cost_usd == pytest.approx((b.input_tokens * 1.0 + b.output_tokens * 4.0) / 1e6)

    # On the same store: the 6 judged items come from the cache, 3 are calls, and the
    # output size is what the earlier calls produced.
    reused = {e.judge_id: e for e in after.judges}
    assert (reused["a"].cached, reused["a"].calls) == (6, 3)
    assert (reused["b"].cached, reused["b"].calls) == (6, 3)
    assert reused["a"].output_basis == "mean of 6 earlier calls in the store"
    assert reused["a"].output_tokens_each == pytest.approx(spent["a"][1])
    no_cache = estimate_run(
        RunRequest(dataset=str(dataset), panel=str(panel), db=str(db), use_cache=False)
    )
    assert {e.judge_id: e.calls for e in no_cache.judges} == {"a": 9, "b": 9, "n": 0}
    _, runs = Store(db).query("SELECT count(*) FROM runs")
    assert runs == [(1,)]  # the estimates wrote no run


def test_sample_and_map_are_applied_as_the_run_applies_them(tmp_path: Path) -> None:
    dataset = synthetic_dataset(tmp_path / "items.jsonl", 30)
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_text(
        dataset.read_text(encoding="utf-8").replace('"response":', '"answer":'), encoding="utf-8"
    )
    with running_stub_server(StubConfig()) as stub:
        panel = stub_panel(tmp_path / "panel.yaml", stub)
        sampled = estimate_run(
            RunRequest(
                dataset=str(renamed),
                panel=str(panel),
                mapping={"response": "answer", "output": "answer"},
                sample=7,
                seed=3,
                db=str(tmp_path / "none.duckdb"),
            )
        )
    assert sampled.items == 7
    assert {e.judge_id: e.calls for e in sampled.judges} == {"a": 7, "b": 7, "n": 0}


def test_the_dry_run_refuses_what_the_run_would_refuse(tmp_path: Path) -> None:
    dataset = synthetic_dataset(tmp_path / "items.jsonl", 3)
    with running_stub_server(StubConfig()) as stub:
        unpriced = stub_panel(tmp_path / "panel.yaml", stub, priced=False)
        no_price = cli(
            str(dataset),
            "--panel",
            str(unpriced),
            "--dry-run",
            "--max-cost",
            "1",
            "--db",
            str(tmp_path / "s.duckdb"),
        )
        missing = cli(str(tmp_path / "absent.jsonl"), "--dry-run")
        resumed = cli("--dry-run", "--resume", "whatever", "--db", str(tmp_path / "s.duckdb"))
        # without --max-cost an unknown price is a note and an n/a, not a refusal
        shown = cli(
            str(dataset), "--panel", str(unpriced), "--dry-run", "--db", str(tmp_path / "s.duckdb")
        )
        assert stub.stats.requests() == 0
    assert no_price.returncode == 2
    assert "prices: {stub-spans-good:" in no_price.stderr
    assert len(no_price.stderr.strip().splitlines()) == 1
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    assert resumed.returncode == 2 and "drop --resume" in resumed.stderr
    assert shown.returncode == 0, shown.stderr
    assert "no price for a's model stub-spans-good" in shown.stdout
    assert "n/a" in shown.stdout
    assert "Traceback" not in no_price.stderr + missing.stderr + resumed.stderr


def test_the_readme_dry_run_command(tmp_path: Path) -> None:
    """The README's example, as written: the bundled sample with the stand-in panel (no
    stand-in needs to run: nothing is called)."""
    from tests.conftest import REPO, SAMPLE

    command = [sys.executable, "-m", "juryflow", "run", str(SAMPLE.relative_to(REPO)),
               "--panel", "examples/panel.stub.yaml", "--dry-run"]  # fmt: skip
    done = subprocess.run(
        command,
        cwd=REPO,
        env={
            **{k: v for k, v in os.environ.items() if k != "JURYFLOW_DB"},
            "JURYFLOW_DB": str(tmp_path / "juryflow.duckdb"),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "dry run: 60 items" in done.stdout
    assert "│ claude-stub │ stub-spans-good     │    60 │" in done.stdout
    assert not (tmp_path / "juryflow.duckdb").exists()


def test_a_custom_prompt_file_is_estimated_from_its_own_text(tmp_path: Path) -> None:
    """`juryflow init`'s LLM panel asks a prompt file: the dry run renders that file."""
    from juryflow.cli.init_project import write_starter

    write_starter(tmp_path)
    done = cli(
        str(tmp_path / "data.jsonl"),
        "--panel",
        str(tmp_path / "panel_llm.yaml"),
        "--db",
        str(tmp_path / "none.duckdb"),
        "--dry-run",
    )
    assert done.returncode == 0, done.stderr
    llm_row = next(line for line in done.stdout.splitlines() if "claude-sonnet-4-5" in line)
    assert " 6 " in llm_row  # one call per starter item
    assert not (tmp_path / "none.duckdb").exists()
