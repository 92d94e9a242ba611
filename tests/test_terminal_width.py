"""Tables at 80 and 120 columns keep every header and every figure whole (issue 28, finding 7).

rich cut ``juryflow agreement``'s figures to ``0.…`` at 80 columns and ``juryflow runs``
lost its unscored, cost, started and duration columns; :class:`FitTable` wraps the columns
into stacked tables instead, each led by the row's name.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterator

import pytest
from rich.console import Console
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.planning.run_request import RunRequest
from juryflow.terminal.tables import FitTable

runner = CliRunner()
BOX = re.compile("[│┃┏┗┡└┌]")
NUMBER = re.compile(r"[-+]?\d+(?:[./]\d+)*")

AGREEMENT_HEADERS = (
    "metric", "all judges (3)", "judge A", "judge B", "items", "verdict agreement", "Cohen κ",
    "span items", "span F1", "judge", "prompt", "scored", "mean score", "flag rate",
    "bias vs median", "verdict = consensus", "span F1 vs consensus", "span P / R",
    "sensitivity", "specificity", "verdicts", "predictor", "coverage", "precision", "recall",
    "F1", "F1 answered", "span P", "span R", "span F1 answered",
)  # fmt: skip
RUNS_HEADERS = (
    "run_id", "status", "kind", "panel", "dataset", "items", "judgments", "unscored", "cost",
    "cache read", "started", "duration",
)  # fmt: skip


@pytest.fixture(scope="module")
def offline_db(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from juryflow.flows.evaluate import evaluate

    db = tmp_path_factory.mktemp("width") / "offline.duckdb"
    asyncio.run(evaluate(RunRequest(db=str(db))))
    yield str(db)


def _output(columns: int, *args: str) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


def _check_fits(narrow: str, wide: str, headers: tuple[str, ...], columns: int) -> None:
    table_lines = [line for line in narrow.splitlines() if BOX.search(line)]
    assert table_lines
    assert max(len(line) for line in table_lines) <= columns
    header_cells = {
        cell.strip()
        for line in table_lines
        if line.startswith("┃")
        for cell in line.strip("┃").split("┃")
    }
    missing = [h for h in headers if h not in header_cells]
    assert not missing, f"headers not whole at {columns} columns: {missing}\n{narrow}"
    assert "…" not in narrow
    # Every figure of the unconstrained table is there, whole (keys repeat, so "at least").
    shortfall = Counter(NUMBER.findall(wide)) - Counter(NUMBER.findall(narrow))
    assert not shortfall, f"figures cut at {columns} columns: {shortfall}\n{narrow}"


@pytest.mark.parametrize("columns", [80, 120])
def test_agreement_keeps_every_header_and_figure_whole(offline_db: str, columns: int) -> None:
    wide = _output(400, "agreement", "--db", offline_db)
    narrow = _output(columns, "agreement", "--db", offline_db)
    _check_fits(narrow, wide, AGREEMENT_HEADERS, columns)


@pytest.mark.parametrize("columns", [80, 120])
def test_runs_keeps_every_column(offline_db: str, columns: int) -> None:
    """At 120 columns the table stacks; at 80 it would stack four one-row tables, so each
    run is a record headed by its id instead (issue 43): every column and figure whole."""
    wide = _output(400, "runs", "--db", offline_db)
    narrow = _output(columns, "runs", "--db", offline_db)
    if BOX.search(narrow):
        _check_fits(narrow, wide, RUNS_HEADERS, columns)
        return
    lines = narrow.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= columns
    keys = {line[:15].strip() for line in lines[1:]}
    missing = [h for h in RUNS_HEADERS[1:] if h not in keys]
    assert not missing, f"columns missing at {columns} columns: {missing}\n{narrow}"
    assert "…" not in narrow
    shortfall = Counter(NUMBER.findall(wide)) - Counter(NUMBER.findall(narrow))
    assert not shortfall, f"figures cut at {columns} columns: {shortfall}\n{narrow}"


SQL = (
    "SELECT judge_id, count(*) AS judgments, avg(score) AS mean_score, count(*) - count(score) "
    "AS unscored, min(score) AS min_score, max(score) AS max_score, sum(cost_usd) AS cost_usd "
    "FROM judgments GROUP BY judge_id ORDER BY judge_id"
)
SQL_HEADERS = ("judge_id", "judgments", "mean_score", "unscored", "min_score", "max_score",
               "cost_usd")  # fmt: skip


@pytest.mark.parametrize("columns", [80, 120])
def test_sql_keeps_every_column(offline_db: str, columns: int) -> None:
    wide = _output(400, "sql", SQL, "--db", offline_db)
    narrow = _output(columns, "sql", SQL, "--db", offline_db)
    _check_fits(narrow, wide, SQL_HEADERS, columns)


def _render(table: FitTable, width: int) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(table)
    return console.export_text()


def test_a_table_that_fits_is_one_table_and_a_wide_one_repeats_its_keys() -> None:
    table = FitTable(title="t", key_columns=1)
    table.add_column("name")
    for k in range(6):
        table.add_column(f"column {k}", justify="right")
    table.add_column("n", with_previous=True)
    table.add_row("row-a", *(f"{k}.123456" for k in range(6)), "7")
    one = _render(table, 200)
    assert one.count("name") == 1
    parts = _render(table, 40)
    assert parts.count("name") == len(table.parts(40)) > 2
    assert all(len(line) <= 40 for line in parts.splitlines())
    for k in range(6):
        assert f"column {k}" in parts and f"{k}.123456" in parts
    # "n" stays beside the column before it
    assert any("column 5" in line and " n " in line for line in parts.splitlines())


def test_a_column_wider_than_the_terminal_folds_and_loses_nothing() -> None:
    table = FitTable()
    table.add_column("id")
    table.add_column("text")
    long = "".join(chr(ord("a") + k % 26) for k in range(150))
    table.add_row("x", long)
    shown = _render(table, 60)
    assert all(len(line) <= 60 for line in shown.splitlines())
    joined = "".join(
        line.split("│")[2].strip() for line in shown.splitlines() if line.count("│") == 3
    )
    assert joined == long
