"""What the items and item templates show, built from the store's rows: numbers formatted,
links made, the item's text cut into overlay segments. Templates only place these values
(autoescaped); nothing here is markup."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from juryflow.pages.overlay import Layer, Segment, segments
from juryflow.pages.reference_text import reference_text
from juryflow.pages.rule_labels import UNLOCALISED_NOTE, RunRule, verdict_why
from juryflow.storage.annotations import Annotation
from juryflow.storage.reads.consensus_facts import ConsensusFacts
from juryflow.storage.reads.item_queries import (
    ConsensusRecord,
    ItemPage,
    ItemRecord,
    JudgmentRecord,
    Neighbours,
    SpanRecord,
)
from juryflow.viewer.items_query import ItemsQuery

EXCERPT_CHARS = 160

SORT_LABELS: dict[str, str] = {
    "disagreement": "disagreement",
    "score_spread": "score spread",
    "verdict_split": "verdict split",
    "span_disagreement": "span disagreement",
    "consensus_score": "median score",
    "consensus_verdict": "consensus verdict",
    "gold_mismatch": "gold mismatch",
    "item": "item id",
}


def number(value: Any, digits: int = 3) -> str:
    """A float for a table cell; "–" for none (or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{float(value):.{digits}f}"


def verdict_word(value: bool | None) -> str:
    return "–" if value is None else ("hallucinated" if value else "clean")


def run_href(run_id: str) -> str:
    return f"/runs/{quote(run_id, safe='')}"


def item_href(run_id: str, item_id: str, query: str = "", *, queue: bool = False) -> str:
    pairs = urlencode([("id", item_id)])
    extra = "&queue=1" if queue else ""
    return f"{run_href(run_id)}/item?{pairs}{'&' + query if query else ''}{extra}"


def items_href(run_id: str, query: str = "") -> str:
    return f"{run_href(run_id)}/items{'?' + query if query else ''}"


@dataclass(frozen=True, slots=True)
class Excerpt:
    """The start of the judged text, or the part around the first match of the search."""

    before: str
    match: str
    after: str


def excerpt(text: str, q: str, width: int = EXCERPT_CHARS) -> Excerpt:
    flat = " ".join(text.split())
    found = re.search(re.escape(q), flat, re.IGNORECASE) if q else None
    if found is None:
        cut = flat[:width]
        return Excerpt(cut + ("…" if len(flat) > width else ""), "", "")
    start = max(0, found.start() - width // 3)
    end = min(len(flat), found.end() + width // 2)
    lead = ("…" if start > 0 else "") + flat[start : found.start()]
    tail = flat[found.end() : end] + ("…" if end < len(flat) else "")
    return Excerpt(lead, found.group(0), tail)


@dataclass(frozen=True, slots=True)
class ItemsRow:
    item_id: str
    href: str
    excerpt: Excerpt
    disagreement: str
    score_spread: str
    verdict_split: str
    span_disagreement: str
    consensus_status: str
    consensus_verdict: str
    consensus_score: str
    verdicts: tuple[str, ...]
    """One word per judge of the run, in panel order: hallucinated, clean, unscored, –."""
    gold: str
    gold_mismatch: bool
    unlocalised: bool = False
    """The judges agree something is wrong, not where (the stored consensus says so)."""


@dataclass(frozen=True, slots=True)
class PageLink:
    label: str
    href: str | None
    """None: the current page, or no such page."""


@dataclass(frozen=True, slots=True)
class SortLink:
    key: str
    label: str
    href: str
    active: bool
    arrow: str


@dataclass(frozen=True, slots=True)
class ItemsModel:
    run_id: str
    run_href: str
    judges: tuple[str, ...]
    query: ItemsQuery
    rows: tuple[ItemsRow, ...]
    total: int
    first: int
    last: int
    pages: int
    page_links: tuple[PageLink, ...]
    sorts: tuple[SortLink, ...]
    sort_labels: dict[str, str]
    clear_href: str
    queue_href: str
    past_the_end: bool
    verdict_label: str = "consensus"
    """The consensus verdict column's heading, with the rule that made the verdicts."""
    unlocalised_note: str = UNLOCALISED_NOTE

    @property
    def sort_link(self) -> dict[str, SortLink]:
        return {s.key: s for s in self.sorts}


def _verdict_cell(verdicts: dict[str, bool | None], judge: str) -> str:
    if judge not in verdicts:
        return "–"
    value = verdicts[judge]
    return "unscored" if value is None else verdict_word(value)


def items_model(
    run_id: str,
    judges: Sequence[str],
    query: ItemsQuery,
    page: ItemPage,
    rule: RunRule | None = None,
    verdict_rules: Sequence[str] = (),
    facts: dict[str, ConsensusFacts] | None = None,
) -> ItemsModel:
    """The items page; ``rule``, ``verdict_rules`` (the run's items' resolved verdict rules)
    and ``facts`` (the page's items' stored consensus) label the consensus columns and mark
    the unlocalised items."""
    rule = rule or RunRule.of(None)
    facts = facts or {}
    # one verdict rule over the run (the usual case) is named in the heading
    shown_rule = verdict_rules[0] if len(verdict_rules) == 1 else None
    item_query = query.query_string()
    rows = tuple(
        ItemsRow(
            item_id=row.item_id,
            href=item_href(run_id, row.item_id, item_query),
            excerpt=excerpt(row.text, query.q),
            disagreement=number(row.measures["disagreement"]),
            score_spread=number(row.measures["score_spread"]),
            verdict_split=number(row.measures["verdict_split"]),
            span_disagreement=number(row.measures["span_disagreement"]),
            consensus_status=str(row.measures["consensus_status"] or "none"),
            consensus_verdict=verdict_word(row.measures["consensus_hallucinated"]),
            consensus_score=number(row.measures["consensus_score"], 2),
            verdicts=tuple(_verdict_cell(row.verdicts, j) for j in judges),
            gold=verdict_word(row.measures["gold_hallucinated"]),
            gold_mismatch=bool(row.measures["gold_mismatch"]),
            unlocalised=row.item_id in facts and facts[row.item_id].unlocalised,
        )
        for row in page.rows
    )
    pages = max(1, math.ceil(page.total / query.per_page))
    return ItemsModel(
        run_id=run_id,
        run_href=run_href(run_id),
        judges=tuple(judges),
        query=query,
        rows=rows,
        total=page.total,
        first=query.offset + 1 if rows else 0,
        last=query.offset + len(rows),
        pages=pages,
        page_links=_page_links(run_id, query, pages),
        sorts=_sort_links(run_id, query),
        sort_labels=SORT_LABELS,
        clear_href=items_href(run_id),
        queue_href=f"{run_href(run_id)}/queue",
        past_the_end=not rows and query.page > 1,
        verdict_label=f"verdict ({rule.verdict_label(shown_rule)})",
    )


def _page_links(run_id: str, query: ItemsQuery, pages: int) -> tuple[PageLink, ...]:
    def link(label: str, page: int) -> PageLink:
        if page < 1 or page > pages or page == query.page:
            return PageLink(label, None)
        return PageLink(label, items_href(run_id, query.query_string(page=page)))

    shown = sorted({1, pages, *range(query.page - 2, query.page + 3)} & set(range(1, pages + 1)))
    links = [link("‹ previous", query.page - 1)]
    last = 0
    for page in shown:
        if page > last + 1:
            links.append(PageLink("…", None))
        links.append(link(f"{page:,}", page))
        last = page
    links.append(link("next ›", query.page + 1))
    return tuple(links)


def _sort_links(run_id: str, query: ItemsQuery) -> tuple[SortLink, ...]:
    links = []
    for key, label in SORT_LABELS.items():
        active = key == query.sort
        # a second click on the active sort flips it; a new sort starts with its usual way
        order = (
            ("asc" if query.order == "desc" else "desc")
            if active
            else ("asc" if key == "item" else "desc")
        )
        href = items_href(run_id, query.query_string(sort=key, order=order, page=1))
        arrow = ("↓" if query.order == "desc" else "↑") if active else ""
        links.append(SortLink(key, label, href, active, arrow))
    return tuple(links)


# -- one item ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JudgeView:
    """One judge's answer on the item, with its overlay layer key."""

    key: str
    record: JudgmentRecord
    score: str
    verdict: str
    latency: str
    cost: str
    tokens: str
    anchored: tuple[SpanRecord, ...]
    unanchored: tuple[SpanRecord, ...]


@dataclass(frozen=True, slots=True)
class ConsensusSpanView:
    start: int
    end: int
    text: str
    votes: int
    value: str
    """``START-END``, as the form posts it."""
    decision: str
    """accept, reject or "" (the latest annotation's decision on it)."""


@dataclass(frozen=True, slots=True)
class ItemModel:
    run_id: str
    run_href: str
    record: ItemRecord
    text: str
    reference: tuple[tuple[str, str], ...]
    """The item's other variables (the reference data the judges were given)."""
    layers: tuple[Layer, ...]
    segments: tuple[Segment, ...]
    judges: tuple[JudgeView, ...]
    missing_judges: tuple[str, ...]
    skipped_judges: tuple[str, ...]
    """Not called (early stopping): the judges that were had already decided the item."""
    consensus: ConsensusRecord | None
    consensus_spans: tuple[ConsensusSpanView, ...]
    consensus_score: str
    consensus_verdict: str
    score_label: str
    """What the consensus score is: ``median score`` (the run's score reducer)."""
    median_score: str | None
    """The median too, where the score reducer is another (the items page sorts by it)."""
    verdict_why: str
    """The rule behind the verdict and what it went by (``— spans: union marks ...``)."""
    unlocalised: bool
    unlocalised_note: str
    gold_verdict: str
    measures: dict[str, str]
    annotation: Annotation | None
    annotation_verdict: str
    """hallucinated, clean or unset: the form's preset."""
    missed: tuple[tuple[int, int, str], ...]
    previous_href: str | None
    next_href: str | None
    items_href: str
    queue_href: str
    position: int
    total: int
    queue: bool
    filtered: bool
    post_href: str
    view: str
    """The items query the page was opened with, posted back by the form as ``view``."""


def _tokens(j: JudgmentRecord) -> str:
    if j.input_tokens is None and j.output_tokens is None:
        return "–"
    cache = []
    if j.cache_read_tokens:
        cache.append(f"{j.cache_read_tokens:,} from the prompt cache")
    if j.cache_write_tokens:
        cache.append(f"{j.cache_write_tokens:,} written to it")
    served = f" ({', '.join(cache)})" if cache else ""
    return f"{j.input_tokens or 0:,} in{served} / {j.output_tokens or 0:,} out"


def _judge_view(key: str, j: JudgmentRecord) -> JudgeView:
    return JudgeView(
        key=key,
        record=j,
        score=number(j.score, 2),
        verdict="unscored" if j.score is None else verdict_word(j.verdict),
        latency="–" if j.latency_ms is None else f"{j.latency_ms:,.0f} ms",
        cost="–" if j.cost_usd is None or math.isnan(j.cost_usd) else f"${j.cost_usd:.4f}",
        tokens=_tokens(j),
        anchored=tuple(s for s in j.spans if s.char_start is not None and s.char_end is not None),
        unanchored=tuple(s for s in j.spans if s.char_start is None or s.char_end is None),
    )


def item_model(
    record: ItemRecord,
    annotation: Annotation | None,
    query: ItemsQuery,
    around: Neighbours,
    *,
    queue: bool,
    rule: RunRule | None = None,
    facts: ConsensusFacts | None = None,
) -> ItemModel:
    """One item's page; ``rule`` (the run's stored rule) and ``facts`` (the item's stored
    consensus with its counts) say which rule made the score and the verdict.

    Over 100 lines: the page's model is built field by field in one place, in the order
    the page shows them, so that what the page says can be read top to bottom here."""
    rule = rule or RunRule.of(None)
    text = record.text
    panel_keys = {judge: f"j{k}" for k, judge in enumerate(record.judges)}
    judges = tuple(
        _judge_view(panel_keys[j.judge_id], j) for j in record.judgments if j.judge_id in panel_keys
    )
    layers = [
        Layer(
            view.key,
            view.record.judge_id,
            [(s.char_start or 0, s.char_end or 0) for s in view.anchored],
        )
        for view in judges
    ]
    consensus = record.consensus
    consensus_spans = consensus.spans if consensus is not None else ()
    layers.append(
        Layer("consensus", "consensus", [(s.char_start, s.char_end) for s in consensus_spans])
    )
    if record.gold_spans is not None or record.gold_hallucinated is not None:
        layers.append(Layer("gold", "gold (dataset)", list(record.gold_spans or ())))
    if annotation is not None:
        layers.append(
            Layer("annotation", f"annotation ({annotation.reviewer})", list(annotation.spans))
        )
    decisions = {
        (d.char_start, d.char_end): ("accept" if d.accepted else "reject")
        for d in (annotation.decisions if annotation else ())
    }
    item_query = query.query_string()
    answered = {j.judge_id for j in record.judgments}
    return ItemModel(
        run_id=record.run_id,
        run_href=run_href(record.run_id),
        record=record,
        text=text,
        reference=tuple(
            (name, reference_text(value))
            for name, value in record.variables.items()
            if name != record.text_variable
        ),
        layers=tuple(layers),
        segments=tuple(segments(text, layers)),
        judges=judges,
        missing_judges=tuple(
            j for j in record.judges if j not in answered and j not in record.skipped
        ),
        skipped_judges=record.skipped,
        consensus=consensus,
        consensus_spans=tuple(
            ConsensusSpanView(
                s.char_start,
                s.char_end,
                s.text,
                s.votes,
                f"{s.char_start}-{s.char_end}",
                decisions.get((s.char_start, s.char_end), ""),
            )
            for s in consensus_spans
        ),
        consensus_score=number(consensus.score if consensus else None, 2),
        consensus_verdict=verdict_word(consensus.hallucinated if consensus else None),
        score_label=rule.score_label(),
        median_score=(
            number(consensus.score_median, 2)
            if consensus is not None and rule.score != "median"
            else None
        ),
        verdict_why=verdict_why(rule, facts) if facts is not None else "",
        unlocalised=bool(consensus and consensus.unlocalised),
        unlocalised_note=UNLOCALISED_NOTE,
        gold_verdict=verdict_word(record.gold_hallucinated),
        measures={
            name: number(around.measures.get(name))
            for name in ("disagreement", "score_spread", "verdict_split", "span_disagreement")
        },
        annotation=annotation,
        annotation_verdict=(
            "unset"
            if annotation is None or annotation.verdict is None
            else verdict_word(annotation.verdict)
        ),
        missed=tuple((s, e, text[s:e]) for s, e in (annotation.missed if annotation else ())),
        previous_href=(
            item_href(record.run_id, around.previous, item_query, queue=queue)
            if around.previous
            else None
        ),
        next_href=(
            item_href(record.run_id, around.next, item_query, queue=queue) if around.next else None
        ),
        items_href=items_href(record.run_id, item_query),
        queue_href=f"{run_href(record.run_id)}/queue",
        position=around.position,
        total=around.total,
        queue=queue,
        filtered=query.filtered,
        post_href=f"{run_href(record.run_id)}/annotations",
        view=item_query,
    )
