"""Choose a panel's consensus rule from human labels, judged only on items it never saw.

``juryflow calibrate`` gives this module a labelled run's judgments; it searches the named
rules of :mod:`juryflow.maths.reducers` (verdict rule and threshold, span vote threshold, per-judge
weights) by k-fold cross-validation over items, folds grouped so that the responses of one
source never sit on both sides, and reports the **out-of-fold** P/R/F1 of the procedure
next to the panel's default rule and every single judge. Nothing is scored on the items it
was fitted on. The rule fitted on all items is what gets stored and applied to new runs.

Everything is vectorised over one flat axis of characters (all items' texts end to end), so
a candidate rule is a few array operations, never a loop over items. The evaluation
mirrors :func:`juryflow.maths.consensus.item_consensus` exactly: only answering judges vote,
ties are
not majorities, runs are snapped to whole words, items below the quorum predict nothing.

Accuracy is over **all** labelled items, RAGTruth style: a judge (or rule) that gave no
answer on an item counts as flagging nothing there.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from juryflow.maths.gold import PRF
from juryflow.maths.reducers import ConsensusRule, Reliability, RuleRef

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

SHARES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""Thresholds tried for weighted shares, consensus scores and posteriors."""


@dataclass(frozen=True)
class CalibrationData:
    """A labelled run, flattened for fast rule evaluation.

    ``n`` judges, ``m`` items, ``c`` characters (every item's judged text end to end).
    """

    judge_ids: tuple[str, ...]
    span_judge: BoolArray
    """(n,) the judge answers with spans."""
    verdicts: FloatArray
    """(n, m) each judge's own verdict, 0/1, NaN where it gave none."""
    scores: FloatArray
    """(n, m) scores, NaN where none."""
    covered: BoolArray
    """(n, c) characters each judge marked with a voting span (rows of score judges: False)."""
    span_answered: BoolArray
    """(n, m) the judge answered that item with spans."""
    char_item: IntArray
    """(c,) the item each character belongs to."""
    word_id: IntArray
    """(c,) index of the word a character is part of, -1 for non-word characters."""
    gold_verdict: FloatArray
    """(m,) 0/1, NaN without a human verdict."""
    gold_chars: BoolArray
    """(c,) characters inside human span labels."""
    span_labelled: BoolArray
    """(m,) the item has usable span labels."""
    groups: npt.NDArray[np.object_]
    """(m,) fold groups (a source id); items of one group share a fold."""
    quorum: int = 1

    @property
    def n_items(self) -> int:
        return int(self.verdicts.shape[1])

    @property
    def answered(self) -> BoolArray:
        return np.asarray(~np.isnan(self.verdicts))

    @property
    def has_spans(self) -> bool:
        return bool(self.span_judge.any())


def word_ids(text: str) -> IntArray:
    """The word each character belongs to (``-1``: not a word character), numbered from 0.

    >>> word_ids("ab, c").tolist()
    [0, 0, -1, -1, 1]
    """
    is_word = np.fromiter((c.isalnum() or c == "_" for c in text), dtype=bool, count=len(text))
    starts = is_word & ~np.r_[False, is_word[:-1]]
    ids = np.cumsum(starts) - 1
    return np.where(is_word, ids, -1).astype(np.int64)


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


# ------------------------------------------------------------------------- predictions


@dataclass(frozen=True)
class Prediction:
    """What one predictor says on every item and character."""

    verdict: BoolArray
    """(m,) hallucinated."""
    chars: BoolArray
    """(c,) marked characters (already word-snapped)."""


def snap(data: CalibrationData, flagged: BoolArray) -> BoolArray:
    """Widen marked characters to whole words, as the consensus snaps its runs."""
    words = data.word_id
    if not flagged.any():
        return flagged
    n_words = int(words.max()) + 1 if words.size else 0
    hit = np.zeros(n_words + 1, dtype=bool)
    hit[words[flagged & (words >= 0)]] = True
    return np.asarray(flagged | ((words >= 0) & hit[words]))


def _span_counts(data: CalibrationData, weights: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per character: weight of the judges marking it, weight of those that answered."""
    w = np.where(data.span_judge, weights, 0.0)
    marked = w @ data.covered.astype(np.float64)
    answering = (w[:, None] * data.span_answered).sum(axis=0)[data.char_item]
    return marked, answering


def span_flags(data: CalibrationData, rule: ConsensusRule, quorum_ok: BoolArray) -> BoolArray:
    """Characters ``rule``'s span reducer marks, snapped, on items that reach the quorum."""
    name, param = rule.spans.name, rule.spans.param
    ones = np.ones(len(data.judge_ids))
    if name in ("majority", "at_least", "union"):
        marked, answering = _span_counts(data, ones)
        if name == "majority":
            flagged = marked * 2 > answering
        else:
            flagged = marked >= (1 if name == "union" else int(param or 1))
    elif name == "weighted":
        marked, answering = _span_counts(data, rule.span_weight_vector(data.judge_ids))
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(answering > 0, marked / answering, 0.0)
        flagged = share > (0.5 if param is None else param) + 1e-12
    elif name == "dawid_skene":
        fit = rule.span_fit
        assert fit is not None
        votes = np.where(
            data.span_answered[:, data.char_item], data.covered.astype(np.float64), np.nan
        )
        votes[~data.span_judge] = np.nan
        posterior = 0.5 * (1 + np.tanh(0.5 * fit.log_odds(data.judge_ids, votes)))
        flagged = posterior > (0.5 if param is None else param)
    else:
        raise ValueError(f"no calibration evaluator for spans rule {name!r}")
    return snap(data, np.asarray(flagged & quorum_ok[data.char_item]))


def verdict_flags(
    data: CalibrationData, rule: ConsensusRule, chars: BoolArray, quorum_ok: BoolArray
) -> BoolArray:
    """Items ``rule``'s verdict rule calls hallucinated (NaN-free: no consensus is clean)."""
    answered = data.answered
    said = np.nan_to_num(data.verdicts, nan=0.0)
    name, param = rule.verdict.name, rule.verdict.param
    if name == "majority":
        out = said.sum(axis=0) * 2 > answered.sum(axis=0)
    elif name == "at_least":
        out = said.sum(axis=0) >= int(param or 1)
    elif name == "weighted":
        w = rule.weight_vector(data.judge_ids)[:, None]
        total = (w * answered).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(total > 0, (w * said).sum(axis=0) / total, 0.0)
        out = share > (0.5 if param is None else param) + 1e-12
    elif name == "score":
        out = consensus_scores(data, rule) >= (0.5 if param is None else param) - 1e-12
    elif name == "spans":
        out = np.bincount(data.char_item[chars], minlength=data.n_items) > 0
    elif name == "dawid_skene":
        assert rule.verdict_fit is not None
        posterior = 0.5 * (
            1 + np.tanh(0.5 * rule.verdict_fit.log_odds(data.judge_ids, data.verdicts))
        )
        out = posterior > (0.5 if param is None else param)
    else:
        raise ValueError(f"no calibration evaluator for verdict rule {name!r}")
    return np.asarray(out & quorum_ok)


def consensus_scores(data: CalibrationData, rule: ConsensusRule) -> FloatArray:
    """The rule's score reducer per item (NaN where nobody scored)."""
    s = data.scores
    # An item nobody scored is NaN on purpose; numpy would warn about the empty slice.
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if rule.score.name == "mean":
            w = rule.weight_vector(data.judge_ids)[:, None] * ~np.isnan(s)
            return np.asarray((np.nan_to_num(s) * w).sum(axis=0) / w.sum(axis=0))
        return np.asarray(np.nanmedian(s, axis=0))


def predict(data: CalibrationData, rule: ConsensusRule) -> Prediction:
    quorum_ok = data.answered.sum(axis=0) >= data.quorum
    chars = (
        span_flags(data, rule, quorum_ok)
        if data.has_spans
        else np.zeros(data.char_item.shape, dtype=bool)
    )
    return Prediction(verdict_flags(data, rule, chars, quorum_ok), chars)


def judge_prediction(data: CalibrationData, j: int) -> Prediction:
    """One judge alone; where it gave no answer it flags nothing."""
    verdict = np.nan_to_num(data.verdicts[j], nan=0.0) > 0.5
    return Prediction(np.asarray(verdict), np.asarray(data.covered[j]))


# ----------------------------------------------------------------------------- scoring


@dataclass(frozen=True)
class Scored:
    """Response and span P/R/F1 of a predictor over a set of items."""

    response: PRF
    spans: PRF | None


def score(data: CalibrationData, pred: Prediction, items: BoolArray | None = None) -> Scored:
    items = np.ones(data.n_items, dtype=bool) if items is None else items
    tp, fp, fn = (int(v) for v in _verdict_counts_per_item(data, pred.verdict)[items].sum(axis=0))
    response = PRF.from_counts(tp=tp, fp=fp, fn=fn)
    spans = None
    if data.span_labelled.any() and data.has_spans and pred.chars.size:
        tp, fp, fn = (int(v) for v in _span_counts_per_item(data, pred.chars)[items].sum(axis=0))
        spans = PRF.from_counts(tp=tp, fp=fp, fn=fn)
    return Scored(response, spans)


# --------------------------------------------------------------------------- candidates


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


def span_candidates(
    data: CalibrationData, base: ConsensusRule, train: BoolArray
) -> list[ConsensusRule]:
    """Span rules to try, parameters fitted on the ``train`` items."""
    span_ids = [j for j, s in zip(data.judge_ids, data.span_judge, strict=True) if s]
    n = len(span_ids)
    rules = [replace(base, spans=RuleRef("spans", "majority"))]
    rules += [replace(base, spans=RuleRef("spans", "at_least", float(k))) for k in range(1, n + 1)]
    scope = (train & data.span_labelled)[data.char_item]
    votes = np.where(data.span_answered[:, data.char_item], data.covered.astype(float), np.nan)
    fit = _supervised_fit(votes, data.gold_chars, scope, data.judge_ids)
    fit = Reliability(
        {k: v for k, v in fit.sensitivity.items() if k in span_ids},
        {k: v for k, v in fit.specificity.items() if k in span_ids},
        fit.prevalence,
    )
    weights = _log_odds_weights(fit, span_ids)
    rules += [
        replace(base, spans=RuleRef("spans", "weighted", t), span_weights=weights) for t in SHARES
    ]
    rules += [
        replace(base, spans=RuleRef("spans", "dawid_skene", t), span_fit=fit)
        for t in (0.2, 0.3, 0.4, 0.5, 0.6)
    ]
    for judge_id in span_ids:
        alone = {j: (1.0 if j == judge_id else 0.0) for j in span_ids}
        rules.append(replace(base, spans=RuleRef("spans", "weighted", 0.5), span_weights=alone))
    return rules


def verdict_candidates(
    data: CalibrationData, base: ConsensusRule, train: BoolArray
) -> list[ConsensusRule]:
    """Verdict rules to try, parameters fitted on the ``train`` items."""
    n = len(data.judge_ids)
    ids = data.judge_ids
    rules = [replace(base, verdict=RuleRef("verdict", "majority"))]
    if data.has_spans:
        rules.append(replace(base, verdict=RuleRef("verdict", "spans")))
    rules += [
        replace(base, verdict=RuleRef("verdict", "at_least", float(k))) for k in range(1, n + 1)
    ]
    labelled = train & ~np.isnan(data.gold_verdict)
    fit = _supervised_fit(data.verdicts, data.gold_verdict > 0.5, labelled, ids)
    weights = _log_odds_weights(fit, ids)
    rules += [
        replace(base, verdict=RuleRef("verdict", "weighted", t), weights=weights) for t in SHARES
    ]
    rules += [
        replace(base, verdict=RuleRef("verdict", "dawid_skene", t), verdict_fit=fit)
        for t in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
    ]
    if not data.span_judge.all():
        for reducer in ("mean", "median"):
            rules += [
                replace(
                    base,
                    score=RuleRef("score", reducer),
                    verdict=RuleRef("verdict", "score", t),
                )
                for t in SHARES
            ]
    for judge_id in ids:
        alone = {j: (1.0 if j == judge_id else 0.0) for j in ids}
        rules.append(replace(base, verdict=RuleRef("verdict", "weighted", 0.5), weights=alone))
    return rules


def fit_on(
    data: CalibrationData, base: ConsensusRule, train: BoolArray, inner_folds: int = 3
) -> ConsensusRule:
    """The rule that does best on ``train``: span rule by span F1, then verdict by F1.

    Span rules are judged on the training characters themselves (thousands of them make a
    stable estimate). Verdicts rest on a few dozen items, where the best training F1 is
    mostly luck, so each verdict candidate is judged by an inner grouped cross-validation
    inside ``train`` (its parameters refitted on each inner fold), and the winner is refitted
    on all of ``train``.

    A combining verdict rule must *earn its keep*: it replaces the best single judge
    (following that judge alone is always a candidate) only when its inner-CV advantage on
    ``train`` exceeds ``MARGIN_SE`` bootstrap standard errors (groups resampled, see
    :func:`earns_its_keep`). A panel whose best judge is already about as good as the
    evidence allows then follows that judge instead of a rule that won by luck.
    """
    rule = _fit_spans(data, base, train)
    candidates = verdict_candidates(data, rule, train)
    groups = data.groups[train]
    if inner_folds < 2 or len(set(map(str, groups))) < inner_folds:
        said = np.stack([predict(data, r).verdict for r in candidates])
    else:
        inner = np.full(data.n_items, -1, dtype=np.int64)
        inner[train] = grouped_folds(groups, inner_folds, seed=len(candidates))
        said = np.zeros((len(candidates), data.n_items), dtype=bool)
        for k in range(inner_folds):
            held = inner == k
            # The span rule is refitted too: a "spans" verdict judged with a span rule
            # fitted on the held-out items would look better than it is.
            inner_rule = _fit_spans(data, base, train & ~held)
            for c, rule_k in enumerate(verdict_candidates(data, inner_rule, train & ~held)):
                said[c, held] = predict(data, rule_k).verdict[held]
    counts = np.stack([_verdict_counts_per_item(data, s) for s in said])
    return candidates[_select(counts, _alone(candidates, "verdict"), data, train)]


def _fit_spans(data: CalibrationData, base: ConsensusRule, train: BoolArray) -> ConsensusRule:
    """``base`` with the span rule that does best on the training characters."""
    if not (data.has_spans and data.span_labelled[train].any()):
        return base
    spans = span_candidates(data, base, train)
    counts = np.stack([_span_counts_per_item(data, predict(data, r).chars) for r in spans])
    # Span rules are chosen on thousands of training characters, and combining rules win
    # there by wide margins; the judge-alone fallback is for the few-dozen-item verdicts.
    return spans[_select(counts, [], data, train)]


def _alone(rules: Sequence[ConsensusRule], family: str) -> list[int]:
    """Indices of the candidates that follow one judge alone (weight 1 on it, 0 elsewhere)."""
    out = []
    for c, rule in enumerate(rules):
        weights = rule.span_weights if family == "spans" else rule.weights
        ref = rule.spans if family == "spans" else rule.verdict
        if ref.name == "weighted" and sum(1 for w in weights.values() if w) == 1:
            out.append(c)
    return out


def _verdict_counts_per_item(data: CalibrationData, said: BoolArray) -> IntArray:
    """(m, 3) per item: true positive, false positive, false negative (0/1 each)."""
    labelled = ~np.isnan(data.gold_verdict)
    gold = data.gold_verdict > 0.5
    return np.stack(
        [said & gold & labelled, said & ~gold & labelled, ~said & gold & labelled], axis=1
    ).astype(np.int64)


def _span_counts_per_item(data: CalibrationData, chars: BoolArray) -> IntArray:
    """(m, 3) per item: overlapping, predicted-only and gold-only characters."""
    in_scope = data.span_labelled[data.char_item]
    p, g = chars & in_scope, data.gold_chars & in_scope
    m = data.n_items
    return np.stack(
        [
            np.bincount(data.char_item[p & g], minlength=m),
            np.bincount(data.char_item[p & ~g], minlength=m),
            np.bincount(data.char_item[~p & g], minlength=m),
        ],
        axis=1,
    ).astype(np.int64)


def _f1_of(counts: FloatArray) -> FloatArray:
    """F1 from (..., 3) summed counts; 0 where nothing was predicted or labelled."""
    tp, fp, fn = counts[..., 0], counts[..., 1], counts[..., 2]
    denominator = 2 * tp + fp + fn
    return np.asarray(np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 0.0))


BOOTSTRAP_SAMPLES = 400
MARGIN_SE = 2.0
"""A combining verdict rule must beat the best judge alone by this many bootstrap standard
errors (about a one-sided 97.5 % test): at one, across five folds some rule that won by luck
on a few dozen items slips through most of the time."""


def earns_its_keep(
    challenger: IntArray,
    incumbent: IntArray,
    groups: npt.NDArray[np.object_],
    seed: int = 0,
) -> bool:
    """Does ``challenger`` beat ``incumbent`` on F1 by more than ``MARGIN_SE`` standard errors?

    ``challenger`` and ``incumbent`` are (m, 3) per-item (tp, fp, fn) counts over the same
    items; the standard error of the F1 difference comes from a paired bootstrap that
    resamples whole groups (items of one source are not independent).

    >>> one = np.array([[1, 0, 0]] * 20)
    >>> miss = np.array([[0, 0, 1]] * 20)
    >>> groups = np.array([str(i) for i in range(20)], dtype=object)
    >>> earns_its_keep(one, miss, groups), earns_its_keep(one, one, groups)
    (True, False)
    """
    _, group_index = np.unique(np.asarray([str(g) for g in groups]), return_inverse=True)
    n_groups = int(group_index.max()) + 1 if group_index.size else 0
    if n_groups < 2:
        return False
    ours, theirs = challenger.astype(np.float64), incumbent.astype(np.float64)
    observed = float(_f1_of(ours.sum(axis=0)) - _f1_of(theirs.sum(axis=0)))
    if observed <= 0:
        return False
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n_groups, np.full(n_groups, 1 / n_groups), size=BOOTSTRAP_SAMPLES)
    weights = draws[:, group_index].astype(np.float64)  # (B, m) item weights
    boot = _f1_of(np.einsum("bm,mk->bk", weights, ours)) - _f1_of(
        np.einsum("bm,mk->bk", weights, theirs)
    )
    return observed > MARGIN_SE * float(np.std(boot))


def _select(counts: IntArray, alone: Sequence[int], data: CalibrationData, train: BoolArray) -> int:
    """The best candidate on ``train`` by F1 of its (c, m, 3) counts, unless it is a
    combining rule that does not beat the best judge-alone candidate by ``MARGIN_SE``
    standard errors (then that judge). Ties keep the earlier, simpler candidate."""
    use = counts[:, train]
    f1 = [float(v) for v in _f1_of(use.sum(axis=1).astype(np.float64))]
    best = _first_best(f1)
    if not alone or best in alone:
        return best
    best_alone = max(alone, key=lambda c: (f1[c], -c))
    if earns_its_keep(use[best], use[best_alone], data.groups[train]):
        return best
    return best_alone


def _first_best(values: list[float]) -> int:
    best = 0
    for i, v in enumerate(values):
        if v > values[best] + 1e-12:
            best = i
    return best


# ------------------------------------------------------------------------------ report


@dataclass(frozen=True)
class PredictorResult:
    name: str
    kind: str
    """``calibrated`` (out of fold), ``default`` (the panel's rule) or ``judge``."""
    scored: Scored
    coverage: float | None = None
    """Judges only: the share of items it answered."""


@dataclass(frozen=True)
class CalibrationResult:
    rule: ConsensusRule
    """Fitted on every item: what is stored and applied to new runs."""
    fold_rules: tuple[str, ...]
    """The rule each fold chose (how stable the choice is)."""
    results: tuple[PredictorResult, ...]
    folds: int
    n_items: int
    n_groups: int
    notes: tuple[str, ...] = field(default_factory=tuple)


def calibrate(
    data: CalibrationData,
    default: ConsensusRule,
    folds: int = 5,
    seed: int = 0,
) -> CalibrationResult:
    """Cross-validated rule choice; see the module docstring."""
    labelled = ~np.isnan(data.gold_verdict) | data.span_labelled
    if not labelled.any():
        raise ValueError("no item of this run has human labels: calibration needs them")
    default = default.resolve(bool(data.span_judge.all()))
    fold = grouped_folds(data.groups, folds, seed)
    oof_verdict = np.zeros(data.n_items, dtype=bool)
    oof_chars = np.zeros(data.char_item.shape, dtype=bool)
    chosen: list[str] = []
    base = replace(default, weights={}, span_weights={}, verdict_fit=None, span_fit=None, name=None)
    for k in range(folds):
        test = fold == k
        rule = fit_on(data, base, ~test & labelled)
        chosen.append(str(rule))
        pred = predict(data, rule)
        oof_verdict[test] = pred.verdict[test]
        in_test = test[data.char_item]
        oof_chars[in_test] = pred.chars[in_test]
    results = [
        PredictorResult(
            "calibrated (out of fold)",
            "calibrated",
            score(data, Prediction(oof_verdict, oof_chars)),
        ),
        PredictorResult("default rule", "default", score(data, predict(data, default))),
    ]
    answered = data.answered
    for j, judge_id in enumerate(data.judge_ids):
        results.append(
            PredictorResult(
                judge_id,
                "judge",
                score(data, judge_prediction(data, j)),
                coverage=float(answered[j].mean()) if data.n_items else None,
            )
        )
    final = fit_on(data, base, labelled)
    notes: list[str] = []
    follows = _alone([final], "verdict")
    if follows:
        judge = next(j for j, w in final.weights.items() if w)
        notes.append(
            f"the verdict follows {judge} alone: no combining rule beat it by "
            f"{MARGIN_SE:g} standard errors on these items"
        )
    if len(set(chosen)) > 1:
        notes.append(f"the folds chose {len(set(chosen))} different rules: the choice is unstable")
    return CalibrationResult(
        rule=final,
        fold_rules=tuple(chosen),
        results=tuple(results),
        folds=folds,
        n_items=data.n_items,
        n_groups=len(set(map(str, data.groups))),
        notes=tuple(notes),
    )
