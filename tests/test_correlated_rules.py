"""Rules for correlated judges (issue 40): stacking, at_least:K, Dawid–Skene refitted on each
run, the best subset, and what each judge adds. Hypothesis properties, then fixed cases."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from hypothesis import given, settings
from hypothesis import strategies as st

from juryflow.maths.calibration.candidates import (
    ALONE,
    COUNTED,
    PER_RUN,
    STACKED,
    SUBSET,
    WEIGHTED,
    echoes,
    fit_stack,
    verdict_candidates,
)
from juryflow.maths.calibration.data import CalibrationData, predict
from juryflow.maths.calibration.judge_value import cheapest_subset, leave_one_out
from juryflow.maths.consensus import item_consensus
from juryflow.maths.records import Judgment
from juryflow.maths.reducers import ConsensusRule, RuleRef, StackFit

PROPERTY = settings(deadline=None, max_examples=60)
SLOW_PROPERTY = settings(deadline=None, max_examples=12)

# (n_judges, n_items) verdict matrices of 0/1 with some NaN (no answer)
verdicts_st = st.integers(1, 6).flatmap(
    lambda n: st.integers(1, 12).flatmap(
        lambda m: st.lists(
            st.lists(st.sampled_from([0.0, 1.0, np.nan]), min_size=m, max_size=m),
            min_size=n,
            max_size=n,
        )
    )
)


def _data(verdicts: npt.NDArray[np.float64], gold: npt.NDArray[np.float64] | None = None,
          groups: list[str] | None = None) -> CalibrationData:  # fmt: skip
    n, m = verdicts.shape
    return CalibrationData(
        judge_ids=tuple(f"j{k}" for k in range(n)),
        span_judge=np.zeros(n, dtype=bool),
        verdicts=verdicts,
        scores=verdicts.copy(),
        covered=np.zeros((n, 0), dtype=bool),
        span_answered=np.zeros((n, m), dtype=bool),
        char_item=np.zeros(0, dtype=np.int64),
        word_id=np.zeros(0, dtype=np.int64),
        gold_verdict=np.full(m, np.nan) if gold is None else gold,
        gold_chars=np.zeros(0, dtype=bool),
        span_labelled=np.zeros(m, dtype=bool),
        groups=np.asarray(groups or [str(i) for i in range(m)], dtype=object),
        quorum=1,
    )


def _item_verdicts(rule: ConsensusRule, verdicts: npt.NDArray[np.float64]) -> list[bool | None]:
    """The rule applied item by item, as a run applies it."""
    out = []
    for i in range(verdicts.shape[1]):
        judgments = [
            Judgment(f"i{i}", f"j{k}", "score", float(v))
            for k, v in enumerate(verdicts[:, i])
            if not np.isnan(v)
        ]
        if not judgments:
            out.append(None)
            continue
        c = item_consensus(f"i{i}", judgments, verdicts.shape[0], "", quorum=1, rule=rule)
        out.append(c.hallucinated)
    return out


@PROPERTY
@given(verdicts_st, st.floats(0.1, 5.0))
def test_stacking_with_equal_judges_is_the_majority(rows: list[list[float]], c: float) -> None:
    verdicts = np.asarray(rows, dtype=np.float64)
    ids = [f"j{k}" for k in range(verdicts.shape[0])]
    stacked = ConsensusRule(
        verdict=RuleRef("verdict", "stacked", 0.5), stack=StackFit(0.0, dict.fromkeys(ids, c))
    )
    majority = ConsensusRule(verdict=RuleRef("verdict", "majority"))
    assert _item_verdicts(stacked, verdicts) == _item_verdicts(majority, verdicts)
    data = _data(verdicts)
    answered = ~np.isnan(verdicts).all(axis=0)
    a, b = predict(data, stacked).verdict, predict(data, majority).verdict
    assert (a[answered] == b[answered]).all()


@PROPERTY
@given(verdicts_st)
def test_at_least_one_is_the_union_of_verdicts(rows: list[list[float]]) -> None:
    verdicts = np.asarray(rows, dtype=np.float64)
    rule = ConsensusRule(verdict=RuleRef("verdict", "at_least", 1.0))
    union = [None if np.isnan(col).all() else bool(np.nansum(col) > 0) for col in verdicts.T]
    assert _item_verdicts(rule, verdicts) == union
    said = predict(_data(verdicts), rule).verdict
    assert said.tolist() == [bool(u) for u in union]


@PROPERTY
@given(verdicts_st, st.data())
def test_a_judge_weighted_zero_takes_no_part_in_counted_rules(
    rows: list[list[float]], data: st.DataObject
) -> None:
    verdicts = np.asarray(rows, dtype=np.float64)
    n = verdicts.shape[0]
    muted = data.draw(st.integers(0, n - 1))
    weights = {f"j{muted}": 0.0}
    for name in ("majority", "at_least:2"):
        full = ConsensusRule.from_dict({"verdict": name, "weights": weights})
        rest = np.delete(verdicts, muted, axis=0)
        bare = ConsensusRule.from_dict({"verdict": name})
        expected = predict(_data(rest), bare).verdict if n > 1 else None
        got = predict(_data(verdicts), full).verdict
        if expected is not None:
            assert got.tolist() == expected.tolist()


def _labelled(seed: int, n_items: int = 120) -> CalibrationData:
    """Three judges of unequal quality with labels, items in groups of three."""
    rng = np.random.default_rng(seed)
    gold = rng.random(n_items) < 0.3
    quality = (0.9, 0.75, 0.6)
    verdicts = np.stack([np.where(rng.random(n_items) < q, gold, ~gold) for q in quality])
    return _data(
        verdicts.astype(np.float64),
        gold.astype(np.float64),
        [f"g{i // 3}" for i in range(n_items)],
    )


def _with_echo(data: CalibrationData, of: int) -> CalibrationData:
    """``data`` with a fourth judge that repeats judge ``of`` on every item."""
    verdicts = np.vstack([data.verdicts, data.verdicts[of]])
    return _data(verdicts, data.gold_verdict, [str(g) for g in data.groups])


@SLOW_PROPERTY
@given(
    st.integers(0, 10_000),
    st.integers(0, 2),
    st.sampled_from([STACKED, COUNTED, ALONE, WEIGHTED, PER_RUN, SUBSET]),
)
def test_a_judge_that_always_agrees_with_another_adds_nothing(
    seed: int, of: int, family: str
) -> None:
    data = _with_echo(_labelled(seed), of)
    assert echoes(data) == ("j3",)
    values = leave_one_out(data, ConsensusRule().resolve(False), ("default", family), folds=3)
    echo = next(v for v in values if v.versus == "j3")
    assert echo.response == 0.0 and echo.response_interval == (0.0, 0.0)


def test_stacking_weighs_the_better_judge_more_and_beats_a_noisy_majority() -> None:
    data = _labelled(3, 600)
    everything = np.ones(data.n_items, dtype=bool)
    fitted = fit_stack(data, everything, "verdicts", frozenset())
    assert fitted is not None
    fit, threshold = fitted
    assert fit.coefficients["j0"] > fit.coefficients["j1"] > fit.coefficients["j2"] > 0
    assert 0.0 <= threshold < 1.0
    # Stored and read back, the rule decides the same.
    rule = ConsensusRule(verdict=RuleRef("verdict", "stacked", threshold), stack=fit)
    again = ConsensusRule.from_dict(rule.to_dict())
    assert (predict(data, again).verdict == predict(data, rule).verdict).all()


def test_dawid_skene_per_run_is_stored_unfitted_and_refitted_on_each_run() -> None:
    data = _labelled(4, 300)
    everything = np.ones(data.n_items, dtype=bool)
    base = ConsensusRule().resolve(False)
    per_run = [
        c for c in verdict_candidates(data, base, base, everything, PER_RUN) if c.family == PER_RUN
    ]
    assert per_run and all(c.refit_per_run and c.rule.verdict_fit is not None for c in per_run)
    # A fit made over this run's verdicts alone: the labels play no part in it.
    blind = _data(data.verdicts, np.full(data.n_items, np.nan), [str(g) for g in data.groups])
    again = verdict_candidates(blind, base, base, everything, PER_RUN)[1]
    assert again.rule.verdict_fit == per_run[0].rule.verdict_fit


def test_the_cheapest_subset_within_noise_of_the_best_is_named() -> None:
    data = _labelled(5, 600)
    best = predict(data, ConsensusRule(verdict=RuleRef("verdict", "majority"))).verdict
    from juryflow.maths.calibration.data import Prediction

    advice = cheapest_subset(data, Prediction(best, np.zeros(0, dtype=bool)), folds=3)
    assert advice.cost_unit == "calls"
    assert [s.size for s in advice.subsets] == [1, 2, 3]
    assert advice.cheapest is not None and advice.cheapest.within_noise
    assert advice.cheapest.judges[0] == "j0"  # the best judge is picked first
    priced = cheapest_subset(
        data, Prediction(best, np.zeros(0, dtype=bool)), {"j0": 0.01, "j1": 0.001, "j2": 0.001},
        folds=3,
    )  # fmt: skip
    assert priced.cost_unit == "USD"


@PROPERTY
@given(verdicts_st, st.data())
def test_a_stored_stacking_rule_decides_alike_item_by_item_and_over_the_run(
    rows: list[list[float]], data: st.DataObject
) -> None:
    """What `calibrate` scores (vectorised) is what a run or `reaggregate` applies to each
    item, once the rule is stored and read back."""
    verdicts = np.asarray(rows, dtype=np.float64)
    ids = [f"j{k}" for k in range(verdicts.shape[0])]
    coefficients = {j: data.draw(st.floats(-3, 3)) for j in ids}
    stack = StackFit(data.draw(st.floats(-2, 2)), coefficients)
    threshold = data.draw(st.sampled_from([0.1, 0.3, 0.5, 0.7]))
    rule = ConsensusRule.from_dict(
        ConsensusRule(verdict=RuleRef("verdict", "stacked", threshold), stack=stack).to_dict()
    )
    per_item = _item_verdicts(rule, verdicts)
    over_run = predict(_data(verdicts), rule).verdict
    answered = ~np.isnan(verdicts).all(axis=0)
    assert [v for v, a in zip(per_item, answered, strict=True) if a] == over_run[answered].tolist()


def test_calibrate_says_no_fold_chose_a_lossy_stop_when_none_did() -> None:
    """Issue 43: `folds chose off/off/off/off/off` was followed by `the folds disagree`."""
    from juryflow.cli.calibration import _lossy_line

    lossy = {
        "fold_agreements": [None] * 5, "agreement": None, "first": ["a", "b"],
        "calls_saved": 0.0, "response_full": 80.0, "response_lossy": 80.0,
        "response_change_interval": [0.0, 0.0], "span_full": None,
    }  # fmt: skip
    line = _lossy_line(lossy)
    assert "folds chose off/off/off/off/off" in line and "disagree" not in line
    assert line.endswith("no fold found a lossy stop worth its loss: keep exact early stopping")
    lossy["fold_agreements"] = [None, 0.6, None, None, None]
    assert _lossy_line(lossy).endswith(
        "the folds disagree on the agreement: keep exact early stopping"
    )
