"""How reliable each judge is when there are no human labels: the Dawid–Skene model.

Dawid and Skene (1979) treat the true label of every unit as a hidden class and each judge
as a noisy channel with its own error rates. For binary verdicts (1 = hallucinated) a judge
has a *sensitivity* ``P(says 1 | truth 1)`` and a *specificity* ``P(says 0 | truth 0)``; the
class prior is the *prevalence* ``P(truth 1)``. Given the judges' verdicts, EM alternates

- E-step: each unit's posterior ``P(truth 1 | its verdicts)`` from Bayes' rule, assuming the
  judges err *independently given the truth*;
- M-step: sensitivity, specificity and prevalence as posterior-weighted vote frequencies.

A *unit* is whatever was judged: an item (response-level verdicts) or a character of the
judged text (span verdicts, 1 = inside a flagged span). The input is a verdict matrix as in
:mod:`juryflow.maths.agreement`: ``(n_judges, n_units)`` float, 0/1, ``NaN`` where a judge gave no
verdict.

Choices made here, each documented where it applies:

- **Smoothing.** Every rate is a posterior mode under a symmetric Beta prior: ``prior``
  pseudo-votes are added to each cell of each judge's 2x2 table and to each class count
  (``prior=1`` is Laplace's add-one rule). A judge who is never wrong thus gets a rate just
  below 1, not exactly 1, and no ``log(0)`` appears; the effect is ~``prior / n`` and vanishes
  on large data.
- **Initialisation.** From the soft majority vote (each unit starts with the fraction of its
  verdicts that are 1), as Dawid and Skene did and as crowd-kit does.
- **Label switching.** Swapping the two classes (sensitivity <-> 1 - specificity, prevalence
  <-> 1 - prevalence) gives the same likelihood, so EM may land on the mirror solution in
  which the judges are worse than chance. When the fitted judges' mean
  ``sensitivity + specificity`` is below 1 the fit is mirrored back, on the premise that the
  panel as a whole does better than chance.
- **Vote patterns.** The likelihood of a unit depends only on its pattern of verdicts, and
  ``n`` judges with 0/1/missing verdicts produce at most ``3**n`` patterns. EM runs over the
  distinct patterns weighted by their counts, so its cost does not grow with the number of
  units: per-character fits over millions of characters take a single pass to collapse.
- **Independence.** The model's central assumption. :func:`conditional_dependence` measures
  how far the judges' residuals stay correlated given the class, and
  :func:`reliability_report` warns when that leaves the panel worth few independent judges.

A. P. Dawid and A. M. Skene, "Maximum Likelihood Estimation of Observer Error-Rates Using
the EM Algorithm", *Journal of the Royal Statistical Society C* 28(1), 1979, 20–28.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from juryflow.maths.agreement import effective_panel_size

FloatArray = npt.NDArray[np.float64]
IntpArray = npt.NDArray[np.intp]

__all__ = [
    "ConditionalDependence",
    "DawidSkeneFit",
    "ReliabilityReport",
    "conditional_dependence",
    "dawid_skene",
    "reliability_report",
]

# Patterns are coded in base 3 (0 missing, 1 vote 0, 2 vote 1) into an int64: exact up to
# 39 judges (3**39 < 2**63). Up to 3**12 codes a counting table beats sorting the units.
_MAX_CODED_JUDGES = 39
_MAX_TABLE_JUDGES = 12
_FLIP_MARGIN = 1e-9


# --------------------------------------------------------------------------- vote patterns


@dataclass(frozen=True, slots=True, eq=False)
class _Patterns:
    """The distinct vote patterns of a verdict matrix, with how often each occurs."""

    ones: FloatArray  # (n_judges, n_patterns): 1.0 where the judge voted 1
    zeros: FloatArray  # (n_judges, n_patterns): 1.0 where the judge voted 0
    weight: FloatArray  # (n_patterns,): number (or total weight) of units with the pattern
    inverse: IntpArray  # (n_units,): the pattern of each unit

    @property
    def present(self) -> FloatArray:
        return self.ones + self.zeros


def _votes(votes: npt.ArrayLike) -> FloatArray:
    v = np.asarray(votes, dtype=np.float64)
    if v.ndim == 1 and v.size == 0:
        v = v.reshape(0, 0)
    if v.ndim != 2:
        raise ValueError(f"votes must be 2-d (n_judges, n_units), got shape {v.shape}")
    return v


def _unit_weights(counts: npt.ArrayLike | None, n_units: int) -> FloatArray | None:
    if counts is None:
        return None
    w = np.asarray(counts, dtype=np.float64).reshape(-1)
    if w.shape[0] != n_units:
        raise ValueError(f"counts has {w.shape[0]} entries, expected one per unit ({n_units})")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("counts must be finite and non-negative")
    return w


def _collapse(v: FloatArray, w: FloatArray | None) -> _Patterns:
    """Group the units by vote pattern; raises if a verdict is not 0, 1 or NaN."""
    n_judges, n_units = v.shape
    digits = np.empty((n_judges, n_units), dtype=np.int8)
    for j in range(n_judges):
        row = v[j]
        missing = np.isnan(row)
        one = row == 1.0
        if not (missing | one | (row == 0.0)).all():
            raise ValueError("votes must be 0/1 verdicts with NaN for no verdict")
        digits[j] = one
        digits[j] += ~missing

    if n_judges <= _MAX_CODED_JUDGES:
        code = np.zeros(n_units, dtype=np.int64)
        for j in range(n_judges):
            code *= 3
            code += digits[j]
        if n_judges <= _MAX_TABLE_JUDGES:
            seen = np.flatnonzero(np.bincount(code, minlength=3**n_judges))
            lookup = np.zeros(3**n_judges, dtype=np.intp)
            lookup[seen] = np.arange(seen.size)
            inverse = lookup[code]
        else:
            seen, inverse = np.unique(code, return_inverse=True)
        powers = 3 ** np.arange(n_judges - 1, -1, -1, dtype=np.int64)
        pattern_digits = (seen[None, :] // powers[:, None]) % 3
    else:
        rows, inverse = np.unique(digits.T, axis=0, return_inverse=True)
        pattern_digits = rows.T
    inverse = inverse.reshape(-1).astype(np.intp, copy=False)
    weight = np.bincount(inverse, weights=w, minlength=pattern_digits.shape[1])
    return _Patterns(
        ones=(pattern_digits == 2).astype(np.float64),
        zeros=(pattern_digits == 1).astype(np.float64),
        weight=weight.astype(np.float64),
        inverse=inverse,
    )


# --------------------------------------------------------------------------- Dawid–Skene


@dataclass(frozen=True, slots=True, eq=False)
class DawidSkeneFit:
    """A fitted two-class Dawid–Skene model.

    ``sensitivity``/``specificity``/``n_items_used`` have one entry per judge (row of the
    votes), ``NaN`` rates for a judge with no verdict; ``posterior`` has one entry per unit,
    ``P(truth = 1 | verdicts)``, the prevalence for a unit nobody judged.
    ``log_likelihood`` is the observed-data log-likelihood (natural log, weighted by
    ``counts``) at the fitted rates. ``flipped`` says the mirror solution was turned around
    (see the module docstring); ``notes`` are sentences about anything degenerate.
    """

    sensitivity: FloatArray
    specificity: FloatArray
    prevalence: float
    posterior: FloatArray
    iterations: int
    converged: bool
    log_likelihood: float
    n_items_used: FloatArray
    flipped: bool
    notes: tuple[str, ...]

    @property
    def labels(self) -> FloatArray:
        """The most probable class of each unit (1.0 when the posterior exceeds 0.5)."""
        return np.where(np.isnan(self.posterior), np.nan, (self.posterior > 0.5) * 1.0)


def _name(names: Sequence[str] | None, j: int) -> str:
    return names[j] if names is not None else f"judge {j}"


def _m_step(
    p: _Patterns, w: FloatArray, q: FloatArray, prior: float
) -> tuple[FloatArray, FloatArray, float]:
    """Rates from posteriors ``q``: posterior-weighted vote frequencies + Beta smoothing."""
    w1 = w * q
    w0 = w - w1
    present = p.present
    sens = (p.ones @ w1 + prior) / (present @ w1 + 2 * prior)
    spec = (p.zeros @ w0 + prior) / (present @ w0 + 2 * prior)
    prev = (w1.sum() + prior) / (w.sum() + 2 * prior)
    return sens, spec, float(prev)


def _e_step(
    p: _Patterns, sens: FloatArray, spec: FloatArray, prev: float
) -> tuple[FloatArray, FloatArray]:
    """Posterior of class 1 and log-likelihood of each pattern, in log space throughout."""
    log1 = np.log(prev) + p.ones.T @ np.log(sens) + p.zeros.T @ np.log1p(-sens)
    log0 = np.log1p(-prev) + p.ones.T @ np.log1p(-spec) + p.zeros.T @ np.log(spec)
    loglik = np.logaddexp(log1, log0)
    return np.exp(log1 - loglik), loglik


def dawid_skene(
    votes: npt.ArrayLike,
    *,
    max_iter: int = 100,
    tol: float = 1e-6,
    init: Literal["majority"] | npt.ArrayLike = "majority",
    prior: float = 1.0,
    counts: npt.ArrayLike | None = None,
    names: Sequence[str] | None = None,
) -> DawidSkeneFit:
    """Fit the binary Dawid–Skene model to a verdict matrix ``(n_judges, n_units)``.

    Over 100 lines: most of them are this docstring and its worked example; the EM loop
    itself is one screen.

    ``votes`` holds 0/1 with ``NaN`` for no verdict. ``counts`` (optional, one per unit)
    weights each unit, e.g. the length of a run of characters sharing the same verdicts.
    ``init`` is ``"majority"`` (soft majority vote) or starting posteriors, one per unit.
    ``prior`` is the Beta smoothing pseudo-count (> 0) added to every rate's counts.
    EM stops when no rate moves by more than ``tol`` in an iteration, or after ``max_iter``.
    ``names`` label the judges in ``notes``.

    With fewer than three judges the model is not identified (two judges give three pattern
    frequencies for five parameters) and EM would only drift towards the smoothing prior, so
    it is not run: the posterior stays at the start and the rates are each judge's agreement
    with it (``iterations == 0``, a note says so). Anything else degenerate (every verdict
    the same, a class left empty, no convergence, the mirror solution) is a sentence in
    ``notes``, never an exception.

    Three judges on eight items; judge 2 disagrees with the other two on items 1 and 6:

    >>> votes = [[1, 1, 0, 0, 1, 0, 0, 1], [1, 1, 0, 0, 1, 0, 0, 1], [1, 0, 0, 0, 1, 0, 1, 1]]
    >>> fit = dawid_skene(votes)
    >>> q = fit.posterior
    >>> q.round(2).tolist()
    [0.97, 0.89, 0.03, 0.03, 0.97, 0.03, 0.11, 0.97]
    >>> round(fit.prevalence, 2), fit.converged
    (0.5, True)

    At the fixed point a sensitivity is the posterior mass of the judge's 1-votes over the
    mass of class 1, one pseudo-vote added to each of its two cells: judge 2 said 1 on
    items 0, 4, 6 and 7, so ``(q[[0, 4, 6, 7]].sum() + 1) / (q.sum() + 2)``:

    >>> fit.sensitivity.round(2).tolist(), fit.specificity.round(2).tolist()
    ([0.8, 0.8, 0.67], [0.8, 0.8, 0.67])
    >>> bool(np.isclose(fit.sensitivity[2], (q[[0, 4, 6, 7]].sum() + 1) / (q.sum() + 2)))
    True
    """
    v = _votes(votes)
    if prior <= 0 or not np.isfinite(prior):
        raise ValueError(f"prior must be a positive pseudo-count, got {prior}")
    if max_iter < 0:
        raise ValueError(f"max_iter must be >= 0, got {max_iter}")
    n_judges, n_units = v.shape
    unit_w = _unit_weights(counts, n_units)
    p = _collapse(v, unit_w)
    present = p.present
    n_used = present @ p.weight
    active = n_used > 0
    notes: list[str] = [
        f"{_name(names, int(j))} gave no verdict: its sensitivity and specificity are undefined"
        for j in np.flatnonzero(~active)
    ]

    # Zero-count patterns stay in: they add nothing to the M-step but get a posterior.
    voted = present.any(axis=0)
    nan_rates = np.full(n_judges, np.nan)
    if not (voted & (p.weight > 0)).any():
        notes.append("no unit has a verdict: nothing to fit")
        return DawidSkeneFit(
            sensitivity=nan_rates,
            specificity=nan_rates.copy(),
            prevalence=float("nan"),
            posterior=np.full(n_units, np.nan),
            iterations=0,
            converged=False,
            log_likelihood=float("nan"),
            n_items_used=n_used,
            flipped=False,
            notes=tuple(notes),
        )

    # EM only needs the patterns that carry a verdict; unvoted units get the prevalence.
    fit_p = _Patterns(
        ones=p.ones[:, voted], zeros=p.zeros[:, voted], weight=p.weight[voted], inverse=p.inverse
    )
    w = fit_p.weight
    if isinstance(init, str):
        if init != "majority":
            raise ValueError(f"init must be 'majority' or starting posteriors, got {init!r}")
        q = fit_p.ones.sum(axis=0) / fit_p.present.sum(axis=0)
    else:
        q0 = np.asarray(init, dtype=np.float64).reshape(-1)
        if q0.shape[0] != n_units or not ((q0 >= 0) & (q0 <= 1)).all():
            raise ValueError(f"init must hold {n_units} starting posteriors in [0, 1]")
        # A pattern's units share one posterior, so a pattern starts from their mean.
        per_unit_w = np.ones(n_units) if unit_w is None else unit_w
        total = np.bincount(p.inverse, weights=q0 * per_unit_w, minlength=p.weight.size)
        with np.errstate(invalid="ignore", divide="ignore"):
            q = np.where(p.weight > 0, total / p.weight, 0.5)[voted]

    sens, spec, prev = _m_step(fit_p, w, q, prior)
    n_active = int(active.sum())
    # Fewer than three judges leave the model unidentified: EM would only drift towards the
    # smoothing prior, so the fit stays at the (soft majority) start instead.
    identified = n_active >= 3
    iterations, converged = 0, False
    for iterations in range(1, (max_iter if identified else 0) + 1):  # noqa: B007
        q, _ = _e_step(fit_p, sens, spec, prev)
        new_sens, new_spec, new_prev = _m_step(fit_p, w, q, prior)
        change = max(
            float(np.abs(new_sens - sens).max()),
            float(np.abs(new_spec - spec).max()),
            abs(new_prev - prev),
        )
        sens, spec, prev = new_sens, new_spec, new_prev
        if change <= tol:
            converged = True
            break
    q_final, loglik = _e_step(fit_p, sens, spec, prev)
    if identified:
        q = q_final

    # The margin keeps float noise at an exact tie (every posterior 0.5) from flipping.
    flipped = bool(np.mean(sens[active] + spec[active]) < 1.0 - _FLIP_MARGIN)
    if flipped:
        # The mirror solution: same likelihood, classes renamed (module docstring).
        sens, spec, prev, q = 1.0 - spec, 1.0 - sens, 1.0 - prev, 1.0 - q
        notes.append(
            "EM reached the mirror solution (judges worse than chance on average); the "
            "classes were swapped so that the panel does better than chance"
        )

    posterior_by_pattern = np.full(p.weight.size, prev)
    posterior_by_pattern[voted] = q
    posterior = posterior_by_pattern[p.inverse]
    notes.extend(_fit_notes(fit_p, w, q, n_active, converged, max_iter))

    sens = np.where(active, sens, np.nan)
    spec = np.where(active, spec, np.nan)
    return DawidSkeneFit(
        sensitivity=sens,
        specificity=spec,
        prevalence=prev,
        posterior=posterior,
        iterations=iterations,
        converged=converged,
        log_likelihood=float(w @ loglik),
        n_items_used=n_used,
        flipped=flipped,
        notes=tuple(notes),
    )


def _fit_notes(
    p: _Patterns,
    w: FloatArray,
    q: FloatArray,
    n_active: int,
    converged: bool,
    max_iter: int,
) -> list[str]:
    notes: list[str] = []
    if n_active < 3:
        # Two classes need three conditionally independent judges to be identified
        # (Allman, Matias & Rhodes 2009): 2 judges give 3 pattern frequencies, 5 parameters.
        notes.append(
            f"only {n_active} judge{'s' if n_active != 1 else ''} voted: the model needs "
            "at least three to tell accuracy from prevalence, so EM was not run; the "
            "posterior is the starting one (the majority vote) and the rates are agreement "
            "with it"
        )
    said_one = (p.ones @ w).sum()
    said_zero = (p.zeros @ w).sum()
    if said_one == 0 or said_zero == 0:
        notes.append(
            f"every verdict is {1 if said_zero == 0 else 0}: the data cannot separate the "
            "judges' accuracy from the prevalence"
        )
    else:
        for cls, mass in ((1, w @ q), (0, w @ (1.0 - q))):
            if mass < 1.0:
                rate = "sensitivities" if cls == 1 else "specificities"
                notes.append(
                    f"the fit puts less than one unit in class {cls}: the {rate} come from "
                    "the smoothing prior, not from the data"
                )
    if not converged and max_iter > 0 and n_active >= 3:
        notes.append(f"EM did not converge within {max_iter} iterations")
    return notes


# --------------------------------------------------------------------------- independence


@dataclass(frozen=True, slots=True, eq=False)
class ConditionalDependence:
    """How correlated the judges' verdicts remain once the class is known.

    ``correlation`` ``(n_judges, n_judges)`` is the posterior-weighted correlation of the
    residuals ``vote - E[vote | class]`` (``NaN`` where undefined). ``mean_rho`` is its mean
    off-diagonal value, ``effective_size`` the Kish effective panel size from it, over
    ``n_judges`` judges with a defined correlation. ``warning`` is set when the panel is
    worth too few independent judges for the model's independence assumption to hold.
    """

    correlation: FloatArray
    mean_rho: float
    effective_size: float
    n_judges: int
    warning: str | None
    notes: tuple[str, ...]


def conditional_dependence(
    votes: npt.ArrayLike,
    fit: DawidSkeneFit,
    *,
    counts: npt.ArrayLike | None = None,
    min_effective: float = 1.5,
) -> ConditionalDependence:
    """Residual correlation of the judges given the class, from a Dawid–Skene ``fit``.

    Under the model a judge's vote given class 1 has mean ``sensitivity`` and given class 0
    mean ``1 - specificity``, independently of the other judges. For each pair the residuals
    ``vote - E[vote | class]`` are correlated over the units both judged, each unit counted
    in class 1 with weight ``posterior`` and in class 0 with ``1 - posterior``. The mean
    off-diagonal correlation gives Kish's effective size ``n / (1 + (n - 1) * rho)``, rho
    clipped to [0, 1] (:func:`juryflow.maths.agreement.effective_panel_size`). ``warning`` is set
    when that is below ``min_effective`` or below half the judges.

    Pass the same ``votes`` and ``counts`` the fit was made from.

    Limits, inherent to working without labels: an error the whole panel (or its majority)
    makes together looks exactly like the truth, so the class absorbs it and no residual
    is left to correlate; only gold labels show it
    (:func:`juryflow.maths.agreement.error_correlation_report`). With exactly three judges the
    model is saturated (seven pattern frequencies, seven parameters), so any partial
    copying is absorbed into the rates and only outright copies show. From four judges on a
    dependent subset leaves residual correlation (two copying pairs among four judges: about
    three judges' worth instead of four), but which judges it points at need not be the
    copiers. A low effective size is therefore a reliable alarm; a high one is no proof of
    independence.

    >>> votes = [[1, 0, 1, 0, 1, 0], [1, 0, 1, 0, 1, 0], [1, 0, 1, 0, 1, 0]]
    >>> dep = conditional_dependence(votes, dawid_skene(votes))
    >>> round(dep.effective_size, 3), dep.warning is not None
    (1.0, True)
    """
    v = _votes(votes)
    n_judges, n_units = v.shape
    if fit.posterior.shape != (n_units,) or fit.sensitivity.shape != (n_judges,):
        raise ValueError("fit does not belong to these votes (shapes differ)")
    unit_w = _unit_weights(counts, n_units)
    p = _collapse(v, unit_w)
    w = p.weight
    # Units of one pattern share a posterior; the weighted mean recovers it exactly.
    post = np.nan_to_num(fit.posterior, nan=0.5)
    q_sum = np.bincount(
        p.inverse, weights=post if unit_w is None else post * unit_w, minlength=w.size
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(w > 0, q_sum / w, 0.0)
    present = p.present
    active = np.isfinite(fit.sensitivity) & np.isfinite(fit.specificity)
    sens = np.where(active, fit.sensitivity, 0.0)
    spec = np.where(active, fit.specificity, 0.0)

    cross = np.zeros((n_judges, n_judges))
    square = np.zeros((n_judges, n_judges))
    for class_w, mean in ((w * q, sens), (w * (1.0 - q), 1.0 - spec)):
        resid = present * (p.ones - mean[:, None])
        cross += (resid * class_w) @ resid.T
        # square[i, k]: judge i's squared residuals over the units judge k also judged.
        square += (resid * resid * class_w) @ present.T
    overlap = (present * w) @ present.T
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cross / np.sqrt(square * square.T)
    defined = active[:, None] & active[None, :] & (overlap >= 2) & (square > 0) & (square.T > 0)
    corr = np.where(defined, np.clip(corr, -1.0, 1.0), np.nan)

    off = defined & ~np.eye(n_judges, dtype=bool)
    n_def = int(off.any(axis=1).sum())
    mean_rho = float(corr[off].mean()) if off.any() else float("nan")
    n_eff = effective_panel_size(corr) if n_judges else float("nan")
    notes: list[str] = []
    if n_def < 2:
        notes.append("fewer than two judges with overlapping, varying residuals: no correlation")
    elif n_def == 3:
        notes.append(
            "with three judges the model is saturated and absorbs correlated errors into the "
            "rates: only outright copying shows, so the effective size is an upper bound"
        )
    warning = None
    if n_def >= 2 and np.isfinite(n_eff) and (n_eff < min_effective or n_eff < n_def / 2):
        warning = (
            f"effective panel size {n_eff:.2f} of {n_def} judges (mean residual correlation "
            f"{mean_rho:.2f}): the judges err together given the truth, so Dawid–Skene's "
            "independence assumption fails and its sensitivities, specificities and "
            "posterior confidence are overstated"
        )
    return ConditionalDependence(
        correlation=corr,
        mean_rho=mean_rho,
        effective_size=float(n_eff),
        n_judges=n_def,
        warning=warning,
        notes=tuple(notes),
    )


@dataclass(frozen=True, slots=True, eq=False)
class ReliabilityReport:
    """A Dawid–Skene fit with its independence check; ``warning`` as in the check."""

    fit: DawidSkeneFit
    dependence: ConditionalDependence
    warning: str | None
    notes: tuple[str, ...]


def reliability_report(
    votes: npt.ArrayLike,
    *,
    max_iter: int = 100,
    tol: float = 1e-6,
    prior: float = 1.0,
    counts: npt.ArrayLike | None = None,
    names: Sequence[str] | None = None,
    min_effective: float = 1.5,
) -> ReliabilityReport:
    """Fit :func:`dawid_skene` and check its independence assumption in one call.

    ``notes`` gathers the fit's and the check's notes; ``warning`` is the check's.

    >>> votes = [[1, 0, 1, 0, 1, 0], [1, 0, 1, 0, 1, 0], [1, 0, 1, 0, 1, 0]]
    >>> reliability_report(votes).warning.startswith("effective panel size 1.00 of 3")
    True
    """
    fit = dawid_skene(votes, max_iter=max_iter, tol=tol, prior=prior, counts=counts, names=names)
    dep = conditional_dependence(votes, fit, counts=counts, min_effective=min_effective)
    return ReliabilityReport(
        fit=fit, dependence=dep, warning=dep.warning, notes=fit.notes + dep.notes
    )
