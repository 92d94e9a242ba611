"""Issue 9: blank span strings, reserved judge ids, --quorum range, gold label checks, and
regression suites too small for the Wilcoxon gate. Each test reproduces the bug it guards."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from juryflow.cli import app
from juryflow.judges.llm_judge import LLMJudge
from juryflow.judges.panel import JudgeSpec, PanelError, load_panel
from juryflow.judges.parsing import parse_spans_output
from juryflow.judges.providers.base import ModelRequest, ModelResponse, ProviderError
from juryflow.judges.ratelimit import Limiter
from juryflow.maths.records import Consensus, Item, Judgment
from juryflow.maths.regression_stats import (
    Thresholds,
    check_thresholds,
    compare,
    gate_notes,
    min_wilcoxon_p,
    regression_message,
)
from juryflow.planning.run_request import RunRequest
from juryflow.prompts.loader import load_template
from juryflow.storage.datasets import RowError, read_items
from juryflow.storage.store import RunRecord, Store
from tests.conftest import SAMPLE

runner = CliRunner()

# -- 1. blank span strings flag nothing; the verdict needs an anchored span -----------------

RESPONSE = "Revenue grew 15% in 2023. Revenue grew again in 2024."
ITEM = Item("i1", {"reference": '{"growth": "10%"}', "response": RESPONSE})


class _Answers:
    """A ModelClient that answers every request with the same structured output."""

    provider = "openai"

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="", structured=self.answer, input_tokens=10, output_tokens=5)

    def should_retry(self, error: ProviderError) -> bool:
        return False

    async def aclose(self) -> None:
        return None


async def _span_judgment(spans: list[str]) -> Judgment:
    spec = JudgeSpec(id="j", provider="openai", model="m", prompt="data2txt_spans")
    judge = LLMJudge(
        spec,
        _Answers({"reasoning": "r", "hallucination_list": spans}),
        load_template("data2txt_spans"),
        limiter=Limiter(1),
    )
    return await judge.judge(ITEM)


@pytest.mark.parametrize("blank", [[""], ["   "], ["", " \n\t "]])
def test_blank_span_strings_are_dropped_by_the_parser(blank: list[str]) -> None:
    parsed = parse_spans_output({"hallucination_list": blank})
    assert parsed.spans == ()
    mixed = parse_spans_output({"hallucination_list": ["", "15%", "  "]})
    assert mixed.spans == ("15%",)


async def test_a_list_of_blank_strings_is_a_clean_answer() -> None:
    judgment = await _span_judgment(["", "  "])
    assert judgment.score == 0.0 and judgment.verdict is False
    assert judgment.spans == ()


async def test_only_unmatched_spans_score_zero_but_are_kept() -> None:
    judgment = await _span_judgment(["a sentence that is not in the response at all"])
    assert judgment.score == 0.0 and judgment.verdict is False
    (span,) = judgment.spans
    assert span.match == "unmatched" and not span.anchored


async def test_one_anchored_span_makes_the_verdict() -> None:
    judgment = await _span_judgment(["not in the response whatsoever", "15%"])
    assert judgment.score == 1.0 and judgment.verdict is True
    assert [s.match for s in judgment.spans] == ["unmatched", "exact"]


async def test_an_ambiguous_span_is_anchored_and_makes_the_verdict() -> None:
    judgment = await _span_judgment(["Revenue grew"])
    assert judgment.score == 1.0
    (span,) = judgment.spans
    assert span.match == "ambiguous" and span.anchored
    assert judgment.voting_spans == ()


# -- 2. reserved judge ids ------------------------------------------------------------------


@pytest.mark.parametrize("judge_id", ["consensus", "gold", "Consensus", "GOLD"])
def test_reserved_judge_ids_are_refused(tmp_path: Path, judge_id: str) -> None:
    path = tmp_path / "panel.yaml"
    path.write_text(
        f"judges:\n  - {{id: {judge_id}, provider: offline, detector: numbers}}\n",
        encoding="utf-8",
    )
    with pytest.raises(PanelError, match="reserved") as raised:
        load_panel(path)
    assert "rename the judge" in str(raised.value)
    assert judge_id in str(raised.value)


def test_ids_that_merely_contain_a_reserved_word_are_fine() -> None:
    assert JudgeSpec(id="gold-standard", provider="offline", detector="numbers").id


# -- 3. --quorum must be between 1 and the panel size -----------------------------------------


@pytest.mark.parametrize("quorum", [0, -1, 4])
def test_plan_run_rejects_an_out_of_range_quorum_before_the_run_row(
    tmp_path: Path, quorum: int
) -> None:
    from juryflow.planning.run_setup import RunSetupError, plan_run

    db = tmp_path / "q.duckdb"
    with pytest.raises(RunSetupError, match=f"--quorum {quorum} is out of range"):
        plan_run(
            RunRequest(
                dataset=str(SAMPLE),
                panel=None,
                db=str(db),
                resume=None,
                suite=None,
                chunk_size=10,
                quorum=quorum,
                mapping=None,
                use_cache=False,
            )
        )
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    finally:
        con.close()


@pytest.mark.parametrize("quorum", ["0", "-1", "4"])
def test_run_rejects_an_out_of_range_quorum_up_front(tmp_path: Path, quorum: str) -> None:
    db = tmp_path / "x.duckdb"
    result = runner.invoke(app, ["run", str(SAMPLE), "--quorum", quorum, "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert f"--quorum {quorum} is out of range" in result.output
    assert "pass 1 to 3 (the panel has 3 judges)" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not db.exists()  # nothing was created: no run row, not even the store


def test_preflight_accepts_every_quorum_the_panel_allows() -> None:
    from juryflow.planning.run_setup import preflight

    for quorum in (None, 1, 2, 3):
        preflight(RunRequest(dataset=str(SAMPLE), panel=None, mapping={}, quorum=quorum))


# -- 4. gold labels are checked against the judged text at load -------------------------------

TEXT = "The cafe opens at 9 and has free WiFi."  # 38 characters


def _read(
    tmp_path: Path, labels: list[object], needed: tuple[str, ...] = ("reference", "response")
) -> list[Item | RowError]:
    path = tmp_path / "d.jsonl"
    rows = [
        {"id": f"r{n}", "reference": "{}", "response": TEXT, "labels": label}
        for n, label in enumerate(labels, start=1)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return list(read_items(path, list(needed)))


GOOD = [{"start": 18, "end": 19, "text": "9"}]


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ([{"start": 19, "end": 18}], "label 1: start 19 is not before end 18"),
        ([{"start": 5, "end": 5}], "label 1: start 5 is not before end 5"),
        ([{"start": -2, "end": 3}], "label 1: start -2 is negative"),
        (
            [*GOOD, {"start": 30, "end": 812}],
            "label 2: end 812 is past the end of the response text (38 characters)",
        ),
        ([{"start": 0, "end": 10**12}], "past the end of the response text (38 characters)"),
        (7, "'labels' must be a list of {start, end} objects, got int 7"),
        ({"start": 0, "end": 3}, "'labels' must be a list of {start, end} objects, got object"),
        ([*GOOD, 5], "label 2 must be an object with 'start' and 'end', got int 5"),
        ([{"start": 1.5, "end": 3}], "label 1: start must be an integer, got float 1.5"),
        ([{"start": "one", "end": 3}], "label 1: start must be an integer, got str 'one'"),
        ([{"start": True, "end": 3}], "label 1: start must be an integer, got bool True"),
        ([{"start": 1}], "label 1 has no 'end'"),
        ([{"text": "free WiFi"}], "label 1 has no 'start'"),
    ],
)
def test_bad_gold_labels_are_row_errors(tmp_path: Path, labels: object, message: str) -> None:
    good, bad = _read(tmp_path, [GOOD, labels])
    assert isinstance(good, Item) and good.gold is not None and good.gold.spans == ((18, 19),)
    assert isinstance(bad, RowError)
    assert (bad.row_number, bad.item_id) == (2, "r2")
    assert message in bad.error, bad.error
    assert bad.error.startswith("bad gold labels: ")


def test_labels_in_a_csv_are_checked_too(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text(
        'id,reference,response,labels\na,{},short,"[{""start"": 0, ""end"": 9}]"\n'
        'b,{},short,"not json"\n',
        encoding="utf-8",
    )
    first, second = read_items(path, ["reference", "response"])
    assert isinstance(first, RowError) and first.row_number == 2
    assert "end 9 is past the end of the response text (5 characters)" in first.error
    assert isinstance(second, RowError) and "'labels' is not valid JSON" in second.error


def test_offsets_duckdb_widened_to_json_or_double_are_still_integers(tmp_path: Path) -> None:
    # One row with a string offset makes DuckDB type the column JSON for every row, and a
    # fraction elsewhere makes it DOUBLE: the good rows must still read as they are.
    rows = _read(tmp_path, [GOOD, [{"start": "0", "end": 3.0}], [{"start": 0, "end": 3}]])
    assert [r.gold.spans if isinstance(r, Item) and r.gold else r for r in rows] == [
        ((18, 19),),
        ((0, 3),),
        ((0, 3),),
    ]


def test_the_score_prompt_output_is_the_judged_text(tmp_path: Path) -> None:
    (bad,) = _read(tmp_path, [[{"start": 0, "end": 39}]], needed=("input", "output"))
    assert isinstance(bad, RowError)
    assert "end 39 is past the end of the response text (38 characters)" in bad.error


def test_a_label_text_that_disagrees_with_the_offsets_is_accepted(tmp_path: Path) -> None:
    # The offsets are what every view uses; the text is a human note and may be stale.
    (item,) = _read(tmp_path, [[{"start": 18, "end": 19, "text": "ten"}]])
    assert isinstance(item, Item) and item.gold is not None
    assert item.gold.spans == ((18, 19),) and item.gold.hallucinated is True


def test_the_bundled_sample_still_loads_whole() -> None:
    rows = list(read_items(SAMPLE, ["reference", "response"]))
    assert all(isinstance(r, Item) for r in rows) and len(rows) == 60


# -- 6. a suite too small for the Wilcoxon test says so ---------------------------------------


def test_min_wilcoxon_p_matches_scipy_for_same_sign_differences() -> None:
    from scipy import stats

    assert min_wilcoxon_p(5) == 0.0625 and min_wilcoxon_p(6) == 0.03125
    assert min_wilcoxon_p(1) == 1.0
    for n in range(1, 16):
        exact = stats.wilcoxon([0.1 * (k + 1) for k in range(n)], zero_method="wilcox")
        assert float(exact.pvalue) == pytest.approx(min_wilcoxon_p(n))


def _comparison_of(deltas: list[float], n_items: int) -> Any:
    items = [f"i{k}" for k in range(n_items)]
    before = dict.fromkeys(items, 0.0)
    after = {i: (deltas[k] if k < len(deltas) else 0.0) for k, i in enumerate(items)}
    judges_before = {"a": before, "b": before}
    judges_after = {"a": after, "b": after}
    return compare(
        before,
        after,
        {i: s >= 0.5 for i, s in before.items()},
        {i: s >= 0.5 for i, s in after.items()},
        judges_before,
        judges_after,
    )


def test_five_items_that_all_rose_cannot_pass_the_gate_and_say_so() -> None:
    comparison = _comparison_of([0.3] * 5, 5)
    assert comparison.score.n_changed == 5
    thresholds = Thresholds(max_flips_to_hallucinated=None, max_judge_drift=None)
    assert check_thresholds(comparison, thresholds) == []
    notes = gate_notes(comparison, thresholds)
    assert notes == [
        "too few paired items (n=5 whose score changed) for the Wilcoxon test to reach "
        "p < 0.05 (its smallest possible p-value is 0.0625); the mean-increase gate was "
        "not applied"
    ]
    message = regression_message([], notes)
    assert message == f"no regression. Note: {notes[0]}"
    assert regression_message(["x"], notes) == f"regressed: x. Note: {notes[0]}"


def test_zero_differences_do_not_count_towards_n() -> None:
    # 30 paired items, only 4 changed: the test runs on 4 and can never reach 0.05.
    comparison = _comparison_of([0.5] * 4, 30)
    assert comparison.score.n_paired == 30 and comparison.score.n_changed == 4
    (note,) = gate_notes(comparison, Thresholds())
    assert "n=4 whose score changed" in note


@pytest.mark.parametrize(
    ("deltas", "thresholds"),
    [
        ([0.3] * 6, Thresholds()),  # n=6 can reach p = 0.03125 < 0.05
        ([0.0] * 5, Thresholds()),  # nothing changed: there is nothing to test
        ([0.3] * 5, Thresholds(max_mean_increase=None)),  # the gate is switched off
        ([0.3] * 5, Thresholds(p_value_alpha=0.1)),  # 0.0625 < 0.1 is reachable
    ],
)
def test_no_note_when_the_gate_can_work(deltas: list[float], thresholds: Thresholds) -> None:
    assert gate_notes(_comparison_of(deltas, len(deltas)), thresholds) == []


def _store_run(store: Store, run_id: str, scores: dict[str, float]) -> None:
    store.create_run(
        RunRecord(
            run_id=run_id,
            kind="evaluate",
            suite="tiny",
            status="completed",
            started_at=datetime.now(UTC),
            finished_at=datetime.now(UTC),
            dataset="tiny.jsonl",
            panel_name="p",
            panel={"name": "p", "judges": [{"id": "a"}]},
            prompts=[],
            quorum=1,
            n_judges=1,
        )
    )
    store.insert_items(run_id, [Item(i, {"response": "x"}) for i in scores])
    store.insert_judgments(run_id, [Judgment(i, "a", "score", s) for i, s in scores.items()])
    store.insert_consensus(
        run_id,
        [
            Consensus(
                item_id=i,
                status="ok",
                n_judges=1,
                n_answered=1,
                n_scored=1,
                score=s,
                score_median=s,
                score_min=s,
                score_max=s,
                score_spread=0.0,
                hallucinated=s >= 0.5,
            )
            for i, s in scores.items()
        ],
    )


def test_compare_runs_stores_and_returns_the_note(tmp_path: Path) -> None:
    from juryflow.flows.regression import compare_runs

    store = Store(tmp_path / "c.duckdb")
    store.migrate()
    items = [f"i{k}" for k in range(5)]
    _store_run(store, "base", dict.fromkeys(items, 0.1))
    _store_run(store, "new", dict.fromkeys(items, 0.4))
    # every score rose by 0.3: past the 0.05 gate, but five items cannot make p < 0.05
    outcome = compare_runs(store, "new", "base", Thresholds(max_judge_drift=None))
    assert outcome["regressed"] is False
    assert outcome["notes"] and "the mean-increase gate was not applied" in outcome["notes"][0]
    assert outcome["message"].startswith("no regression. Note: too few paired items (n=5")
    with store.read() as con:
        row = con.execute("SELECT message, regressed FROM comparisons").fetchone()
    assert row == (outcome["message"], False)


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_regression_command_prints_the_note(tmp_path: Path) -> None:
    subset = tmp_path / "five.jsonl"
    subset.write_text(
        "\n".join(SAMPLE.read_text(encoding="utf-8").splitlines()[:5]) + "\n", encoding="utf-8"
    )
    db = str(tmp_path / "r.duckdb")
    panel = tmp_path / "p.yaml"
    common = ["regression", str(subset), "--db", db, "--suite", "five"]
    panel.write_text("judges:\n  - {id: a, provider: offline, detector: names}\n", encoding="utf-8")
    first = runner.invoke(app, [*common, "--panel", str(panel)])
    assert first.exit_code == 0, first.output
    # Same judge id, a detector that flags far more: every score rises.
    panel.write_text(
        "judges:\n  - {id: a, provider: offline, detector: content}\n", encoding="utf-8"
    )
    second = runner.invoke(
        app,
        [
            *common,
            "--panel",
            str(panel),
            "--max-judge-drift",
            "1",
            "--max-flips-to-hallucinated",
            "5",
        ],
    )
    assert second.exit_code == 0, second.output
    assert "no regression. Note: too few paired items (n=" in " ".join(second.output.split())


# -- a resumed run keeps its settings; new consensus settings are refused, not ignored ----------


@pytest.mark.parametrize("option", [["--quorum", "2"], ["--calibration", "c"]])
def test_resume_refuses_settings_it_would_ignore(tmp_path: Path, option: list[str]) -> None:
    db = tmp_path / "x.duckdb"
    result = runner.invoke(app, ["run", str(SAMPLE), "--resume", "r", *option, "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert f"drop {option[0]}" in " ".join(result.output.split())
    assert not db.exists()


def test_regression_refuses_quorum_zero_up_front(tmp_path: Path) -> None:
    db = tmp_path / "x.duckdb"
    result = runner.invoke(app, ["regression", str(SAMPLE), "--quorum", "0", "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert "--quorum 0" in result.output
    assert not db.exists()
