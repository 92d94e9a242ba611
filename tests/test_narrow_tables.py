"""Tables in narrow terminals (issue 43): at 60 columns the dry run's judge and model
columns and its figures, and at 100 calibrate's predictor names, are whole, never cut.

The tables are rendered as a terminal of that width shows them (a rich Console of that
width), from the run's own estimate and a stored calibration report's rows.
"""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from juryflow.planning.dry_run import estimate_run
from juryflow.planning.run_request import RunRequest
from juryflow.terminal.output import print_dry_run
from juryflow.terminal.tables import FitTable
from tests.conftest import REPO, SAMPLE


def _terminal(width: int) -> Console:
    return Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)


def test_the_dry_run_keeps_every_judge_model_and_figure_whole_at_60_columns(
    tmp_path: Path,
) -> None:
    panel = REPO / "examples" / "panel.sim-3span.yaml"
    estimate = estimate_run(
        RunRequest(dataset=str(SAMPLE), panel=str(panel), db=str(tmp_path / "x.duckdb"))
    )
    console = _terminal(60)
    print_dry_run(console, estimate)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "…" not in text
    for judge in estimate.judges:
        assert judge.judge_id in text and str(judge.model) in text
        assert f" {judge.calls} " in text
    assert f" {estimate.total('calls')} " in text and "total" in text
    assert max(len(line) for line in text.splitlines() if "│" in line) <= 60


def test_a_fit_table_keeps_its_total_rule_in_every_part() -> None:
    table = FitTable()
    for name in ("judge", "a long column header", "another long column header"):
        table.add_column(name)
    table.add_row("j1", "1", "2")
    table.add_section()
    table.add_row("total", "1", "2")
    console = _terminal(40)
    console.print(table)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    # Two parts, each with the rule above its total.
    assert text.count("total") == 2 and text.count("├") == 2


def test_calibrates_table_keeps_its_predictor_names_at_100_columns() -> None:
    from juryflow.cli.calibration import _judges_added_table

    long_name = "best judge, chosen on the training folds"
    table = FitTable(title="t")
    for column in ("predictor", "coverage", "P", "R", "F1", "F1 interval", "span P", "span R",
                   "span F1", "span F1 interval"):  # fmt: skip
        table.add_column(column)
    table.add_row(long_name, "100 %", *(["0.912"] * 3), "0.88-0.94", *(["0.812"] * 3), "0.7-0.9")
    console = _terminal(100)
    console.print(table)
    console.print(
        _judges_added_table(
            [
                {
                    "judge": "gemini-2.5-pro",
                    "response": 0.062,
                    "response_interval": [0.025, 0.1],
                    "spans": None,
                    "span_interval": None,
                }
            ]
        )
    )
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert long_name in text and "…" not in text and "gemini-2.5-pro" in text


def test_runs_in_a_narrow_terminal_are_records_headed_by_their_id(tmp_path: Path) -> None:
    """At 60 columns `juryflow runs` stacked seven one-row tables; each run is now a record
    headed by the id the next command needs, every figure on its own line."""
    table = FitTable(records_beyond=2)
    columns = ("run_id", "status", "kind", "panel", "dataset", "items", "judgments",
               "unscored", "cost", "started", "duration")  # fmt: skip
    for name in columns:
        table.add_column(name)
    values = ("20261129-133346-fddaba", "completed", "evaluate", "sim-pairwise",
              "ragtruth_pairs_sample.jsonl", "30", "90", "33", "—", "11-29 13:33",
              "4.1 s")  # fmt: skip
    table.add_row(*values)
    narrow, wide = _terminal(60), _terminal(200)
    narrow.print(table)
    wide.print(table)
    text = narrow.file.getvalue()  # type: ignore[attr-defined]
    assert text.splitlines()[0].strip() == "20261129-133346-fddaba"
    assert "┃" not in text
    assert any(
        line.split() == ["dataset", "ragtruth_pairs_sample.jsonl"] for line in text.splitlines()
    )
    assert "┃ run_id" in wide.file.getvalue()  # type: ignore[attr-defined]
