"""Intra-judge reliability (issue 26, point 2): the maths of a judge's agreement with its own
samples against the reference libraries, the resampling forms against the point formulas on
duplicated items, and a flip rate F recovered from synthetic samples (2F(1-F) of pairs)."""

from __future__ import annotations

import doctest
import math
import warnings

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

import juryflow.maths.samples.self_agreement as sa_module
from juryflow.maths import agreement as ag
from juryflow.maths.group_bootstrap import group_weights
from juryflow.maths.samples.self_agreement import (
    Draws,
    fleiss_kappa_weighted,
    interval_alpha_weighted,
    others_disagreement_per_item,
    pair_disagreement_per_item,
    self_agreement,
    span_f1_weighted,
)

NAN = float("nan")


def same(a: float, b: float, tol: float = 1e-9) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol * max(1.0, abs(b))


def package_alpha(ratings: np.ndarray) -> float:
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return float(
                krippendorff.alpha(reliability_data=ratings, level_of_measurement="interval")
            )
    except ValueError:
        return NAN


@st.composite
def samples(draw: st.DrawFn, binary: bool = False) -> np.ndarray:
    """(n_samples, n_items) ratings with gaps: 0-1 scores in tenths, or 0/1 verdicts."""
    n = draw(st.integers(1, 5))
    m = draw(st.integers(1, 25))
    top = 1 if binary else 10
    values = draw(arrays(np.float64, (n, m), elements=st.integers(0, top).map(float)))
    missing = draw(arrays(np.bool_, (n, m)))
    values = values if binary else values / 10
    values[missing] = np.nan
    return values


def test_doctests_pass() -> None:
    result = doctest.testmod(sa_module)
    assert result.attempted and not result.failed


# -- the point figures are the panel's own statistics ---------------------------------------


@settings(max_examples=200, deadline=None)
@given(samples())
def test_alpha_with_unit_weights_is_the_reference_alpha(scores: np.ndarray) -> None:
    ours = float(interval_alpha_weighted(scores, np.ones((1, scores.shape[1])))[0])
    reference = ag.krippendorff_alpha(scores, "interval")
    assert same(ours, reference, 1e-7)
    pairable = (~np.isnan(scores)).sum(axis=0) >= 2
    if pairable.any() and not math.isnan(reference):
        assert same(reference, package_alpha(scores), 1e-7)


@settings(max_examples=150, deadline=None)
@given(samples(), st.data())
def test_alpha_with_whole_weights_is_alpha_of_the_duplicated_items(
    scores: np.ndarray, data: st.DataObject
) -> None:
    weights = np.asarray(
        data.draw(st.lists(st.integers(0, 3), min_size=scores.shape[1], max_size=scores.shape[1]))
    )
    duplicated = np.repeat(scores, weights, axis=1)
    expected = ag.krippendorff_alpha(duplicated, "interval") if duplicated.size else NAN
    ours = float(interval_alpha_weighted(scores, weights[None, :].astype(float))[0])
    assert same(ours, expected, 1e-7)


@settings(max_examples=150, deadline=None)
@given(samples(binary=True), st.data())
def test_fleiss_with_whole_weights_is_fleiss_of_the_duplicated_items(
    verdicts: np.ndarray, data: st.DataObject
) -> None:
    weights = np.asarray(
        data.draw(
            st.lists(st.integers(0, 3), min_size=verdicts.shape[1], max_size=verdicts.shape[1])
        )
    )
    duplicated = np.repeat(verdicts, weights, axis=1)
    table = ag.verdict_table(duplicated) if duplicated.size else np.zeros((0, 2))
    # Fewer than two raters, no complete item or one category throughout: undefined.
    expected = ag.fleiss_kappa(table) if table.shape[0] and table.sum(axis=1)[0] >= 2 else NAN
    # A sample that rated only items drawn zero times is still a rater: compare on the
    # samples active in the original, as verdict_table sees them there.
    active = ~np.isnan(verdicts).all(axis=1)
    if active.sum() != (~np.isnan(duplicated).all(axis=1)).sum() if duplicated.size else True:
        return
    ours = float(fleiss_kappa_weighted(verdicts, weights[None, :].astype(float))[0])
    assert same(ours, expected, 1e-9)
    assert active.any() or math.isnan(ours)


@settings(max_examples=150, deadline=None)
@given(samples(binary=True))
def test_fleiss_matches_statsmodels(verdicts: np.ndarray) -> None:
    table = ag.verdict_table(verdicts)
    ours = float(fleiss_kappa_weighted(verdicts, np.ones((1, verdicts.shape[1])))[0])
    if table.shape[0] == 0 or table.sum(axis=1)[0] < 2:
        assert math.isnan(ours)
        return
    with np.errstate(all="ignore"):
        reference = float(sm_fleiss_kappa(table, method="fleiss"))
    assert same(ours, reference, 1e-9)


@settings(max_examples=150, deadline=None)
@given(samples(binary=True))
def test_pair_disagreement_is_one_minus_percent_agreement(verdicts: np.ndarray) -> None:
    per_item = pair_disagreement_per_item(verdicts)
    defined = ~np.isnan(per_item)
    expected = ag.percent_agreement(verdicts)
    if not defined.any():
        assert math.isnan(expected)
    else:
        assert same(1 - float(per_item[defined].mean()), expected, 1e-12)


def test_others_disagreement_counts_every_sample_against_every_other_judge() -> None:
    rng = np.random.default_rng(3)
    own = (rng.random((3, 40)) < 0.5).astype(float)
    theirs = (rng.random((2, 40)) < 0.5).astype(float)
    own[0, :5] = np.nan
    theirs[1, 3:9] = np.nan
    per_item = others_disagreement_per_item(own, theirs)
    for i in range(40):
        pairs = [
            own[s, i] != theirs[o, i]
            for s in range(3)
            for o in range(2)
            if not np.isnan(own[s, i]) and not np.isnan(theirs[o, i])
        ]
        assert same(float(per_item[i]), float(np.mean(pairs)) if pairs else NAN)


def _spans(rng: np.random.Generator, n_items: int) -> ag.ItemSpans:
    lists: list[list[tuple[int, int]] | None] = []
    for _ in range(n_items):
        if rng.random() < 0.15:
            lists.append(None)
            continue
        starts = rng.integers(0, 80, rng.integers(0, 3))
        lists.append([(int(s), int(s + rng.integers(1, 20))) for s in starts])
    return ag.ItemSpans.from_lists(lists)


@pytest.mark.parametrize("seed", range(4))
def test_span_f1_forms_agree(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sets = [_spans(rng, 30) for _ in range(3)]
    stride = ag.span_stride(*sets)
    lines = [ag.SpanLine.of(s, stride) for s in sets]
    f1 = ag.pairwise_line_f1(lines)
    expected = float(np.nanmean(f1[np.triu_indices(3, 1)]))
    assert same(float(span_f1_weighted(lines, np.ones((1, 30)))[0]), expected, 1e-12)
    weights = rng.integers(0, 3, 30)
    duplicated = [
        ag.SpanLine.of(
            ag.ItemSpans.from_lists(
                [spans for spans, k in zip(s.to_lists(), weights, strict=True) for _ in range(k)]
            ),
            stride,
        )
        for s in sets
    ]
    f1d = ag.pairwise_line_f1(duplicated)
    assert same(
        float(span_f1_weighted(lines, weights[None, :].astype(float))[0]),
        float(np.nanmean(f1d[np.triu_indices(3, 1)])),
        1e-12,
    )
    found = self_agreement(
        np.zeros((3, 30)), np.zeros((3, 30)), [str(i // 3) for i in range(30)], spans=sets
    )
    assert same(found.span_f1.value, expected, 1e-12)
    assert found.span_f1.low <= found.span_f1.value <= found.span_f1.high


def test_draws_by_source_are_the_item_weights_they_stand_for() -> None:
    """Summing per source first gives what the (resamples, items) weights give, and the
    draws are group_weights' own."""
    rng = np.random.default_rng(9)
    groups = np.asarray([f"s{k}" for k in rng.integers(0, 12, 60)])
    labels, index = np.unique(groups, return_inverse=True)
    by_source, items = group_weights(labels, seed=4), group_weights(groups, seed=4)
    assert by_source is not None and items is not None
    draws = Draws(by_source, index.astype(np.intp))
    scores = np.round(rng.random((3, 60)), 1)
    scores[rng.random(scores.shape) < 0.2] = np.nan
    verdicts = np.where(np.isnan(scores), np.nan, (scores > 0.5) * 1.0)
    np.testing.assert_allclose(
        interval_alpha_weighted(scores, draws), interval_alpha_weighted(scores, items)
    )
    np.testing.assert_allclose(
        fleiss_kappa_weighted(verdicts, draws), fleiss_kappa_weighted(verdicts, items)
    )


# -- a known flip rate is recovered ----------------------------------------------------------


def _flipping_judge(
    rng: np.random.Generator, gold: np.ndarray, flip: float, n_samples: int
) -> np.ndarray:
    flips = rng.random((n_samples, gold.size)) < flip
    return np.where(flips, 1 - gold, gold).astype(float)


@pytest.mark.parametrize("flip", [0.1, 0.2, 0.35])
def test_a_flip_rate_is_recovered_within_its_interval(flip: float) -> None:
    """Samples right on the verdict but for a flip with chance F: pairs of samples split on
    2F(1-F) of items, and split from a judge that never errs on F of them. A 95 % interval
    misses one time in twenty by design, so coverage is counted over 30 seeded panels
    (at most 5 misses: about one chance in 500 for a calibrated interval)."""
    expected = 2 * flip * (1 - flip)
    n_sources = 150
    groups = np.repeat([f"s{k}" for k in range(n_sources)], 3)
    covered = {"self": 0, "others": 0, "kappa": 0}
    for seed in range(30):
        rng = np.random.default_rng([seed, int(flip * 100)])
        gold = (rng.random(groups.size) < 0.4).astype(float)
        verdicts = _flipping_judge(rng, gold, flip, 3)
        found = self_agreement(verdicts, verdicts, groups, others=gold[None, :], seed=seed)
        d, o = found.verdict_disagreement, found.others_disagreement
        covered["self"] += d.low < expected < d.high
        covered["others"] += o.low < flip < o.high
        # Fleiss' kappa implied by F and the prevalence of flags.
        q = gold.mean() * (1 - flip) + (1 - gold.mean()) * flip
        chance = q * q + (1 - q) * (1 - q)
        kappa = (1 - expected - chance) / (1 - chance)
        covered["kappa"] += found.verdict_kappa.low < kappa < found.verdict_kappa.high
        assert found.n_samples == 3 and found.n_items == groups.size
        # A judge right but for its noise splits with a faultless one less than with itself.
        assert found.as_noisy_as_others is True
    assert min(covered.values()) >= 25, covered


def test_a_steady_judge_that_disagrees_with_the_others_is_not_noise() -> None:
    """Three identical samples that differ from the panel on a fifth of the items: no
    self-disagreement, so its disagreement with the others is its opinion, not noise."""
    rng = np.random.default_rng(7)
    gold = (rng.random(300) < 0.5).astype(float)
    opinion = _flipping_judge(rng, gold, 0.2, 1)[0]
    verdicts = np.vstack([opinion] * 3)
    found = self_agreement(verdicts, verdicts, [str(i) for i in range(300)], others=gold[None, :])
    assert found.verdict_disagreement.value == 0.0
    assert found.excess.low > 0 and found.as_noisy_as_others is False


def test_noisy_judges_alike_disagree_with_themselves_as_with_each_other() -> None:
    rng = np.random.default_rng(11)
    gold = (rng.random(600) < 0.5).astype(float)
    mine = _flipping_judge(rng, gold, 0.25, 3)
    theirs = _flipping_judge(rng, gold, 0.25, 2)
    found = self_agreement(mine, mine, [str(i // 2) for i in range(600)], others=theirs)
    assert found.excess.low <= 0 <= found.excess.high and found.as_noisy_as_others is True


def test_scores_of_a_noisy_judge() -> None:
    """Scores are the item's level plus noise of variance s^2: alpha is about
    var(level) / (var(level) + s^2)."""
    rng = np.random.default_rng(5)
    level = rng.random(500)
    # On a grid of 0.01: the krippendorff package builds a table per distinct value.
    scores = np.round(level[None, :] + rng.normal(0, 0.2, (4, 500)), 2)
    found = self_agreement(scores, (scores > 0.5) * 1.0, [str(i) for i in range(500)])
    expected = (1 / 12) / (1 / 12 + 0.04)
    assert found.score_alpha.low < expected < found.score_alpha.high
    assert same(found.score_alpha.value, package_alpha(scores), 1e-9)


def test_degenerate_inputs_say_nothing_rather_than_fail() -> None:
    one = self_agreement(np.array([[0.5, 0.2]]), np.array([[0.0, 0.0]]), ["a", "b"])
    assert one.n_items == 0 and not one.score_alpha.measured
    assert not one.verdict_kappa.measured and not one.verdict_disagreement.measured
    assert one.as_noisy_as_others is None
    same_everywhere = self_agreement(np.zeros((3, 4)), np.zeros((3, 4)), list("abcd"))
    assert not same_everywhere.score_alpha.measured and not same_everywhere.verdict_kappa.measured
    assert same_everywhere.verdict_disagreement.value == 0.0
    one_source = self_agreement(np.eye(3), np.eye(3), ["a"] * 3)
    assert one_source.verdict_disagreement.measured and math.isnan(
        one_source.verdict_disagreement.low
    )
    empty = self_agreement(np.zeros((0, 0)), np.zeros((0, 0)), [])
    assert empty.n_items == 0 and empty.n_samples == 0
    with pytest.raises(ValueError, match="differ in shape"):
        self_agreement(np.zeros((2, 3)), np.zeros((3, 3)), list("abc"))
