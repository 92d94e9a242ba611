"""How accurate a judge (or the panel's consensus) is against human labels: pure numpy.

Two granularities, as RAGTruth and LettuceDetect report them:

- response level: is the response hallucinated, yes or no (:func:`response_prf`);
- span level: characters of predicted spans that overlap gold spans, summed over the whole
  data set before dividing (micro), :func:`span_prf`.

A 0/0 ratio is 0.0 throughout, as sklearn's ``zero_division=0``: a predictor that flags
nothing has precision 0, not an undefined one, so tables of many runs stay numeric.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from juryflow.maths.agreement import SpanList, micro_span_counts

__all__ = ["PRF", "response_prf", "span_prf"]


def _ratio(num: int, den: int) -> float:
    return num / den if den else 0.0


@dataclass(frozen=True, slots=True)
class PRF:
    """Precision, recall and F1 with the counts they came from (items or characters)."""

    precision: float
    recall: float
    f1: float
    tp: int
    fp: int
    fn: int

    @classmethod
    def from_counts(cls, tp: int, fp: int, fn: int) -> PRF:
        """Ratios from counts, 0/0 = 0.0.

        F1 as ``2 tp / (2 tp + fp + fn)``, which equals the harmonic mean of precision and
        recall whenever that is defined and is 0 (not 0/0) when tp = 0.

        >>> PRF.from_counts(tp=3, fp=1, fn=2)
        PRF(precision=0.75, recall=0.6, f1=0.6666666666666666, tp=3, fp=1, fn=2)
        >>> PRF.from_counts(0, 0, 0).f1
        0.0
        """
        return cls(
            precision=_ratio(tp, tp + fp),
            recall=_ratio(tp, tp + fn),
            f1=_ratio(2 * tp, 2 * tp + fp + fn),
            tp=int(tp),
            fp=int(fp),
            fn=int(fn),
        )


def response_prf(pred: npt.ArrayLike, gold: npt.ArrayLike) -> PRF:
    """Response-level P/R/F1 for "hallucinated" yes/no, positive class = hallucinated.

    Same numbers as ``sklearn.metrics.precision_recall_fscore_support(gold, pred,
    average="binary", zero_division=0)``.

    >>> response_prf([True, True, False, False], [True, False, True, False])
    PRF(precision=0.5, recall=0.5, f1=0.5, tp=1, fp=1, fn=1)
    """
    p = np.asarray(pred, dtype=bool).reshape(-1)
    g = np.asarray(gold, dtype=bool).reshape(-1)
    if p.shape != g.shape:
        raise ValueError(f"pred and gold differ in length: {p.size} vs {g.size}")
    return PRF.from_counts(
        tp=int((p & g).sum()),
        fp=int((p & ~g).sum()),
        fn=int((~p & g).sum()),
    )


def span_prf(
    pred_spans_per_item: Sequence[SpanList], gold_spans_per_item: Sequence[SpanList]
) -> PRF:
    """Character-level micro P/R/F1 over a data set, as in RAGTruth and LettuceDetect.

    ``tp`` = characters of predicted spans that lie in gold spans, ``fp`` = other predicted
    characters, ``fn`` = gold characters not predicted, each summed over all items; spans
    are half-open ``(start, end)`` offsets into the response, and overlapping spans within
    one item's set are merged first so that a character counts once.

    >>> span_prf([[(0, 5), (3, 8)], []], [[(6, 12)], [(0, 4)]])
    PRF(precision=0.25, recall=0.2, f1=0.2222222222222222, tp=2, fp=6, fn=8)
    """
    if len(pred_spans_per_item) != len(gold_spans_per_item):
        raise ValueError(
            f"{len(pred_spans_per_item)} predicted span lists for "
            f"{len(gold_spans_per_item)} gold ones; need one of each per item"
        )
    overlap, pred, gold = micro_span_counts(pred_spans_per_item, gold_spans_per_item)
    return PRF.from_counts(tp=overlap, fp=pred - overlap, fn=gold - overlap)
