"""Calibration: grouped folds, out-of-fold honesty, and the stored rule applied again."""

from __future__ import annotations

import asyncio
import doctest
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import juryflow.maths.calibration.candidates
import juryflow.maths.calibration.data
import juryflow.maths.calibration.procedure
import juryflow.maths.group_bootstrap
from juryflow.maths.calibration.procedure import (
    CalibrationData,
    calibrate,
    grouped_folds,
    judge_prediction,
    predict,
    score,
    word_ids,
)
from juryflow.maths.reducers import ConsensusRule
from juryflow.planning.run_request import RunRequest

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "ragtruth"


def test_doctests_pass() -> None:
    attempted = 0
    for module in (
        juryflow.maths.calibration.procedure,
        juryflow.maths.calibration.candidates,
        juryflow.maths.calibration.data,
        juryflow.maths.group_bootstrap,
    ):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__
        attempted += result.attempted
    assert attempted >= 8


@settings(deadline=None, max_examples=60)
@given(st.lists(st.integers(0, 12), min_size=6, max_size=80), st.integers(2, 5), st.integers(0, 9))
def test_a_group_never_straddles_two_folds(groups: list[int], k: int, seed: int) -> None:
    if len(set(groups)) < k:
        with pytest.raises(ValueError, match="folds"):
            grouped_folds(groups, k, seed)
        return
    folds = grouped_folds(groups, k, seed)
    for g in set(groups):
        assert len({int(f) for f, h in zip(folds, groups, strict=True) if h == g}) == 1
    assert set(folds.tolist()) == set(range(k))


def synthetic(n_items: int = 240, seed: int = 0) -> CalibrationData:
    """Three span judges of known quality over texts of one-letter words ("a b c ...")."""
    rng = np.random.default_rng(seed)
    words_per_item = 20
    length = 2 * words_per_item - 1
    text = " ".join("x" * words_per_item)
    n_chars = n_items * length
    gold_words = np.zeros((n_items, words_per_item), dtype=bool)
    hallucinated = rng.random(n_items) < 0.6
    for i in np.flatnonzero(hallucinated):
        start = rng.integers(0, words_per_item - 3)
        gold_words[i, start : start + 3] = True
    quality = [(0.9, 0.02), (0.6, 0.1), (0.3, 0.3)]  # (keep gold word, add false word)
    marked_words = np.stack(
        [
            (gold_words & (rng.random(gold_words.shape) < keep))
            | (~gold_words & (rng.random(gold_words.shape) < false))
            for keep, false in quality
        ]
    )

    # Characters: word w of item i sits at 2w; spaces at odd positions stay unmarked.
    def to_chars(words: np.ndarray) -> np.ndarray:
        chars = np.zeros((*words.shape[:-1], length), dtype=bool)
        chars[..., 0::2] = words
        return chars.reshape(*words.shape[:-2], n_chars)

    covered = to_chars(marked_words)
    verdicts = marked_words.any(axis=2).astype(np.float64)
    ids = word_ids(text)
    word_id = np.concatenate(
        [np.where(ids >= 0, ids + i * words_per_item, -1) for i in range(n_items)]
    )
    return CalibrationData(
        judge_ids=("good", "fair", "poor"),
        span_judge=np.ones(3, dtype=bool),
        verdicts=verdicts,
        scores=verdicts.copy(),
        covered=covered,
        span_answered=np.ones((3, n_items), dtype=bool),
        char_item=np.repeat(np.arange(n_items), length),
        word_id=word_id,
        gold_verdict=hallucinated.astype(np.float64),
        gold_chars=to_chars(gold_words[None])[0],
        span_labelled=np.ones(n_items, dtype=bool),
        groups=np.asarray([f"src{i // 6}" for i in range(n_items)], dtype=object),
        quorum=2,
    )


def test_calibrated_rule_beats_majority_and_matches_the_best_judge_out_of_fold() -> None:
    data = synthetic()
    default = ConsensusRule.from_dict({"verdict": "spans"})
    result = calibrate(data, default, folds=5, seed=1)
    by_name = {r.name: r.scored for r in result.results}
    calibrated = by_name["calibrated (out of fold)"]
    best_judge = max(
        (r.scored for r in result.results if r.kind == "judge"), key=lambda s: s.response.f1
    )
    assert calibrated.spans is not None and best_judge.spans is not None
    assert calibrated.spans.f1 >= by_name["default rule"].spans.f1  # type: ignore[union-attr]
    assert calibrated.response.f1 >= best_judge.response.f1 - 0.02
    assert calibrated.spans.f1 >= best_judge.spans.f1 - 0.02
    assert len(result.fold_rules) == 5


def test_a_panel_follows_its_best_judge_unless_a_rule_does_better() -> None:
    """With one near-perfect judge and two coin flips, no combination can beat the judge: the
    calibrated verdict follows it (a tie keeps the simpler rule). With three equal,
    independent judges, the vote beats each of them and is kept."""
    data = synthetic(seed=5)
    rng = np.random.default_rng(11)
    gold = data.gold_verdict > 0.5
    sharp = np.where(rng.random(data.n_items) < 0.96, gold, ~gold).astype(np.float64)
    coins = (rng.random((2, data.n_items)) < 0.5).astype(np.float64)
    lopsided = CalibrationData(**{**data.__dict__, "verdicts": np.vstack([sharp, coins])})
    result = calibrate(lopsided, ConsensusRule.from_dict({"verdict": "majority"}), folds=5)
    calibrated = result.results[0].scored
    judge = next(r.scored for r in result.results if r.name == "good")
    assert calibrated.response.f1 >= judge.response.f1 - 0.01
    assert result.choice is not None and result.choice.follows == "good"

    equal = np.stack(
        [np.where(rng.random(data.n_items) < 0.8, gold, ~gold) for _ in range(3)]
    ).astype(np.float64)
    panel = CalibrationData(**{**data.__dict__, "verdicts": equal})
    result = calibrate(panel, ConsensusRule.from_dict({"verdict": "majority"}), folds=5)
    best_judge = max(r.scored.response.f1 for r in result.results if r.kind == "judge")
    assert result.results[0].scored.response.f1 > best_judge
    assert result.choice is not None and result.choice.follows is None


def test_earns_its_keep_needs_a_margin_beyond_noise() -> None:
    from juryflow.maths.calibration.procedure import earns_its_keep

    groups = np.asarray([f"g{i // 4}" for i in range(80)], dtype=object)
    right, wrong = np.array([1, 0, 0]), np.array([0, 0, 1])
    incumbent = np.stack([wrong if i % 8 == 0 else right for i in range(80)])
    one_better = incumbent.copy()
    one_better[8] = right  # one item of 80: well inside the noise
    assert not earns_its_keep(one_better, incumbent, groups)
    much_better = np.stack([right] * 80)
    assert earns_its_keep(much_better, incumbent, groups)
    assert not earns_its_keep(incumbent, much_better, groups)


def test_a_fold_is_never_scored_by_a_rule_fitted_on_it() -> None:
    """Scrambling one fold's labels changes nothing that fold was predicted with."""
    data = synthetic(seed=3)
    folds = grouped_folds(data.groups, 4, 7)
    rng = np.random.default_rng(0)
    scrambled_gold = data.gold_verdict.copy()
    scrambled_gold[folds == 0] = rng.permutation(scrambled_gold[folds == 0])
    scrambled = CalibrationData(**{**data.__dict__, "gold_verdict": scrambled_gold})
    # Fit on folds 1-3 only: identical training data, so identical rules and predictions.
    train = folds != 0
    from juryflow.maths.calibration.procedure import fit_on

    base = ConsensusRule.from_dict({"verdict": "spans"})
    a = predict(data, fit_on(data, base, train))
    b = predict(scrambled, fit_on(scrambled, base, train))
    assert (a.verdict == b.verdict).all() and (a.chars == b.chars).all()


def test_a_failed_judge_counts_as_flagging_nothing() -> None:
    data = synthetic(60)
    verdicts = data.verdicts.copy()
    verdicts[0, :30] = np.nan  # the good judge failed on half the items
    failing = CalibrationData(**{**data.__dict__, "verdicts": verdicts})
    full = score(data, judge_prediction(data, 0)).response
    half = score(failing, judge_prediction(failing, 0)).response
    assert half.recall < full.recall and half.fp <= full.fp


# -- through the store and the command line ---------------------------------------------


@pytest.fixture
def labelled_run(tmp_path: Path, prefect_harness: None) -> tuple[Path, str]:
    """The offline panel over 60 RAGTruth rows of ten sources (human labels included)."""
    from juryflow.flows.evaluate import evaluate

    source = SHARED / "data2txt_dev.jsonl"
    if not source.is_file():
        pytest.skip(f"{source} is not here (it ships in shared/ beside the checkout)")
    subset = tmp_path / "labelled.jsonl"
    subset.write_text(
        "\n".join(source.read_text(encoding="utf-8").splitlines()[:60]) + "\n", encoding="utf-8"
    )
    db = tmp_path / "store.duckdb"
    summary = asyncio.run(evaluate(RunRequest(dataset=str(subset), db=str(db))))
    return db, str(summary["run_id"])


def test_calibrate_stores_a_rule_that_run_and_reaggregate_apply(
    labelled_run: tuple[Path, str], tmp_path: Path
) -> None:
    from juryflow.cli import app
    from juryflow.flows.reaggregate import reaggregate
    from juryflow.storage.store import Store

    db, run_id = labelled_run
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "calibrate",
            run_id,
            "--db",
            str(db),
            "--name",
            "offline",
            "--folds",
            "3",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["group_column"] == "source_id" and report["groups"] == 10
    kinds = [p["kind"] for p in report["predictors"]]
    assert kinds[:2] == ["calibrated", "default"] and kinds.count("judge") == 3
    stored = Store(db).get_calibration("offline")
    assert stored is not None and stored.run_id == run_id and stored.folds == 3

    summary = asyncio.run(reaggregate(run_id=run_id, db=str(db), calibration="offline"))
    rule = Store(db).get_run(summary["run_id"])
    assert rule is not None and rule.consensus is not None
    assert rule.consensus["name"] == "offline"
    assert rule.consensus["spans"] == stored.rule["spans"]

    table = runner.invoke(app, ["calibrate", run_id, "--db", str(db), "--folds", "3"])
    assert table.exit_code == 0, table.output
    assert "out-of-fold" in table.output.lower() and "stored as calibration" in table.output


def test_unknown_calibration_and_group_say_what_to_do(labelled_run: tuple[Path, str]) -> None:
    from juryflow.cli import app

    db, run_id = labelled_run
    runner = CliRunner()
    bad = runner.invoke(app, ["reaggregate", run_id, "--db", str(db), "--calibration", "nope"])
    assert bad.exit_code == 2 and "juryflow calibrate" in bad.output
    group = runner.invoke(app, ["calibrate", run_id, "--db", str(db), "--group", "nope"])
    assert group.exit_code == 2 and "no such column" in group.output
