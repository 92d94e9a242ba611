"""A labelled run flattened onto one character axis, and what a consensus rule predicts on it.

:mod:`juryflow.maths.calibration.procedure` chooses rules; this module holds what it
chooses them on:
:class:`CalibrationData` (judges' verdicts, scores and marked characters with the human
labels), :func:`predict` (a rule's verdicts and characters, vectorised), and the per-item
counts the F1 of a verdict or a span prediction sums over.

Everything is vectorised over one flat axis of characters (all items' texts end to end), so
a candidate rule is a few array operations, never a loop over items. The evaluation
mirrors :func:`juryflow.maths.consensus.item_consensus` exactly: only answering judges vote,
ties are not majorities, runs are snapped to whole words, items below the quorum predict
nothing.

Accuracy is over **all** labelled items, RAGTruth style: a judge (or rule) that gave no
answer on an item counts as flagging nothing there.
"""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from juryflow.maths.gold import PRF
from juryflow.maths.reducers import ConsensusRule

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


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


_CACHES: dict[int, tuple[weakref.ref[CalibrationData], dict[object, Any]]] = {}


def _cache(data: CalibrationData) -> dict[object, Any]:
    """What has been computed on ``data`` (kept beside it, not in it: the records are
    rebuilt from their fields); dropped with ``data``. A calibration scores hundreds of
    candidates over the same characters, most of them sharing their judges' weights."""
    key = id(data)
    entry = _CACHES.get(key)
    if entry is None or entry[0]() is not data:
        ref = weakref.ref(data, lambda _ref, key=key: _CACHES.pop(key, None))  # type: ignore[misc]
        entry = (ref, {})
        _CACHES[key] = entry
    return entry[1]


def _marking_weights(data: CalibrationData, weights: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per character: weight of the judges marking it, weight of those that answered."""
    w = np.where(data.span_judge, weights, 0.0)
    cache = _cache(data)
    key = ("marking", w.tobytes())
    if key not in cache:
        if "covered" not in cache:
            cache["covered"] = data.covered.astype(np.float64)
        marked = w @ cache["covered"]
        answering = (w[:, None] * data.span_answered).sum(axis=0)[data.char_item]
        cache[key] = (marked, answering)
    found: tuple[FloatArray, FloatArray] = cache[key]
    return found


def char_votes(data: CalibrationData) -> FloatArray:
    """(n, c) each span judge's vote on each character: 1 marked, 0 not, NaN no span answer
    on that character's item (score judges: NaN)."""
    cache = _cache(data)
    if "votes" not in cache:
        votes = np.where(
            data.span_answered[:, data.char_item], data.covered.astype(np.float64), np.nan
        )
        votes[~data.span_judge] = np.nan
        cache["votes"] = votes
    found: FloatArray = cache["votes"]
    return found


def span_flags(data: CalibrationData, rule: ConsensusRule, quorum_ok: BoolArray) -> BoolArray:
    """Characters ``rule``'s span reducer marks, snapped, on items that reach the quorum."""
    name, param = rule.spans.name, rule.spans.param
    # A judge weighted 0 takes no part in a counted vote either (how a calibration leaves
    # one out); union counts everyone.
    voting = (rule.span_weight_vector(data.judge_ids) > 0).astype(np.float64)
    if name in ("majority", "at_least", "union"):
        marked, answering = _marking_weights(
            data, np.ones(len(data.judge_ids)) if name == "union" else voting
        )
        if name == "majority":
            flagged = marked * 2 > answering
        else:
            flagged = marked >= (1 if name == "union" else int(param or 1))
    elif name == "weighted":
        marked, answering = _marking_weights(data, rule.span_weight_vector(data.judge_ids))
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(answering > 0, marked / answering, 0.0)
        flagged = share > (0.5 if param is None else param) + 1e-12
    elif name == "dawid_skene":
        fit = rule.span_fit
        assert fit is not None
        posterior = 0.5 * (1 + np.tanh(0.5 * fit.log_odds(data.judge_ids, char_votes(data))))
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
    voting = (rule.weight_vector(data.judge_ids) > 0)[:, None]
    if name == "majority":
        out = (said * voting).sum(axis=0) * 2 > (answered & voting).sum(axis=0)
    elif name == "at_least":
        out = (said * voting).sum(axis=0) >= int(param or 1)
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
    elif name == "stacked":
        assert rule.stack is not None
        out = stacked_probability(data, rule) > (0.5 if param is None else param) + 1e-12
    else:
        raise ValueError(f"no calibration evaluator for verdict rule {name!r}")
    return np.asarray(out & quorum_ok)


def stacked_probability(data: CalibrationData, rule: ConsensusRule) -> FloatArray:
    """The ``stacked`` rule's probability of "flagged" per item."""
    assert rule.stack is not None
    log_odds = rule.stack.log_odds(data.judge_ids, data.verdicts, data.scores)
    return np.asarray(0.5 * (1 + np.tanh(0.5 * log_odds)))


def consensus_scores(data: CalibrationData, rule: ConsensusRule) -> FloatArray:
    """The rule's score reducer per item (NaN where nobody scored)."""
    s = data.scores
    # An item nobody scored is NaN on purpose; numpy would warn about the empty slice.
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if rule.score.name == "mean":
            w = rule.weight_vector(data.judge_ids)[:, None] * ~np.isnan(s)
            return np.asarray((np.nan_to_num(s) * w).sum(axis=0) / w.sum(axis=0))
        voting = rule.weight_vector(data.judge_ids) > 0
        return np.asarray(np.nanmedian(np.where(voting[:, None], s, np.nan), axis=0))


def predict(data: CalibrationData, rule: ConsensusRule) -> Prediction:
    quorum_ok = data.answered.sum(axis=0) >= data.quorum
    chars = predict_chars(data, rule, quorum_ok)
    return Prediction(verdict_flags(data, rule, chars, quorum_ok), chars)


def predict_chars(
    data: CalibrationData, rule: ConsensusRule, quorum_ok: BoolArray | None = None
) -> BoolArray:
    """The characters ``rule`` marks (no verdicts: what choosing a span rule needs)."""
    if not data.has_spans:
        return np.zeros(data.char_item.shape, dtype=bool)
    if quorum_ok is None:
        quorum_ok = data.answered.sum(axis=0) >= data.quorum
    return span_flags(data, rule, quorum_ok)


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
    tp, fp, fn = (int(v) for v in verdict_counts(data, pred.verdict)[items].sum(axis=0))
    response = PRF.from_counts(tp=tp, fp=fp, fn=fn)
    spans = None
    if data.span_labelled.any() and data.has_spans and pred.chars.size:
        tp, fp, fn = (int(v) for v in span_counts(data, pred.chars)[items].sum(axis=0))
        spans = PRF.from_counts(tp=tp, fp=fp, fn=fn)
    return Scored(response, spans)


def verdict_counts(data: CalibrationData, said: BoolArray) -> IntArray:
    """(m, 3) per item: true positive, false positive, false negative (0/1 each)."""
    labelled = ~np.isnan(data.gold_verdict)
    gold = data.gold_verdict > 0.5
    return np.stack(
        [said & gold & labelled, said & ~gold & labelled, ~said & gold & labelled], axis=1
    ).astype(np.int64)


def span_counts(data: CalibrationData, chars: BoolArray) -> IntArray:
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
