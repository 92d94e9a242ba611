"""Fit the run-level parts of a consensus rule: judge reliabilities estimated over a run.

A ``dawid_skene`` verdict or span rule weighs each judge by how often it is right, which no
single item can tell; it is estimated here over all of a run's judgments (without labels,
by EM: :func:`juryflow.maths.reliability.dawid_skene`) and stored in the rule as a
:class:`~juryflow.maths.reducers.Reliability`, so applying the rule to an item stays per item.

Pure: judgments and texts in, a rule out; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from juryflow.maths.consensus import coverage
from juryflow.maths.records import Judgment
from juryflow.maths.reducers import PREFERENCE_CLASS, ConsensusRule, PreferenceFit, Reliability

FloatArray = npt.NDArray[np.float64]


def verdict_matrix(
    judgments_by_item: Mapping[str, Sequence[Judgment]], judge_ids: Sequence[str]
) -> FloatArray:
    """``(n_judges, n_items)`` 0/1 verdicts, NaN where a judge gave none.

    >>> from juryflow.maths.records import Judgment
    >>> by_item = {"i": [Judgment("i", "a", "score", 0.9)], "k": []}
    >>> verdict_matrix(by_item, ["a", "b"]).tolist()
    [[1.0, nan], [nan, nan]]
    """
    row = {judge_id: j for j, judge_id in enumerate(judge_ids)}
    out = np.full((len(judge_ids), len(judgments_by_item)), np.nan)
    for i, judgments in enumerate(judgments_by_item.values()):
        for judgment in judgments:
            if judgment.verdict is not None and judgment.judge_id in row:
                out[row[judgment.judge_id], i] = float(judgment.verdict)
    return out


def character_patterns(
    judgments_by_item: Mapping[str, Sequence[Judgment]],
    texts: Mapping[str, str],
    judge_ids: Sequence[str],
) -> tuple[FloatArray, FloatArray]:
    """Every character's vote pattern over the span judges, collapsed to unique patterns.

    Returns ``(patterns, counts)``: ``patterns`` is ``(n_judges, n_patterns)`` of 0/1/NaN
    (NaN: the judge gave no span answer on that character's item), ``counts`` how many
    characters share each pattern. A run of 100,000 items × 1,500 characters collapses to
    at most ``3 ** n_judges`` patterns, so per-character Dawid–Skene costs what a few
    thousand units would.

    >>> from juryflow.maths.records import Judgment, Span
    >>> j = Judgment("i", "a", "spans", 1.0, spans=(Span(0, 2, "ab", "exact"),))
    >>> patterns, counts = character_patterns({"i": [j]}, {"i": "abcd"}, ["a", "b"])
    >>> patterns.tolist(), counts.tolist()
    ([[0.0, 1.0], [nan, nan]], [2.0, 2.0])
    """
    from juryflow.maths.consensus import _offsets

    n = len(judge_ids)
    row = {judge_id: j for j, judge_id in enumerate(judge_ids)}
    # A pattern is coded in base 3 per judge: 0 clean, 1 marked, 2 no answer.
    weights = 3 ** np.arange(n, dtype=np.int64)
    totals: dict[int, int] = {}
    for item_id, judgments in judgments_by_item.items():
        length = len(texts.get(item_id, ""))
        if length == 0:
            continue
        answering = [
            j for j in judgments if j.score is not None and j.output_kind == "spans"
            and j.judge_id in row
        ]  # fmt: skip
        if not answering:
            continue
        codes = np.full((n, length), 2, dtype=np.int64)
        marked = coverage([_offsets(j) for j in answering], length)
        for k, judgment in enumerate(answering):
            codes[row[judgment.judge_id]] = marked[k]
        keys, counts = np.unique(weights @ codes, return_counts=True)
        for key, count in zip(keys.tolist(), counts.tolist(), strict=True):
            totals[key] = totals.get(key, 0) + count
    keys = np.asarray(sorted(totals), dtype=np.int64)
    digits = (keys[None, :] // weights[:, None]) % 3
    patterns = np.where(digits == 2, np.nan, digits.astype(np.float64))
    counts = np.asarray([totals[k] for k in keys.tolist()], dtype=np.float64)
    return patterns, counts


def preference_fit(
    judgments_by_item: Mapping[str, Sequence[Judgment]], judge_ids: Sequence[str]
) -> PreferenceFit | None:
    """Three-class Dawid–Skene over a pairwise run's item verdicts; None with none to fit.

    A judgment unscored as ``inconsistent`` (its two orders disagreed) abstains, as it does
    in the plurality.

    >>> from juryflow.maths.records import Judgment
    >>> by_item = {f"i{k}": [Judgment(f"i{k}", j, "preference", k % 2 * 1.0)
    ...            for j in "abc"] for k in range(6)}
    >>> fit = preference_fit(by_item, ["a", "b", "c"])
    >>> [round(p, 2) for p in fit.prior]
    [0.43, 0.43, 0.14]
    """
    from juryflow.maths.pairwise.records import MISSING
    from juryflow.maths.pairwise.rules import dawid_skene

    row = {judge_id: j for j, judge_id in enumerate(judge_ids)}
    codes = np.full((len(judge_ids), len(judgments_by_item)), MISSING, dtype=np.int8)
    for i, judgments in enumerate(judgments_by_item.values()):
        for judgment in judgments:
            said = None if judgment.score is None else PREFERENCE_CLASS.get(judgment.score)
            if said is not None and judgment.judge_id in row:
                codes[row[judgment.judge_id], i] = said
    if not (codes != MISSING).any():
        return None
    fit = dawid_skene(codes)
    if fit.confusion is None or fit.prior is None:
        return None
    return PreferenceFit(
        confusion={
            judge_id: tuple(tuple(float(p) for p in r) for r in fit.confusion[j].tolist())
            for judge_id, j in row.items()
        },
        prior=tuple(float(p) for p in fit.prior.tolist()),
    )


def _reliability(
    votes: FloatArray, judge_ids: Sequence[str], counts: FloatArray | None = None
) -> Reliability | None:
    from juryflow.maths.reliability import (
        dawid_skene,  # scipy-free EM, imported when a rule needs it
    )

    if votes.shape[1] == 0:
        return None
    fit = dawid_skene(votes, counts=counts)
    sensitivity = {
        j: float(s) for j, s in zip(judge_ids, fit.sensitivity, strict=True) if np.isfinite(s)
    }
    specificity = {
        j: float(s) for j, s in zip(judge_ids, fit.specificity, strict=True) if np.isfinite(s)
    }
    return Reliability(sensitivity, specificity, float(fit.prevalence))


def fit_rule(
    rule: ConsensusRule,
    judgments_by_item: Mapping[str, Sequence[Judgment]],
    texts: Mapping[str, str],
    judge_ids: Sequence[str],
) -> ConsensusRule:
    """``rule`` with every part that needs a run-level fit fitted on these judgments.

    A rule that needs nothing comes back unchanged; a part with nothing to fit on (no
    verdict, no span answer) is left to its provisional rule's judgment at apply time.
    """
    fitted = rule
    # A judge the rule weighs 0 takes no part, in the fit either (a calibration mutes a
    # judge that only echoes another: counted twice, EM would take it for independent).
    weights = rule.weight_vector(judge_ids)
    judge_ids = [j for j, w in zip(judge_ids, weights, strict=True) if w > 0] or list(judge_ids)
    if rule.verdict.needs_fit and rule.verdict_fit is None:
        verdict_fit = _reliability(verdict_matrix(judgments_by_item, judge_ids), judge_ids)
        fitted = replace(fitted, verdict_fit=verdict_fit)
    if rule.spans.needs_fit and rule.span_fit is None:
        patterns, counts = character_patterns(judgments_by_item, texts, judge_ids)
        fitted = replace(fitted, span_fit=_reliability(patterns, judge_ids, counts))
    if rule.score.needs_fit and rule.score_fit is None:
        fitted = replace(fitted, score_fit=preference_fit(judgments_by_item, judge_ids))
    if fitted.needs_fit:
        # Nothing to fit on (no verdicts or no span answers at all): fall back openly.
        fitted = fitted.provisional()
    return fitted
