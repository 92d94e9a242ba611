"""Every named consensus rule: property tests (Hypothesis), reference values, doctests."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import juryflow.maths.reducers
from juryflow.maths.consensus import item_consensus
from juryflow.maths.records import Judgment, Span
from juryflow.maths.reducers import (
    Ballot,
    ConsensusRule,
    Reliability,
    RuleError,
    RuleRef,
    decide_verdict,
    reduce_score,
    reduce_spans,
    reducer_names,
)

# Generous budgets: these run on a loaded 2-core machine beside Prefect servers.
PROPERTY = settings(deadline=None, max_examples=80)

scores_st = st.lists(st.floats(0, 1), min_size=1, max_size=9)
weights_st = st.floats(0.1, 10)


def test_doctests_pass() -> None:
    result = doctest.testmod(juryflow.maths.reducers)
    assert result.attempted > 20 and result.failed == 0


def _rule(**parts: str) -> ConsensusRule:
    return ConsensusRule.from_dict(parts)


# -- score reducers --------------------------------------------------------------------


@PROPERTY
@given(scores_st, st.sampled_from(reducer_names("score")))
def test_every_score_reducer_stays_between_min_and_max(scores: list[float], name: str) -> None:
    values = np.asarray(scores)
    got = reduce_score(_rule(score=name), values, np.ones(len(scores)))
    assert values.min() - 1e-12 <= got <= values.max() + 1e-12


@PROPERTY
@given(st.floats(0, 1), st.integers(1, 9), st.sampled_from(reducer_names("score")))
def test_unanimous_scores_reduce_to_themselves(value: float, n: int, name: str) -> None:
    got = reduce_score(_rule(score=name), np.full(n, value), np.ones(n))
    assert got == pytest.approx(value)


@PROPERTY
@given(scores_st)
def test_median_and_trimmed_mean_match_numpy_and_scipy(scores: list[float]) -> None:
    values = np.asarray(scores)
    ones = np.ones(len(scores))
    assert reduce_score(_rule(score="median"), values, ones) == pytest.approx(np.median(values))
    assert reduce_score(_rule(score="trimmed_mean:0.25"), values, ones) == pytest.approx(
        stats.trim_mean(values, 0.25)
    )
    assert reduce_score(_rule(score="mean"), values, ones) == pytest.approx(values.mean())


@PROPERTY
@given(st.lists(st.tuples(st.floats(0, 1), weights_st), min_size=1, max_size=9))
def test_weighted_median_splits_the_weight(pairs: list[tuple[float, float]]) -> None:
    values = np.asarray([p[0] for p in pairs])
    weights = np.asarray([p[1] for p in pairs])
    got = reduce_score(_rule(score="weighted_median"), values, weights)
    # At least half the weight is at or below it, and at least half at or above it.
    assert weights[values <= got].sum() >= weights.sum() / 2 - 1e-9
    assert weights[values >= got].sum() >= weights.sum() / 2 - 1e-9


# -- span reducers ---------------------------------------------------------------------

covered_st = st.integers(1, 6).flatmap(
    lambda n: st.lists(st.lists(st.booleans(), min_size=12, max_size=12), min_size=n, max_size=n)
)


@PROPERTY
@given(covered_st)
def test_span_rules_nest_union_at_least_majority(rows: list[list[bool]]) -> None:
    covered = np.asarray(rows, dtype=bool)
    n = covered.shape[0]
    ones = np.ones(n)
    union = reduce_spans(_rule(spans="union"), covered, ones, [])
    majority = reduce_spans(_rule(spans="majority"), covered, ones, [])
    assert (union == covered.any(axis=0)).all()
    assert (majority == (covered.sum(axis=0) * 2 > n)).all()
    previous = union
    for k in range(1, n + 1):
        at_least = reduce_spans(_rule(spans=f"at_least:{k}"), covered, ones, [])
        assert not (at_least & ~previous).any(), "raising K never adds a character"
        previous = at_least
    # With equal weights "weighted:0.5" is the strict majority, and weighted:0 the union.
    assert (reduce_spans(_rule(spans="weighted:0.5"), covered, ones, []) == majority).all()
    assert (reduce_spans(_rule(spans="weighted:0"), covered, ones, []) == union).all()


@PROPERTY
@given(covered_st, st.data())
def test_weighted_spans_follow_a_dominant_judge(
    rows: list[list[bool]], data: st.DataObject
) -> None:
    covered = np.asarray(rows, dtype=bool)
    n = covered.shape[0]
    boss = data.draw(st.integers(0, n - 1))
    weights = np.ones(n)
    weights[boss] = n + 1.0  # more than everyone else together
    got = reduce_spans(_rule(spans="weighted:0.5"), covered, weights, [])
    assert (got == covered[boss]).all()


@PROPERTY
@given(covered_st)
def test_dawid_skene_spans_with_equal_judges_are_a_majority(rows: list[list[bool]]) -> None:
    covered = np.asarray(rows, dtype=bool)
    n = covered.shape[0]
    ids = [f"j{i}" for i in range(n)]
    # Equally reliable, symmetric judges and an even prior: the posterior is a vote count.
    fit = Reliability(dict.fromkeys(ids, 0.8), dict.fromkeys(ids, 0.8), 0.5)
    rule = ConsensusRule(spans=RuleRef("spans", "dawid_skene"), span_fit=fit)
    got = reduce_spans(rule, covered, np.ones(n), ids)
    assert (got == (covered.sum(axis=0) * 2 > n)).all()


# -- verdict rules ---------------------------------------------------------------------

verdicts_st = st.lists(st.booleans(), min_size=1, max_size=9)


def _ballot(verdicts: list[bool], score: float = 0.0, spans: bool = False) -> Ballot:
    n = len(verdicts)
    return Ballot(tuple(f"j{i}" for i in range(n)), np.asarray(verdicts), np.ones(n), score, spans)


@PROPERTY
@given(verdicts_st)
def test_a_tie_is_never_a_majority(verdicts: list[bool]) -> None:
    got = decide_verdict(_rule(verdict="majority"), _ballot(verdicts))
    assert got == (2 * sum(verdicts) > len(verdicts))
    if 2 * sum(verdicts) == len(verdicts):
        assert got is False


@PROPERTY
@given(verdicts_st)
def test_at_least_k_is_monotone_in_k(verdicts: list[bool]) -> None:
    said = [decide_verdict(_rule(verdict=f"at_least:{k}"), _ballot(verdicts)) for k in (1, 2, 3)]
    assert said == sorted(said, reverse=True)
    assert said[0] == any(verdicts)


@PROPERTY
@given(verdicts_st, st.floats(0, 1), st.booleans())
def test_score_and_spans_verdicts(verdicts: list[bool], score: float, spans: bool) -> None:
    ballot = _ballot(verdicts, score, spans)
    assert decide_verdict(_rule(verdict="spans"), ballot) is spans
    assert decide_verdict(_rule(verdict="score:0.3"), ballot) == (score >= 0.3 - 1e-12)


@PROPERTY
@given(verdicts_st)
def test_dawid_skene_verdict_with_equal_judges_is_a_majority(verdicts: list[bool]) -> None:
    ids = [f"j{i}" for i in range(len(verdicts))]
    fit = Reliability(dict.fromkeys(ids, 0.7), dict.fromkeys(ids, 0.7), 0.5)
    rule = ConsensusRule(verdict=RuleRef("verdict", "dawid_skene"), verdict_fit=fit)
    assert decide_verdict(rule, _ballot(verdicts)) == (2 * sum(verdicts) > len(verdicts))


@PROPERTY
@given(verdicts_st, st.sampled_from([0.0, 0.2, 0.5, 0.8]))
def test_dawid_skene_verdict_reads_its_threshold_zero_included(
    verdicts: list[bool], threshold: float
) -> None:
    """The posterior is compared with T as given: dawid_skene:0 flags any posterior above 0
    (it once fell back to 0.5, ``param or 0.5``), as the span rule of the same name does."""
    ids = [f"j{i}" for i in range(len(verdicts))]
    fit = Reliability(dict.fromkeys(ids, 0.7), dict.fromkeys(ids, 0.7), 0.5)
    rule = ConsensusRule(verdict=RuleRef("verdict", "dawid_skene", threshold), verdict_fit=fit)
    ballot = _ballot(verdicts)
    votes = np.array(verdicts, dtype=np.float64)[:, None]
    posterior = 1 / (1 + np.exp(-fit.log_odds(tuple(ids), votes)[0]))
    assert decide_verdict(rule, ballot) == bool(posterior > threshold)
    if threshold == 0.0:
        assert decide_verdict(rule, ballot)  # every posterior is above 0


# -- rules as data ---------------------------------------------------------------------


@PROPERTY
@given(
    st.sampled_from(["median", "mean", "trimmed_mean:0.1", "weighted_median"]),
    st.sampled_from(["majority", "union", "at_least:2", "weighted:0.3"]),
    st.sampled_from(["auto", "majority", "spans", "score:0.3", "at_least:1", "weighted:0.4"]),
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.floats(0, 5)),
)
def test_a_rule_survives_its_stored_form(
    score: str, spans: str, verdict: str, weights: dict[str, float]
) -> None:
    rule = ConsensusRule.from_dict(
        {"score": score, "spans": spans, "verdict": verdict, "weights": weights}
    )
    assert ConsensusRule.from_dict(rule.to_dict()) == rule


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"spans": "at_least:0"}, "at least 1"),
        ({"spans": "at_least:1.5"}, "whole number"),
        ({"verdict": "score:1.5"}, r"\(0, 1\]"),
        ({"score": "median:3"}, "takes no parameter"),
        ({"score": "mode"}, "unknown score rule 'mode'"),
        ({"weights": {"a": -1}}, ">= 0"),
        ({"weights": "heavy"}, "must map judge ids"),
    ],
)
def test_bad_rules_say_what_to_fix(data: dict[str, object], message: str) -> None:
    with pytest.raises(RuleError, match=message):
        ConsensusRule.from_dict(data)


def test_fitted_rules_need_a_fit_and_fall_back_provisionally() -> None:
    rule = ConsensusRule.from_options(["verdict=dawid_skene", "spans=dawid_skene"])
    assert rule.needs_fit
    provisional = rule.provisional()
    assert str(provisional.verdict) == "majority" and str(provisional.spans) == "majority"
    with pytest.raises(RuleError, match="fitted reliability"):
        decide_verdict(rule, _ballot([True]))


# -- applied to an item ----------------------------------------------------------------


def _spans(judge: str, text: str, *words: str, match: str = "exact") -> Judgment:
    spans = tuple(
        Span(text.index(w), text.index(w) + len(w), w, match)  # type: ignore[arg-type]
        for w in words
    )
    return Judgment("i", judge, "spans", 1.0 if spans else 0.0, spans)


def test_an_ambiguous_anchor_does_not_vote() -> None:
    text = "the cat sat on the mat"
    judgments = [
        _spans("a", text, "the", match="ambiguous"),
        _spans("b", text, "the", match="ambiguous"),
        _spans("c", text, "mat"),
    ]
    c = item_consensus("i", judgments, 3, text, rule=_rule(spans="union", verdict="spans"))
    assert [s.text for s in c.spans] == ["mat"]


def test_union_helps_specialists_and_verdict_follows_spans() -> None:
    text = "Opened in 1889 by Jean Valjean, it serves sushi."
    judgments = [
        _spans("numbers", text, "1889"),
        _spans("names", text, "Jean Valjean"),
        _spans("content", text),
    ]
    majority = item_consensus("i", judgments, 3, text)
    assert majority.spans == () and majority.hallucinated is False
    union = item_consensus("i", judgments, 3, text, rule=_rule(spans="union", verdict="spans"))
    assert [s.text for s in union.spans] == ["1889", "Jean Valjean"]
    assert union.hallucinated is True and not union.contradicts


def test_weights_naming_unknown_judges_are_refused() -> None:
    with pytest.raises(RuleError, match="does not have"):
        _rule(**{}).from_dict({"weights": {"claud": 2}}).check_judges(["claude", "gpt"])
