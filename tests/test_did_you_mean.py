"""Did you mean (issue 43, point 3): a mistyped rule name, column name, prompt, detector,
gold source or reducer is refused in one line that names the closest known one."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.maths.pairwise.rules import PreferenceRuleError, apply_preference_rule
from juryflow.maths.reducers import RuleError, RuleRef
from juryflow.maths.samples.reducers import SampleReducerError, resolve_sample_reducer
from juryflow.storage.annotation_labels import labels_view
from juryflow.storage.connection import StoreError
from juryflow.storage.datasets import DatasetError, resolve_columns

runner = CliRunner()
WIDE = {"COLUMNS": "240"}


def _one_line_error(args: list[str]) -> str:
    result = runner.invoke(app, args, env=WIDE)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.mark.parametrize(
    ("family", "typed", "meant"),
    [("score", "meidan", "median"), ("spans", "at_leest:2", "at_least"),
     ("verdict", "majorty", "majority"), ("verdict", "atuo", "auto")],
)  # fmt: skip
def test_a_mistyped_rule_name_names_the_rule_meant(family: str, typed: str, meant: str) -> None:
    with pytest.raises(RuleError, match=f"did you mean '{meant}'"):
        RuleRef.parse(family, typed)  # type: ignore[arg-type]


def test_a_panel_file_with_a_mistyped_rule_is_one_line_naming_the_rule_meant(
    tmp_path: Path,
) -> None:
    panel = tmp_path / "panel.yaml"
    panel.write_text(
        "judges:\n  - {id: a, provider: offline, detector: numbers}\n"
        "  - {id: b, provider: offline, detector: nams}\n"
        "consensus: {spans: 'majorty'}\n"
    )
    line = _one_line_error(["run", "--dry-run", "--panel", str(panel), "--db", "x.duckdb"])
    assert "did you mean 'majority'?" in line
    panel.write_text(panel.read_text().replace("majorty", "majority"))
    line = _one_line_error(["run", "--dry-run", "--panel", str(panel), "--db", "x.duckdb"])
    assert "unknown detector 'nams' (did you mean 'names'?)" in line


def test_consensus_keys_and_the_other_rule_families_say_what_was_meant() -> None:
    from juryflow.maths.reducers import ConsensusRule

    with pytest.raises(RuleError, match="did you mean 'spans'"):
        ConsensusRule.from_dict({"span": "union"})
    with pytest.raises(PreferenceRuleError, match="did you mean 'majority'"):
        apply_preference_rule("majoity", [[0, 1]])
    with pytest.raises(SampleReducerError, match="did you mean 'union'"):
        resolve_sample_reducer("unoin", "spans")
    with pytest.raises(StoreError, match="did you mean 'annotations'"):
        labels_view("anotations")  # type: ignore[arg-type]


def test_a_map_to_a_mistyped_column_names_the_column_meant() -> None:
    with pytest.raises(DatasetError, match="no column 'answr' \\(did you mean 'answer'\\?\\)"):
        resolve_columns(["id", "answer", "reference"], ["response"], {"response": "answr"})


def test_a_variable_without_its_column_suggests_the_map_to_the_closest_column(
    tmp_path: Path,
) -> None:
    data = tmp_path / "rows.csv"
    data.write_text('id,Response,reference\n1,"The sky is green.","The sky is blue."\n')
    line = _one_line_error(["run", "--dry-run", "--db", "x.duckdb", str(data)])
    assert "map one with --map response=Response" in line
    # The suggestion works as printed.
    result = runner.invoke(
        app, ["run", "--dry-run", "--db", "x.duckdb", "--map", "response=Response", str(data)],
        env=WIDE,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    with pytest.raises(DatasetError, match="--map response=COLUMN"):
        resolve_columns(["id", "zzz"], ["response"], {})


def test_a_mistyped_prompt_names_the_prompt_meant(tmp_path: Path) -> None:
    panel = tmp_path / "panel.yaml"
    panel.write_text(
        "judges:\n"
        "  - {id: a, provider: anthropic, model: claude-sonnet-4-5, prompt: hallucination_scor}\n"
    )
    line = _one_line_error(["run", "--dry-run", "--panel", str(panel), "--db", "x.duckdb"])
    assert "did you mean 'hallucination_score'?" in line


def test_the_closest_name_examples_hold() -> None:
    import doctest

    from juryflow.maths import names

    assert doctest.testmod(names).failed == 0
