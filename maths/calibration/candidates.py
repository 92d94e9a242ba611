"""The rules ``juryflow calibrate`` tries, each with its parameters fitted on training items.

A candidate is a :class:`~juryflow.maths.reducers.ConsensusRule` with a *family* (what the
folds' choices are tallied by, and what a leave-one-judge-out refits) and a *kind*
(``default``, ``alone``: one judge followed, or ``combining``). The lists have the same
length and order for any training set, so candidate ``c`` refitted on an inner fold is
still candidate ``c``.

Rules for correlated judges (real judges' errors are not independent: a panel of nine can
be worth two votes):

- ``at_least:K`` with K chosen: a minority veto when K is small;
- **stacking**: an L2-regularised logistic regression (scikit-learn) on the judges'
  verdicts or scores, its threshold chosen for F1 on the training items; correlated
  judges share a weight instead of outvoting the rest;
- **Dawid–Skene refitted on each run**: its reliabilities come from the run's own
  judgments by EM (no labels), so a rule calibrated on one set of answers adapts when the
  judges' reliabilities shift on the next; only its threshold is fitted to labels;
- **the best subset of m judges**: a majority of the m judges a greedy forward search picks
  on the training items (what a team paying for nine judges worth two votes wants to know).

A judge whose every answer equals an earlier judge's (an *echo*) adds no information: every
fitted candidate gives it weight 0, so it neither counts twice nor changes a fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

import numpy as np

from juryflow.maths.calibration.data import (
    BoolArray,
    CalibrationData,
    FloatArray,
    char_votes,
    verdict_counts,
    verdict_flags,
)
from juryflow.maths.group_bootstrap import f1_of
from juryflow.maths.reducers import ConsensusRule, Reliability, RuleRef, StackFit

SHARES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""Thresholds tried for weighted shares, consensus scores and posteriors."""
POSTERIORS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
STACK_C = 1.0
"""Inverse L2 strength of the stacking regression (scikit-learn's default)."""

Kind = Literal["default", "alone", "combining"]

# Families: what the folds' choices are tallied by and what a leave-one-judge-out refits.
# Thresholds, counts, weights and the judge followed are fitted parameters within one.
COUNTED = "counted votes"
"""``majority`` and ``at_least:K``."""
WEIGHTED = "reliability-weighted votes"
"""``weighted`` and ``dawid_skene`` with weights fitted on the training labels."""
PER_RUN = "Dawid–Skene refitted on each run"
SCORED = "consensus score"
STACKED = "stacking"
SUBSET = "best subset"
SPANS = "read off the spans"
ALONE = "one judge followed"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A rule to try, and what it is when folds' choices are compared."""

    rule: ConsensusRule
    label: str
    """What the rule is, for people (``follows JUDGE``, ``stacking on verdicts``, ...)."""
    kind: Kind
    family: str = "default"
    refit_per_run: bool = False
    """Its reliabilities are fitted again on every run it is applied to (stored unfitted)."""


def echoes(data: CalibrationData) -> tuple[str, ...]:
    """Judges whose every verdict, score and marked character equals an earlier judge's.

    >>> from juryflow.maths.calibration.data import CalibrationData
    >>> v = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    >>> echoes(_verdicts_only(v, ("a", "b", "c")))
    ('b',)
    """
    seen: list[int] = []
    out: list[str] = []
    for j, judge_id in enumerate(data.judge_ids):
        same = any(
            np.array_equal(data.verdicts[j], data.verdicts[k], equal_nan=True)
            and np.array_equal(data.scores[j], data.scores[k], equal_nan=True)
            and np.array_equal(data.covered[j], data.covered[k])
            and np.array_equal(data.span_answered[j], data.span_answered[k])
            for k in seen
        )
        if same:
            out.append(judge_id)
        else:
            seen.append(j)
    return tuple(out)


def _verdicts_only(verdicts: FloatArray, ids: tuple[str, ...]) -> CalibrationData:
    """A verdict-only data set (doctests)."""
    n, m = verdicts.shape
    return CalibrationData(
        judge_ids=ids, span_judge=np.zeros(n, bool), verdicts=verdicts, scores=verdicts,
        covered=np.zeros((n, 0), bool), span_answered=np.zeros((n, m), bool),
        char_item=np.zeros(0, np.int64), word_id=np.zeros(0, np.int64),
        gold_verdict=np.full(m, np.nan), gold_chars=np.zeros(0, bool),
        span_labelled=np.zeros(m, bool), groups=np.arange(m).astype(object),
    )  # fmt: skip


# ------------------------------------------------------------------ labelled fits


def supervised_fit(
    votes: FloatArray, truth: BoolArray, mask: BoolArray, judge_ids: tuple[str, ...],
    skip: frozenset[str] = frozenset(),
) -> Reliability:  # fmt: skip
    """Each judge's sensitivity and specificity on labelled units (add-one smoothed)."""
    sens: dict[str, float] = {}
    spec: dict[str, float] = {}
    for j, judge_id in enumerate(judge_ids):
        said = votes[j]
        ok = mask & ~np.isnan(said)
        pos, neg = ok & truth, ok & ~truth
        if judge_id in skip or (not pos.any() and not neg.any()):
            continue
        sens[judge_id] = (float((said[pos] > 0.5).sum()) + 1) / (int(pos.sum()) + 2)
        spec[judge_id] = (float((said[neg] < 0.5).sum()) + 1) / (int(neg.sum()) + 2)
    prevalence = (float(truth[mask].sum()) + 1) / (int(mask.sum()) + 2)
    return Reliability(sens, spec, prevalence)


def log_odds_weights(fit: Reliability, judge_ids: tuple[str, ...]) -> dict[str, float]:
    """Naive-Bayes vote weights ``log(sens * spec / ((1 - sens)(1 - spec)))``, floored at 0:
    a judge no better than chance (or unknown to the fit) gets no say."""
    weights: dict[str, float] = {}
    for judge_id in judge_ids:
        if judge_id not in fit.sensitivity:
            weights[judge_id] = 0.0
            continue
        s, p = fit.sensitivity[judge_id], fit.specificity[judge_id]
        weights[judge_id] = round(max(0.0, math.log(s * p / ((1 - s) * (1 - p)))), 4)
    return weights


def fit_stack(
    data: CalibrationData, train: BoolArray, features: Literal["verdicts", "scores"],
    skip: frozenset[str],
) -> tuple[StackFit, float] | None:  # fmt: skip
    """An L2 logistic regression of the label on the judges' answers over the labelled
    ``train`` items, and the probability threshold with the best F1 there; None when the
    items hold one class only."""
    from sklearn.linear_model import LogisticRegression  # ~0.5 s: only when calibrating
    from sklearn.metrics import precision_recall_curve

    labelled = train & ~np.isnan(data.gold_verdict)
    y = data.gold_verdict[labelled] > 0.5
    if y.all() or not y.any():
        return None
    used = [j for j, judge_id in enumerate(data.judge_ids) if judge_id not in skip]
    source = data.verdicts if features == "verdicts" else data.scores
    x = source[used][:, labelled]
    x = np.where(np.isnan(x), 0.0, 2.0 * x - 1.0).T
    model = LogisticRegression(C=STACK_C, max_iter=1000).fit(x, y)
    coefficients = {data.judge_ids[j]: 0.0 for j in range(len(data.judge_ids))}
    for j, value in zip(used, model.coef_[0].tolist(), strict=True):
        coefficients[data.judge_ids[j]] = round(float(value), 6)
    fit = StackFit(round(float(model.intercept_[0]), 6), coefficients, features)
    probability = 0.5 * (1 + np.tanh(0.5 * fit.log_odds(data.judge_ids, source[:, labelled],
                                                          data.scores[:, labelled])))  # fmt: skip
    precision, recall, thresholds = precision_recall_curve(y, probability)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0)
    best = float(thresholds[int(np.argmax(f1[:-1]))])
    # The rule flags a probability strictly above its threshold; the curve's is "at or above".
    return fit, min(max(0.0, math.floor((best - 1e-7) * 1e6) / 1e6), 0.999999)


@lru_cache(maxsize=64)
def _em_fit(votes_key: bytes, shape: tuple[int, int], ids: tuple[str, ...]) -> Reliability | None:
    from juryflow.maths.reliability import dawid_skene

    votes = np.frombuffer(votes_key, dtype=np.float64).reshape(shape)
    if votes.shape[1] == 0 or np.isnan(votes).all():
        return None
    fit = dawid_skene(votes)
    return Reliability(
        {j: float(s) for j, s in zip(ids, fit.sensitivity, strict=True) if np.isfinite(s)},
        {j: float(s) for j, s in zip(ids, fit.specificity, strict=True) if np.isfinite(s)},
        float(fit.prevalence),
    )


def per_run_fit(data: CalibrationData, skip: frozenset[str]) -> Reliability | None:
    """Dawid–Skene reliabilities by EM over every item's verdicts, no labels: what the rule
    fits again on each run it is applied to."""
    used = [j for j, judge_id in enumerate(data.judge_ids) if judge_id not in skip]
    votes = np.ascontiguousarray(data.verdicts[used], dtype=np.float64)
    return _em_fit(votes.tobytes(), votes.shape, tuple(data.judge_ids[j] for j in used))


def greedy_subsets(
    data: CalibrationData, base: ConsensusRule, train: BoolArray, pool: tuple[str, ...]
) -> list[tuple[str, ...]]:
    """The best subset of each size from 2 to ``len(pool) - 1`` for a majority vote, by
    greedy forward search on the labelled ``train`` items (F1 of the subset's majority)."""
    chosen: list[str] = []
    out: list[tuple[str, ...]] = []
    labelled = train & ~np.isnan(data.gold_verdict)
    for size in range(1, len(pool)):
        best: tuple[float, str] | None = None
        for judge_id in pool:
            if judge_id in chosen:
                continue
            rule = subset_rule(base, data.judge_ids, (*chosen, judge_id))
            said = verdict_flags(data, rule, np.zeros(0, bool), np.ones(data.n_items, bool))
            f1 = float(f1_of(verdict_counts(data, said)[labelled].sum(axis=0)))
            if best is None or f1 > best[0] + 1e-12:
                best = (f1, judge_id)
        assert best is not None
        chosen.append(best[1])
        if size >= 2:
            out.append(tuple(chosen))
    return out


def subset_rule(
    base: ConsensusRule, judge_ids: tuple[str, ...], subset: tuple[str, ...]
) -> ConsensusRule:
    """A strict majority of ``subset``'s answering judges; the others weigh 0 (not called)."""
    weights = {j: (1.0 if j in subset else 0.0) for j in judge_ids}
    return replace(base, verdict=RuleRef("verdict", "majority"), weights=weights)


# --------------------------------------------------------------------------- candidates


def bare(default: ConsensusRule, data: CalibrationData) -> ConsensusRule:
    """The default with nothing fitted, its echoes weighted 0 (they take no part)."""
    muted = {j: 0.0 for j in echoes(data)}
    return replace(
        default, weights=muted, span_weights=muted, verdict_fit=None, span_fit=None,
        stack=None, name=None,
    )  # fmt: skip


def default_spans(data: CalibrationData, default: ConsensusRule) -> ConsensusRule:
    """The default's span rule on a bare base; its span weights written out, so that the
    verdict weights fitted later cannot change them (span weights fall back on ``weights``,
    and a judge of weight 0 does not vote on spans under any span rule)."""
    vector = default.span_weight_vector(data.judge_ids)
    span_weights = dict(zip(data.judge_ids, vector.tolist(), strict=True))
    base = replace(bare(default, data), weights={})
    return replace(base, spans=default.spans, span_weights=span_weights, span_fit=default.span_fit)


def span_candidates(
    data: CalibrationData, default: ConsensusRule, train: BoolArray, family: str | None = None
) -> list[Candidate]:
    """Span rules to try, the default's first, parameters fitted on the ``train`` items
    (``family``: the default and that family's only)."""
    out = [Candidate(default_spans(data, default), f"{default.spans} (default)", "default")]
    if not data.has_spans or family == "default":
        return out
    if family is not None:
        return out + [c for c in span_candidates(data, default, train) if c.family == family]
    base = bare(default, data)
    skip = frozenset(echoes(data))
    span_ids = tuple(
        j for j, s in zip(data.judge_ids, data.span_judge, strict=True) if s and j not in skip
    )
    # One judge alone first: a tie keeps the simpler rule.
    for judge_id in span_ids:
        alone = {j: (1.0 if j == judge_id else 0.0) for j in data.judge_ids}
        rule = replace(base, spans=RuleRef("spans", "weighted", 0.5), span_weights=alone)
        out.append(Candidate(rule, f"follows {judge_id}", "alone", ALONE))
    out.append(
        Candidate(replace(base, spans=RuleRef("spans", "majority")), "majority", "combining",
                  COUNTED)
    )  # fmt: skip
    out += [
        Candidate(replace(base, spans=RuleRef("spans", "at_least", float(k))), f"at_least:{k}",
                  "combining", COUNTED)
        for k in range(1, len(data.judge_ids) + 1)
    ]  # fmt: skip
    scope = (train & data.span_labelled)[data.char_item]
    votes = char_votes(data)
    fit = supervised_fit(votes, data.gold_chars, scope, data.judge_ids, skip)
    fit = Reliability(
        {k: v for k, v in fit.sensitivity.items() if k in span_ids},
        {k: v for k, v in fit.specificity.items() if k in span_ids},
        fit.prevalence,
    )
    weights = log_odds_weights(fit, data.judge_ids)
    for t in SHARES:
        rule = replace(base, spans=RuleRef("spans", "weighted", t), span_weights=weights)
        out.append(Candidate(rule, f"weighted:{t:g}", "combining", WEIGHTED))
    for t in (0.2, 0.3, 0.4, 0.5, 0.6):
        rule = replace(base, spans=RuleRef("spans", "dawid_skene", t), span_fit=fit)
        out.append(Candidate(rule, f"dawid_skene:{t:g}", "combining", WEIGHTED))
    return out


def verdict_candidates(
    data: CalibrationData,
    default: ConsensusRule,
    spans: ConsensusRule,
    train: BoolArray,
    family: str | None = None,
) -> list[Candidate]:
    """Verdict rules to try over the span rule ``spans``, parameters fitted on ``train``
    (``family``: the default and that family's only; the others are not even fitted).

    The first is the whole default rule (its own spans too): keeping it keeps the default's
    verdicts exactly, whatever span rule was chosen.
    """

    def want(name: str) -> bool:
        return family is None or family == name

    ids = data.judge_ids
    skip = frozenset(echoes(data))
    pool = tuple(j for j in ids if j not in skip)
    muted = {j: 0.0 for j in skip}
    spans = replace(spans, weights=muted)
    out = [Candidate(default, "default", "default")]

    def add(rule: ConsensusRule, label: str, name: str, kind: Kind = "combining",
            per_run: bool = False) -> None:  # fmt: skip
        if want(name):
            out.append(Candidate(rule, label, kind, name, per_run))

    # One judge alone first: a tie keeps the simpler rule.
    for judge_id in pool:
        alone = {j: (1.0 if j == judge_id else 0.0) for j in ids}
        rule = replace(spans, verdict=RuleRef("verdict", "weighted", 0.5), weights=alone)
        add(rule, f"follows {judge_id}", ALONE, "alone")
    add(replace(spans, verdict=RuleRef("verdict", "majority")), "majority", COUNTED)
    if data.has_spans:
        add(replace(spans, verdict=RuleRef("verdict", "spans")), SPANS, SPANS)
    for k in range(1, len(ids) + 1):
        add(replace(spans, verdict=RuleRef("verdict", "at_least", float(k))), f"at_least:{k}",
            COUNTED)  # fmt: skip
    labelled = train & ~np.isnan(data.gold_verdict)
    # The default's verdict with a new span rule, as a member of the chosen family.
    fit = supervised_fit(data.verdicts, data.gold_verdict > 0.5, labelled, ids, skip)
    weights = log_odds_weights(fit, ids)
    for t in SHARES:
        add(replace(spans, verdict=RuleRef("verdict", "weighted", t), weights=weights),
            f"weighted:{t:g}", WEIGHTED)  # fmt: skip
    for t in POSTERIORS:
        add(replace(spans, verdict=RuleRef("verdict", "dawid_skene", t), verdict_fit=fit),
            f"dawid_skene:{t:g} (labels)", WEIGHTED)  # fmt: skip
    em = per_run_fit(data, skip) if want(PER_RUN) else None
    for t in POSTERIORS:
        rule = replace(spans, verdict=RuleRef("verdict", "dawid_skene", t), verdict_fit=em)
        add(rule, f"dawid_skene:{t:g} (per run)", PER_RUN, per_run=True)
    if not data.span_judge.all():
        for reducer in ("mean", "median"):
            for t in SHARES:
                rule = replace(
                    spans, score=RuleRef("score", reducer), verdict=RuleRef("verdict", "score", t)
                )
                add(rule, f"{reducer} score:{t:g}", SCORED)
    kinds: list[Literal["verdicts", "scores"]] = ["verdicts"]
    if np.nanmax(np.abs(data.scores - np.round(data.scores)), initial=0.0) > 0:
        kinds.append("scores")
    for features in kinds if want(STACKED) else []:
        stacked = fit_stack(data, train, features, skip)
        if stacked is None:
            rule = replace(spans, verdict=RuleRef("verdict", "majority"))
        else:
            rule = replace(
                spans, verdict=RuleRef("verdict", "stacked", stacked[1]), stack=stacked[0]
            )
        add(rule, f"stacking on {features}", STACKED)
    subsets = greedy_subsets(data, spans, train, pool) if want(SUBSET) else []
    for size in range(2, len(pool) if want(SUBSET) else 0):
        subset = subsets[size - 2]
        add(subset_rule(spans, ids, subset), f"majority of {', '.join(subset)}", SUBSET)
    return out
