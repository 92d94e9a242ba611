"""Choose a panel's consensus rule from human labels, judged by nested cross-validation.

``juryflow calibrate`` gives this module a labelled run's judgments
(:class:`~juryflow.maths.calibration.data.CalibrationData`). What decides is the
**out-of-fold score of the procedure**: on each outer fold (sources grouped), the rule is
chosen on the other folds alone and applied to the held-out one. That figure is compared
with the panel's default rule and with "follow the judge that is best on the training
folds", by the same paired bootstrap that resamples whole sources
(:mod:`juryflow.maths.group_bootstrap`), and printed beside every single judge.

How the procedure chooses on some training items (:func:`choose`), spans first, then
verdicts: every candidate of :mod:`juryflow.maths.calibration.candidates` (the default
first; counted votes with K chosen; reliability-weighted votes; Dawid–Skene refitted on
each run; consensus-score thresholds; stacking; the best subset of m judges; each judge
alone) is scored by an **inner** grouped cross-validation inside the training items, its
parameters refitted without each inner fold; the best inner-fold F1 is kept (ties keep the
earlier candidate: the default, then one judge alone, then the rules combining judges).

What is stored (:func:`calibrate`): three procedures scored on the same outer folds, the
default, the nested choice and "follow the judge best on the training folds", each give a
span part and a verdict part; every pairing of the two is scored out of fold (together: a
verdict read off new spans changes with them). Of the pairings not below the default on
either F1, the one with the best sum of response and span F1 is kept (ties keep the
default, then the nested choice), each part made again on **all** labelled items. Never
worse than the default is so measured out of fold. Choosing among out-of-fold figures is
itself a choice: the stored figure can carry that small optimism, which the paired
intervals beside it show. Folds that choose different rules are reported (a tally), never a
veto: two good rules picked by two folds are no evidence against calibrating. Whether the
gain over the default is beyond noise is said in a note.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from juryflow.maths.calibration.candidates import (
    ALONE,
    COUNTED,
    SCORED,
    SHARES,
    WEIGHTED,
    Candidate,
    echoes,
    span_candidates,
    verdict_candidates,
)
from juryflow.maths.calibration.data import (
    BoolArray,
    CalibrationData,
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
from juryflow.maths.reducers import ConsensusRule

__all__ = [
    "COUNTED",
    "MARGIN_SE",
    "SCORED",
    "SHARES",
    "WEIGHTED",
    "CalibrationData",
    "CalibrationResult",
    "Candidate",
    "Choice",
    "Difference",
    "Prediction",
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

INNER_FOLDS = 3


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
            stack=default.stack,
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


def _select(counts: IntArray, allowed: Sequence[bool] | None = None) -> int:
    """The candidate with the best F1 over the (c, m, 3) inner-fold counts of the training
    items; ties keep the earlier candidate, so the default (candidate 0) wins them.
    ``allowed`` narrows the choice (a leave-one-judge-out refits one family only).

    Plain argmax on purpose: the outer folds judge the whole procedure, so a bar inside it
    (a margin over the default, a preference for one judge alone) only trades one noise for
    another; measured on the dev panels it reached the best judge less often.
    """
    f1 = f1_of(counts.sum(axis=1))
    if allowed is not None:
        f1 = np.where(np.asarray(allowed, dtype=bool), f1, -1.0)
    return int(np.argmax(f1 >= f1.max() - 1e-12))


def choose(
    data: CalibrationData,
    default: ConsensusRule,
    train: BoolArray,
    inner_folds: int = INNER_FOLDS,
    seed: int = 0,
    families: tuple[str, str] | None = None,
) -> Choice:
    """The rule to keep, chosen on the ``train`` items alone (see the module docstring).

    The span rule is chosen first, on characters; the verdict rules are then tried over it,
    the chosen span rule refitted with them on each inner fold (a ``spans`` verdict judged
    with a span rule fitted on the held-out items would look better than it is).
    ``families`` (span family, verdict family) limits each choice to one family.
    """
    span_family, verdict_family = families if families is not None else (None, None)

    made: dict[bytes, list[Candidate]] = {}

    def span_list(t: BoolArray) -> list[Candidate]:
        # The verdicts' inner folds refit the span rule on the training sets the spans'
        # inner folds already fitted it on: fitted once each.
        key = np.packbits(t).tobytes()
        if key not in made:
            made[key] = span_candidates(data, default, t, span_family)
        return made[key]

    spans_at = 0
    if data.has_spans and data.span_labelled[train].any():
        listed = span_list(train)
        allowed = None if span_family is None else [c.kind != "default" for c in listed]
        if len(listed) > 1:
            counts = _inner_counts(
                data,
                span_list,
                lambda r: span_counts(data, predict_chars(data, r)),
                train,
                inner_folds,
                seed,
            )
            spans_at = _select(counts[:, train], allowed)
    spans = span_list(train)[spans_at]

    def verdicts_on(t: BoolArray) -> list[Candidate]:
        return verdict_candidates(data, default, span_list(t)[spans_at].rule, t, verdict_family)

    candidates = verdicts_on(train)
    verdict_at = 0
    allowed = None if verdict_family is None else [c.kind != "default" for c in candidates]
    if (~np.isnan(data.gold_verdict[train])).any() and len(candidates) > 1:
        counts = _inner_counts(
            data,
            verdicts_on,
            lambda r: verdict_counts(data, predict(data, r).verdict),
            train,
            inner_folds,
            seed,
        )
        verdict_at = _select(counts[:, train], allowed)
    verdict = candidates[verdict_at]
    if verdict.kind == "default" and default.verdict.name == "spans":
        # The whole default won the verdicts, which it reads off its own spans: keeping its
        # verdicts keeps those spans.
        spans = span_list(train)[0]
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
    """``calibrated`` (what is kept, out of fold), ``default`` (the panel's rule),
    ``procedure`` (the folds' own choices, out of fold, when a part of them was not kept),
    ``best judge, chosen in fold`` or ``judge``."""
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
    """What is stored and applied to new runs: the procedure's choice on all items for each
    part whose out-of-fold score beats the default's; the default's part otherwise."""
    fold_rules: tuple[str, ...]
    """The rule each fold chose, with its fitted parameters."""
    results: tuple[PredictorResult, ...]
    folds: int
    n_items: int
    n_groups: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    fold_choices: tuple[str, ...] = ()
    """What each fold chose, by family and parameters (reported, never a veto)."""
    choice_on_all: str = "the default rule"
    kept_default: bool = True
    """The stored rule is the panel's default."""
    differences: tuple[Difference, ...] = ()
    choice: Choice | None = None
    """The procedure's choice on all items (families of the kept parts: what a
    leave-one-judge-out refits)."""
    kept_parts: tuple[bool, bool] = (False, False)
    """Whether the span part and the verdict part differ from the default's."""
    kept: Choice | None = None
    """The stored rule's parts as candidates (families: what a leave-one-judge-out refits):
    the procedure's choice on all items, the best judge's or the default's, part by part."""
    echoes: tuple[str, ...] = ()
    """Judges whose every answer equals an earlier judge's: weighted 0 by fitted rules."""
    kept_prediction: Prediction | None = None
    """What the calibrated figures score: each fold's items by its kept rule."""


class Counts:
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

    def beats(self, ours: Prediction, theirs: Prediction, spans: bool) -> bool:
        """Does ``ours`` beat ``theirs`` beyond noise (``MARGIN_SE`` paired standard errors)?"""
        (av, as_), (bv, bs) = self.of(ours), self.of(theirs)
        if spans:
            if as_ is None or bs is None:
                return False
            return earns_its_keep(as_, bs, self.data.groups[self.span_items], self.seed)
        return earns_its_keep(av, bv, self.data.groups[self.verdict_items], self.seed)


def _tally(choices: Sequence[str]) -> str:
    counts = Counter(choices)
    return "; ".join(
        f"{n} {'fold' if n == 1 else 'folds'}: {label}" for label, n in counts.most_common()
    )


def out_of_fold(
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


def _f1s(data: CalibrationData, pred: Prediction) -> tuple[float, float | None]:
    scored = score(data, pred)
    return scored.response.f1, None if scored.spans is None else scored.spans.f1


DEFAULT_PART = "the default's"
PROCEDURE_PART = "the folds' choice"
BEST_PART = "the best judge's"
"""The three procedures each part of the stored rule comes from, in their tie order."""


def best_alone(data: CalibrationData, default: ConsensusRule, train: BoolArray) -> Choice:
    """Follow the judge with the best span F1 (spans) and the one with the best response F1
    (verdicts) on the ``train`` items, as candidates (the default's part where a judge
    cannot be followed)."""
    preds = [judge_prediction(data, j) for j in range(len(data.judge_ids))]
    scored = [score(data, p, train) for p in preds]
    muted = set(echoes(data))
    pool = [j for j, judge_id in enumerate(data.judge_ids) if judge_id not in muted]
    by_response = max(pool, key=lambda j: (scored[j].response.f1, -j))
    span_pool = [j for j in pool if data.span_judge[j]]
    spans_list = span_candidates(data, default, train, ALONE)
    spans = spans_list[0]
    if span_pool and data.has_spans:
        by_spans = max(
            span_pool, key=lambda j: (-1.0 if (s := scored[j].spans) is None else s.f1, -j)
        )
        spans = _labelled(spans_list, f"follows {data.judge_ids[by_spans]}")
    verdicts = verdict_candidates(data, default, spans.rule, train, ALONE)
    verdict = _labelled(verdicts, f"follows {data.judge_ids[by_response]}")
    return Choice(spans, verdict, assemble(default, spans, verdict))


def _labelled(candidates: Sequence[Candidate], label: str) -> Candidate:
    return next(c for c in candidates if c.label == label)


def _pick_parts(
    data: CalibrationData,
    default: ConsensusRule,
    tests: Sequence[BoolArray],
    per_fold: dict[str, list[Choice]],
    default_pred: Prediction,
    spans_scored: bool,
) -> tuple[str, str, Prediction]:
    """The span part and the verdict part to keep (names of ``per_fold``'s procedures) and
    their out-of-fold prediction.

    Every pairing of a procedure's span part with one's verdict part is scored out of fold
    (together: a verdict read off new spans, or verdict weights the span rule falls back on,
    tie the two). Admissible where neither F1 is below the default's; of those, the best sum
    of the F1s (response F1 alone without span labels); ties keep the earlier pairing.
    """
    combos = {
        (sp, vp): out_of_fold(
            data,
            tests,
            [
                assemble(default, s.spans, v.verdict)
                for s, v in zip(per_fold[sp], per_fold[vp], strict=True)
            ],
        )
        for sp in per_fold
        for vp in per_fold
    }
    f1s = {key: _f1s(data, pred) for key, pred in combos.items()}
    floor = _f1s(data, default_pred)

    def merit(key: tuple[str, str]) -> float:
        response, spans = f1s[key]
        if response < floor[0] - 1e-12 or (spans or 0.0) < (floor[1] or 0.0) - 1e-12:
            return -1.0
        return response + (spans or 0.0 if spans_scored else 0.0)

    top = max(merit(key) for key in combos)
    span_part, verdict_part = next(key for key in combos if merit(key) >= top - 1e-12)
    return span_part, verdict_part, combos[span_part, verdict_part]


def calibrate(
    data: CalibrationData,
    default: ConsensusRule,
    folds: int = 5,
    seed: int = 0,
    inner_folds: int = INNER_FOLDS,
) -> CalibrationResult:
    """Nested cross-validated rule choice, kept part by part where its out-of-fold score
    beats the default's; see the module docstring."""
    labelled = ~np.isnan(data.gold_verdict) | data.span_labelled
    if not labelled.any():
        raise ValueError("no item of this run has human labels: calibration needs them")
    default = default.resolve(bool(data.span_judge.all()))
    fold = grouped_folds(data.groups, folds, seed)
    tests = [fold == k for k in range(folds)]
    choices = [choose(data, default, ~test & labelled, inner_folds, seed) for test in tests]
    final = choose(data, default, labelled, inner_folds, seed)
    default_spans = span_candidates(data, default, labelled, "default")[0]
    default_verdict = verdict_candidates(data, default, default_spans.rule, labelled, "default")[0]

    counts = Counts(data, seed)
    default_pred = predict(data, default)
    own = out_of_fold(data, tests, [c.rule for c in choices])
    # Per fold, the three procedures' parts: the default's, the fold's own choice, and the
    # judge best on the fold's training items followed alone.
    whole_default = Choice(default_spans, default_verdict, default)
    per_fold = {
        DEFAULT_PART: [whole_default] * folds,
        PROCEDURE_PART: list(choices),
        BEST_PART: [best_alone(data, default, ~test & labelled) for test in tests],
    }
    span_part, verdict_part, kept_pred = _pick_parts(
        data, default, tests, per_fold, default_pred, counts.spans
    )
    best_on_all = best_alone(data, default, labelled)
    on_all = {
        DEFAULT_PART: whole_default,
        PROCEDURE_PART: final,
        BEST_PART: best_on_all,
    }
    kept_spans, kept_verdict = on_all[span_part].spans, on_all[verdict_part].verdict
    keep_spans, keep_verdict = span_part != DEFAULT_PART, verdict_part != DEFAULT_PART
    rule = assemble(default, kept_spans, kept_verdict)
    if keep_verdict and kept_verdict.refit_per_run:
        # Stored unfitted: every run it is applied to fits its own reliabilities.
        rule = replace(rule, verdict_fit=None)
    results = [
        counts.result("calibrated (out of fold)", "calibrated", kept_pred),
        counts.result("default rule", "default", default_pred),
    ]
    differs = (own.verdict != kept_pred.verdict).any() or (own.chars != kept_pred.chars).any()
    if differs:
        results.append(counts.result("the folds' own choices (not kept)", "procedure", own))
    judge_preds = [judge_prediction(data, j) for j in range(len(data.judge_ids))]
    trained_best = out_of_fold(data, tests, [c.rule for c in per_fold[BEST_PART]])
    results.append(
        counts.result("best judge, chosen on the training folds", "best in fold", trained_best)
    )
    answered = data.answered
    for j, judge_id in enumerate(data.judge_ids):
        coverage = float(answered[j].mean()) if data.n_items else None
        results.append(counts.result(judge_id, "judge", judge_preds[j], coverage))
    muted = echoes(data)
    return CalibrationResult(
        rule=rule,
        fold_rules=tuple(str(c.rule) for c in choices),
        results=tuple(results),
        folds=folds,
        n_items=data.n_items,
        n_groups=len(set(map(str, data.groups))),
        notes=tuple(
            _notes(
                default,
                choices,
                final,
                (span_part, verdict_part),
                best_on_all,
                counts,
                kept_pred,
                default_pred,
                muted,
            )
        ),
        fold_choices=tuple(c.label for c in choices),
        choice_on_all=final.label,
        kept_default=rule == default,
        differences=tuple(
            _differences(counts, results, kept_pred, default_pred, judge_preds, trained_best)
        ),
        choice=final,
        kept_parts=(keep_spans, keep_verdict),
        kept=Choice(kept_spans, kept_verdict, rule),
        echoes=muted,
        kept_prediction=kept_pred,
    )


def _differences(
    counts: Counts,
    results: Sequence[PredictorResult],
    kept: Prediction,
    default: Prediction,
    judges: Sequence[Prediction],
    trained_best: Prediction,
) -> list[Difference]:
    """The calibrated F1 minus the default's, minus the best judge's in hindsight (by
    response F1; the span difference against the judge with the best span F1), and minus
    the best judge chosen on the training folds."""
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
    out.append(counts.difference("best judge, chosen on the training folds", kept, trained_best))
    return out


def _notes(
    default: ConsensusRule,
    choices: Sequence[Choice],
    final: Choice,
    parts: tuple[str, str],
    best_on_all: Choice,
    counts: Counts,
    kept: Prediction,
    default_pred: Prediction,
    muted: Sequence[str],
) -> list[str]:
    notes: list[str] = []
    tally = _tally([c.label for c in choices])
    notes.append(f"the folds chose: {tally}; on all items: {final.label}")
    span_part, verdict_part = parts
    for what, part, tried, default_label, best in (
        ("span", span_part, counts.spans and any(c.spans.kind != "default" for c in choices),
         str(default.spans), best_on_all.spans.label),
        ("verdict", verdict_part, any(c.verdict.kind != "default" for c in choices),
         str(default.verdict), best_on_all.verdict.label),
    ):  # fmt: skip
        if part == BEST_PART:
            notes.append(
                f"following the training folds' best judge scored above the folds' {what} "
                f"rules and the default's out of fold: kept, {best} (chosen on all items)"
            )
        elif part == DEFAULT_PART and tried:
            notes.append(
                f"the folds' {what} rules scored no better than the default's out of fold: "
                f"keeping the default's, {default_label}"
            )
    if span_part != DEFAULT_PART or verdict_part != DEFAULT_PART:
        margin = f"{MARGIN_SE:g} paired bootstrap standard errors"
        scored = [("response", False)] + ([("span", True)] if counts.spans else [])
        for what, spans in scored:
            beyond = counts.beats(kept, default_pred, spans)
            notes.append(
                f"out of fold, the calibrated {what} F1 "
                + ("beats the default's by more than " if beyond else "is within ")
                + margin
                + ("" if beyond else " of the default's (kept: it is not below it)")
            )
    if muted:
        notes.append(
            f"{', '.join(muted)} answered exactly as an earlier judge on every item: weighted "
            "0 by every fitted rule (an echo adds no information)"
        )
    return notes
