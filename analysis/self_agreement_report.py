"""Each sampled judge's agreement with itself, beside its agreement with the other judges.

Wiring only: the samples come from :mod:`juryflow.storage.reads.sample_inputs`, the figures
from :func:`juryflow.maths.samples.self_agreement.self_agreement`, the sources the intervals
resample from :func:`juryflow.storage.reads.bias_inputs.bias_inputs`. The result is part of
:class:`juryflow.analysis.agreement_report.AgreementReport` (``self_agreement``), so every
face shows the same numbers.

A judge's own verdicts (its reduced answers in ``judgments``, the ones the panel agreement is
measured on) are not its samples: the others' disagreement is measured sample by sample
against the other judges' verdicts, so that both figures are of single answers.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict

from juryflow.maths.bias import Effect
from juryflow.maths.samples.self_agreement import SelfAgreement, self_agreement
from juryflow.storage.reads.analysis import RunData
from juryflow.storage.reads.bias_inputs import bias_inputs
from juryflow.storage.reads.sample_inputs import JudgeSamples, item_samples, load_samples
from juryflow.storage.store import Store

__all__ = [
    "Interval",
    "JudgeSelfAgreement",
    "SampleAnswer",
    "judge_self_agreement",
    "sample_answers",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


class Interval(_Frozen):
    """A figure with its percentile interval; ``value`` None (with a ``note``) where it is
    undefined, ``low``/``high`` None where there is nothing to resample (one source)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0
    """Items the figure rests on."""
    note: str | None = None

    @classmethod
    def of(cls, effect: Effect, why: str) -> Interval:
        value = _finite(effect.value)
        return cls(
            value=value,
            low=_finite(effect.low),
            high=_finite(effect.high),
            n=effect.n,
            note=None if value is not None else why,
        )

    def show(self, digits: int = 3) -> str:
        if self.value is None:
            return f"n/a ({self.note})" if self.note else "n/a"
        if self.low is None or self.high is None:
            return f"{self.value:.{digits}f}"
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


class JudgeSelfAgreement(_Frozen):
    """One judge with ``samples: N > 1``: how its samples agree, and how it agrees with the
    panel's other judges."""

    judge_id: str
    n_samples: int
    """Samples stored per item (the judge's ``samples``), unscored ones included."""
    n_items: int
    """Items with two scored samples or more."""
    score_alpha: Interval
    """Krippendorff's α (interval) between its samples' scores."""
    verdict_kappa: Interval
    """Fleiss' κ between its samples' verdicts (items every sample answered)."""
    verdict_disagreement: Interval
    """Share of its pairs of samples whose verdicts differ (mean over items)."""
    span_f1: Interval
    """Mean over pairs of samples of their character F1 (span judges)."""
    others_disagreement: Interval
    """Share of (its sample, another judge's verdict) pairs that differ (mean over items)."""
    excess: Interval
    """``others_disagreement - verdict_disagreement``, paired over the same items."""
    as_noisy_as_others: bool | None
    """It disagrees with itself about as much as with the others (the interval of
    ``excess`` reaches 0); None without other judges."""
    kappa_with_others: float | None
    """Its mean pairwise Cohen κ with the other judges (the panel agreement's pairs)."""

    def summary(self) -> str | None:
        """One line when it disagrees with itself about as much as with the others."""
        if not self.as_noisy_as_others:
            return None
        own, theirs = self.verdict_disagreement, self.others_disagreement
        more = own.value is not None and theirs.value is not None and own.value > theirs.value
        return (
            f"{self.judge_id} disagrees with itself {'more than' if more else 'about as much as'} "
            f"with the other judges ({_short(own)} of its sample pairs split, {_short(theirs)} "
            "of its samples against their verdicts): its dissent is mostly its own noise"
        )


def _short(found: Interval) -> str:
    return "n/a" if found.value is None else f"{found.value:.3f}"


def _entry(samples: JudgeSamples, found: SelfAgreement, kappa: float | None) -> JudgeSelfAgreement:
    no_others = "no other judge's verdict on its items"
    return JudgeSelfAgreement(
        judge_id=samples.judge_id,
        n_samples=int(samples.scores.shape[0]),
        n_items=found.n_items,
        score_alpha=Interval.of(found.score_alpha, "all scores identical or under two samples"),
        verdict_kappa=Interval.of(
            found.verdict_kappa, "all verdicts identical or no item every sample answered"
        ),
        verdict_disagreement=Interval.of(found.verdict_disagreement, "no item has two samples"),
        span_f1=Interval.of(
            found.span_f1,
            "score-only judge" if samples.output_kind != "spans" else "no sample flagged a span",
        ),
        others_disagreement=Interval.of(found.others_disagreement, no_others),
        excess=Interval.of(found.excess, no_others),
        as_noisy_as_others=found.as_noisy_as_others,
        kappa_with_others=kappa,
    )


def judge_self_agreement(
    store: Store,
    data: RunData,
    n_run_items: int,
    keep: np.ndarray | None,
    kappa_with_others: dict[str, float | None],
) -> list[JudgeSelfAgreement]:
    """The sampled judges of ``data``'s run; ``keep`` restricts the run's ``n_run_items``
    items to ``data``'s (an early-stopped run's audit sample), None for all."""
    sampled = load_samples(store, data.info.run_id, n_run_items)
    # An early-stopped run without an audit sample has no item every judge judged: there is
    # nothing to set a judge's self-agreement beside, so none is reported.
    if not sampled or not len(data.item_ids):
        return []
    groups = np.asarray(bias_inputs(store, data.info.run_id).groups, dtype=object)
    if keep is not None:
        groups = groups[keep]
    out: list[JudgeSelfAgreement] = []
    for samples in sampled:
        scores, verdicts = samples.scores, samples.verdicts
        spans = samples.span_sets
        if keep is not None:
            scores, verdicts = scores[:, keep], verdicts[:, keep]
            spans = tuple(s.take(keep) for s in spans)
        others = np.asarray(
            [v for j, v in zip(data.judge_ids, data.verdicts, strict=True) if j != samples.judge_id]
        ).reshape(-1, len(data.item_ids))
        found = self_agreement(
            scores,
            verdicts,
            groups,
            spans=spans if samples.output_kind == "spans" else None,
            others=others,
        )
        out.append(_entry(samples, found, kappa_with_others.get(samples.judge_id)))
    return out


class SampleAnswer(_Frozen):
    """One sample of a judge on an item, for showing an item's samples side by side."""

    judge_id: str
    sample_index: int
    output_kind: str
    score: float | None
    verdict: bool | None
    unscored_reason: str | None
    spans: list[tuple[int | None, int | None, str]]
    """``(start, end, text)``; offsets None where the span could not be anchored."""


def sample_answers(store: Store, run_id: str, item_ids: list[str]) -> dict[str, list[SampleAnswer]]:
    """Each item's samples (items without any absent), judges by id, samples in order."""
    return {
        item_id: [
            SampleAnswer(
                judge_id=r.judge_id,
                sample_index=r.sample_index,
                output_kind=r.output_kind,
                score=r.score,
                verdict=r.verdict,
                unscored_reason=r.unscored_reason,
                spans=r.spans,
            )
            for r in rows
        ]
        for item_id, rows in item_samples(store, run_id, item_ids).items()
    }
