"""juryflow.maths.agreement against its reference libraries, published examples and naive loops."""

from __future__ import annotations

import doctest
import itertools
import math
import warnings

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

import juryflow.maths.agreement
from juryflow.maths.agreement import (
    Level,
    alpha_from_coincidences,
    cohen_kappa,
    coincidence_matrix,
    effective_panel_size,
    error_correlation,
    error_correlation_report,
    error_indicators,
    fleiss_kappa,
    judge_bias,
    krippendorff_alpha,
    merge_spans,
    micro_span_f1,
    pairwise_cohen_kappa,
    pairwise_span_f1,
    percent_agreement,
    span_f1,
    verdict_table,
    verdicts_from_scores,
)

NAN = float("nan")
LEVELS: tuple[Level, ...] = ("interval", "ordinal", "nominal")

# Wikipedia, "Krippendorff's alpha", worked example: 3 coders x 15 units, 1-4 scale.
WIKI = np.array(
    [
        [NAN, NAN, NAN, NAN, NAN, 3, 4, 1, 2, 1, 1, 3, 3, NAN, 3],
        [1, NAN, 2, 1, 3, 3, 4, 3, NAN, NAN, NAN, NAN, NAN, NAN, NAN],
        [NAN, NAN, 2, 1, 3, 4, 4, NAN, 2, 1, 1, 3, 3, NAN, 4],
    ]
)


def same(a: float, b: float, tol: float = 1e-9) -> bool:
    """Equal within tol, or both NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol


def package_alpha(ratings: np.ndarray, level: Level) -> float:
    """The krippendorff package, with its 'undefined' exceptions mapped to our NaN."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return float(krippendorff.alpha(reliability_data=ratings, level_of_measurement=level))
    except ValueError:
        return NAN


@st.composite
def rating_matrices(draw: st.DrawFn, n_values: int = 5, max_judges: int = 6) -> np.ndarray:
    n_judges = draw(st.integers(1, max_judges))
    n_items = draw(st.integers(1, 30))
    values = draw(
        arrays(np.float64, (n_judges, n_items), elements=st.integers(0, n_values - 1).map(float))
    )
    missing = draw(arrays(np.bool_, (n_judges, n_items)))
    values[missing] = np.nan
    return values


def seeded_matrix(seed: int, n_judges: int, n_items: int, n_values: int | None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if n_values is None:
        r = rng.random((n_judges, n_items))
    else:
        r = rng.integers(0, n_values, (n_judges, n_items)).astype(float)
    r[rng.random(r.shape) < 0.2] = np.nan
    return r


# ------------------------------------------------------------------------------- alpha


@pytest.mark.parametrize("level", LEVELS)
def test_alpha_wikipedia_example_matches_package(level: Level) -> None:
    assert same(krippendorff_alpha(WIKI, level), package_alpha(WIKI, level))


def test_alpha_wikipedia_published_nominal_value() -> None:
    assert round(krippendorff_alpha(WIKI, "nominal"), 3) == 0.691
    # By hand from the page's coincidence table: n = 26 pairable values, off-diagonal
    # coincidences 6, marginals (7, 4, 10, 5): 1 - 25 * 6 / (26^2 - 190) = 1 - 150 / 486.
    assert krippendorff_alpha(WIKI, "nominal") == pytest.approx(1 - 150 / 486, abs=1e-12)
    assert krippendorff_alpha(WIKI, "interval") == pytest.approx(0.8108448928121059, abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(rating_matrices(), st.sampled_from(LEVELS))
def test_alpha_matches_package_on_random_discrete_data(r: np.ndarray, level: Level) -> None:
    assert same(krippendorff_alpha(r, level), package_alpha(r, level))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("level", LEVELS)
def test_alpha_matches_package_on_seeded_data(seed: int, level: Level) -> None:
    # Continuous scores (every value distinct) for half the seeds, a 1-7 scale otherwise;
    # fewer items when continuous, as the package's memory grows with items x values^2.
    n_values = None if seed % 2 else 7
    n_items = 60 if n_values is None else 300
    r = seeded_matrix(seed, n_judges=2 + seed % 4, n_items=n_items, n_values=n_values)
    ours, ref = krippendorff_alpha(r, level), package_alpha(r, level)
    assert not math.isnan(ours)
    assert same(ours, ref)


@settings(max_examples=200, deadline=None)
@given(rating_matrices(), st.sampled_from(LEVELS))
def test_alpha_equals_textbook_coincidence_form(r: np.ndarray, level: Level) -> None:
    values, o = coincidence_matrix(r)
    assert same(krippendorff_alpha(r, level), alpha_from_coincidences(values, o, level))


def test_coincidence_matrix_wikipedia() -> None:
    # The coincidence table printed on the Wikipedia page for the example.
    values, o = coincidence_matrix(WIKI)
    assert values.tolist() == [1, 2, 3, 4]
    expected = [[6, 0, 1, 0], [0, 4, 0, 0], [1, 0, 7, 2], [0, 0, 2, 3]]
    np.testing.assert_allclose(o, expected, atol=1e-12)


@pytest.mark.parametrize("level", LEVELS)
def test_alpha_all_identical_is_nan(level: Level) -> None:
    assert math.isnan(krippendorff_alpha(np.full((3, 10), 0.7), level))
    # Other values only on unpairable items: expected disagreement is still 0.
    r = np.array([[1.0, 1.0, 2.0], [1.0, 1.0, NAN]])
    assert math.isnan(krippendorff_alpha(r, level))


@pytest.mark.parametrize("level", LEVELS)
def test_alpha_drops_items_with_fewer_than_two_ratings(level: Level) -> None:
    r = seeded_matrix(1, 4, 40, 5)
    lonely = np.full((4, 3), NAN)
    lonely[0, :2] = [0.0, 4.0]
    lonely[2, 2] = 9.0  # a value seen nowhere else, on an unpairable item
    with_lonely = np.hstack([lonely[:, :1], r, lonely[:, 1:]])
    assert krippendorff_alpha(with_lonely, level) == pytest.approx(
        krippendorff_alpha(r, level), abs=1e-12
    )


@pytest.mark.parametrize("level", LEVELS)
def test_alpha_ignores_a_judge_with_no_scored_items(level: Level) -> None:
    r = seeded_matrix(2, 3, 40, 5)
    with_empty = np.vstack([r[:1], np.full((1, 40), NAN), r[1:]])
    assert krippendorff_alpha(with_empty, level) == pytest.approx(
        krippendorff_alpha(r, level), abs=1e-12
    )


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(
    "r",
    [np.empty((0, 0)), np.empty((3, 0)), np.empty((0, 5)), [], [[1.0, 2.0, 3.0]]],
    ids=["0x0", "3x0", "0x5", "list", "one-judge"],
)
def test_alpha_without_pairable_items_is_nan(r: object, level: Level) -> None:
    assert math.isnan(krippendorff_alpha(r, level))  # type: ignore[arg-type]


def test_alpha_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha(WIKI, "ratio")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="infinite"):
        krippendorff_alpha([[1.0, np.inf], [1.0, 2.0]])
    with pytest.raises(ValueError, match="2-d"):
        krippendorff_alpha([1.0, 2.0])


# ------------------------------------------------------------------------------ kappas


@st.composite
def verdict_matrices(draw: st.DrawFn, max_judges: int = 6) -> np.ndarray:
    return draw(rating_matrices(n_values=2, max_judges=max_judges))


@settings(max_examples=300, deadline=None)
@given(verdict_matrices())
def test_fleiss_kappa_matches_statsmodels(v: np.ndarray) -> None:
    table = verdict_table(v)
    ours = fleiss_kappa(table)
    if table.shape[0] == 0 or table.sum(axis=1)[0] < 2:
        assert math.isnan(ours)
        return
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        ref = float(sm_fleiss_kappa(table, method="fleiss"))
    assert same(ours, ref)


def test_fleiss_kappa_wikipedia_example() -> None:
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    assert round(fleiss_kappa(table), 3) == 0.210
    assert fleiss_kappa(table) == pytest.approx(sm_fleiss_kappa(np.array(table)), abs=1e-12)


def test_verdict_table_keeps_items_rated_by_every_active_judge() -> None:
    v = np.array(
        [
            [1, 0, 1, NAN, 0],
            [1, 1, NAN, 0, 0],
            [NAN, NAN, NAN, NAN, NAN],  # scored nothing: not a member of the table
            [0, 1, 1, 1, 0],
        ]
    )
    assert verdict_table(v).tolist() == [[1, 2], [1, 2], [3, 0]]
    assert verdict_table(np.full((2, 3), NAN)).shape == (0, 2)
    with pytest.raises(ValueError, match="categories"):
        verdict_table([[0.0, 0.7]])


def test_fleiss_kappa_edge_cases() -> None:
    assert math.isnan(fleiss_kappa(np.empty((0, 2))))
    assert math.isnan(fleiss_kappa([[3, 0], [3, 0]]))  # one category only: chance = 1
    assert math.isnan(fleiss_kappa([[1, 0], [0, 1]]))  # one rater per item
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([[2, 0], [1, 0]])


def sklearn_kappa(a: np.ndarray, b: np.ndarray) -> float:
    keep = ~(np.isnan(a) | np.isnan(b))
    if not keep.any():
        return NAN
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(cohen_kappa_score(a[keep], b[keep]))


@settings(max_examples=300, deadline=None)
@given(verdict_matrices(max_judges=5))
def test_pairwise_cohen_kappa_matches_sklearn(v: np.ndarray) -> None:
    k = pairwise_cohen_kappa(v)
    assert k.shape == (v.shape[0],) * 2
    for i, j in itertools.product(range(v.shape[0]), repeat=2):
        assert same(k[i, j], sklearn_kappa(v[i], v[j])), (i, j)
        assert same(cohen_kappa(v[i], v[j]), k[i, j])


@pytest.mark.parametrize("seed", range(5))
def test_cohen_kappa_matches_sklearn_multilabel(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, 200).astype(float)
    b = np.where(rng.random(200) < 0.6, a, rng.integers(0, 4, 200)).astype(float)
    a[rng.random(200) < 0.1] = NAN
    assert same(cohen_kappa(a, b), sklearn_kappa(a, b))


def test_cohen_kappa_undefined_cases() -> None:
    assert math.isnan(cohen_kappa([], []))
    assert math.isnan(cohen_kappa([1, NAN], [NAN, 1]))  # nothing shared
    assert math.isnan(cohen_kappa([1, 1, 1], [1, 1, 1]))  # both constant and equal
    assert cohen_kappa([1], [0]) == 0.0  # sklearn's answer too
    assert cohen_kappa([1, 1], [0, 0]) == 0.0
    with pytest.raises(ValueError, match="length"):
        cohen_kappa([1, 0], [1])


def naive_percent_agreement(v: np.ndarray) -> float:
    shares = []
    for col in v.T:
        got = [x for x in col if not math.isnan(x)]
        pairs = list(itertools.combinations(got, 2))
        if pairs:
            shares.append(sum(a == b for a, b in pairs) / len(pairs))
    return sum(shares) / len(shares) if shares else NAN


@settings(max_examples=200, deadline=None)
@given(rating_matrices(n_values=3))
def test_percent_agreement_matches_pair_counting(v: np.ndarray) -> None:
    assert same(percent_agreement(v), naive_percent_agreement(v))


def test_percent_agreement_edge_cases() -> None:
    assert math.isnan(percent_agreement(np.empty((0, 0))))
    assert math.isnan(percent_agreement(np.array([[1, NAN], [NAN, 0]])))
    assert percent_agreement(np.array([[1, 1], [1, 1], [NAN, NAN]])) == 1.0


def test_verdicts_from_scores_uses_strict_threshold() -> None:
    out = verdicts_from_scores([[0.5, 0.51, 0.0, NAN]])
    assert out[0, :3].tolist() == [0.0, 1.0, 0.0]
    assert math.isnan(out[0, 3])


# ------------------------------------------------------------------------------- spans

span_lists = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 25)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=6,
)


def chars(spans: list[tuple[int, int]]) -> set[int]:
    return {c for s, e in spans for c in range(s, e)}


@settings(max_examples=300, deadline=None)
@given(span_lists, span_lists)
def test_span_f1_matches_character_sets(
    pred: list[tuple[int, int]], ref: list[tuple[int, int]]
) -> None:
    p, r = chars(pred), chars(ref)
    assert span_f1(pred, ref) == (len(p & r), len(p), len(r))


@settings(max_examples=200, deadline=None)
@given(span_lists)
def test_merge_spans_is_disjoint_sorted_cover(spans: list[tuple[int, int]]) -> None:
    merged = merge_spans(spans)
    assert chars([tuple(x) for x in merged.tolist()]) == chars(spans)
    assert all(merged[:, 1] > merged[:, 0])
    assert all(merged[1:, 0] > merged[:-1, 1])


def test_merge_spans_rejects_malformed() -> None:
    with pytest.raises(ValueError):
        merge_spans([(5, 3)])
    with pytest.raises(ValueError):
        merge_spans([(-1, 3)])
    assert merge_spans([]).shape == (0, 2)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(span_lists, span_lists), max_size=8))
def test_micro_span_f1_sums_before_dividing(pairs: list) -> None:
    overlap = pred = ref = 0
    for p, r in pairs:
        overlap += len(chars(p) & chars(r))
        pred += len(chars(p))
        ref += len(chars(r))
    precision, recall, f1 = micro_span_f1(pairs)
    assert precision == pytest.approx(overlap / pred if pred else 0.0)
    assert recall == pytest.approx(overlap / ref if ref else 0.0)
    assert f1 == pytest.approx(2 * overlap / (pred + ref) if pred + ref else 0.0)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda n_items: st.lists(
            st.lists(st.none() | span_lists, min_size=n_items, max_size=n_items),
            min_size=1,
            max_size=4,
        )
    )
)
def test_pairwise_span_f1_matches_naive(spans_by_judge: list) -> None:
    out = pairwise_span_f1(spans_by_judge)
    for i, j in itertools.product(range(len(spans_by_judge)), repeat=2):
        overlap = total = 0
        for a, b in zip(spans_by_judge[i], spans_by_judge[j], strict=True):
            if a is None or b is None:
                continue
            overlap += len(chars(a) & chars(b))
            total += len(chars(a)) + len(chars(b))
        expected = 2 * overlap / total if total else NAN
        assert same(out[i, j], expected)
    np.testing.assert_array_equal(out, out.T)


def test_pairwise_span_f1_edge_cases() -> None:
    # Neither judge flagged anything: F1 undefined.
    out = pairwise_span_f1([[[], []], [[], [(0, 3)]], [[], []]])
    assert math.isnan(out[0, 2]) and math.isnan(out[0, 0])
    assert out[0, 1] == 0.0 and out[1, 1] == 1.0
    assert pairwise_span_f1([]).shape == (0, 0)
    with pytest.raises(ValueError, match="one entry per item"):
        pairwise_span_f1([[[]], [[], []]])


# -------------------------------------------------------------------- bias, correlation


@settings(max_examples=100, deadline=None)
@given(rating_matrices(n_values=11))
def test_judge_bias_matches_loops(r: np.ndarray) -> None:
    consensus = np.nanmedian(np.where(np.isnan(r).all(axis=0), 0.0, r), axis=0)
    consensus[::3] = NAN
    out = judge_bias(r, consensus)
    for j, row in enumerate(r):
        diffs = [s - c for s, c in zip(row, consensus, strict=True) if not np.isnan(s - c)]
        assert same(out[j], sum(diffs) / len(diffs) if diffs else NAN)


def draw_gold(data: st.DataObject, n_items: int) -> np.ndarray:
    """Gold 0/1 labels for n_items, some missing."""
    labels = st.lists(st.sampled_from([0.0, 1.0, NAN]), min_size=n_items, max_size=n_items)
    return np.array(data.draw(labels), dtype=float)


@settings(max_examples=100, deadline=None)
@given(rating_matrices(n_values=2), st.data())
def test_error_indicators_match_loops(v: np.ndarray, data: st.DataObject) -> None:
    gold = draw_gold(data, v.shape[1])
    out = error_indicators(v, gold)
    for j, i in itertools.product(range(v.shape[0]), range(v.shape[1])):
        expected = NAN if np.isnan(v[j, i]) or np.isnan(gold[i]) else float(v[j, i] != gold[i])
        assert same(out[j, i], expected)
    # Scores are thresholded exactly as verdicts_from_scores does.
    scores = np.where(np.isnan(v), NAN, np.where(v == 1, 0.9, 0.2))
    np.testing.assert_array_equal(error_indicators(scores, gold), out)


def test_error_indicators_reject_what_is_not_a_verdict() -> None:
    with pytest.raises(ValueError, match="verdicts must be 0/1"):
        error_indicators([[2.0, 0.0]], [1.0, 0.0])
    with pytest.raises(ValueError, match="gold must be 0/1"):
        error_indicators([[1.0, 0.0]], [0.5, 0.0])
    with pytest.raises(ValueError, match="one per item"):
        error_indicators([[1.0, 0.0]], [1.0])


@settings(max_examples=100, deadline=None)
@given(rating_matrices(n_values=2), st.data())
def test_error_correlation_matches_corrcoef_of_indicators(
    v: np.ndarray, data: st.DataObject
) -> None:
    gold = draw_gold(data, v.shape[1])
    report = error_correlation_report(v, gold)
    out = report.correlation
    np.testing.assert_array_equal(error_correlation(v, gold), out)
    active = ~np.isnan(v).all(axis=1)
    keep = ~np.isnan(gold) & ~np.isnan(v[active]).any(axis=0)
    assert report.n_items == keep.sum()
    err = (v[:, keep] != gold[keep]).astype(float)
    for i, j in itertools.product(range(v.shape[0]), repeat=2):
        a, b = err[i], err[j]
        if not (active[i] and active[j]) or keep.sum() < 2 or a.std() == 0 or b.std() == 0:
            assert math.isnan(out[i, j])
        else:
            assert out[i, j] == pytest.approx(np.corrcoef(a, b)[0, 1], abs=1e-12)
    # Every varying judge is in the matrix; every constant one is named in a note.
    constant = {j for j in range(v.shape[0]) if active[j] and keep.any() and err[j].std() == 0}
    assert set(report.constant_error) == constant
    for j in constant:
        assert any(note.startswith(f"judge {j} is ") for note in report.notes)
    assert same(report.effective_size, effective_panel_size(out))


def test_error_correlation_counts_missing_verdicts_and_gold_listwise() -> None:
    rng = np.random.default_rng(7)
    gold = (rng.random(300) < 0.4).astype(float)
    shared_noise = rng.random(300) < 0.2
    v = np.array(
        [np.where(shared_noise | (rng.random(300) < 0.1), 1 - gold, gold) for _ in range(4)]
    )
    v[1, 5] = NAN
    gold[9] = NAN
    empty = np.full((1, 300), NAN)
    out = error_correlation(np.vstack([v, empty]), gold)
    keep = ~np.isnan(v).any(axis=0) & ~np.isnan(gold)
    indicators = (v[:, keep] != gold[keep]).astype(float)
    np.testing.assert_allclose(out[:4, :4], np.corrcoef(indicators), atol=1e-12)
    assert np.isnan(out[4]).all() and np.isnan(out[:, 4]).all()
    # The shared noise makes them err together: clearly fewer than four judges' worth.
    assert effective_panel_size(out) < 2.5


def test_error_correlation_constant_error_is_reported_not_dropped() -> None:
    gold = np.array([0.0, 1.0, 1.0, 0.0])
    verdicts = np.array([gold, 1 - gold, [1, 1, 0, 0], [1, 1, 1, 0], [NAN] * 4])
    report = error_correlation_report(verdicts, gold, names=["good", "bad", "a", "b", "idle"])
    out = report.correlation
    assert np.isnan(out[:2]).all() and np.isnan(out[:, :2]).all() and np.isnan(out[4]).all()
    assert not np.isnan(out[2:4, 2:4]).any()
    assert report.constant_error == (0, 1)
    np.testing.assert_array_equal(report.error_rate, [0.0, 1.0, 0.5, 0.25, NAN])
    assert report.notes == (
        "idle gave no verdict and is left out",
        "good is never wrong on the 4 items with gold and every judge's verdict: its errors "
        "do not vary, so it has no error correlation and is left out of the effective panel "
        "size",
        "bad is wrong on every one of the 4 items with gold and every judge's verdict: its "
        "errors do not vary, so it has no error correlation and is left out of the effective "
        "panel size",
    )
    # One usable item: nothing to correlate, and the note says so.
    short = error_correlation_report([[1.0], [0.0]], [1.0])
    assert np.isnan(short.correlation).all() and short.n_items == 1
    assert short.notes[-1] == "1 item with gold and every judge's verdict: no error correlation"


def test_effective_size_of_independent_coin_flips_is_the_panel_size() -> None:
    # Signed errors (verdict - gold) all share -gold and made this ~1.5; indicators do not.
    rng = np.random.default_rng(11)
    gold = (rng.random(5000) < 0.3).astype(float)
    coins = (rng.random((3, 5000)) < 0.5).astype(float)
    assert 2.7 <= effective_panel_size(error_correlation(coins, gold)) <= 3.0
    assert effective_panel_size(np.corrcoef(coins - gold)) < 1.7  # the old definition
    # Independent judges of different accuracy: still three judges' worth.
    wrong = rng.random((3, 5000)) < np.array([[0.1], [0.2], [0.35]])
    judges_ = np.where(wrong, 1 - gold, gold)
    assert 2.7 <= error_correlation_report(judges_, gold).effective_size <= 3.0


def test_effective_size_of_identical_judges_is_one() -> None:
    rng = np.random.default_rng(12)
    gold = (rng.random(2000) < 0.3).astype(float)
    one = np.where(rng.random(2000) < 0.2, 1 - gold, gold)
    corr = error_correlation(np.array([one, one, one]), gold)
    assert effective_panel_size(corr) == pytest.approx(1.0)


def test_effective_panel_size() -> None:
    assert effective_panel_size(np.eye(4)) == 4.0  # independent errors
    assert effective_panel_size(np.ones((4, 4))) == 1.0  # identical errors
    assert effective_panel_size([[1, -0.5], [-0.5, 1]]) == 2.0  # negative rho clipped to 0
    corr = np.full((3, 3), 0.25)
    np.fill_diagonal(corr, 1.0)
    assert effective_panel_size(corr) == pytest.approx(3 / 1.5)
    # A judge with no defined correlation is left out of n.
    with_nan = np.full((4, 4), NAN)
    with_nan[:3, :3] = corr
    assert effective_panel_size(with_nan) == pytest.approx(2.0)
    assert effective_panel_size([[1.0]]) == 1.0
    assert math.isnan(effective_panel_size(np.full((3, 3), NAN)))
    with pytest.raises(ValueError, match="square"):
        effective_panel_size(np.ones((2, 3)))


def test_docstring_examples() -> None:
    # The docstrings carry the worked examples (Wikipedia alpha and Fleiss' kappa); keep them true.
    result = doctest.testmod(juryflow.maths.agreement)
    assert result.attempted > 0 and result.failed == 0
