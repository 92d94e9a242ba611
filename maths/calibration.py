"""Choose a panel's consensus rule from human labels: never one that loses to the default.

``juryflow calibrate`` gives this module a labelled run's judgments
(:class:`~juryflow.maths.calibration_data.CalibrationData`). It searches the named rules of
:mod:`juryflow.maths.reducers` (span vote threshold, verdict rule and threshold, per-judge
weights from each judge's sensitivity and specificity) and reports the **out-of-fold**
P/R/F1 of what it keeps next to the panel's default rule and every single judge, each with a
bootstrap interval (sources resampled, :mod:`juryflow.maths.group_bootstrap`). Nothing is
scored on the items it was fitted on.

How a rule is chosen on some training items (:func:`choose`), spans first, then verdicts:

1. Every candidate is judged by an **inner** grouped cross-validation inside the training
   items: its parameters (weights, reliabilities) are refitted without each inner fold and it
   predicts that fold. The choice is made on the training items only (nested
   cross-validation), so the outer folds score it honestly.
2. The panel's own **default rule is always a candidate**, first, so a tie keeps it. Any
   other rule replaces it only when its inner-fold F1 beats the default's by ``MARGIN_SE``
   bootstrap standard errors (groups resampled). Of the rules that do, a rule combining
   judges gives way to the best judge followed alone when that judge beats the default too
   and the combining rule does not beat it by the same margin.

:func:`calibrate` runs that choice once per outer fold and once on all items. A rule has two
parts, its span rule and its verdict rule. A part they do not all choose alike (the same
kind: counted votes, reliability-weighted votes, the consensus score, the spans, one judge
followed, the default; thresholds, counts and weights are fitted parameters) is noise:
the **default's part is kept**, and a note names how many folds chose what. (The default's
verdict rule kept over an agreed new span rule applies to those spans: ``verdict: spans``
reads them.) The calibrated figures stay out of fold: each fold's items are predicted by
that fold's choice with the set-aside parts replaced by the default's, which have nothing
fitted to the labels; whether the folds agree is read from their choices, never from their
scores. When a part was set aside, the folds' own choices are scored beside it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from juryflow.maths.calibration_data import (
    BoolArray,
    CalibrationData,
    FloatArray,
    IntArray,
    Prediction,
    Scored,
    judge_prediction,
    predict,
    predict_chars,
    score,
    span_counts,
    verdict_counts,
    word_ids,
)
from juryflow.maths.group_bootstrap import (
    MARGIN_SE,
    difference_interval,
    earns_its_keep,
    f1_interval,
    f1_of,
)
from juryflow.maths.reducers import ConsensusRule, Reliability, RuleRef

__all__ = [
    "MARGIN_SE",
    "CalibrationData",
    "CalibrationResult",
    "Candidate",
    "Choice",
    "Difference",
    "PredictorResult",
    "calibrate",
    "choose",
    "earns_its_keep",
    "fit_on",
    "grouped_folds",
    "judge_prediction",
    "predict",
    "score",
    "span_candidates",
    "verdict_candidates",
    "word_ids",
]

SHARES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""Thresholds tried for weighted shares, consensus scores and posteriors."""
INNER_FOLDS = 3

# The kinds of rule whose choice the folds must agree on. Thresholds, vote counts and
# weights are fitted parameters within a kind: ``weighted`` and ``dawid_skene`` both weigh
# each judge's vote by the sensitivity and specificity fitted on the training items and
# differ only in how those weights become a decision boundary.
COUNTED = "counted votes"
"""``majority`` and ``at_least:K``."""
WEIGHTED = "reliability-weighted votes"
"""``weighted`` and ``dawid_skene`` with weights fitted on the training labels."""
SCORED = "consensus score"
"""``score:T`` over the mean or median score."""

Kind = Literal["default", "alone", "combining"]


# ----------------------------------------------------------------------------- folds


def grouped_folds(
    groups: Sequence[object] | npt.NDArray[np.object_], k: int, seed: int = 0
) -> IntArray:
    """A fold index per item, every group wholly in one fold, folds of similar size.

    Groups are shuffled (seeded) and dealt largest first to the smallest fold, so one big
    source cannot leave a fold empty.

    >>> f = grouped_folds(["a", "a", "b", "c", "c", "d"], 2)
    >>> sorted(set(f.tolist())), bool(f[0] == f[1]), bool(f[3] == f[4])
    ([0, 1], True, True)
    """
    keys = np.asarray([str(g) for g in groups], dtype=object)
    unique, inverse, sizes = np.unique(keys, return_inverse=True, return_counts=True)
    if len(unique) < k:
        raise ValueError(
            f"{len(unique)} groups cannot make {k} folds; use --folds {max(len(unique), 2)} "
            "or fewer, or a finer --group column"
        )
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(unique))
    order = order[np.argsort(-sizes[order], kind="stable")]
    fold_of_group = np.zeros(len(unique), dtype=np.int64)
    load = np.zeros(k, dtype=np.int64)
    for g in order:
        target = int(np.argmin(load))
        fold_of_group[g] = target
        load[target] += sizes[g]
    return fold_of_group[inverse]


# ------------------------------------------------------------------ labelled fits


def _supervised_fit(
    votes: FloatArray, truth: BoolArray, mask: BoolArray, judge_ids: Sequence[str]
) -> Reliability:
    """Each judge's sensitivity and specificity on labelled units (add-one smoothed)."""
    sens: dict[str, float] = {}
    spec: dict[str, float] = {}
    for j, judge_id in enumerate(judge_ids):
        said = votes[j]
        ok = mask & ~np.isnan(said)
        pos, neg = ok & truth, ok & ~truth
        if not pos.any() and not neg.any():
            continue
        sens[judge_id] = (float((said[pos] > 0.5).sum()) + 1) / (int(pos.sum()) + 2)
        spec[judge_id] = (float((said[neg] < 0.5).sum()) + 1) / (int(neg.sum()) + 2)
    prevalence = (float(truth[mask].sum()) + 1) / (int(mask.sum()) + 2)
    return Reliability(sens, spec, prevalence)


def _log_odds_weights(fit: Reliability, judge_ids: Sequence[str]) -> dict[str, float]:
    """Naive-Bayes vote weights ``log(sens * spec / ((1 - sens)(1 - spec)))``, floored at 0:
    a judge no better than chance gets no say."""
    weights: dict[str, float] = {}
    for judge_id in judge_ids:
        if judge_id not in fit.sensitivity:
            weights[judge_id] = 0.0
            continue
        s, p = fit.sensitivity[judge_id], fit.specificity[judge_id]
        weights[judge_id] = round(max(0.0, math.log(s * p / ((1 - s) * (1 - p)))), 4)
    return weights


# --------------------------------------------------------------------------- candidates


@dataclass(frozen=True, slots=True)
class Candidate:
    """A rule to try, and what it is when folds' choices are compared."""

    rule: ConsensusRule
    label: str
    """The kind of rule (``COUNTED``, ``WEIGHTED``, ``SCORED``, ``read off the spans``,
    ``follows JUDGE``, or the default's name): what the folds must agree on."""
    kind: Kind
    """``default`` (the panel's own rule), ``alone`` (follows one judge) or ``combining``."""


def _bare(default: ConsensusRule) -> ConsensusRule:
    return replace(default, weights={}, span_weights={}, verdict_fit=None, span_fit=None, name=None)


def _default_spans(data: CalibrationData, default: ConsensusRule) -> ConsensusRule:
    """The default's span rule on a bare base; its span weights written out, so that the
    verdict weights fitted later cannot change them (span weights fall back on ``weights``)."""
    span_weights = dict(default.span_weights)
    if default.spans.name == "weighted" and not span_weights:
        vector = default.span_weight_vector(data.judge_ids)
        span_weights = dict(zip(data.judge_ids, vector.tolist(), strict=True))
    return replace(
        _bare(default), spans=default.spans, span_weights=span_weights, span_fit=default.span_fit
    )


def span_candidates(
    data: CalibrationData, default: ConsensusRule, train: BoolArray
) -> list[Candidate]:
    """Span rules to try, the default's first, parameters fitted on the ``train`` items.

    The list has the same length and order for any ``train``: candidate ``c`` refitted on an
    inner fold is still candidate ``c``.
    """
    base = _bare(default)
    out = [Candidate(_default_spans(data, default), f"{default.spans} (default)", "default")]
    if not data.has_spans:
        return out
    span_ids = [j for j, s in zip(data.judge_ids, data.span_judge, strict=True) if s]
    n = len(span_ids)
    out.append(Candidate(replace(base, spans=RuleRef("spans", "majority")), COUNTED, "combining"))
    out += [
        Candidate(replace(base, spans=RuleRef("spans", "at_least", float(k))), COUNTED,
                  "combining")
        for k in range(1, n + 1)
    ]  # fmt: skip
    scope = (train & data.span_labelled)[data.char_item]
    votes = np.where(data.span_answered[:, data.char_item], data.covered.astype(float), np.nan)
    fit = _supervised_fit(votes, data.gold_chars, scope, data.judge_ids)
    fit = Reliability(
        {k: v for k, v in fit.sensitivity.items() if k in span_ids},
        {k: v for k, v in fit.specificity.items() if k in span_ids},
        fit.prevalence,
    )
    weights = _log_odds_weights(fit, span_ids)
    out += [
        Candidate(
            replace(base, spans=RuleRef("spans", "weighted", t), span_weights=weights),
            WEIGHTED,
            "combining",
        )
        for t in SHARES
    ]
    out += [
        Candidate(
            replace(base, spans=RuleRef("spans", "dawid_skene", t), span_fit=fit),
            WEIGHTED,
            "combining",
        )
        for t in (0.2, 0.3, 0.4, 0.5, 0.6)
    ]
    for judge_id in span_ids:
        alone = {j: (1.0 if j == judge_id else 0.0) for j in span_ids}
        rule = replace(base, spans=RuleRef("spans", "weighted", 0.5), span_weights=alone)
        out.append(Candidate(rule, f"follows {judge_id}", "alone"))
    return out


def verdict_candidates(
    data: CalibrationData, default: ConsensusRule, spans: ConsensusRule, train: BoolArray
) -> list[Candidate]:
    """Verdict rules to try over the span rule ``spans``, parameters fitted on ``train``.

    The first is the whole default rule (its own spans too): keeping it keeps the default's
    verdicts exactly, whatever span rule was chosen.
    """
    ids = data.judge_ids
    out = [Candidate(default, "default", "default")]

    def add(rule: ConsensusRule, label: str, kind: Kind = "combining") -> None:
        out.append(Candidate(rule, label, kind))

    add(replace(spans, verdict=RuleRef("verdict", "majority")), COUNTED)
    if data.has_spans:
        add(replace(spans, verdict=RuleRef("verdict", "spans")), "read off the spans")
    for k in range(1, len(ids) + 1):
        add(replace(spans, verdict=RuleRef("verdict", "at_least", float(k))), COUNTED)
    labelled = train & ~np.isnan(data.gold_verdict)
    fit = _supervised_fit(data.verdicts, data.gold_verdict > 0.5, labelled, ids)
    weights = _log_odds_weights(fit, ids)
    for t in SHARES:
        add(replace(spans, verdict=RuleRef("verdict", "weighted", t), weights=weights), WEIGHTED)
    for t in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7):
        add(replace(spans, verdict=RuleRef("verdict", "dawid_skene", t), verdict_fit=fit),
            WEIGHTED)  # fmt: skip
    if not data.span_judge.all():
        for reducer in ("mean", "median"):
            for t in SHARES:
                rule = replace(
                    spans, score=RuleRef("score", reducer), verdict=RuleRef("verdict", "score", t)
                )
                add(rule, SCORED)
    for judge_id in ids:
        alone = {j: (1.0 if j == judge_id else 0.0) for j in ids}
        rule = replace(spans, verdict=RuleRef("verdict", "weighted", 0.5), weights=alone)
        add(rule, f"follows {judge_id}", "alone")
    return out


# ------------------------------------------------------------------------------ choosing


@dataclass(frozen=True, slots=True)
class Choice:
    """What :func:`choose` keeps on some training items: a span and a verdict candidate."""

    spans: Candidate
    verdict: Candidate
    rule: ConsensusRule
    """The two put together (:func:`assemble`)."""

    @property
    def label(self) -> str:
        """The parts that differ from the default (``the default rule`` if none)."""
        parts = [
            f"{family} {c.label}"
            for family, c in (("spans", self.spans), ("verdict", self.verdict))
            if c.kind != "default"
        ]
        return " · ".join(parts) or "the default rule"

    @property
    def follows(self) -> str | None:
        """The judge whose verdict the rule follows alone, if it does."""
        v = self.verdict
        return v.label.removeprefix("follows ") if v.kind == "alone" else None


def assemble(default: ConsensusRule, spans: Candidate, verdict: Candidate) -> ConsensusRule:
    """One rule from a span candidate and a verdict candidate.

    The default verdict candidate stands for the default's verdict rule: over another span
    rule it is that rule applied there (for ``verdict: majority`` the default's verdicts
    exactly; for ``verdict: spans`` the verdicts of the new spans).
    """
    if verdict.kind == "default":
        if spans.kind == "default":
            return default
        return replace(
            spans.rule,
            score=default.score,
            verdict=default.verdict,
            weights=default.weights,
            verdict_fit=default.verdict_fit,
        )
    s = spans.rule
    return replace(verdict.rule, spans=s.spans, span_weights=s.span_weights, span_fit=s.span_fit)


def _inner_counts(
    data: CalibrationData,
    make: Callable[[BoolArray], list[Candidate]],
    count: Callable[[ConsensusRule], IntArray],
    train: BoolArray,
    inner_folds: int,
    seed: int,
) -> IntArray:
    """(c, m, 3) per-item counts of every candidate, each ``train`` item predicted by the
    candidate refitted without its inner fold (rows outside ``train``: zero)."""
    groups = data.groups[train]
    if inner_folds < 2 or len(set(map(str, groups))) < inner_folds:
        # Too few groups to hold any out: judged on the training items themselves.
        return np.stack([count(c.rule) * train[:, None] for c in make(train)])
    inner = np.full(data.n_items, -1, dtype=np.int64)
    inner[train] = grouped_folds(groups, inner_folds, seed)
    out: IntArray | None = None
    for k in range(inner_folds):
        held = inner == k
        candidates = make(train & ~held)
        if out is None:
            out = np.zeros((len(candidates), data.n_items, 3), dtype=np.int64)
        for c, candidate in enumerate(candidates):
            out[c, held] = count(candidate.rule)[held]
    assert out is not None
    return out


def _select(counts: IntArray, kinds: Sequence[Kind], groups: npt.NDArray[np.object_]) -> int:
    """The candidate to keep from (c, m, 3) counts over the training items.

    Only a candidate that beats the default (at 0) by ``MARGIN_SE`` standard errors may
    replace it; of those, the best by F1, except that a rule combining judges gives way to
    the best judge followed alone when that judge beats the default too and the combining
    rule does not beat it by as much (the simpler of two rules the items cannot tell apart).
    A combining rule that beats the default is kept even when no judge alone does: falling
    back on the default would keep a rule it beat beyond noise. Ties keep the earlier
    candidate, so the default wins them.
    """
    f1 = [float(v) for v in f1_of(counts.sum(axis=1))]

    def beats(challenger: int, incumbent: int) -> bool:
        return earns_its_keep(counts[challenger], counts[incumbent], groups)

    order = sorted(range(len(f1)), key=lambda c: (-f1[c], c))
    admissible = [c for c in order if c == 0 or (f1[c] > f1[0] and beats(c, 0))]
    best = admissible[0]
    if kinds[best] != "combining":
        return best
    alone = next((c for c in admissible if kinds[c] == "alone"), None)
    if alone is not None and not beats(best, alone):
        return alone
    return best


def _first_best(values: list[float]) -> int:
    best = 0
    for i, v in enumerate(values):
        if v > values[best] + 1e-12:
            best = i
    return best


def choose(
    data: CalibrationData,
    default: ConsensusRule,
    train: BoolArray,
    inner_folds: int = INNER_FOLDS,
    seed: int = 0,
) -> Choice:
    """The rule to keep, chosen on the ``train`` items alone (see the module docstring).

    The span rule is chosen first, on characters; the verdict rules are then tried over it,
    the chosen span rule refitted with them on each inner fold (a ``spans`` verdict judged
    with a span rule fitted on the held-out items would look better than it is).
    """
    groups = data.groups[train]
    spans_at = 0
    if data.has_spans and data.span_labelled[train].any():
        counts = _inner_counts(
            data,
            lambda t: span_candidates(data, default, t),
            lambda r: span_counts(data, predict_chars(data, r)),
            train,
            inner_folds,
            seed,
        )
        kinds = [c.kind for c in span_candidates(data, default, train)]
        spans_at = _select(counts[:, train], kinds, groups)
    spans = span_candidates(data, default, train)[spans_at]

    def verdicts_on(t: BoolArray) -> list[Candidate]:
        return verdict_candidates(
            data, default, span_candidates(data, default, t)[spans_at].rule, t
        )

    candidates = verdict_candidates(data, default, spans.rule, train)
    verdict_at = 0
    if (~np.isnan(data.gold_verdict[train])).any():
        counts = _inner_counts(
            data,
            verdicts_on,
            lambda r: verdict_counts(data, predict(data, r).verdict),
            train,
            inner_folds,
            seed,
        )
        verdict_at = _select(counts[:, train], [c.kind for c in candidates], groups)
    verdict = candidates[verdict_at]
    if verdict.kind == "default" and default.verdict.name == "spans":
        # The whole default won the verdicts, which it reads off its own spans: keeping its
        # verdicts keeps those spans.
        spans = span_candidates(data, default, train)[0]
    return Choice(spans, verdict, assemble(default, spans, verdict))


def fit_on(
    data: CalibrationData,
    default: ConsensusRule,
    train: BoolArray,
    inner_folds: int = INNER_FOLDS,
    seed: int = 0,
) -> ConsensusRule:
    """The rule :func:`choose` keeps on ``train``."""
    return choose(data, default, train, inner_folds, seed).rule


# ------------------------------------------------------------------------------ report


@dataclass(frozen=True, slots=True)
class PredictorResult:
    name: str
    kind: str
    """``calibrated`` (what is kept, out of fold), ``default`` (the panel's rule), ``folds``
    (the folds' own choices, out of fold, when they disagreed and were not kept) or ``judge``."""
    scored: Scored
    coverage: float | None = None
    """Judges only: the share of items it answered."""
    response_interval: tuple[float, float] | None = None
    """Bootstrap interval of the response F1 (sources resampled)."""
    span_interval: tuple[float, float] | None = None


@dataclass(frozen=True, slots=True)
class Difference:
    """The calibrated F1 minus another predictor's, with a paired bootstrap interval."""

    versus: str
    response: float
    response_interval: tuple[float, float]
    spans: float | None = None
    span_interval: tuple[float, float] | None = None


@dataclass(frozen=True)
class CalibrationResult:
    rule: ConsensusRule
    """What is stored and applied to new runs: the rule chosen on every item when every
    fold chose the same, else the default."""
    fold_rules: tuple[str, ...]
    """The rule each fold chose, with its fitted parameters."""
    results: tuple[PredictorResult, ...]
    folds: int
    n_items: int
    n_groups: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    fold_choices: tuple[str, ...] = ()
    """The kind of rule each fold chose (what must agree)."""
    choice_on_all: str = "the default rule"
    kept_default: bool = True
    """The stored rule is the panel's default."""
    differences: tuple[Difference, ...] = ()


class _Counts:
    """Per-item counts of predictions and the groups to resample them by."""

    def __init__(self, data: CalibrationData, seed: int) -> None:
        self.data, self.seed = data, seed
        self.verdict_items = ~np.isnan(data.gold_verdict)
        self.span_items = data.span_labelled
        self.spans = bool(data.span_labelled.any() and data.has_spans)

    def of(self, pred: Prediction) -> tuple[IntArray, IntArray | None]:
        verdicts = verdict_counts(self.data, pred.verdict)[self.verdict_items]
        if not self.spans:
            return verdicts, None
        return verdicts, span_counts(self.data, pred.chars)[self.span_items]

    def result(
        self, name: str, kind: str, pred: Prediction, coverage: float | None = None
    ) -> PredictorResult:
        verdicts, spans = self.of(pred)
        groups = self.data.groups
        return PredictorResult(
            name,
            kind,
            score(self.data, pred),
            coverage,
            f1_interval(verdicts, groups[self.verdict_items], self.seed),
            None if spans is None else f1_interval(spans, groups[self.span_items], self.seed),
        )

    def difference(self, versus: str, ours: Prediction, theirs: Prediction) -> Difference:
        (av, as_), (bv, bs) = self.of(ours), self.of(theirs)
        groups = self.data.groups
        response = float(f1_of(av.sum(axis=0)) - f1_of(bv.sum(axis=0)))
        interval = difference_interval(av, bv, groups[self.verdict_items], self.seed)
        if as_ is None or bs is None:
            return Difference(versus, response, interval)
        return Difference(
            versus,
            response,
            interval,
            float(f1_of(as_.sum(axis=0)) - f1_of(bs.sum(axis=0))),
            difference_interval(as_, bs, groups[self.span_items], self.seed),
        )


def _tally(choices: Sequence[str]) -> str:
    counts = Counter(choices)
    return "; ".join(
        f"{n} {'fold' if n == 1 else 'folds'}: {label}" for label, n in counts.most_common()
    )


def calibrate(
    data: CalibrationData,
    default: ConsensusRule,
    folds: int = 5,
    seed: int = 0,
    inner_folds: int = INNER_FOLDS,
) -> CalibrationResult:
    """Nested cross-validated rule choice that keeps the default's span rule, verdict rule
    or both unless every fold and the fit on all items replace it the same way; see the
    module docstring."""
    labelled = ~np.isnan(data.gold_verdict) | data.span_labelled
    if not labelled.any():
        raise ValueError("no item of this run has human labels: calibration needs them")
    default = default.resolve(bool(data.span_judge.all()))
    fold = grouped_folds(data.groups, folds, seed)
    tests = [fold == k for k in range(folds)]
    choices = [choose(data, default, ~test & labelled, inner_folds, seed) for test in tests]
    final = choose(data, default, labelled, inner_folds, seed)
    agreement = _Agreement.of(choices, final)
    default_spans = span_candidates(data, default, labelled)[0]
    default_verdict = verdict_candidates(data, default, default_spans.rule, labelled)[0]

    def kept(choice: Choice) -> ConsensusRule:
        return assemble(
            default,
            choice.spans if agreement.spans else default_spans,
            choice.verdict if agreement.verdict else default_verdict,
        )

    counts = _Counts(data, seed)
    default_pred = predict(data, default)
    kept_pred = _out_of_fold(data, tests, [kept(c) for c in choices])
    results = [
        counts.result("calibrated (out of fold)", "calibrated", kept_pred),
        counts.result("default rule", "default", default_pred),
    ]
    if not (agreement.spans and agreement.verdict):
        own = _out_of_fold(data, tests, [c.rule for c in choices])
        results.append(counts.result("the folds' own choices (not kept)", "folds", own))
    judge_preds = [judge_prediction(data, j) for j in range(len(data.judge_ids))]
    answered = data.answered
    for j, judge_id in enumerate(data.judge_ids):
        coverage = float(answered[j].mean()) if data.n_items else None
        results.append(counts.result(judge_id, "judge", judge_preds[j], coverage))
    rule = kept(final)
    return CalibrationResult(
        rule=rule,
        fold_rules=tuple(str(c.rule) for c in choices),
        results=tuple(results),
        folds=folds,
        n_items=data.n_items,
        n_groups=len(set(map(str, data.groups))),
        notes=tuple(_notes(default, choices, final, agreement)),
        fold_choices=tuple(c.label for c in choices),
        choice_on_all=final.label,
        kept_default=rule == default,
        differences=tuple(_differences(counts, results, kept_pred, default_pred, judge_preds)),
    )


@dataclass(frozen=True, slots=True)
class _Agreement:
    """Whether the folds and the fit on all items chose the same span and verdict rules."""

    spans: bool
    verdict: bool

    @classmethod
    def of(cls, choices: Sequence[Choice], final: Choice) -> _Agreement:
        spans = all(c.spans.label == final.spans.label for c in choices)
        verdict = all(c.verdict.label == final.verdict.label for c in choices)
        # A verdict read off the spans is only the same rule over the same span rule.
        reads_spans = final.verdict.rule.verdict.name == "spans"
        return cls(spans, verdict and (spans or not reads_spans))


def _out_of_fold(
    data: CalibrationData, tests: Sequence[BoolArray], rules: Sequence[ConsensusRule]
) -> Prediction:
    """Each fold's items predicted by its own rule."""
    verdict = np.zeros(data.n_items, dtype=bool)
    chars = np.zeros(data.char_item.shape, dtype=bool)
    for test, rule in zip(tests, rules, strict=True):
        pred = predict(data, rule)
        verdict[test] = pred.verdict[test]
        in_test = test[data.char_item]
        chars[in_test] = pred.chars[in_test]
    return Prediction(verdict, chars)


def _differences(
    counts: _Counts,
    results: Sequence[PredictorResult],
    kept: Prediction,
    default: Prediction,
    judges: Sequence[Prediction],
) -> list[Difference]:
    """The calibrated F1 minus the default's, and minus the best judge's (by response F1;
    the span difference is taken against the judge with the best span F1)."""
    out = [counts.difference("default rule", kept, default)]
    scored = [r for r in results if r.kind == "judge"]
    if not scored:
        return out
    by_response = max(range(len(scored)), key=lambda j: (scored[j].scored.response.f1, -j))
    by_spans = max(
        range(len(scored)),
        key=lambda j: (-1.0 if (s := scored[j].scored.spans) is None else s.f1, -j),
    )
    name = scored[by_response].name
    if by_spans != by_response and scored[by_spans].scored.spans is not None:
        name += f"; spans: {scored[by_spans].name}"
    response = counts.difference(name, kept, judges[by_response])
    spans = counts.difference(name, kept, judges[by_spans])
    out.append(replace(response, spans=spans.spans, span_interval=spans.span_interval))
    return out


def _notes(
    default: ConsensusRule, choices: Sequence[Choice], final: Choice, agreement: _Agreement
) -> list[str]:
    margin = f"{MARGIN_SE:g} bootstrap standard errors in the inner folds"
    notes: list[str] = []
    span_votes = [c.spans.label for c in choices]
    verdict_votes = [c.verdict.label for c in choices]
    if not agreement.spans:
        notes.append(
            f"the folds disagree on the span rule ({_tally(span_votes)}; all items: "
            f"{final.spans.label}): keeping the default's, {default.spans}"
        )
    if not agreement.verdict:
        notes.append(
            f"the folds disagree on the verdict rule ({_tally(verdict_votes)}; all items: "
            f"{final.verdict.label}): keeping the default's, {default.verdict}"
        )
    if notes:
        return notes
    if final.label == "the default rule":
        return [f"every fold kept the default rule: no other rule beat it by {margin}"]
    notes.append(f"every fold chose {final.label}, beating the default rule by {margin}")
    if final.follows is not None:
        notes.append(
            f"the verdict follows {final.follows} alone: no combining rule beat it by {margin}"
        )
    return notes
