"""Issue 44, points 5, 6, 7 and the first two of 9: what a server, a dataset, a panel file or
a query can send that juryflow took at its word.

- 5: a usage report out of range (negative counts, cached tokens below 0 or above the
  prompt's) is a provider error, the judgment unscored with a reason naming the bad usage;
  never priced. Both providers, over real HTTP against the stand-in, through the SDK's own
  call and the lean replay after it; and the batch path's ``answered``.
- 6: a dataset wider than ``MAX_COLUMNS`` is refused in one line naming the file, the count
  and the limit (CSV, JSONL, Parquet), the header checks are linear (timed by
  ``bench/bench_dataset_headers.py``, not here), and an item's metadata is bounded.
- 7: JSON and YAML nested past ``MAX_NESTING_DEPTH`` are refused where they arrive (a
  judge's answer: unscored with a reason; ``juryflow sql`` and a panel file: one line), by
  the one helper of :mod:`juryflow.judges.untrusted.loading`.
- 9: ``?code=`` (and its kin) in a ``base_url`` is masked; a row without an id whose made-up
  id is an earlier row's own is refused in words true of both rows.

New names are imported inside the tests that need them, so that each test failed on its own
on the code before the fix.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from juryflow.judges.factory import build_judge
from juryflow.judges.llm_judge import LLMJudge, PreparedCall
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.ratelimit import reset_limiters
from juryflow.maths.records import Item, Judgment
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server
from juryflow.storage.dataset_readers import COLUMN_SAMPLE_ROWS, DatasetError
from juryflow.storage.datasets import RowError, dataset_columns, iter_rows, read_items
from tests.conftest import REPO

KEY_ENV = "JURYFLOW_TEST_ROUND3_KEY"
ITEM = Item("r3-1", {"input": "List the files.", "output": "I ran ls and found main.py."})
OTHER_ITEM = Item("r3-2", {"input": "Count the files.", "output": "There are 3 files."})
PRICED_MODEL = {"anthropic": "claude-haiku-4-5", "openai": "gpt-4o-mini"}
"""Models with a price in juryflow's table: a bad usage report would be priced for them."""


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubHandle]:
    monkeypatch.setenv(KEY_ENV, "sk-test-round3-0123456789abcdef")
    reset_limiters()
    with running_stub_server(StubConfig()) as handle:
        yield handle
    reset_limiters()


def _judge(stub: StubHandle, provider: str, *, structured: bool = True) -> LLMJudge:
    spec = JudgeSpec(
        id=f"{provider}-r3-{'s' if structured else 't'}",
        provider=provider,  # type: ignore[arg-type]
        model=PRICED_MODEL[provider],
        prompt="hallucination_score",
        base_url=stub.anthropic_base_url if provider == "anthropic" else stub.openai_base_url,
        api_key_env=KEY_ENV,
        timeout=30.0,
        max_attempts=3,
        structured_output=structured,
    )
    judge = build_judge(spec)
    assert isinstance(judge, LLMJudge)
    return judge


@pytest.fixture
async def judges(stub: StubHandle) -> AsyncIterator[dict[str, LLMJudge]]:
    built = {provider: _judge(stub, provider) for provider in ("anthropic", "openai")}
    yield built
    for judge in built.values():
        await judge.aclose()


# --- 5: usage out of its range ------------------------------------------------------------


def _cached(tokens: int) -> dict[str, Any]:
    """An OpenAI usage report of a 100-token prompt, ``tokens`` of them cached."""
    details = {"cached_tokens": tokens}
    return {"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": details}


BAD_USAGE: list[tuple[str, dict[str, Any], str]] = [
    # (provider, the usage the server reports, what the reason must name)
    ("openai", {"prompt_tokens": -1_000_000, "completion_tokens": 10}, "prompt_tokens"),
    ("openai", {"prompt_tokens": 100, "completion_tokens": -5}, "completion_tokens"),
    ("openai", _cached(-1), "cached_tokens"),
    ("openai", _cached(500), "cached_tokens"),
    ("openai", {"prompt_tokens": 10**15, "completion_tokens": 5}, "prompt_tokens"),
    ("anthropic", {"input_tokens": -1_000_000, "output_tokens": 10}, "input_tokens"),
    ("anthropic", {"input_tokens": 100, "output_tokens": -5}, "output_tokens"),
    (
        "anthropic",
        {"input_tokens": 100, "output_tokens": 5, "cache_read_input_tokens": -50},
        "cache_read_input_tokens",
    ),
    (
        "anthropic",
        {"input_tokens": 100, "output_tokens": 5, "cache_creation_input_tokens": -50},
        "cache_creation_input_tokens",
    ),
]  # fmt: skip


def _refused_for_usage(judgment: Judgment, field: str) -> None:
    assert judgment.score is None
    reason = judgment.unscored_reason or ""
    assert reason.startswith("provider error after 1 attempt: server: "), reason
    assert "usage" in reason and field in reason, reason
    # Not priced, not even partly: no token count of that answer is kept.
    assert judgment.usage.cost_usd is None
    assert judgment.usage.input_tokens is None and judgment.usage.output_tokens is None
    assert judgment.usage.cache_read_tokens is None
    assert judgment.usage.cache_write_tokens is None


@pytest.mark.parametrize(("provider", "usage", "field"), BAD_USAGE)
async def test_usage_out_of_range_is_a_provider_error_never_priced(
    stub: StubHandle, judges: dict[str, LLMJudge], provider: str, usage: dict[str, Any], field: str
) -> None:
    from juryflow.judges.budget import Budget

    judge = judges[provider]
    budget = Budget(1.0)
    # The first call goes through the SDK's own POST, the second through the lean replay of
    # the request it recorded: both read the usage the same way.
    for item in (ITEM, OTHER_ITEM):
        stub.enqueue(judge.model, "usage:" + json.dumps(usage))
        judgment = await judge.judge(item, budget=budget)
        _refused_for_usage(judgment, field)
    assert budget.state().spent_usd == 0.0
    assert budget.state().calls == 2


@pytest.mark.parametrize(
    ("provider", "usage"),
    [
        # Every cached token at most the prompt's: an answer served wholly from the cache.
        ("openai", {"prompt_tokens": 2_000, "completion_tokens": 5,
                    "prompt_tokens_details": {"cached_tokens": 2_000}}),
        ("anthropic", {"input_tokens": 0, "output_tokens": 5, "cache_read_input_tokens": 2_000,
                       "cache_creation_input_tokens": 0}),
    ],
)  # fmt: skip
async def test_usage_at_the_edges_of_its_range_is_priced(
    stub: StubHandle, judges: dict[str, LLMJudge], provider: str, usage: dict[str, Any]
) -> None:
    judge = judges[provider]
    stub.enqueue(judge.model, "usage:" + json.dumps(usage))
    judgment = await judge.judge(ITEM)
    assert judgment.unscored_reason is None and judgment.score is not None
    assert judgment.usage.input_tokens == 2_000
    assert judgment.usage.cost_usd is not None and judgment.usage.cost_usd > 0


def test_a_batch_answer_with_bad_usage_is_unscored(monkeypatch: pytest.MonkeyPatch) -> None:
    # The batch path reads a result with the providers' own readers and judges it with
    # ``answered``; no batch server needed to check what it does with bad usage.
    from juryflow.judges.providers.anthropic import _response as message_response
    from juryflow.judges.providers.openai import _response as completion_response

    monkeypatch.setenv(KEY_ENV, "sk-test-round3-0123456789abcdef")
    answer = {"score": 0.0, "reasoning": "grounded"}
    responses = {
        "anthropic": message_response(
            {
                "content": [{"type": "tool_use", "name": "submit_judgment", "input": answer}],
                "usage": {"input_tokens": -1_000_000, "output_tokens": 10},
            }
        ),
        "openai": completion_response(
            {
                "choices": [{"message": {"content": json.dumps(answer)}}],
                "usage": {"prompt_tokens": -1_000_000, "completion_tokens": 10},
            },
            True,
        ),
    }
    for provider, response in responses.items():
        spec = JudgeSpec(
            id=f"{provider}-batch",
            provider=provider,  # type: ignore[arg-type]
            model=PRICED_MODEL[provider],
            prompt="hallucination_score",
            api_key_env=KEY_ENV,
        )
        judge = build_judge(spec)
        assert isinstance(judge, LLMJudge)
        call = judge.prepare(ITEM)
        assert isinstance(call, PreparedCall)
        judgment = judge.answered(call, response, batch_id="batch-1")
        assert judgment.score is None
        field = "input_tokens" if provider == "anthropic" else "prompt_tokens"
        assert judgment.unscored_reason is not None and field in judgment.unscored_reason
        assert "usage" in judgment.unscored_reason
        assert judgment.usage.cost_usd is None and judgment.usage.input_tokens is None


# --- 6: wide datasets -----------------------------------------------------------------------


def _wide_csv(path: Path, width: int) -> Path:
    names = ["input", "output", *(f"c{i}" for i in range(width - 2))]
    path.write_text(",".join(names) + "\n" + ",".join("v" for _ in names) + "\n", "utf-8")
    return path


def _refused_wide(error: DatasetError, path: Path, width: int) -> None:
    from juryflow.storage.dataset_readers import MAX_COLUMNS

    message = str(error)
    assert "\n" not in message
    assert str(path) in message
    assert f"{width:,}" in message and f"{MAX_COLUMNS:,}" in message


def test_a_csv_wider_than_the_limit_is_refused_in_one_line(tmp_path: Path) -> None:
    from juryflow.storage.dataset_readers import MAX_COLUMNS

    path = _wide_csv(tmp_path / "wide.csv", MAX_COLUMNS + 1)
    with pytest.raises(DatasetError) as refused:
        dataset_columns(path)
    _refused_wide(refused.value, path, MAX_COLUMNS + 1)
    with pytest.raises(DatasetError) as refused:
        list(read_items(path, ["input", "output"]))
    _refused_wide(refused.value, path, MAX_COLUMNS + 1)


def test_a_csv_at_the_limit_reads(tmp_path: Path) -> None:
    from juryflow.storage.dataset_readers import MAX_COLUMNS

    path = _wide_csv(tmp_path / "wide.csv", MAX_COLUMNS)
    assert len(dataset_columns(path)) == MAX_COLUMNS
    (item,) = read_items(path, ["input", "output"])
    assert isinstance(item, Item)


def test_a_repeated_csv_column_is_still_named(tmp_path: Path) -> None:
    path = tmp_path / "twice.csv"
    path.write_text("input,output,b,c,b\nx,y,1,2,3\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="column 'b' appears more than once"):
        dataset_columns(path)


def test_a_jsonl_wider_than_the_limit_is_refused_in_one_line(tmp_path: Path) -> None:
    from juryflow.storage.dataset_readers import MAX_COLUMNS

    path = tmp_path / "wide.jsonl"
    row = {"input": "x", "output": "y", **{f"c{i}": "v" for i in range(MAX_COLUMNS - 1)}}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as refused:
        dataset_columns(path)
    _refused_wide(refused.value, path, MAX_COLUMNS + 1)


def test_a_wide_jsonl_row_past_the_sampled_ones_is_a_row_error(tmp_path: Path) -> None:
    from juryflow.storage.dataset_readers import MAX_COLUMNS

    path = tmp_path / "late.jsonl"
    narrow = json.dumps({"input": "x", "output": "y"})
    wide = {"input": "x", "output": "y", **{f"c{i}": "v" for i in range(MAX_COLUMNS)}}
    path.write_text(
        "".join(f"{narrow}\n" for _ in range(COLUMN_SAMPLE_ROWS)) + json.dumps(wide) + "\n",
        encoding="utf-8",
    )
    assert dataset_columns(path) == ["input", "output"]
    rows = list(read_items(path, ["input", "output"]))
    errors = [row for row in rows if isinstance(row, RowError)]
    assert len(rows) == COLUMN_SAMPLE_ROWS + 1 and len(errors) == 1
    (error,) = errors
    assert error.row_number == COLUMN_SAMPLE_ROWS + 1
    assert f"{MAX_COLUMNS + 2:,}" in error.error and f"{MAX_COLUMNS:,}" in error.error


def test_a_parquet_wider_than_the_limit_is_refused_in_one_line(tmp_path: Path) -> None:
    from juryflow.storage.dataset_readers import MAX_COLUMNS

    path = tmp_path / "wide.parquet"
    names = ["input", "output", *(f"c{i}" for i in range(MAX_COLUMNS - 1))]
    pq.write_table(pa.table({name: ["v"] for name in names}), path)
    with pytest.raises(DatasetError) as refused:
        dataset_columns(path)
    _refused_wide(refused.value, path, MAX_COLUMNS + 1)
    with pytest.raises(DatasetError) as refused:
        list(iter_rows(path))
    _refused_wide(refused.value, path, MAX_COLUMNS + 1)


def _metadata_size(item: Item) -> int:
    return sum(len(key) + len(value) for key, value in item.metadata.items())


def test_item_metadata_is_bounded(tmp_path: Path) -> None:
    from juryflow.storage.datasets import ITEM_METADATA_MAX_CHARS, METADATA_LEFT_OUT

    path = tmp_path / "extra.jsonl"
    rows = [
        # one huge unused column: left out whole, never cut
        {"input": "x", "output": "y", "group": "g1", "blob": "b" * 1_000_000},
        # thousands of small ones: kept while they fit
        {"input": "x", "output": "y", **{f"c{i:04d}": "v" * 100 for i in range(3_000)}},
        # a few ordinary ones: kept whole, as before
        {"input": "x", "output": "y", "group": "g2", "source": "wiki", "n": 7},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    huge, many, plain = read_items(path, ["input", "output"])
    assert isinstance(huge, Item) and isinstance(many, Item) and isinstance(plain, Item)
    assert plain.metadata == {"group": "g2", "source": "wiki", "n": "7"}
    for item in (huge, many):
        assert _metadata_size(item) <= ITEM_METADATA_MAX_CHARS
    assert huge.metadata["group"] == "g1" and "blob" not in huge.metadata
    assert "1 column" in huge.metadata[METADATA_LEFT_OUT]
    assert "blob" in huge.metadata[METADATA_LEFT_OUT]
    kept = [key for key in many.metadata if key != METADATA_LEFT_OUT]
    assert kept == [f"c{i:04d}" for i in range(len(kept))]  # in the file's order
    assert all(many.metadata[key] == "v" * 100 for key in kept)  # whole values only
    assert f"{3_000 - len(kept):,} columns" in many.metadata[METADATA_LEFT_OUT]


def test_bench_dataset_headers_runs_at_a_tiny_size() -> None:
    # Its figures are the bench's to print, never asserted here.
    from juryflow.storage.dataset_readers import MAX_COLUMNS

    bench = REPO / "bench" / "bench_dataset_headers.py"
    width = MAX_COLUMNS + 10
    result = subprocess.run(
        [sys.executable, str(bench), "--widths", f"100,{width}", "--repeats", "1"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CPU speed: " in result.stdout and "target: " in result.stdout
    assert f"CSV {width:,} columns, columns_of: " in result.stdout
    assert "refused: " in result.stdout


# --- 7: nesting -----------------------------------------------------------------------------

NESTED = "[" * 1200 + "]" * 1200


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("structured", [True, False])
async def test_a_deeply_nested_answer_is_unscored_with_its_reason(
    stub: StubHandle, provider: str, structured: bool, caplog: pytest.LogCaptureFixture
) -> None:
    from juryflow.judges.untrusted.loading import MAX_NESTING_DEPTH

    judge = _judge(stub, provider, structured=structured)
    try:
        stub.enqueue(judge.model, "raw:" + NESTED)
        with caplog.at_level(logging.ERROR):
            judgment = await judge.judge(ITEM)
    finally:
        await judge.aclose()
    assert judgment.score is None
    assert judgment.unscored_reason == (
        f"unparseable output: answer nested deeper than {MAX_NESTING_DEPTH} levels"
    )
    assert "unexpected failure" not in caplog.text and "RecursionError" not in caplog.text


def _deep_body(provider: str) -> str:
    """A 200 whose answer (a tool call's input, a choice) nests 1,200 levels."""
    if provider == "anthropic":
        return (
            '{"type": "message", "content": [{"type": "tool_use", "name": "submit_judgment", '
            f'"input": {{"score": 0.0, "reasoning": {NESTED}}}}}], '
            '"usage": {"input_tokens": 10, "output_tokens": 10}}'
        )
    return f'{{"choices": [{{"message": {{"content": "{{}}", "extra": {NESTED}}}}}]}}'


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_deeply_nested_response_body_is_a_provider_error(
    stub: StubHandle, judges: dict[str, LLMJudge], provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    from juryflow.judges.untrusted.loading import MAX_NESTING_DEPTH

    judge = judges[provider]
    for item in (ITEM, OTHER_ITEM):  # the SDK's call, then the lean replay
        stub.enqueue(judge.model, "body:" + _deep_body(provider))
        with caplog.at_level(logging.ERROR):
            judgment = await judge.judge(item)
        assert judgment.score is None
        assert judgment.unscored_reason == (
            "provider error after 1 attempt: server: the response body is nested deeper "
            f"than {MAX_NESTING_DEPTH} levels"
        )
    assert "unexpected failure" not in caplog.text and "RecursionError" not in caplog.text


def test_a_deeply_nested_dataset_row_and_label_cell_are_row_errors(tmp_path: Path) -> None:
    from juryflow.judges.untrusted.loading import MAX_NESTING_DEPTH

    jsonl = tmp_path / "nested.jsonl"
    jsonl.write_text(
        json.dumps({"input": "x", "output": "y"}) + "\n"
        + '{"input": "x", "output": "y", "extra": ' + NESTED + "}\n",
        encoding="utf-8",
    )  # fmt: skip
    rows = list(read_items(jsonl, ["input", "output"]))
    assert isinstance(rows[0], Item) and isinstance(rows[1], RowError)
    assert rows[1].error == f"malformed JSON: nested deeper than {MAX_NESTING_DEPTH} levels"
    csv_file = tmp_path / "nested.csv"
    csv_file.write_text(f'input,output,labels\nx,y,"{NESTED}"\n', encoding="utf-8")
    (row,) = read_items(csv_file, ["input", "output"])
    assert isinstance(row, RowError)
    assert (
        f"'labels' is not valid JSON (nested deeper than {MAX_NESTING_DEPTH} levels)" in row.error
    )


def _juryflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "juryflow", *args],
        capture_output=True, text=True, timeout=300, env=env, cwd=cwd, check=False,
    )  # fmt: skip


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_sql_nested_past_the_limit_is_one_line(tmp_path: Path) -> None:
    from juryflow.storage.sql_guard import SQL_TREE_MAX_DEPTH

    db = tmp_path / "store.duckdb"
    duckdb.connect(str(db)).close()  # what the query reads does not matter: it never runs
    query = "SELECT " + "abs(" * 500 + "1" + ")" * 500
    line = _one_line(_juryflow("sql", query, "--db", str(db), cwd=tmp_path))
    assert line.startswith("error: ")
    assert f"nested deeper than {SQL_TREE_MAX_DEPTH} levels" in line
    assert "nothing ran" in line
    # A deep but reasonable query still runs: a sum of 150 terms, 60 nested calls.
    query = "SELECT " + " + ".join(["1"] * 150) + ", " + "abs(" * 60 + "1" + ")" * 60
    done = _juryflow("sql", query, "--db", str(db), "--format", "csv", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "150,1"


def test_a_panel_nested_past_the_limit_is_one_line_naming_it(tmp_path: Path) -> None:
    from juryflow.judges.panel import PanelError, load_panel
    from juryflow.judges.untrusted.loading import MAX_NESTING_DEPTH

    panel = tmp_path / "panel.yaml"
    panel.write_text("name: deep\njudges: " + "[" * 100_000 + "]" * 100_000 + "\n", "utf-8")
    with pytest.raises(PanelError) as refused:
        load_panel(panel)
    assert str(refused.value) == f"{panel}: nested deeper than {MAX_NESTING_DEPTH} levels (line 2)"
    dataset = tmp_path / "items.jsonl"
    dataset.write_text(json.dumps({"input": "x", "output": "y"}) + "\n", encoding="utf-8")
    run = ["run", str(dataset), "--panel", str(panel), "--db", str(tmp_path / "s.duckdb")]
    line = _one_line(_juryflow(*run, "--dry-run", cwd=tmp_path))
    assert line == f"error: {panel}: nested deeper than {MAX_NESTING_DEPTH} levels (line 2)"


def test_a_panel_file_over_its_size_limit_is_refused_unread(tmp_path: Path) -> None:
    from juryflow.judges.panel import MAX_PANEL_BYTES, PanelError, load_panel

    panel = tmp_path / "panel.yaml"
    panel.write_text("name: big\n# " + "x" * MAX_PANEL_BYTES + "\njudges: []\n", "utf-8")
    with pytest.raises(PanelError) as refused:
        load_panel(panel)
    assert str(refused.value).startswith(f"{panel}: ")
    assert f"over the limit of {MAX_PANEL_BYTES:,}" in str(refused.value)


def test_the_nesting_check_reads_brackets_outside_strings_only() -> None:
    from juryflow.judges.untrusted.loading import (
        MAX_NESTING_DEPTH,
        DocumentTooLarge,
        NestingError,
        json_nesting_over,
        load_json,
        load_yaml,
    )

    limit = MAX_NESTING_DEPTH
    at_limit = "[" * limit + "]" * limit
    assert load_json(at_limit) is not None and load_json(at_limit.encode()) is not None
    for over in ("[" * (limit + 1) + "]" * (limit + 1), '{"a": ' * (limit + 1)):
        assert json_nesting_over(over) and json_nesting_over(over.encode())
        with pytest.raises(NestingError, match=f"nested deeper than {limit} levels"):
            load_json(over)
    # brackets in strings (escaped quotes included) are text, not nesting
    text = json.dumps({"a": "[" * 5_000, "b": ['say \\"[[[[' * 500]})
    assert not json_nesting_over(text) and load_json(text)["a"] == "[" * 5_000
    # many shallow containers are not deep
    wide = "[" + ",".join(["[[1], {}]"] * 50_000) + "]"
    assert not json_nesting_over(wide) and len(load_json(wide)) == 50_000
    with pytest.raises(DocumentTooLarge, match="11 characters, over the limit of 10"):
        load_json('"abcdefghi"', max_size=10)
    assert load_yaml("a:\n" + "  - " * 3 + "x\n") == {"a": [[["x"]]]}
    with pytest.raises(NestingError, match=r"nested deeper than 3 levels \(line 4\)"):
        load_yaml("a:\n  b:\n    c:\n      d: 1\n", max_depth=3)


# --- 9: a masked base_url query, truthful duplicate ids -------------------------------------


@pytest.mark.parametrize(
    "name", ["code", "sig", "signature", "token", "key", "secret", "password", "auth", "jwt"]
)
def test_secret_query_names_in_a_base_url_are_masked(name: str) -> None:
    from juryflow.judges.redact import redact_text, redact_url, url_secrets

    url = f"https://judge.example.net/api/v1?{name}=S1CODE-value&api-version=2024-01"
    assert redact_url(url) == f"https://judge.example.net/api/v1?{name}=***&api-version=2024-01"
    assert "S1CODE-value" in url_secrets(url)
    spec = JudgeSpec(
        id="fn", provider="openai", model="gpt-4o-mini", prompt="hallucination_score",
        base_url=url,
    )  # fmt: skip
    stored = json.dumps([spec.public_dict(), spec.call_parameters()])
    assert "S1CODE-value" not in stored and f"{name}=***" in stored
    assert "S1CODE-value" not in redact_text(f"POST {url} failed")


def test_a_made_up_id_that_is_an_earlier_rows_id_is_named_truthfully(tmp_path: Path) -> None:
    path = tmp_path / "ids.jsonl"
    rows = [
        {"id": "row-4", "input": "a", "output": "b"},
        {"id": "second", "input": "a", "output": "b"},
        {"id": "third", "input": "a", "output": "b"},
        {"input": "a", "output": "b"},  # line 4: no id, juryflow's would be row-4
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    *items, error = read_items(path, ["input", "output"])
    assert [item.item_id for item in items if isinstance(item, Item)] == [
        "row-4",
        "second",
        "third",
    ]
    assert isinstance(error, RowError) and error.row_number == 4
    assert error.item_id is None  # the row never had that id
    assert "duplicate id" not in error.error
    assert error.error == (
        "the row has no id, and the one juryflow gives a row without one, 'row-4', is "
        "row 1's id; give this row an id of its own"
    )
    # The other order, an id given after juryflow made it up, keeps its message.
    path.write_text(
        "".join(json.dumps(row) + "\n" for row in [rows[3], {**rows[0], "id": "row-1"}]),
        encoding="utf-8",
    )
    _, later = read_items(path, ["input", "output"])
    assert isinstance(later, RowError) and later.item_id == "row-1"
    assert "is also the id juryflow gave row 1, which has none" in later.error
