"""juryflow.maths.reliability against crowd-kit's Dawid–Skene, textbook EM, simulated truth."""

from __future__ import annotations

import doctest
import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import juryflow.maths.reliability
from juryflow.maths.reliability import (
    DawidSkeneFit,
    conditional_dependence,
    dawid_skene,
    reliability_report,
)

NAN = float("nan")


@st.composite
def verdict_matrices(draw: st.DrawFn, max_judges: int = 6, max_units: int = 25) -> np.ndarray:
    n_judges = draw(st.integers(1, max_judges))
    n_units = draw(st.integers(1, max_units))
    values = draw(arrays(np.float64, (n_judges, n_units), elements=st.sampled_from([0.0, 1.0])))
    missing = draw(arrays(np.bool_, (n_judges, n_units)))
    values[missing] = NAN
    return values


def simulate(
    rng: np.random.Generator,
    n: int,
    sens: list[float],
    spec: list[float],
    prevalence: float = 0.3,
    missing: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Independent judges with known rates: (votes, truth)."""
    truth = rng.random(n) < prevalence
    p_one = np.where(truth, np.array(sens)[:, None], 1.0 - np.array(spec)[:, None])
    votes = (rng.random(p_one.shape) < p_one).astype(float)
    votes[rng.random(votes.shape) < missing] = NAN
    return votes, truth


def close(a: np.ndarray, b: np.ndarray, tol: float) -> bool:
    """Equal within tol elementwise, NaN where the other is NaN."""
    return bool(np.allclose(a, b, atol=tol, rtol=0, equal_nan=True))


# ------------------------------------------------------------------ textbook reference


def textbook_dawid_skene(votes: np.ndarray, iterations: int, prior: float) -> dict:
    """Dawid–Skene EM as written in the paper, one unit and one judge at a time.

    Same soft-majority start, add-``prior`` smoothing and mirror rule as the module, but no
    vote patterns, no log space and no matrix algebra, so it checks all three.
    """
    n_judges, n_units = votes.shape
    judged = [i for i in range(n_units) if not np.isnan(votes[:, i]).all()]
    voters = [j for j in range(n_judges) if not np.isnan(votes[j]).all()]
    q = {i: float(np.nanmean(votes[:, i])) for i in judged}

    def m_step() -> tuple[list[float], list[float], float]:
        sens, spec = [], []
        for j in range(n_judges):
            said1_in1 = in1 = said0_in0 = in0 = 0.0
            for i in judged:
                if np.isnan(votes[j, i]):
                    continue
                in1 += q[i]
                in0 += 1 - q[i]
                if votes[j, i] == 1:
                    said1_in1 += q[i]
                else:
                    said0_in0 += 1 - q[i]
            sens.append((said1_in1 + prior) / (in1 + 2 * prior))
            spec.append((said0_in0 + prior) / (in0 + 2 * prior))
        prev = (sum(q.values()) + prior) / (len(judged) + 2 * prior)
        return sens, spec, prev

    def e_step() -> float:
        loglik = 0.0
        for i in judged:
            like1, like0 = prev, 1 - prev
            for j in range(n_judges):
                if np.isnan(votes[j, i]):
                    continue
                said1 = votes[j, i] == 1
                like1 *= sens[j] if said1 else 1 - sens[j]
                like0 *= 1 - spec[j] if said1 else spec[j]
            q[i] = like1 / (like1 + like0)
            loglik += math.log(like1 + like0)
        return loglik

    sens, spec, prev = m_step()
    if len(voters) < 3:  # not identified: the module keeps the majority-vote start
        start = dict(q)
        loglik = e_step()
        q = start
    else:
        for _ in range(iterations):
            e_step()
            sens, spec, prev = m_step()
        loglik = e_step()
    flipped = bool(judged) and np.mean([sens[j] + spec[j] for j in voters]) < 1 - 1e-9
    if flipped:
        sens, spec = [1 - s for s in spec], [1 - s for s in sens]
        prev = 1 - prev
        q = {i: 1 - p for i, p in q.items()}
    posterior = np.array([q.get(i, prev) for i in range(n_units)]) if judged else None
    return {
        "sensitivity": np.array([sens[j] if j in voters else NAN for j in range(n_judges)]),
        "specificity": np.array([spec[j] if j in voters else NAN for j in range(n_judges)]),
        "prevalence": prev if judged else NAN,
        "posterior": posterior if posterior is not None else np.full(n_units, NAN),
        "log_likelihood": loglik if judged else NAN,
        "flipped": flipped,
    }


def assert_matches_textbook(fit: DawidSkeneFit, ref: dict, tol: float = 1e-9) -> None:
    assert close(fit.sensitivity, ref["sensitivity"], tol)
    assert close(fit.specificity, ref["specificity"], tol)
    assert close(fit.posterior, ref["posterior"], tol)
    assert close(np.array(fit.prevalence), np.array(ref["prevalence"]), tol)
    assert close(np.array(fit.log_likelihood), np.array(ref["log_likelihood"]), 1e-7)
    assert fit.flipped == ref["flipped"]


@settings(max_examples=80, deadline=None)
@given(verdict_matrices(), st.integers(0, 6), st.sampled_from([1.0, 0.5, 1e-3]))
def test_matches_textbook_loops(votes: np.ndarray, iterations: int, prior: float) -> None:
    # tol=0 runs every iteration unless the rates stop moving, when further ones change
    # nothing, so the fixed-iteration reference must agree.
    fit = dawid_skene(votes, max_iter=iterations, tol=0.0, prior=prior)
    assert_matches_textbook(fit, textbook_dawid_skene(votes, iterations, prior))


@pytest.mark.parametrize("n_judges", [13, 41])
def test_matches_textbook_loops_with_many_judges(n_judges: int) -> None:
    # 13 judges take the sorted-code path, 41 the row-unique path (codes overflow int64).
    rng = np.random.default_rng(n_judges)
    votes, _ = simulate(rng, 60, [0.8] * n_judges, [0.75] * n_judges, missing=0.3)
    fit = dawid_skene(votes, max_iter=5, tol=0.0)
    assert_matches_textbook(fit, textbook_dawid_skene(votes, 5, 1.0))


# ------------------------------------------------------------------ crowd-kit reference


def crowdkit_fit(votes: np.ndarray, n_iter: int, tol: float) -> tuple:
    """crowd-kit's DawidSkene on the same votes: (sensitivity, specificity, prior, P(1))."""
    pd = pytest.importorskip("pandas")
    aggregation = pytest.importorskip("crowdkit.aggregation")
    judge, unit = np.nonzero(~np.isnan(votes))
    data = pd.DataFrame({"task": unit, "worker": judge, "label": votes[judge, unit].astype(int)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = aggregation.DawidSkene(n_iter=n_iter, tol=tol).fit(data)
    errors = ds.errors_  # rows (worker, said), columns true label: P(said | truth)
    sens = np.array([errors.loc[(j, 1), 1] for j in range(votes.shape[0])])
    spec = np.array([errors.loc[(j, 0), 0] for j in range(votes.shape[0])])
    proba = ds.probas_[1].reindex(range(votes.shape[1])).to_numpy()
    return sens, spec, float(ds.priors_[1]), proba


def test_matches_crowdkit_dawid_skene() -> None:
    rng = np.random.default_rng(2024)
    votes, _ = simulate(
        rng, 2000, [0.9, 0.8, 0.7, 0.85, 0.6], [0.95, 0.7, 0.8, 0.9, 0.65], missing=0.1
    )
    sens, spec, prev, proba = crowdkit_fit(votes, n_iter=300, tol=1e-10)
    judged = ~np.isnan(votes).all(axis=0)
    # crowd-kit smooths only by clipping rates at 1e-10, so a negligible prior is the same
    # model; both start from the soft majority vote, so they walk the same EM path.
    fit = dawid_skene(votes, max_iter=2000, tol=1e-12, prior=1e-9)
    np.testing.assert_allclose(fit.sensitivity, sens, atol=1e-6)
    np.testing.assert_allclose(fit.specificity, spec, atol=1e-6)
    assert fit.prevalence == pytest.approx(prev, abs=1e-6)
    np.testing.assert_allclose(fit.posterior[judged], proba[judged], atol=1e-6)
    # With the default add-one smoothing the rates move by ~1/n only.
    default = dawid_skene(votes)
    np.testing.assert_allclose(default.sensitivity, sens, atol=0.01)
    np.testing.assert_allclose(default.specificity, spec, atol=0.01)
    np.testing.assert_allclose(default.posterior[judged], proba[judged], atol=0.03)
    assert ((default.posterior[judged] > 0.5) == (proba[judged] > 0.5)).mean() > 0.995


def test_recovers_known_rates() -> None:
    rng = np.random.default_rng(5)
    sens = [0.9, 0.8, 0.7, 0.85, 0.6]
    spec = [0.95, 0.7, 0.8, 0.9, 0.65]
    votes, truth = simulate(rng, 20_000, sens, spec, prevalence=0.3, missing=0.1)
    fit = dawid_skene(votes)
    assert fit.converged and not fit.flipped and fit.notes == ()
    np.testing.assert_allclose(fit.sensitivity, sens, atol=0.02)
    np.testing.assert_allclose(fit.specificity, spec, atol=0.02)
    assert fit.prevalence == pytest.approx(0.3, abs=0.01)
    np.testing.assert_array_equal(fit.n_items_used, (~np.isnan(votes)).sum(axis=1))
    # Better than the plain majority vote at recovering the truth.
    majority = np.nanmean(votes, axis=0) > 0.5
    assert (fit.labels == truth).mean() > (majority == truth).mean()


# ------------------------------------------------------------------ properties


@settings(max_examples=60, deadline=None)
@given(verdict_matrices(), st.integers(1, 4))
def test_collapsing_units_into_counts_changes_nothing(votes: np.ndarray, repeat: int) -> None:
    # Repeating every unit `repeat` times is the same data as counting it `repeat` times,
    # and the order of the units does not matter.
    fit = dawid_skene(votes, counts=np.full(votes.shape[1], repeat), max_iter=20, tol=0.0)
    long = dawid_skene(np.repeat(votes, repeat, axis=1), max_iter=20, tol=0.0)
    assert close(fit.sensitivity, long.sensitivity, 1e-9)
    assert close(fit.specificity, long.specificity, 1e-9)
    assert close(np.repeat(fit.posterior, repeat), long.posterior, 1e-9)
    assert close(np.array(fit.log_likelihood), np.array(long.log_likelihood), 1e-7)
    order = np.random.default_rng(votes.shape[1]).permutation(votes.shape[1])
    shuffled = dawid_skene(votes[:, order], max_iter=20, tol=0.0)
    assert close(
        shuffled.posterior, dawid_skene(votes, max_iter=20, tol=0.0).posterior[order], 1e-9
    )


@settings(max_examples=60, deadline=None)
@given(verdict_matrices())
def test_swapping_the_labels_mirrors_the_fit(votes: np.ndarray) -> None:
    fit = dawid_skene(votes, max_iter=30, tol=0.0)
    mirror = dawid_skene(1.0 - votes, max_iter=30, tol=0.0)
    assert close(mirror.sensitivity, fit.specificity, 1e-9)
    assert close(mirror.specificity, fit.sensitivity, 1e-9)
    assert close(mirror.posterior, 1.0 - fit.posterior, 1e-9)


def map_objective(fit: DawidSkeneFit, prior: float) -> float:
    """Log-likelihood plus the log Beta(1 + prior, 1 + prior) density of every rate."""
    rates = np.concatenate(
        [
            fit.sensitivity[np.isfinite(fit.sensitivity)],
            fit.specificity[np.isfinite(fit.specificity)],
            [fit.prevalence],
        ]
    )
    return fit.log_likelihood + prior * float(np.sum(np.log(rates) + np.log1p(-rates)))


@settings(max_examples=60, deadline=None)
@given(verdict_matrices(), st.integers(0, 8))
def test_em_never_decreases_the_penalised_likelihood(votes: np.ndarray, k: int) -> None:
    if np.isnan(votes).all():
        return
    before = map_objective(dawid_skene(votes, max_iter=k, tol=0.0), 1.0)
    after = map_objective(dawid_skene(votes, max_iter=k + 1, tol=0.0), 1.0)
    assert after >= before - 1e-9


@settings(max_examples=60, deadline=None)
@given(verdict_matrices())
def test_fit_is_well_formed(votes: np.ndarray) -> None:
    fit = dawid_skene(votes)
    voters = ~np.isnan(votes).all(axis=1)
    judged = ~np.isnan(votes).all(axis=0)
    assert fit.sensitivity.shape == fit.specificity.shape == (votes.shape[0],)
    assert fit.posterior.shape == (votes.shape[1],)
    assert np.isnan(fit.sensitivity[~voters]).all() and np.isnan(fit.specificity[~voters]).all()
    if judged.any():
        for rate in (fit.sensitivity[voters], fit.specificity[voters], fit.posterior):
            assert ((rate >= 0) & (rate <= 1)).all()
        # Smoothing keeps every rate off 0 and 1, so no log(0) ever happened.
        assert ((fit.sensitivity[voters] > 0) & (fit.sensitivity[voters] < 1)).all()
        assert 0 < fit.prevalence < 1 and np.isfinite(fit.log_likelihood)
        assert (fit.posterior[~judged] == fit.prevalence).all()
        assert np.mean(fit.sensitivity[voters] + fit.specificity[voters]) >= 1 - 1e-9
    for j in np.flatnonzero(~voters):
        assert f"judge {j} gave no verdict: its sensitivity and specificity are undefined" in (
            fit.notes
        )


# ------------------------------------------------------------------ edge cases


def test_degenerate_inputs_do_not_crash() -> None:
    empty = dawid_skene(np.zeros((0, 0)))
    assert empty.posterior.shape == (0,) and "no unit has a verdict: nothing to fit" in empty.notes
    nothing = dawid_skene([[NAN, NAN], [NAN, NAN]])
    assert np.isnan(nothing.posterior).all() and math.isnan(nothing.prevalence)

    ones = dawid_skene(np.ones((3, 50)))
    assert any(n.startswith("every verdict is 1") for n in ones.notes)
    assert (ones.posterior > 0.9).all() and np.isfinite(ones.sensitivity).all()
    zeros = dawid_skene(np.zeros((3, 50)))
    assert any(n.startswith("every verdict is 0") for n in zeros.notes)

    single = dawid_skene([[1, 0, 1, 1, NAN]], names=["gpt"])
    assert single.notes[0].startswith("only 1 judge voted")
    assert single.posterior[4] == pytest.approx(single.prevalence)
    np.testing.assert_array_equal(single.posterior[:4], [1, 0, 1, 1])
    assert single.iterations == 0 and not single.converged

    idle = np.array([[1, 0, 1], [1, 0, 0], [NAN, NAN, NAN]])
    with_idle = dawid_skene(idle, names=["a", "b", "idle"])
    assert "idle gave no verdict: its sensitivity and specificity are undefined" in (
        with_idle.notes
    )
    assert with_idle.n_items_used.tolist() == [3, 3, 0]


def test_zero_count_units_get_a_posterior_but_no_say() -> None:
    rng = np.random.default_rng(8)
    votes, _ = simulate(rng, 300, [0.9, 0.8, 0.7], [0.8, 0.9, 0.7])
    extra = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    counts = np.r_[np.ones(300), 0.0, 0.0]
    fit = dawid_skene(np.hstack([votes, extra]), counts=counts)
    alone = dawid_skene(votes)
    np.testing.assert_allclose(fit.sensitivity, alone.sensitivity, atol=1e-12)
    np.testing.assert_allclose(fit.posterior[:300], alone.posterior, atol=1e-12)
    same_pattern = [int(np.flatnonzero((col == votes.T).all(axis=1))[0]) for col in extra.T]
    np.testing.assert_allclose(fit.posterior[300:], alone.posterior[same_pattern], atol=1e-12)


def test_bad_input_is_rejected() -> None:
    with pytest.raises(ValueError, match="0/1 verdicts"):
        dawid_skene([[0.0, 0.7]])
    with pytest.raises(ValueError, match="2-d"):
        dawid_skene([0.0, 1.0])
    with pytest.raises(ValueError, match="prior"):
        dawid_skene([[0.0, 1.0]], prior=0.0)
    with pytest.raises(ValueError, match="counts"):
        dawid_skene([[0.0, 1.0]], counts=[1.0])
    with pytest.raises(ValueError, match="init"):
        dawid_skene([[0.0, 1.0]], init=[0.5, 2.0])
    with pytest.raises(ValueError, match="init"):
        dawid_skene([[0.0, 1.0]], init="random")


def test_mirror_solution_is_turned_around() -> None:
    rng = np.random.default_rng(9)
    votes, truth = simulate(rng, 3000, [0.9, 0.8, 0.85], [0.9, 0.85, 0.8])
    good = dawid_skene(votes)
    # Starting from the opposite of the majority, EM climbs to the mirror solution.
    start = 1.0 - np.nanmean(votes, axis=0)
    mirrored = dawid_skene(votes, init=start)
    assert mirrored.flipped and not good.flipped
    assert any("mirror solution" in n for n in mirrored.notes)
    np.testing.assert_allclose(mirrored.sensitivity, good.sensitivity, atol=1e-4)
    np.testing.assert_allclose(mirrored.posterior, good.posterior, atol=1e-4)
    assert (good.labels == truth).mean() > 0.9


def test_non_convergence_is_noted() -> None:
    rng = np.random.default_rng(10)
    votes, _ = simulate(rng, 500, [0.7, 0.65, 0.6], [0.6, 0.7, 0.65])
    fit = dawid_skene(votes, max_iter=2, tol=1e-12)
    assert not fit.converged and fit.iterations == 2
    assert "EM did not converge within 2 iterations" in fit.notes


def test_per_character_scale_recovers_the_rates() -> None:
    # Spans are fitted per character (collapsed to vote patterns); how fast is the bench's
    # business (bench/bench_krippendorff.py), not a test's on a machine of unknown load.
    rng = np.random.default_rng(0)
    votes, _ = simulate(
        rng, 1_000_000, [0.9, 0.8, 0.7, 0.85, 0.6], [0.95, 0.7, 0.8, 0.9, 0.65], missing=0.05
    )
    fit = dawid_skene(votes)
    assert fit.converged
    np.testing.assert_allclose(fit.sensitivity, [0.9, 0.8, 0.7, 0.85, 0.6], atol=0.01)


# ------------------------------------------------------------------ conditional dependence


def textbook_dependence(votes: np.ndarray, fit: DawidSkeneFit) -> np.ndarray:
    """Posterior-weighted residual correlation, one unit and one class at a time."""
    n_judges, n_units = votes.shape
    out = np.full((n_judges, n_judges), NAN)
    for a, b in itertools.product(range(n_judges), repeat=2):
        if not (np.isfinite(fit.sensitivity[a]) and np.isfinite(fit.sensitivity[b])):
            continue
        cross = sq_a = sq_b = 0.0
        both = 0
        for i in range(n_units):
            if np.isnan(votes[a, i]) or np.isnan(votes[b, i]):
                continue
            both += 1
            for weight, mean in (
                (fit.posterior[i], fit.sensitivity),
                (1 - fit.posterior[i], 1 - fit.specificity),
            ):
                ra, rb = votes[a, i] - mean[a], votes[b, i] - mean[b]
                cross += weight * ra * rb
                sq_a += weight * ra * ra
                sq_b += weight * rb * rb
        if both >= 2 and sq_a > 0 and sq_b > 0:
            out[a, b] = max(-1.0, min(1.0, cross / math.sqrt(sq_a * sq_b)))
    return out


@settings(max_examples=60, deadline=None)
@given(verdict_matrices())
def test_dependence_matches_textbook_loops(votes: np.ndarray) -> None:
    fit = dawid_skene(votes)
    dep = conditional_dependence(votes, fit)
    assert close(dep.correlation, textbook_dependence(votes, fit), 1e-9)
    np.testing.assert_array_equal(np.isnan(dep.correlation), np.isnan(dep.correlation.T))
    # The same votes given as counts of distinct columns give the same matrix.
    columns, counts = np.unique(np.nan_to_num(votes, nan=-1).T, axis=0, return_counts=True)
    collapsed = np.where(columns.T == -1, NAN, columns.T)
    fit_c = dawid_skene(collapsed, counts=counts)
    dep_c = conditional_dependence(collapsed, fit_c, counts=counts)
    assert close(dep_c.correlation, dep.correlation, 1e-7)


def test_independent_judges_have_full_effective_size() -> None:
    rng = np.random.default_rng(21)
    votes, _ = simulate(rng, 5000, [0.85, 0.75, 0.7], [0.8, 0.75, 0.7], prevalence=0.4)
    report = reliability_report(votes)
    assert 2.8 <= report.dependence.effective_size <= 3.0
    assert report.warning is None and report.dependence.n_judges == 3


def test_judges_copying_one_another_are_worth_one() -> None:
    rng = np.random.default_rng(22)
    votes, truth = simulate(rng, 2000, [0.8], [0.8], prevalence=0.4)
    copies = np.repeat(votes, 3, axis=0)  # all three repeat one judge's errors
    report = reliability_report(copies, names=["a", "b", "c"])
    assert report.dependence.effective_size == pytest.approx(1.0, abs=0.01)
    assert report.warning is not None
    assert "independence assumption fails" in report.warning
    assert report.warning.startswith("effective panel size 1.00 of 3 judges")
    # The fit itself believes they are near-perfect: exactly what the warning is about.
    assert (report.fit.sensitivity > 0.99).all()
    assert (report.fit.labels == truth).mean() < 0.85


def test_dependence_shows_with_four_judges_in_two_copying_pairs() -> None:
    # Three judges saturate the model (it absorbs partial copying); four leave it room.
    rng = np.random.default_rng(23)
    n = 3000
    truth = rng.random(n) < 0.4

    def judge() -> np.ndarray:
        return np.where(rng.random(n) < 0.2, ~truth, truth)

    def copy(of: np.ndarray) -> np.ndarray:
        return np.where(rng.random(n) < 0.9, of, judge())

    a, b = judge(), judge()
    pairs = reliability_report(np.array([a, copy(a), b, copy(b)], dtype=float))
    independent = reliability_report(np.array([judge() for _ in range(4)], dtype=float))
    assert independent.dependence.effective_size > 3.8
    assert pairs.dependence.effective_size < 3.2 and pairs.dependence.mean_rho > 0.08
    three = reliability_report(np.array([a, copy(a), copy(a)], dtype=float))
    assert any("saturated" in n for n in three.dependence.notes)


def test_dependence_rejects_a_fit_of_other_votes() -> None:
    fit = dawid_skene([[1, 0, 1], [1, 1, 0]])
    with pytest.raises(ValueError, match="shapes"):
        conditional_dependence([[1, 0], [1, 1]], fit)


def test_docstring_examples() -> None:
    result = doctest.testmod(juryflow.maths.reliability)
    assert result.attempted > 0 and result.failed == 0
