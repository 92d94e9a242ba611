"""`juryflow show RUN ITEM` and `juryflow compare RUN BASELINE` (issue 43) on a real store.

One store is shared by the module: two offline runs of six sample items, the second with
the judge called 'numbers' running the content detector (as tests/test_regression.py
changes a judge), so that comparing it with the first regresses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.storage.store import Store
from tests.conftest import SAMPLE

runner = CliRunner()
WIDE = {"COLUMNS": "250"}
JUDGES = ("numbers", "names", "content")
PANEL = """name: look-test
judges:
  - {{id: numbers, provider: offline, detector: {numbers}}}
  - {{id: names, provider: offline, detector: names}}
  - {{id: content, provider: offline, detector: content}}
"""


@dataclass(frozen=True)
class Runs:
    db: str
    good: str
    changed: str
    """Run with the judge 'numbers' running the content detector."""


def invoke(*args: str) -> tuple[int, str, str]:
    """Exit code, everything printed, and standard output alone."""
    result = runner.invoke(app, list(args), env=WIDE)
    return result.exit_code, result.output, result.stdout


def _panel(folder: Path, numbers_detector: str) -> str:
    path = folder / f"{numbers_detector}.yaml"
    path.write_text(PANEL.format(numbers=numbers_detector), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def runs(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    folder = tmp_path_factory.mktemp("look")
    db = str(folder / "look.duckdb")
    for detector in ("numbers", "content"):
        code, out, _ = invoke(
            "run", str(SAMPLE), "--panel", _panel(folder, detector), "--db", db, "--limit", "6"
        )
        assert code == 0, out
    _, rows = Store(db).query("SELECT run_id FROM runs ORDER BY started_at")
    good, changed = (str(r[0]) for r in rows)
    return Runs(db, good=good, changed=changed)


def _flagged_item(runs: Runs) -> tuple[str, str]:
    """An item of the changed run a judge marked spans in, and its judged text."""
    _, rows = Store(runs.db).query(
        "SELECT s.item_id, i.variables->>'response' FROM judgment_spans s "
        "JOIN items i USING (run_id, item_id) WHERE s.run_id = ? "
        "ORDER BY s.item_id LIMIT 1",
        [runs.changed],
    )
    return str(rows[0][0]), str(rows[0][1])


# -- show -------------------------------------------------------------------------------


def test_show_prints_the_text_and_every_judge(runs: Runs) -> None:
    item, text = _flagged_item(runs)
    code, out, _ = invoke("show", runs.changed, item, "--db", runs.db)
    assert code == 0, out
    assert f"item {item}" in out
    assert " ".join(text.split()[:8]) in " ".join(out.split())
    for judge in JUDGES:
        assert f"│ {judge} " in out
    assert "consensus: " in out and "«" in out  # the spans, quoted with their offsets
    assert "gold (dataset): " in out  # the sample carries human labels


def test_show_takes_prefixes_of_the_run_and_the_item(runs: Runs) -> None:
    item, _ = _flagged_item(runs)
    code, out, _ = invoke("show", runs.changed[:17], item[:-2], "--db", runs.db)
    assert code == 0, out
    assert f"item {item} " in out and runs.changed in out


def test_show_of_an_unknown_item_is_one_line(runs: Runs) -> None:
    code, out, _ = invoke("show", runs.good, "no-such-item", "--db", runs.db)
    assert code == 2
    assert out.strip().count("\n") == 0, out
    assert out.startswith(f"error: no item 'no-such-item' in run {runs.good}")
    assert f"`juryflow disagreements {runs.good}`" in out


def test_show_of_an_ambiguous_item_names_the_candidates(runs: Runs) -> None:
    code, out, _ = invoke("show", runs.good, "13604", "--db", runs.db)
    assert code == 2 and out.strip().count("\n") == 0, out
    assert "is ambiguous" in out and "give more of the id" in out


def test_show_json_parses(runs: Runs) -> None:
    item, text = _flagged_item(runs)
    code, out, stdout = invoke(
        "show", runs.changed, item, "--db", runs.db, "-f", "json", "--reference-chars", "40"
    )
    assert code == 0, out
    shown = json.loads(stdout)
    assert shown["item_id"] == item and shown["run_id"] == runs.changed
    assert shown["text"] == text
    assert [j["judge_id"] for j in shown["judgments"]] == list(JUDGES)
    assert shown["consensus"]["status"] == "ok"
    assert any(j["spans"] for j in shown["judgments"])
    reference = shown["variables"]["reference"]
    assert len(reference) == 41 and reference.endswith("…")


def test_show_refuses_an_unknown_format(runs: Runs) -> None:
    code, out, _ = invoke("show", runs.good, "x", "--db", runs.db, "-f", "yaml")
    assert code == 2 and "--format must be table or json" in out


# -- compare ----------------------------------------------------------------------------


def test_compare_of_a_run_with_itself_is_no_regression(runs: Runs) -> None:
    code, out, _ = invoke("compare", runs.good, runs.good, "--db", runs.db)
    assert code == 0, out
    assert "6 of 6 items paired; no regression" in out
    assert "mean consensus change +0 " in out


def test_compare_with_a_changed_judge_exits_1_naming_what_regressed(runs: Runs) -> None:
    code, out, _ = invoke("compare", runs.changed[:17], runs.good[:17], "--db", runs.db)
    assert code == 1, out
    assert f"run {runs.changed} " in out and f"vs baseline {runs.good} " in out
    assert "regressed: " in out and "judge 'numbers' drifted +" in out
    assert "judge 'names' drifted" not in out
    assert "warning: baseline" in out  # the panels differ: the baseline warning says so
    assert "flipped to hallucinated: 13604-" in out  # the ids `juryflow show` takes next
    # nothing stored: `regression --baseline last` still sees no comparison
    _, rows = Store(runs.db).query("SELECT count(*) FROM comparisons")
    assert rows == [(0,)]


def test_compare_thresholds_are_options(runs: Runs) -> None:
    loose = ("--max-flips-to-hallucinated", "6", "--max-judge-drift", "1")
    code, out, _ = invoke("compare", runs.changed, runs.good, "--db", runs.db, *loose)
    assert code == 0, out
    assert "; no regression" in out


def test_compare_markdown_is_a_heading_and_a_table(runs: Runs) -> None:
    code, out, stdout = invoke(
        "compare", runs.changed, runs.good, "--db", runs.db, "--format", "markdown"
    )
    assert code == 1, out
    lines = stdout.splitlines()
    assert lines[0] == "### juryflow compare: regressed"
    assert "| check | value | allowed |" in lines and "|---|---|---|" in lines
    for row in ("| flips to hallucinated |", "| judge drift: numbers |", "| paired items | 6"):
        assert any(line.startswith(row) for line in lines), row
    assert "**Baseline warnings**" in lines
    assert any(line.startswith("- baseline ") for line in lines)


def test_compare_json_parses(runs: Runs) -> None:
    code, out, stdout = invoke("compare", runs.good, runs.good, "--db", runs.db, "-f", "json")
    assert code == 0, out
    compared = json.loads(stdout)
    assert compared["regressed"] is False and compared["n_paired"] == 6
    assert set(compared["judge_drift"]) == set(JUDGES)


def test_compare_of_an_unknown_run_is_one_line(runs: Runs) -> None:
    code, out, _ = invoke("compare", "no-such-run", runs.good, "--db", runs.db)
    assert code == 2 and out.strip().count("\n") == 0, out
    assert out.startswith("error: no run 'no-such-run'") and "`juryflow runs`" in out
    code, out, _ = invoke("compare", runs.good, "nope", "--db", runs.db)
    assert code == 2 and out.startswith("error: BASELINE: no run 'nope'"), out


def test_compare_adds_its_verdict_to_the_ci_jobs_summary(runs: Runs, tmp_path: Path) -> None:
    """In a GitHub Actions job ($GITHUB_STEP_SUMMARY set), the Markdown verdict is appended
    to the job's summary whatever --format prints; outside one, nothing is written."""
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    result = runner.invoke(
        app,
        ["compare", runs.changed, runs.good, "--db", runs.db],
        env={**WIDE, "GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert result.exit_code == 1, result.output
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n### juryflow compare: regressed")
    assert "| check | value | allowed |" in text
