"""Agreement, disagreement and accuracy of a run: wiring between the store and the maths.

No statistics here (they are in :mod:`juryflow.maths.agreement` and
:mod:`juryflow.maths.gold`) and no SQL (it is in :mod:`juryflow.storage.reads.analysis`).
The results are frozen pydantic models, so the CLI,
the HTML report and Prefect artifacts can all use them: ``report.model_dump(mode="json")``
is plain JSON.

An undefined statistic is never a bare NaN: it is a :class:`Stat` with ``value=None`` and
a ``note`` saying why (``"all ratings identical"``, ``"one judge: nothing to compare"``…).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from juryflow.analysis.position_report import JudgePosition, judge_positions, load_orders
from juryflow.analysis.preference_report import PreferenceSummary, preference_summary
from juryflow.analysis.self_agreement_report import (
    JudgeSelfAgreement,
    SampleAnswer,
    judge_self_agreement,
    sample_answers,
)
from juryflow.maths import agreement as ag
from juryflow.maths import gold as gd
from juryflow.storage.annotation_labels import labels_view
from juryflow.storage.annotations import GoldSource
from juryflow.storage.reads import analysis as sa
from juryflow.storage.store import Store

__all__ = [
    "Accuracy",
    "AgreementReport",
    "DisputedItem",
    "GroupAgreement",
    "JudgeAnswer",
    "JudgeSummary",
    "PairAgreement",
    "Scores",
    "SpanOut",
    "Stat",
    "agreement_report",
    "disagreements",
]

NO_PROMPT = "(no prompt)"
"""The prompt group of judges that render no prompt (offline detectors)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Stat(_Frozen):
    """One statistic: its value, what it rests on, and why it is undefined when it is."""

    value: float | None
    n: int = 0
    """Items (for a pair or group: items compared) the value rests on."""
    note: str | None = None

    @property
    def defined(self) -> bool:
        return self.value is not None

    def show(self, digits: int = 3) -> str:
        if self.value is None:
            return f"n/a ({self.note})" if self.note else "n/a"
        return f"{self.value:.{digits}f}"


def _stat(value: float, n: int, why: str) -> Stat:
    if math.isnan(value):
        return Stat(value=None, n=n, note=why)
    return Stat(value=float(value), n=n)


def _na(why: str, n: int = 0) -> Stat:
    return Stat(value=None, n=n, note=why)


def _matrix(m: np.ndarray) -> list[list[float | None]]:
    return [[None if math.isnan(v) else float(v) for v in row] for row in m.tolist()]


class PairAgreement(_Frozen):
    judge_a: str
    judge_b: str
    n_items: int
    """Items both judges scored."""
    verdict_agreement: Stat
    cohen_kappa: Stat
    n_span_items: int
    """Items both judges answered with spans."""
    span_f1: Stat
    """Micro character F1 between the two span sets over those items."""


class GroupAgreement(_Frozen):
    """Agreement among a group of judges: the whole panel, or the judges of one prompt."""

    name: str
    prompt: str | None
    judges: list[str]
    alpha_interval: Stat
    alpha_ordinal: Stat
    fleiss_kappa: Stat
    percent_agreement: Stat
    mean_cohen_kappa: Stat
    mean_span_f1: Stat
    pairs: list[PairAgreement]
    cohen_kappa_matrix: list[list[float | None]]
    span_f1_matrix: list[list[float | None]]
    error_correlation: list[list[float | None]] | None = None
    """Pearson correlation of the judges' error indicators (verdict wrong vs gold); None
    without human labels."""
    effective_panel_size: Stat | None = None
    error_notes: list[str] = []
    """Judges left out of the error correlation (never wrong, always wrong), said apart."""


class JudgeSummary(_Frozen):
    judge_id: str
    output_kind: str
    prompt: str | None
    n_items: int
    n_scored: int
    mean_score: float | None
    flag_rate: float | None
    bias: Stat
    """Mean (score - consensus median); positive = harsher than the panel."""
    consensus_verdict_agreement: Stat
    consensus_span_f1: Stat
    consensus_spans: Scores | None = None
    """The judge's flagged characters against the consensus spans, over the items where both
    gave spans: precision = share of its characters the consensus flagged too, recall =
    share of the consensus' characters it flagged; its F1 is ``consensus_span_f1``."""


class Scores(_Frozen):
    """Precision, recall and F1 with their counts (items, or characters for spans)."""

    precision: float
    recall: float
    f1: float
    tp: int
    fp: int
    fn: int

    @classmethod
    def of(cls, prf: gd.PRF) -> Scores:
        return cls(
            precision=prf.precision,
            recall=prf.recall,
            f1=prf.f1,
            tp=prf.tp,
            fp=prf.fp,
            fn=prf.fn,
        )


class Accuracy(_Frozen):
    """A judge, or the consensus (``predictor == "consensus"``), against the human labels.

    Over **all** labelled items, RAGTruth style: where the predictor gave no answer (a failed
    judge, a consensus below quorum) it counts as flagging nothing. ``coverage`` says how
    many it answered, and the ``*_answered`` figures are over those items only.
    """

    predictor: str
    n_items: int
    """Items with a human verdict."""
    n_answered: int
    coverage: float | None
    """n_answered / n_items."""
    response: Scores | None
    """None when no item has a human verdict."""
    response_answered: Scores | None
    n_span_items: int
    """Items with human span labels (for a predictor that answers with spans)."""
    n_span_answered: int
    spans: Scores | None
    """Character-level, micro over the data set; None for a score-only predictor or without
    span labels."""
    spans_answered: Scores | None


class JudgeReliability(_Frozen):
    """A judge's sensitivity and specificity estimated without labels (Dawid–Skene EM)."""

    judge_id: str
    level: str
    """``verdicts`` (per item) or ``characters`` (per character of span answers)."""
    sensitivity: float | None
    specificity: float | None
    n_units: int


class Reliability(_Frozen):
    judges: list[JudgeReliability]
    prevalence: float | None
    effective_panel_size: Stat
    """How independent the judges' errors look given the estimated truth; Dawid–Skene
    assumes it, and a low value means the sensitivities above are overstated."""
    warning: str | None
    notes: list[str]


class AgreementReport(_Frozen):
    """Everything a run's judges agree and disagree on, and how they fare against human
    labels: the one source of the CLI's, the report's, the artifacts' and the API's numbers."""

    run_id: str
    status: str
    dataset: str | None
    panel_name: str
    n_items: int
    judges: list[str]
    groups: list[GroupAgreement]
    """The whole panel first, then one group per prompt when the run mixes prompts."""
    judge_summaries: list[JudgeSummary]
    has_gold: bool
    accuracy: list[Accuracy]
    notes: list[str]
    consensus_rule: str | None = None
    """The rule the run's consensus was made with (``runs.consensus``)."""
    contradictions: int = 0
    """Items whose consensus is clean yet has consensus spans (the rule let them disagree)."""
    unlocalised: int = 0
    """Items where the judges agree something is wrong but no character won the span vote."""
    reliability: Reliability | None = None
    gold_source: GoldSource = "dataset"
    """Whose labels the accuracy is against (``--gold``): the dataset's, reviewers'
    annotations, or both (an item's newest annotation replaces its dataset label)."""
    self_agreement: list[JudgeSelfAgreement] = []
    """Judges with repeated samples (``samples: N``): agreement between their own samples,
    beside their agreement with the other judges (:mod:`.self_agreement_report`)."""
    position: list[JudgePosition] = []
    """Pairwise judges: how often their two orders disagree, and how often they pick the
    answer shown first (:mod:`.position_report`)."""
    preference: PreferenceSummary | None = None
    """Pairwise runs: answer B against answer A head to head, and each candidate model's
    Bradley–Terry strength (:mod:`.preference_report`)."""

    # -- the same numbers as Arrow tables, for notebooks (juryflow.api) ------------------

    def judges_table(self) -> pa.Table:
        """One row per judge: answers, mean score, flag rate, bias and agreement with the
        consensus."""
        return pa.Table.from_pylist(
            [
                {
                    "judge_id": s.judge_id,
                    "output_kind": s.output_kind,
                    "prompt": s.prompt,
                    "n_items": s.n_items,
                    "n_scored": s.n_scored,
                    "mean_score": s.mean_score,
                    "flag_rate": s.flag_rate,
                    "bias": s.bias.value,
                    "consensus_verdict_agreement": s.consensus_verdict_agreement.value,
                    "consensus_span_f1": s.consensus_span_f1.value,
                }
                for s in self.judge_summaries
            ],
            schema=_JUDGES_SCHEMA,
        )

    def pairs_table(self) -> pa.Table:
        """One row per judge pair and group (the whole panel first): items both scored,
        verdict agreement, Cohen's kappa and the span F1 between their spans."""
        return pa.Table.from_pylist(
            [
                {
                    "group": group.name,
                    "judge_a": pair.judge_a,
                    "judge_b": pair.judge_b,
                    "n_items": pair.n_items,
                    "verdict_agreement": pair.verdict_agreement.value,
                    "cohen_kappa": pair.cohen_kappa.value,
                    "n_span_items": pair.n_span_items,
                    "span_f1": pair.span_f1.value,
                }
                for group in self.groups
                for pair in group.pairs
            ],
            schema=_PAIRS_SCHEMA,
        )

    def self_agreement_table(self) -> pa.Table:
        """One row per judge with samples: agreement between its own samples (value and
        95 % interval of each figure) and with the other judges."""
        rows = []
        for j in self.self_agreement:
            row: dict[str, object] = {
                "judge_id": j.judge_id,
                "n_samples": j.n_samples,
                "n_items": j.n_items,
                "kappa_with_others": j.kappa_with_others,
                "as_noisy_as_others": j.as_noisy_as_others,
            }
            for name in _SELF_FIGURES:
                found = getattr(j, name)
                row |= {name: found.value, f"{name}_low": found.low, f"{name}_high": found.high}
            rows.append(row)
        return pa.Table.from_pylist(rows, schema=_SELF_SCHEMA)

    def accuracy_table(self) -> pa.Table:
        """One row per judge and the consensus against the human labels (empty without)."""

        def prf(prefix: str, scores: Scores | None) -> dict[str, float | None]:
            return {
                f"{prefix}_precision": scores.precision if scores else None,
                f"{prefix}_recall": scores.recall if scores else None,
                f"{prefix}_f1": scores.f1 if scores else None,
            }

        return pa.Table.from_pylist(
            [
                {
                    "predictor": a.predictor,
                    "n_items": a.n_items,
                    "coverage": a.coverage,
                    **prf("response", a.response),
                    **prf("span", a.spans),
                }
                for a in self.accuracy
            ],
            schema=_ACCURACY_SCHEMA,
        )


_JUDGES_SCHEMA = pa.schema(
    [
        ("judge_id", pa.string()),
        ("output_kind", pa.string()),
        ("prompt", pa.string()),
        ("n_items", pa.int64()),
        ("n_scored", pa.int64()),
        ("mean_score", pa.float64()),
        ("flag_rate", pa.float64()),
        ("bias", pa.float64()),
        ("consensus_verdict_agreement", pa.float64()),
        ("consensus_span_f1", pa.float64()),
    ]
)
_PAIRS_SCHEMA = pa.schema(
    [
        ("group", pa.string()),
        ("judge_a", pa.string()),
        ("judge_b", pa.string()),
        ("n_items", pa.int64()),
        ("verdict_agreement", pa.float64()),
        ("cohen_kappa", pa.float64()),
        ("n_span_items", pa.int64()),
        ("span_f1", pa.float64()),
    ]
)
_SELF_FIGURES = (
    "score_alpha",
    "verdict_kappa",
    "verdict_disagreement",
    "others_disagreement",
    "span_f1",
)
_SELF_SCHEMA = pa.schema(
    [
        ("judge_id", pa.string()),
        ("n_samples", pa.int64()),
        ("n_items", pa.int64()),
        ("kappa_with_others", pa.float64()),
        ("as_noisy_as_others", pa.bool_()),
        *[
            (f"{name}{end}", pa.float64())
            for name in _SELF_FIGURES
            for end in ("", "_low", "_high")
        ],
    ]
)
_ACCURACY_SCHEMA = pa.schema(
    [
        ("predictor", pa.string()),
        ("n_items", pa.int64()),
        ("coverage", pa.float64()),
        *[
            (f"{prefix}_{measure}", pa.float64())
            for prefix in ("response", "span")
            for measure in ("precision", "recall", "f1")
        ],
    ]
)


# -- computing ------------------------------------------------------------------------


def _alpha(scores: np.ndarray, level: ag.Level, n_active: int) -> Stat:
    present = ~np.isnan(scores)
    pairable = int((present.sum(axis=0) >= 2).sum())
    if n_active < 2:
        return _na("fewer than two judges scored anything")
    if pairable == 0:
        return _na("no item has two ratings")
    return _stat(ag.krippendorff_alpha(scores, level), pairable, "all ratings identical")


def _fleiss(verdicts: np.ndarray, n_active: int) -> Stat:
    if n_active < 2:
        return _na("fewer than two judges scored anything")
    table = ag.verdict_table(verdicts)
    if table.shape[0] == 0:
        return _na("no item was scored by every judge")
    return _stat(ag.fleiss_kappa(table), int(table.shape[0]), "all verdicts identical")


def _mean(stats: Sequence[Stat], why: str) -> Stat:
    values = [s.value for s in stats if s.value is not None]
    if not values:
        return _na(why)
    return Stat(value=float(np.mean(values)), n=len(values))


@dataclass(frozen=True, slots=True)
class _Lines:
    """The run's span sets, each placed once on one line (:class:`ag.SpanLine`)."""

    judges: list[ag.SpanLine]
    consensus: ag.SpanLine
    gold: ag.SpanLine

    @classmethod
    def of(cls, data: sa.RunData) -> _Lines:
        stride = ag.span_stride(*data.span_sets, data.consensus_span_set, data.gold_span_set)
        return cls(
            [ag.SpanLine.of(spans, stride) for spans in data.span_sets],
            ag.SpanLine.of(data.consensus_span_set, stride),
            ag.SpanLine.of(data.gold_span_set, stride),
        )


def _group(
    data: sa.RunData,
    lines: _Lines,
    name: str,
    prompt: str | None,
    rows: list[int],
    gold: bool,
) -> GroupAgreement:
    """The agreement of one group of judges (the panel, or those sharing a prompt): every
    figure the report shows for it, from the run's arrays.

    Over 100 lines: each figure is a few vectorised lines over the same masks, and they
    are kept in one place so that every figure of a group is computed on the same items."""
    judges = [data.judge_ids[j] for j in rows]
    scores = data.scores[rows]
    verdicts = data.verdicts[rows]
    active = ~np.isnan(scores).all(axis=1)
    n_active = int(active.sum())
    span_lines = [lines.judges[j] for j in rows]
    kappa = ag.pairwise_cohen_kappa(verdicts) if rows else np.zeros((0, 0))
    span_f1 = ag.pairwise_line_f1(span_lines) if rows else np.zeros((0, 0))
    present = ~np.isnan(scores)

    pairs: list[PairAgreement] = []
    for a in range(len(rows)):
        for b in range(a + 1, len(rows)):
            shared = int((present[a] & present[b]).sum())
            n_span = int((span_lines[a].answered & span_lines[b].answered).sum())
            if shared:
                pa = ag.percent_agreement(verdicts[[a, b]][:, present[a] & present[b]])
                agree = _stat(pa, shared, "no item scored by both")
            else:
                agree = _na("no item scored by both")
            pairs.append(
                PairAgreement(
                    judge_a=judges[a],
                    judge_b=judges[b],
                    n_items=shared,
                    verdict_agreement=agree,
                    cohen_kappa=_stat(
                        kappa[a, b],
                        shared,
                        "no item scored by both"
                        if not shared
                        else "both gave one and the same verdict throughout",
                    ),
                    n_span_items=n_span,
                    span_f1=_stat(
                        span_f1[a, b],
                        n_span,
                        "no item both answered with spans"
                        if not n_span
                        else "neither flagged a character",
                    ),
                )
            )

    one = len(rows) < 2
    alone = "one judge: nothing to compare" if rows else "no judgments yet"
    pair_note = ("one judge: pairwise metrics n/a" if rows else "no judgments yet") if one else None
    n_pairable = int((present.sum(axis=0) >= 2).sum())
    if one:
        pa_stat = _na(alone)
    elif n_pairable == 0:
        pa_stat = _na("no item has two verdicts")
    else:
        pa_stat = _stat(ag.percent_agreement(verdicts), n_pairable, "no item has two verdicts")

    corr: list[list[float | None]] | None = None
    n_eff: Stat | None = None
    error_notes: list[str] = []
    if gold and not one:
        # Errors as indicators (the judge's verdict is wrong vs gold), not signed score
        # errors, which correlate through gold itself: independent coin flips must count 3.
        errors = ag.error_correlation_report(verdicts, data.gold_hallucinated, names=judges)
        corr = _matrix(errors.correlation)
        n_eff = _stat(
            errors.effective_size,
            errors.n_items,
            "no two judges with varying errors on the items all of them judged",
        )
        error_notes = list(errors.notes)

    return GroupAgreement(
        name=name,
        prompt=prompt,
        judges=judges,
        alpha_interval=_na(alone) if one else _alpha(scores, "interval", n_active),
        alpha_ordinal=_na(alone) if one else _alpha(scores, "ordinal", n_active),
        fleiss_kappa=_na(alone) if one else _fleiss(verdicts, n_active),
        percent_agreement=pa_stat,
        mean_cohen_kappa=_mean(
            [p.cohen_kappa for p in pairs], pair_note or "no pair with a defined κ"
        ),
        mean_span_f1=_mean(
            [p.span_f1 for p in pairs],
            pair_note
            or (
                "no two judges answered the same item with spans"
                if not any(p.n_span_items for p in pairs)
                else "no pair flagged a character on the items both answered"
            ),
        ),
        pairs=pairs,
        cohen_kappa_matrix=_matrix(kappa),
        span_f1_matrix=_matrix(span_f1),
        error_correlation=corr,
        effective_panel_size=n_eff,
        error_notes=error_notes,
    )


def _judge_summary(data: sa.RunData, lines: _Lines, j: int) -> JudgeSummary:
    judge_id = data.judge_ids[j]
    s = data.scores[j]
    scored = ~np.isnan(s)
    n_scored = int(scored.sum())
    verdicts = data.verdicts[j]
    if n_scored == 0:
        none = "no scored item"
        bias, agree = _na(none), _na(none)
    else:
        both = scored & ~np.isnan(data.consensus_median)
        bias = _stat(
            float(ag.judge_bias(s[None, :], data.consensus_median)[0]),
            int(both.sum()),
            "no consensus on the items it scored",
        )
        vs = scored & ~np.isnan(data.consensus_verdict)
        agree = (
            Stat(value=float((verdicts[vs] == data.consensus_verdict[vs]).mean()), n=int(vs.sum()))
            if vs.any()
            else _na("no consensus on the items it scored")
        )
    both_spans = lines.judges[j].answered & lines.consensus.answered
    span_items = int(both_spans.sum())
    span_scores = None
    if span_items:
        f1 = ag.pairwise_line_f1([lines.judges[j], lines.consensus])[0, 1]
        span = _stat(float(f1), span_items, "neither flagged a character")
        span_scores = _span_scores(ag.item_counts(lines.judges[j], lines.consensus), both_spans)
    elif data.output_kinds[judge_id] != "spans":
        span = _na("score-only judge")
    else:
        span = _na("no item with a span answer and a span consensus")
    return JudgeSummary(
        judge_id=judge_id,
        output_kind=data.output_kinds[judge_id],
        prompt=data.prompts[judge_id],
        n_items=len(data.item_ids),
        n_scored=n_scored,
        mean_score=float(np.nanmean(s)) if n_scored else None,
        flag_rate=float(np.nanmean(verdicts)) if n_scored else None,
        bias=bias,
        consensus_verdict_agreement=agree,
        consensus_span_f1=span,
        consensus_spans=span_scores,
    )


def _accuracy(
    data: sa.RunData,
    lines: _Lines,
    name: str,
    verdict: np.ndarray,
    spans: ag.SpanLine,
    span_predictor: bool,
) -> Accuracy:
    gold = data.gold_hallucinated
    labelled = ~np.isnan(gold)
    answered = ~np.isnan(verdict)
    said = np.nan_to_num(verdict, nan=0.0) > 0.5
    truth = np.nan_to_num(gold, nan=0.0) > 0.5
    n_items, n_answered = int(labelled.sum()), int((labelled & answered).sum())
    response = response_answered = None
    if n_items:
        response = Scores.of(gd.response_prf(said[labelled], truth[labelled]))
        both = labelled & answered
        if both.any():
            response_answered = Scores.of(gd.response_prf(said[both], truth[both]))
    # Over the items with span labels; where the predictor gave no answer it flagged nothing
    # (its line has no intervals there). "answered": those where it gave one.
    with_labels = lines.gold.answered
    with_answer = with_labels & spans.answered if span_predictor else with_labels[:0]
    # Per-item counts against the labels, once for both the all-items and answered figures.
    counts = ag.item_counts(spans, lines.gold) if span_predictor else None
    return Accuracy(
        predictor=name,
        n_items=n_items,
        n_answered=n_answered,
        coverage=n_answered / n_items if n_items else None,
        response=response,
        response_answered=response_answered,
        n_span_items=int(with_labels.sum()) if span_predictor else 0,
        n_span_answered=int(with_answer.sum()),
        spans=_span_scores(counts, with_labels) if counts is not None else None,
        spans_answered=_span_scores(counts, with_answer) if counts is not None else None,
    )


def _span_scores(counts: np.ndarray, items: np.ndarray) -> Scores | None:
    """Character P/R/F1 over ``items`` from :func:`ag.item_counts` against the labels."""
    if not items.any():
        return None
    overlap, pred, gold = (int(n) for n in counts[:, items].sum(axis=1))
    return Scores.of(gd.PRF.from_counts(tp=overlap, fp=pred - overlap, fn=gold - overlap))


def agreement_report(
    store: Store, run_id: str | None = None, gold: GoldSource = "dataset"
) -> AgreementReport:
    """Every agreement and accuracy figure of a run (the latest run when ``run_id`` is None),
    accuracy against the labels of gold source ``gold``."""
    sa.ensure_views(store)  # may upgrade the store: a write, before the held read below
    with store.reading():
        return _agreement_report(store, run_id, gold)


def _agreement_report(store: Store, run_id: str | None, gold: GoldSource) -> AgreementReport:
    everything = sa.load_run_data(store, run_id, gold)
    notes: list[str] = []
    # An early-stopped run called some judges only where the others disagreed: agreement
    # measured there would be agreement on the hard items. Its audit sample is random.
    audit = sa.audit_mask(store, everything)
    data = everything if audit is None else everything.restricted(audit)
    if audit is not None:
        notes.append(
            f"early stopping: agreement, reliability and each judge's figures are over the "
            f"{int(audit.sum())} audit items every judge judged; the consensus's accuracy "
            f"is over all {len(everything.item_ids)} items"
        )
    n_judges = len(data.judge_ids)
    if n_judges == 0:
        notes.append("the run has no judgments yet")
    elif n_judges == 1:
        notes.append("one judge: pairwise metrics n/a")
    for j, judge_id in enumerate(data.judge_ids):
        if np.isnan(data.scores[j]).all():
            notes.append(f"judge {judge_id!r} scored no item: left out of every statistic")
    has_gold = everything.has_gold
    if not has_gold:
        notes.append(_NO_LABELS[gold])
    elif not data.has_gold_spans:
        notes.append("no human span labels in this run: span accuracy omitted")

    lines = _Lines.of(data)
    everyone = list(range(n_judges))
    groups = [_group(data, lines, "all judges", None, everyone, has_gold)]
    by_prompt: dict[str, list[int]] = {}
    for j, judge_id in enumerate(data.judge_ids):
        by_prompt.setdefault(data.prompts[judge_id] or NO_PROMPT, []).append(j)
    if len(by_prompt) > 1:
        for prompt, rows in by_prompt.items():
            label = "no prompt (offline detectors)" if prompt == NO_PROMPT else f"prompt {prompt}"
            groups.append(
                _group(data, lines, label, None if prompt == NO_PROMPT else prompt, rows, has_gold)
            )

    accuracy: list[Accuracy] = []
    if has_gold:
        for j, judge_id in enumerate(data.judge_ids):
            span_judge = data.output_kinds[judge_id] == "spans"
            accuracy.append(
                _accuracy(data, lines, judge_id, data.verdicts[j], lines.judges[j], span_judge)
            )
        all_lines = lines if audit is None else _Lines.of(everything)
        accuracy.append(
            _accuracy(
                everything,
                all_lines,
                "consensus",
                everything.consensus_verdict,
                all_lines.consensus,
                bool(all_lines.consensus.answered.any()),
            )
        )

    # Both pairwise parts read the judges' two orders: loaded once.
    orders = load_orders(store, data.info.run_id, len(everything.item_ids))
    return AgreementReport(
        self_agreement=judge_self_agreement(
            store, data, len(everything.item_ids), audit, _kappa_with_others(groups[0])
        ),
        position=judge_positions(store, data.info.run_id, orders),
        preference=preference_summary(store, data.info.run_id, orders),
        consensus_rule=data.consensus_rule,
        contradictions=data.contradictions,
        unlocalised=data.unlocalised,
        reliability=_reliability(data),
        run_id=data.info.run_id,
        status=data.info.status,
        dataset=data.info.dataset,
        panel_name=data.info.panel_name,
        n_items=len(everything.item_ids),
        judges=data.judge_ids,
        groups=groups,
        judge_summaries=[_judge_summary(data, lines, j) for j in range(n_judges)],
        has_gold=has_gold,
        accuracy=accuracy,
        notes=notes,
        gold_source=gold,
    )


def _kappa_with_others(group: GroupAgreement) -> dict[str, float | None]:
    """Each judge's mean pairwise Cohen κ with the others of ``group``."""
    found: dict[str, list[float]] = {judge: [] for judge in group.judges}
    for pair in group.pairs:
        if pair.cohen_kappa.value is not None:
            found[pair.judge_a].append(pair.cohen_kappa.value)
            found[pair.judge_b].append(pair.cohen_kappa.value)
    return {judge: float(np.mean(k)) if k else None for judge, k in found.items()}


_NO_LABELS: dict[str, str] = {
    "dataset": "no human labels in this run: accuracy against gold omitted",
    "annotations": "no annotated item in this run: accuracy against annotations omitted "
    "(annotate items with `juryflow view`)",
    "both": "no human labels or annotations in this run: accuracy against gold omitted",
}


def _reliability(data: sa.RunData) -> Reliability | None:
    from juryflow.maths.reliability import reliability_report

    if len(data.judge_ids) < 2 or np.isnan(data.verdicts).all():
        return None
    report = reliability_report(data.verdicts, names=data.judge_ids)
    fit, dependence = report.fit, report.dependence
    judges = [
        JudgeReliability(
            judge_id=judge_id,
            level="verdicts",
            sensitivity=None if np.isnan(fit.sensitivity[j]) else float(fit.sensitivity[j]),
            specificity=None if np.isnan(fit.specificity[j]) else float(fit.specificity[j]),
            n_units=int(fit.n_items_used[j]),
        )
        for j, judge_id in enumerate(data.judge_ids)
    ]
    return Reliability(
        judges=judges,
        prevalence=float(fit.prevalence),
        effective_panel_size=_stat(
            float(dependence.effective_size), int(data.verdicts.shape[1]), "not estimable"
        ),
        warning=report.warning,
        notes=list(report.notes),
    )


def record_reliability(store: Store, run_id: str) -> None:
    """Store each judge's unlabelled reliability estimate (``judge_reliability``)."""
    from juryflow.storage.store import ReliabilityRow

    report = agreement_report(store, run_id)
    found = report.reliability
    if found is None:
        return
    size = found.effective_panel_size.value
    store.save_reliability(
        report.run_id,
        [
            ReliabilityRow(
                judge_id=j.judge_id,
                level=j.level,
                method="dawid_skene",
                sensitivity=j.sensitivity,
                specificity=j.specificity,
                prevalence=found.prevalence,
                n_units=j.n_units,
                effective_panel_size=size,
                note=found.warning,
            )
            for j in found.judges
        ],
    )


# -- disputed items -------------------------------------------------------------------


class SpanOut(_Frozen):
    start: int | None
    end: int | None
    text: str
    match: str | None = None
    votes: int | None = None


class JudgeAnswer(_Frozen):
    judge_id: str
    output_kind: str
    score: float | None
    verdict: bool | None
    unscored_reason: str | None
    spans: list[SpanOut]


class DisputedItem(_Frozen):
    """One item of ``juryflow disagreements``: the measures, each judge, consensus, gold."""

    rank: int
    item_id: str
    disagreement: float | None
    score_spread: float | None
    score_stddev: float | None
    verdict_split: float | None
    split_verdict: bool
    n_hallucinated_verdicts: int
    n_clean_verdicts: int
    span_disagreement: float | None
    judges: list[JudgeAnswer]
    consensus_status: str | None
    consensus_score: float | None
    """The median of the judges' scores, whatever the run's score rule."""
    consensus_hallucinated: bool | None
    consensus_spans: list[SpanOut]
    gold_hallucinated: bool | None
    gold_spans: list[SpanOut] | None
    text: str
    """The judged text (the ``response``, else ``output`` variable) the offsets point into."""
    samples: list[SampleAnswer] = []
    """The samples of its judges with ``samples: N > 1``, side by side (judges by id)."""
    consensus_rule_score: float | None = None
    """The run's score rule's consensus (a pairwise panel's preference: 0 A, 0.5 tie, 1 B)."""


def disagreements(
    store: Store, run_id: str | None = None, top: int = 10, gold: GoldSource = "dataset"
) -> list[DisputedItem]:
    """The ``top`` most disputed items of a run, ranked by the ``item_disagreement`` view,
    with the human labels of gold source ``gold``."""
    labels_view(gold)
    rid = sa.resolve_run(store, run_id).run_id
    ranked = sa.top_disagreements(store, rid, top)
    details = sa.item_details(store, rid, [str(r["item_id"]) for r in ranked], gold)
    samples = sample_answers(store, rid, [str(r["item_id"]) for r in ranked])
    out: list[DisputedItem] = []
    for row in ranked:
        detail = details[str(row["item_id"])]
        text = detail.text
        out.append(
            DisputedItem(
                rank=int(row["disagreement_rank"]),
                item_id=str(row["item_id"]),
                disagreement=row["disagreement"],
                score_spread=row["score_spread"],
                score_stddev=row["score_stddev"],
                verdict_split=row["verdict_split"],
                split_verdict=bool(row["split_verdict"]),
                n_hallucinated_verdicts=int(row["n_hallucinated_verdicts"]),
                n_clean_verdicts=int(row["n_clean_verdicts"]),
                span_disagreement=row["span_disagreement"],
                judges=[
                    JudgeAnswer(
                        judge_id=j["judge_id"],
                        output_kind=j["output_kind"],
                        score=j["score"],
                        verdict=j["verdict"],
                        unscored_reason=j["unscored_reason"],
                        spans=[
                            SpanOut(start=s, end=e, text=t, match=m) for s, e, t, m in j["spans"]
                        ],
                    )
                    for j in detail.judgments
                ],
                consensus_status=row["consensus_status"],
                consensus_score=row["consensus_score"],
                consensus_rule_score=row["consensus_rule_score"],
                consensus_hallucinated=row["consensus_hallucinated"],
                consensus_spans=[
                    SpanOut(start=s, end=e, text=t, votes=v)
                    for s, e, t, v in detail.consensus_spans
                ],
                gold_hallucinated=detail.gold_hallucinated,
                gold_spans=None
                if detail.gold_spans is None
                else [SpanOut(start=s, end=e, text=text[s:e]) for s, e in detail.gold_spans],
                text=text,
                samples=samples.get(str(row["item_id"]), []),
            )
        )
    return out
