"""Regression checks: the comparison maths by hand, and the flow run twice with a judge changed."""

from __future__ import annotations

import asyncio
import doctest
import json
import math
from pathlib import Path

import duckdb
import numpy as np
import pytest

import juryflow.maths.regression_stats
from juryflow.maths.regression_stats import (
    Comparison,
    JudgeDrift,
    ScoreChange,
    Thresholds,
    check_thresholds,
    compare,
    judge_drift,
    paired,
    paired_score_change,
    panel_alpha,
    regression_message,
    verdict_flips,
)
from juryflow.planning.run_request import RunRequest
from tests.conftest import SAMPLE

# -- the maths, hand-computed ---------------------------------------------------------


def test_doctests() -> None:
    result = doctest.testmod(juryflow.maths.regression_stats)
    assert result.failed == 0 and result.attempted > 0


def test_paired_keeps_items_scored_in_both_runs_only() -> None:
    ids, a, b = paired({"a": 0.2, "b": None, "c": 1.0, "d": 0.4}, {"a": 0.3, "b": 0.9, "c": 1.0})
    assert ids == ["a", "c"]
    assert a.tolist() == [0.2, 1.0] and b.tolist() == [0.3, 1.0]


def test_paired_score_change_hand_computed() -> None:
    # differences +0.5, +0.25, -0.125, +1.0: mean 1.625 / 4, median (0.25 + 0.5) / 2;
    # signed ranks: |-0.125| is rank 1, so W- = 1, W+ = 2 + 3 + 4 = 9, W = 1;
    # exact two-sided p = 2 * #{sign patterns with W- <= 1} / 2^4 = 2 * 2 / 16.
    change = paired_score_change([0.0, 0.25, 0.5, 0.0], [0.5, 0.5, 0.375, 1.0])
    assert change.n_paired == 4
    assert change.mean_delta == pytest.approx(0.40625)
    assert change.median_delta == pytest.approx(0.375)
    assert change.statistic == 1.0
    assert change.p_value == pytest.approx(0.25)
    assert change.ci_low <= change.mean_delta <= change.ci_high


def test_paired_score_change_matches_scipy_on_larger_sample() -> None:
    from scipy import stats

    rng = np.random.default_rng(7)
    before = rng.uniform(0, 1, 40)
    after = np.clip(before + rng.normal(0.1, 0.1, 40), 0, 1)
    change = paired_score_change(before, after)
    expected = stats.wilcoxon(after - before)
    assert change.statistic == pytest.approx(float(expected.statistic))
    assert change.p_value == pytest.approx(float(expected.pvalue))
    assert change.p_value < 0.001


def test_no_change_is_p_one_and_nothing_is_nan() -> None:
    change = paired_score_change([0.1, 0.9], [0.1, 0.9])
    assert (change.mean_delta, change.statistic, change.p_value) == (0.0, 0.0, 1.0)
    empty = paired_score_change([], [])
    assert empty.n_paired == 0 and math.isnan(empty.p_value)


def test_verdict_flips_each_direction() -> None:
    before = {"a": False, "b": False, "c": True, "d": True, "e": None, "f": False}
    after = {"a": True, "b": False, "c": False, "d": True, "e": True}
    assert verdict_flips(before, after) == (["a"], ["c"])


def test_judge_drift_is_mean_paired_difference() -> None:
    before = {"x": {"i1": 0.0, "i2": 0.0, "i3": 1.0}, "y": {"i1": 0.5}}
    after = {"x": {"i1": 1.0, "i2": 0.0, "i3": 1.0, "i4": 1.0}, "y": {"i1": 0.25}}
    drifts = {d.judge_id: d for d in judge_drift(before, after)}
    assert drifts["x"].drift == pytest.approx(1 / 3) and drifts["x"].n_paired == 3
    assert drifts["y"].drift == pytest.approx(-0.25) and drifts["y"].n_paired == 1


def test_agreement_is_krippendorff_alpha_on_the_common_items() -> None:
    # two judges, items (0, 0), (1, 1), (1, 0): interval alpha by hand.
    # pairable values: 0,0,1,1,1,0 (n = 6, mean 0.5, total SS = 1.5);
    # within-item SS: 0, 0, 0.5 with m = 2 -> sum(m * SS / (m - 1)) = 1.0;
    # alpha = 1 - (n - 1) * 1.0 / (n * 1.5) = 1 - 5 / 9 = 4 / 9.
    scores = {"a": {"i1": 0.0, "i2": 1.0, "i3": 1.0}, "b": {"i1": 0.0, "i2": 1.0, "i3": 0.0}}
    assert panel_alpha(scores, ["i1", "i2", "i3"]) == pytest.approx(4 / 9)


def test_compare_and_thresholds_name_what_regressed() -> None:
    items = [f"i{k}" for k in range(8)]
    before_judges = {
        "steady": dict.fromkeys(items, 0.0),
        "numbers": dict.fromkeys(items, 0.0),
        "other": dict.fromkeys(items, 0.0),
    }
    after_judges = {
        "steady": dict.fromkeys(items, 0.0),
        "numbers": dict.fromkeys(items, 1.0),
        "other": {i: (1.0 if k < 5 else 0.0) for k, i in enumerate(items)},
    }
    # consensus = median of the three judges
    before_consensus = dict.fromkeys(items, 0.0)
    after_consensus = {i: (1.0 if k < 5 else 0.0) for k, i in enumerate(items)}
    comparison = compare(
        before_consensus,
        after_consensus,
        {i: s > 0.5 for i, s in before_consensus.items()},
        {i: s > 0.5 for i, s in after_consensus.items()},
        before_judges,
        after_judges,
    )
    assert comparison.flips_to_hallucinated == 5 and comparison.flips_to_clean == 0
    assert comparison.score.mean_delta == pytest.approx(5 / 8)
    # five +1 differences, three zeros dropped: exact p = 2 / 2^5
    assert comparison.score.p_value == pytest.approx(1 / 16)
    drifts = {d.judge_id: d.drift for d in comparison.judges}
    assert drifts == {"numbers": 1.0, "other": 0.625, "steady": 0.0}
    problems = check_thresholds(comparison, Thresholds(p_value_alpha=0.1))
    assert problems == [
        "mean consensus score rose +0.625 "
        "(threshold 0.05, 95% CI +0.25 to +0.875, Wilcoxon p=0.0625)",
        "5 verdicts flipped to hallucinated (threshold 3)",
        "judge 'numbers' drifted +1 (threshold 0.1)",
        "judge 'other' drifted +0.625 (threshold 0.1)",
    ]
    # the mean-increase check needs a significant paired test
    strict = check_thresholds(comparison, Thresholds(p_value_alpha=0.05))
    assert not any(p.startswith("mean consensus") for p in strict)
    loose = Thresholds(
        max_mean_increase=None,
        max_flips_to_hallucinated=None,
        max_judge_drift=None,
        max_agreement_drop=None,
    )
    assert check_thresholds(comparison, loose) == []
    assert regression_message([]) == "no regression"


def test_nan_statistics_never_trigger() -> None:
    nan = float("nan")
    comparison = Comparison(
        ScoreChange(0, nan, nan, nan, nan, nan, nan), 0, 0, (JudgeDrift("j", nan, 0),), nan, nan
    )
    assert check_thresholds(comparison, Thresholds()) == []


# -- the flow, end to end ---------------------------------------------------------------

PANEL = """name: regression-test
judges:
  - {{id: numbers, provider: offline, detector: {numbers}}}
  - {{id: names, provider: offline, detector: names}}
  - {{id: content, provider: offline, detector: content}}
"""


@pytest.fixture
def subset(tmp_path: Path) -> Path:
    rows = SAMPLE.read_text(encoding="utf-8").splitlines()[:30]
    path = tmp_path / "subset.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _panel(tmp_path: Path, name: str, numbers_detector: str) -> str:
    path = tmp_path / name
    path.write_text(PANEL.format(numbers=numbers_detector), encoding="utf-8")
    return str(path)


@pytest.mark.usefixtures("prefect_harness")
def test_regression_flow_fails_naming_the_judge_that_changed(
    tmp_path: Path, subset: Path, db_path: Path
) -> None:
    from juryflow.flows.regression import RegressionDetected, regression

    good = _panel(tmp_path, "good.yaml", "numbers")
    # same judge ids, but the judge called 'numbers' now runs the content detector
    changed = _panel(tmp_path, "changed.yaml", "content")
    common = dict(dataset=str(subset), db=str(db_path), suite="nightly", chunk_size=10)

    first = asyncio.run(regression(RunRequest(panel=good, **common), return_state=True))  # type: ignore[call-overload]
    assert first.is_completed(), first.message
    assert "is the baseline" in (first.message or "")

    second = asyncio.run(regression(RunRequest(panel=changed, **common), return_state=True))  # type: ignore[call-overload]
    assert second.is_failed()
    message = second.message or ""
    assert message.startswith("regressed: ")
    assert "judge 'numbers' drifted +" in message
    assert "verdicts flipped to hallucinated" in message
    assert "judge 'names'" not in message and "judge 'content'" not in message
    with pytest.raises(RegressionDetected):
        second.result()

    con = duckdb.connect(str(db_path), read_only=True)
    try:
        runs = con.execute(
            "SELECT run_id FROM runs WHERE suite = 'nightly' ORDER BY started_at"
        ).fetchall()
        comparison = con.execute(
            "SELECT comparison_id, run_id, baseline_run_id, regressed, message, n_paired, "
            "flips_to_hallucinated, thresholds FROM comparisons"
        ).fetchall()
        assert len(runs) == 2 and len(comparison) == 1
        comparison_id, run_id, baseline_id, regressed, stored_message, n_paired, flips, th = (
            comparison[0]
        )
        assert (run_id, baseline_id) == (runs[1][0], runs[0][0])
        assert regressed is True and stored_message == message and n_paired == 30
        assert flips > 3
        assert json.loads(th)["max_judge_drift"] == 0.1
        judges = dict(
            con.execute(
                "SELECT judge_id, drift FROM comparison_judges WHERE comparison_id = ?",
                [comparison_id],
            ).fetchall()
        )
    finally:
        con.close()
    assert judges["names"] == 0.0 and judges["content"] == 0.0 and judges["numbers"] > 0.1

    # A regressed run is not the next baseline: the third run is compared with the first.
    third = asyncio.run(regression(RunRequest(panel=good, **common), return_state=True))  # type: ignore[call-overload]
    assert third.is_completed() and third.message == "no regression"
    result = third.result()
    assert result["comparison"]["baseline_run_id"] == runs[0][0]

    asyncio.run(_assert_artifacts(result["run_id"]))


async def _assert_artifacts(run_id: str) -> None:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        # A raw request: with this FastAPI, Prefect's client sends explicit nulls
        # (sort, flow_runs) that the server rejects with a 422.
        response = await client._client.post(
            "/artifacts/filter",
            json={
                "artifacts": {"key": {"like_": "juryflow-"}},
                "limit": 100,
                "offset": 0,
                "sort": "CREATED_DESC",
            },
        )
    artifacts = response.json()
    by_type: dict[str, list[str]] = {}
    for artifact in artifacts:
        by_type.setdefault(str(artifact["type"]), []).append(json.dumps(artifact["data"]))
    assert any(run_id in data for data in by_type.get("markdown", []))
    assert any("no regression" in data for data in by_type.get("markdown", []))
    assert by_type.get("table"), "the per-judge table artifact is missing"


@pytest.mark.usefixtures("prefect_harness")
def test_pinned_baseline_that_does_not_exist_fails_before_judging(
    subset: Path, db_path: Path
) -> None:
    from juryflow.flows.regression import regression

    state = asyncio.run(
        regression(
            RunRequest(dataset=str(subset), db=str(db_path)), baseline="nope", return_state=True
        )  # type: ignore[call-overload]
    )
    assert state.is_failed() and "nope" in (state.message or "")
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        row = con.execute("SELECT count(*) FROM runs").fetchone()
    finally:
        con.close()
    assert row == (0,)
