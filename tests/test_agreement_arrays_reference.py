"""The list-based agreement path as it was before spans were loaded as arrays: reference.

Kept verbatim (names aside) from ``storage/reads/analysis.py``, ``maths/agreement.py`` and
``analysis/agreement_report.py`` before the change, so that :mod:`tests.test_agreement_arrays` can
check the array path gives every figure of the report exactly as this one did. The
pieces that did not change (models, kappas, alphas, ...) come from the product.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from juryflow.analysis.agreement_report import (
    NO_PROMPT,
    Accuracy,
    AgreementReport,
    GroupAgreement,
    JudgeSummary,
    PairAgreement,
    Scores,
    Stat,
    _alpha,
    _fleiss,
    _matrix,
    _mean,
    _na,
    _reliability,
    _stat,
)
from juryflow.maths import agreement as ag
from juryflow.maths import gold as gd
from juryflow.maths.agreement import IntArray, SpanList, _chars, merge_spans
from juryflow.storage.reads.analysis import RunInfo, Spans, _panel_order, _rule_text, resolve_run
from juryflow.storage.store import Store

FloatArray = npt.NDArray[np.float64]


# ---- agreement
def _on_one_line(spans_per_item: Sequence[SpanList | None], stride: int) -> IntArray:
    """Every item's spans as one ``(k, 2)`` array on a single line where item ``i`` owns
    ``[i * stride, (i + 1) * stride)``: spans of different items can then never touch, and
    one merge (one sort) serves every item at once instead of a numpy call per item."""
    flat = [
        (i * stride + start, i * stride + end, start, end)
        for i, spans in enumerate(spans_per_item)
        if spans
        for start, end in spans
    ]
    if not flat:
        return np.zeros((0, 2), dtype=np.int64)
    a = np.asarray(flat, dtype=np.int64)
    if (a[:, 2] < 0).any() or (a[:, 3] < a[:, 2]).any():
        bad = next(s for s in spans_per_item if s and any(x < 0 or y < x for x, y in s))
        raise ValueError(f"spans must be (start, end) with 0 <= start <= end: {bad!r}")
    return merge_spans(a[:, :2])


def span_stride(*span_sets: Sequence[SpanList | None]) -> int:
    """A line length per item longer than any span end, for :class:`SpanLine`."""
    ends = [end for spans_per_item in span_sets for s in spans_per_item if s for _, end in s]
    return max(ends, default=0) + 1


def _union_chars(a: IntArray, b: IntArray) -> int:
    return _chars(merge_spans(np.concatenate([a, b]))) if a.size and b.size else 0


@dataclass(frozen=True, slots=True)
class SpanLine:
    """One span set for every item (a judge's answers, the consensus, the human labels),
    merged once and placed on one line where item ``i`` owns ``[i * stride, (i + 1) *
    stride)``. A report takes many figures from the same sets; each is then a mask and a
    merge, not a pass over Python lists."""

    intervals: IntArray
    answered: npt.NDArray[np.bool_]
    """Per item: a span list was given (possibly empty), as opposed to None."""
    stride: int

    @classmethod
    def of(cls, spans_per_item: Sequence[SpanList | None], stride: int) -> SpanLine:
        answered = np.fromiter((s is not None for s in spans_per_item), dtype=bool)
        return cls(_on_one_line(spans_per_item, stride), answered, stride)

    def on(self, items: npt.NDArray[np.bool_]) -> IntArray:
        """The intervals of the items marked in ``items`` only."""
        return self.intervals[items[self.intervals[:, 0] // self.stride]]


def line_counts(a: IntArray, b: IntArray) -> tuple[int, int, int]:
    """``(overlap, chars_a, chars_b)`` of two merged sets on the same line."""
    chars_a, chars_b = _chars(a), _chars(b)
    overlap = chars_a + chars_b - _union_chars(a, b) if a.size and b.size else 0
    return overlap, chars_a, chars_b


def pairwise_span_f1(
    spans_by_judge: Sequence[Sequence[SpanList | None]],
    *,
    lines: Sequence[SpanLine] | None = None,
) -> FloatArray:
    """Micro character F1 between every pair of judges, ``(n_judges, n_judges)``.

    ``spans_by_judge[j][i]`` is judge j's span list for item i, or ``None`` when the judge
    did not answer that item (the pair is then compared on the items both answered). F1 is
    symmetric: ``2 * overlap / (chars_a + chars_b)`` summed over those items. When neither
    judge flagged a single character on them, F1 is ``NaN``: they agree there is nothing to
    flag, but overlap F1 cannot express it (use the verdict kappas for that).

    >>> pairwise_span_f1([[[(0, 4)], []], [[(2, 6)], [(0, 2)]]]).round(3).tolist()
    [[1.0, 0.4], [0.4, 1.0]]
    """
    n_judges = len(spans_by_judge)
    n_items = {len(items) for items in spans_by_judge}
    if len(n_items) > 1:
        raise ValueError(f"every judge needs one entry per item, got lengths {sorted(n_items)}")
    if lines is None:
        # Each judge's spans are merged once, on one line for all items; a pair then keeps
        # the intervals of the items both judges answered.
        stride = span_stride(*spans_by_judge)
        lines = [SpanLine.of(items, stride) for items in spans_by_judge]
    out = np.full((n_judges, n_judges), np.nan)
    for i in range(n_judges):
        for j in range(i, n_judges):
            both = lines[i].answered & lines[j].answered
            overlap, chars_a, chars_b = line_counts(lines[i].on(both), lines[j].on(both))
            if chars_a + chars_b:
                out[i, j] = out[j, i] = 2.0 * overlap / (chars_a + chars_b)
    return out


# ---- storage
@dataclass(frozen=True, slots=True)
class RunData:
    """One run, ready for the agreement maths. Judges in panel order, items in row order."""

    info: RunInfo
    item_ids: list[str]
    judge_ids: list[str]
    output_kinds: dict[str, str]
    prompts: dict[str, str | None]
    scores: FloatArray
    """``(n_judges, n_items)``, NaN = no score (unscored or not judged)."""
    verdicts: FloatArray
    """``(n_judges, n_items)`` 0/1, each judge's own verdict (its prompt's threshold)."""
    spans: list[list[Spans | None]]
    """``spans[j][i]``: judge j's anchored spans on item i, None = no span answer."""
    consensus_median: FloatArray
    consensus_verdict: FloatArray
    """0/1 where the consensus is ``ok``, NaN otherwise."""
    consensus_spans: list[Spans | None]
    """None where there is no span consensus (insufficient, or no span judge answered)."""
    gold_hallucinated: FloatArray
    """0/1, NaN where the item has no human verdict."""
    gold_spans: list[Spans | None]
    """None where the item has no usable span labels."""
    consensus_rule: str | None = None
    contradictions: int = 0
    unlocalised: int = 0

    @property
    def has_gold(self) -> bool:
        return bool((~np.isnan(self.gold_hallucinated)).any()) or any(
            g is not None for g in self.gold_spans
        )

    @property
    def has_gold_spans(self) -> bool:
        return any(g is not None for g in self.gold_spans)


def _pairs(raw: Any) -> Spans:
    values = json.loads(raw) if isinstance(raw, str) else raw
    return [(int(a), int(b)) for a, b in values or []]


def load_run_data(store: Store, run_id: str | None = None) -> RunData:
    """Everything the agreement report needs about one run, in a few queries."""
    info = resolve_run(store, run_id)
    rid = info.run_id
    with store.read() as con:
        panel_order = _panel_order(con, rid)
        items = con.execute(
            "SELECT i.item_id, g.gold_hallucinated, g.gold_spans, coalesce(g.has_span_labels, "
            "false) FROM items i LEFT JOIN gold_labels g USING (run_id, item_id) "
            "WHERE i.run_id = ? ORDER BY i.row_number, i.item_id",
            [rid],
        ).fetchall()
        judgments = con.execute(
            "SELECT item_id, judge_id, output_kind, score, prompt_name, verdict FROM judgments "
            "WHERE run_id = ?",
            [rid],
        ).fetchall()
        spans = con.execute(
            "SELECT s.item_id, s.judge_id, s.char_start, s.char_end FROM judgment_spans s "
            "WHERE s.run_id = ? AND s.char_start IS NOT NULL AND s.char_end IS NOT NULL "
            "ORDER BY s.item_id, s.judge_id, s.span_index",
            [rid],
        ).fetchall()
        consensus = con.execute(
            "SELECT item_id, status, score_median, hallucinated, n_span_judges FROM consensus "
            "WHERE run_id = ?",
            [rid],
        ).fetchall()
        coherence = con.execute(
            "SELECT count(*) FILTER (WHERE c.unlocalised), "
            "count(*) FILTER (WHERE NOT c.hallucinated AND EXISTS (SELECT 1 FROM "
            "consensus_spans s WHERE s.run_id = c.run_id AND s.item_id = c.item_id)) "
            "FROM consensus c WHERE c.run_id = ? AND c.status = 'ok'",
            [rid],
        ).fetchone()
        rule_row = con.execute("SELECT consensus FROM runs WHERE run_id = ?", [rid]).fetchone()
        consensus_spans = con.execute(
            "SELECT item_id, char_start, char_end FROM consensus_spans WHERE run_id = ? "
            "ORDER BY item_id, span_index",
            [rid],
        ).fetchall()

    item_ids = [str(r[0]) for r in items]
    item_index = {item_id: i for i, item_id in enumerate(item_ids)}
    seen = {str(r[1]) for r in judgments}
    judge_ids = [j for j in panel_order if j in seen] + sorted(seen - set(panel_order))
    judge_index = {judge_id: j for j, judge_id in enumerate(judge_ids)}
    n_judges, n_items = len(judge_ids), len(item_ids)

    kinds: dict[str, Counter[str]] = {j: Counter() for j in judge_ids}
    prompt_votes: dict[str, Counter[str]] = {j: Counter() for j in judge_ids}
    scores = np.full((n_judges, n_items), np.nan)
    verdicts = np.full((n_judges, n_items), np.nan)
    span_lists: list[list[Spans | None]] = [[None] * n_items for _ in judge_ids]
    for item_id, judge_id, output_kind, score, prompt_name, verdict in judgments:
        if item_id not in item_index:
            continue
        j, i = judge_index[judge_id], item_index[item_id]
        kinds[judge_id][str(output_kind)] += 1
        if prompt_name:
            prompt_votes[judge_id][str(prompt_name)] += 1
        if score is not None:
            scores[j, i] = float(score)
            verdicts[j, i] = float(bool(verdict))
            if output_kind == "spans":
                span_lists[j][i] = []
    for item_id, judge_id, start, end in spans:
        if item_id in item_index and judge_id in judge_index:
            answered = span_lists[judge_index[judge_id]][item_index[item_id]]
            if answered is not None:
                answered.append((int(start), int(end)))

    median = np.full(n_items, np.nan)
    verdict = np.full(n_items, np.nan)
    cons_spans: list[Spans | None] = [None] * n_items
    for item_id, status, score_median, hallucinated, n_span_judges in consensus:
        if item_id not in item_index or status != "ok":
            continue
        i = item_index[item_id]
        if score_median is not None:
            median[i] = float(score_median)
        if hallucinated is not None:
            verdict[i] = float(bool(hallucinated))
        if n_span_judges:
            cons_spans[i] = []
    for item_id, start, end in consensus_spans:
        if item_id in item_index:
            answered = cons_spans[item_index[item_id]]
            if answered is not None:
                answered.append((int(start), int(end)))

    gold_h = np.array(
        [np.nan if r[1] is None else float(bool(r[1])) for r in items], dtype=np.float64
    )
    gold_spans: list[Spans | None] = [_pairs(r[2]) if r[3] else None for r in items]

    return RunData(
        info=info,
        item_ids=item_ids,
        judge_ids=judge_ids,
        output_kinds={j: (kinds[j].most_common(1)[0][0] if kinds[j] else "") for j in judge_ids},
        prompts={
            j: (prompt_votes[j].most_common(1)[0][0] if prompt_votes[j] else None)
            for j in judge_ids
        },
        scores=scores,
        verdicts=verdicts,
        spans=span_lists,
        consensus_median=median,
        consensus_verdict=verdict,
        consensus_spans=cons_spans,
        gold_hallucinated=gold_h,
        gold_spans=gold_spans,
        consensus_rule=_rule_text(rule_row[0] if rule_row else None),
        contradictions=int(coherence[1]) if coherence else 0,
        unlocalised=int(coherence[0]) if coherence else 0,
    )


# ---- flows
@dataclass(frozen=True, slots=True)
class _Lines:
    """The run's span sets, each placed once on one line (:class:`SpanLine`)."""

    judges: list[SpanLine]
    consensus: SpanLine
    gold: SpanLine

    @classmethod
    def of(cls, data: RunData) -> _Lines:
        stride = span_stride(*data.spans, data.consensus_spans, data.gold_spans)
        return cls(
            [SpanLine.of(spans, stride) for spans in data.spans],
            SpanLine.of(data.consensus_spans, stride),
            SpanLine.of(data.gold_spans, stride),
        )


def _group(
    data: RunData,
    lines: _Lines,
    name: str,
    prompt: str | None,
    rows: list[int],
    gold: bool,
) -> GroupAgreement:
    judges = [data.judge_ids[j] for j in rows]
    scores = data.scores[rows]
    verdicts = data.verdicts[rows]
    active = ~np.isnan(scores).all(axis=1)
    n_active = int(active.sum())
    spans = [data.spans[j] for j in rows]
    kappa = ag.pairwise_cohen_kappa(verdicts) if rows else np.zeros((0, 0))
    span_f1 = (
        pairwise_span_f1(spans, lines=[lines.judges[j] for j in rows]) if rows else np.zeros((0, 0))
    )
    present = ~np.isnan(scores)

    pairs: list[PairAgreement] = []
    for a in range(len(rows)):
        for b in range(a + 1, len(rows)):
            shared = int((present[a] & present[b]).sum())
            n_span = sum(
                x is not None and y is not None for x, y in zip(spans[a], spans[b], strict=True)
            )
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


def _judge_summary(data: RunData, lines: _Lines, j: int) -> JudgeSummary:
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
    span_items = sum(
        a is not None and b is not None
        for a, b in zip(data.spans[j], data.consensus_spans, strict=True)
    )
    if span_items:
        f1 = pairwise_span_f1(
            [data.spans[j], data.consensus_spans], lines=[lines.judges[j], lines.consensus]
        )[0, 1]
        span = _stat(float(f1), span_items, "neither flagged a character")
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
    )


def _accuracy(
    data: RunData,
    lines: _Lines,
    name: str,
    verdict: np.ndarray,
    spans: SpanLine,
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
    return Accuracy(
        predictor=name,
        n_items=n_items,
        n_answered=n_answered,
        coverage=n_answered / n_items if n_items else None,
        response=response,
        response_answered=response_answered,
        n_span_items=int(with_labels.sum()) if span_predictor else 0,
        n_span_answered=int(with_answer.sum()),
        spans=_span_scores(lines, spans, with_labels) if span_predictor else None,
        spans_answered=_span_scores(lines, spans, with_answer) if span_predictor else None,
    )


def _span_scores(lines: _Lines, spans: SpanLine, items: np.ndarray) -> Scores | None:
    if not items.any():
        return None
    overlap, pred, gold = line_counts(spans.on(items), lines.gold.on(items))
    return Scores.of(gd.PRF.from_counts(tp=overlap, fp=pred - overlap, fn=gold - overlap))


def agreement_report(store: Store, run_id: str | None = None) -> AgreementReport:
    """Every agreement and accuracy figure of a run (the latest run when ``run_id`` is None)."""
    data = load_run_data(store, run_id)
    notes: list[str] = []
    n_judges = len(data.judge_ids)
    if n_judges == 0:
        notes.append("the run has no judgments yet")
    elif n_judges == 1:
        notes.append("one judge: pairwise metrics n/a")
    for j, judge_id in enumerate(data.judge_ids):
        if np.isnan(data.scores[j]).all():
            notes.append(f"judge {judge_id!r} scored no item: left out of every statistic")
    gold = data.has_gold
    if not gold:
        notes.append("no human labels in this run: accuracy against gold omitted")
    elif not data.has_gold_spans:
        notes.append("no human span labels in this run: span accuracy omitted")

    lines = _Lines.of(data)
    everyone = list(range(n_judges))
    groups = [_group(data, lines, "all judges", None, everyone, gold)]
    by_prompt: dict[str, list[int]] = {}
    for j, judge_id in enumerate(data.judge_ids):
        by_prompt.setdefault(data.prompts[judge_id] or NO_PROMPT, []).append(j)
    if len(by_prompt) > 1:
        for prompt, rows in by_prompt.items():
            label = "no prompt (offline detectors)" if prompt == NO_PROMPT else f"prompt {prompt}"
            groups.append(
                _group(data, lines, label, None if prompt == NO_PROMPT else prompt, rows, gold)
            )

    accuracy: list[Accuracy] = []
    if gold:
        for j, judge_id in enumerate(data.judge_ids):
            span_judge = data.output_kinds[judge_id] == "spans"
            accuracy.append(
                _accuracy(data, lines, judge_id, data.verdicts[j], lines.judges[j], span_judge)
            )
        accuracy.append(
            _accuracy(
                data,
                lines,
                "consensus",
                data.consensus_verdict,
                lines.consensus,
                bool(lines.consensus.answered.any()),
            )
        )

    return AgreementReport(
        consensus_rule=data.consensus_rule,
        contradictions=data.contradictions,
        unlocalised=data.unlocalised,
        reliability=_reliability(data),
        run_id=data.info.run_id,
        status=data.info.status,
        dataset=data.info.dataset,
        panel_name=data.info.panel_name,
        n_items=len(data.item_ids),
        judges=data.judge_ids,
        groups=groups,
        judge_summaries=[_judge_summary(data, lines, j) for j in range(n_judges)],
        has_gold=gold,
        accuracy=accuracy,
        notes=notes,
    )
