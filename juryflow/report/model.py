"""What the HTML report shows, read and shaped for its templates (no markup here).

Where the numbers come from: every agreement, bias and accuracy figure is a field of
:class:`juryflow.analysis.agreement_report.AgreementReport`, and the disputed items (which,
in what order, their measures and spans) are
:func:`juryflow.analysis.agreement_report.disagreements`: the very objects
``juryflow agreement`` and ``juryflow disagreements`` print, so the report cannot tell a
different story. Read here directly is only what those do not carry: the run's metadata
and summary counts, each judge's provider and model, the raw scores behind the
histograms, the disputed items' other variables (the reference data), the run's stored
consensus rule with each disputed item's stored consensus (to say which rule made each
consensus number) and the regression comparison. The bias probes are the run page's
(:mod:`juryflow.pages.bias_section`), from ``juryflow agreement --bias``'s report.

The tables are lists of ``(label, cell)`` pairs (:data:`GROUP_METRICS`,
:data:`PAIR_COLUMNS`, :data:`JUDGE_COLUMNS`, :data:`ACCURACY_COLUMNS`, ...): showing one
more field of the agreement report is one more pair. A cell is plain data (:class:`Cell`);
the templates escape it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar
from urllib.parse import quote

from juryflow.analysis.agreement_report import (
    Accuracy,
    AgreementReport,
    DisputedItem,
    GroupAgreement,
    JudgeAnswer,
    JudgeSummary,
    PairAgreement,
    Scores,
    SpanOut,
    Stat,
    agreement_report,
    disagreements,
)
from juryflow.pages.bias_section import BiasSection, bias_section
from juryflow.pages.overlay import Layer, Segment, segments
from juryflow.pages.reference_text import reference_text
from juryflow.pages.rule_labels import RunRule, consensus_line
from juryflow.storage.annotations import GoldSource
from juryflow.storage.comparisons import latest_comparison
from juryflow.storage.reads.consensus_facts import (
    ConsensusFacts,
    consensus_facts,
    run_verdict_rules,
)
from juryflow.storage.reads.report_queries import item_variables, judge_stats, raw_scores
from juryflow.storage.reads.run_queries import cost_split
from juryflow.storage.store import RunRecord, Store

T = TypeVar("T")

GOLD_LABELS: dict[str, str] = {
    "dataset": "human label",
    "annotations": "adjudicated label",
    "both": "human label (adjudicated first)",
}
"""What the gold layer and columns are called, by where the labels come from."""


# The agreement figures are printed as `juryflow agreement` prints them (fixed decimals,
# "n/a (why)" for an undefined Stat), so a number can be looked up in either by its text.


def num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def fmt(value: Any, digits: int = 3) -> str:
    """Run metadata and regression figures (not from the agreement report)."""
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def verdict_word(value: bool | None) -> str:
    return "–" if value is None else ("hallucinated" if value else "clean")


def anchor(kind: str, key: str) -> str:
    """The id of a section element about ``key`` (an item, a judge)."""
    return f"{kind}-{key}"


def href(kind: str, key: str) -> str:
    """A link to :func:`anchor`; percent-encoded, as browsers decode a fragment to find
    the element whose id it names."""
    return "#" + quote(anchor(kind, key), safe="")


# ----------------------------------------------------------------------------- cells


@dataclass(frozen=True, slots=True)
class Cell:
    """One table cell: ``text``, then ``note`` in small print as ``(note)``."""

    text: str
    num: bool = False
    na: bool = False
    title: str | None = None
    note: str | None = None
    href: str | None = None


@dataclass(frozen=True, slots=True)
class Row:
    cells: list[Cell]
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Table:
    id: str
    header: list[str]
    rows: list[Row]


Column = tuple[str, Callable[[T], Cell]]


def text_cell(value: Any) -> Cell:
    return Cell("" if value is None else str(value))


def judge_cell(judge_id: str) -> Cell:
    return Cell(judge_id, href=href("judge", judge_id))


def item_cell(item_id: str) -> Cell:
    return Cell(item_id, href=href("item", item_id))


def count_cell(value: int) -> Cell:
    return Cell(str(value), num=True)


def num_cell(value: float | None, digits: int = 3) -> Cell:
    return Cell(num(value, digits), num=True)


def pct_cell(value: float | None) -> Cell:
    return Cell("—" if value is None else f"{100 * value:.1f} %", num=True)


def stat_cell(stat: Stat | None, *, signed: bool = False) -> Cell:
    """A statistic with what it rests on as a tooltip; undefined: n/a and the reason, as
    visible text too (it survives print and screenshots)."""
    if stat is None:
        return Cell("—", num=True)
    if stat.value is None:
        return Cell("n/a", num=True, na=True, title=stat.note, note=stat.note)
    text = f"{stat.value:+.3f}" if signed else stat.show()
    return Cell(text, num=True, title=f"n = {stat.n}")


def score_cell(scores: Scores | None, field_name: str, why: str) -> Cell:
    """One of precision / recall / F1; n/a with ``why`` as a tooltip when there are none."""
    if scores is None:
        return Cell("n/a", num=True, na=True, title=why)
    value: float = getattr(scores, field_name)
    return Cell(num(value), num=True, title=f"tp {scores.tp}, fp {scores.fp}, fn {scores.fn}")


def table(
    table_id: str,
    columns: Sequence[Column[T]],
    rows: Sequence[T],
    row_id: Callable[[T], str] | None = None,
) -> Table:
    """One row per element of ``rows``, one column per ``(label, cell)`` pair."""
    return Table(
        table_id,
        [label for label, _ in columns],
        [
            Row([cell(row) for _, cell in columns], None if row_id is None else row_id(row))
            for row in rows
        ],
    )


# --------------------------------------------------------------- what the tables show

REPORT_FACTS: tuple[tuple[str, Callable[[AgreementReport], str]], ...] = (
    ("items", lambda r: str(r.n_items)),
    ("judges compared", lambda r: ", ".join(r.judges) or "–"),
    ("human labels", lambda r: "yes" if r.has_gold else "no"),
)

GROUP_METRICS: tuple[tuple[str, Callable[[GroupAgreement], Stat | None]], ...] = (
    ("Krippendorff α, interval (scores)", lambda g: g.alpha_interval),
    ("Krippendorff α, ordinal (scores)", lambda g: g.alpha_ordinal),
    ("Fleiss κ (verdicts)", lambda g: g.fleiss_kappa),
    ("percent agreement (verdicts)", lambda g: g.percent_agreement),
    ("mean pairwise Cohen κ", lambda g: g.mean_cohen_kappa),
    ("mean pairwise span F1 (chars)", lambda g: g.mean_span_f1),
    ("effective panel size (errors vs gold)", lambda g: g.effective_panel_size),
)
"""Rows of the group table; a row that no group has (None everywhere) is left out."""

PAIR_COLUMNS: tuple[Column[PairAgreement], ...] = (
    ("judge A", lambda p: judge_cell(p.judge_a)),
    ("judge B", lambda p: judge_cell(p.judge_b)),
    ("items", lambda p: count_cell(p.n_items)),
    ("verdict agreement", lambda p: stat_cell(p.verdict_agreement)),
    ("Cohen κ", lambda p: stat_cell(p.cohen_kappa)),
    ("span items", lambda p: count_cell(p.n_span_items)),
    ("span F1", lambda p: stat_cell(p.span_f1)),
)


def _vs_consensus(judge: JudgeSummary, measure: Literal["precision", "recall"]) -> float | None:
    scores = judge.consensus_spans
    return None if scores is None else getattr(scores, measure)


JUDGE_COLUMNS: tuple[Column[JudgeSummary], ...] = (
    ("judge", lambda j: judge_cell(j.judge_id)),
    ("output", lambda j: text_cell(j.output_kind)),
    ("prompt", lambda j: text_cell(j.prompt or "—")),
    ("scored", lambda j: Cell(f"{j.n_scored}/{j.n_items}", num=True)),
    ("mean score", lambda j: num_cell(j.mean_score)),
    ("flag rate", lambda j: pct_cell(j.flag_rate)),
    ("bias vs median", lambda j: stat_cell(j.bias, signed=True)),
    ("verdict = consensus", lambda j: stat_cell(j.consensus_verdict_agreement)),
    ("span F1 vs consensus", lambda j: stat_cell(j.consensus_span_f1)),
    ("span precision", lambda j: num_cell(_vs_consensus(j, "precision"))),
    ("span recall", lambda j: num_cell(_vs_consensus(j, "recall"))),
)

_NO_VERDICT = "no verdict on an item with a human label"
_NO_SPANS = "no item with both span answers and human span labels"

ACCURACY_COLUMNS: tuple[Column[Accuracy], ...] = (
    (
        "predictor",
        lambda a: text_cell(a.predictor) if a.predictor == "consensus" else judge_cell(a.predictor),
    ),
    ("items", lambda a: count_cell(a.n_items)),
    ("coverage", lambda a: pct_cell(a.coverage)),
    ("precision", lambda a: score_cell(a.response, "precision", _NO_VERDICT)),
    ("recall", lambda a: score_cell(a.response, "recall", _NO_VERDICT)),
    ("F1", lambda a: score_cell(a.response, "f1", _NO_VERDICT)),
    ("span items", lambda a: count_cell(a.n_span_items)),
    ("span P", lambda a: score_cell(a.spans, "precision", _NO_SPANS)),
    ("span R", lambda a: score_cell(a.spans, "recall", _NO_SPANS)),
    ("span F1", lambda a: score_cell(a.spans, "f1", _NO_SPANS)),
)

ITEM_MEASURES: tuple[tuple[str, Callable[[DisputedItem], str]], ...] = (
    ("disagreement", lambda d: num(d.disagreement)),
    ("score spread", lambda d: num(d.score_spread, 2)),
    (
        "verdicts",
        lambda d: f"{d.n_hallucinated_verdicts} hallucinated / {d.n_clean_verdicts} clean",
    ),
    ("span disagreement", lambda d: num(d.span_disagreement, 2)),
    ("consensus", lambda d: d.consensus_status or "none"),
    ("human label", lambda d: verdict_word(d.gold_hallucinated)),
)
"""The measures of each disputed item, in its article and in the index of disputed items."""


def _measure_column(label: str, show: Callable[[DisputedItem], str]) -> Column[DisputedItem]:
    numeric = label in {"disagreement", "score spread", "span disagreement"}
    return label, lambda d: Cell(show(d), num=numeric)


DISPUTED_COLUMNS: tuple[Column[DisputedItem], ...] = (
    ("rank", lambda d: count_cell(d.rank)),
    ("item", lambda d: item_cell(d.item_id)),
    *(_measure_column(label, show) for label, show in ITEM_MEASURES),
)


# ------------------------------------------------------------------------ one item


@dataclass(frozen=True, slots=True)
class JudgeLine:
    """One judge's answer to a disputed item."""

    judge_id: str
    layer: str | None
    """The key of its span layer in the overlay; None when it gave no spans."""
    score: str
    verdict: str
    detail: str
    unscored: bool

    @property
    def href(self) -> str:
        return href("judge", self.judge_id)


@dataclass(frozen=True, slots=True)
class Unanchored:
    who: str
    text: str
    match: str | None


@dataclass(frozen=True, slots=True)
class ItemView:
    item: DisputedItem
    block_id: str
    """The id of its overlay (toggles are named after it)."""
    judged_variable: str | None
    reference: list[tuple[str, str]]
    """The item's other variables, as the judges were given them."""
    layers: list[Layer]
    segments: list[Segment]
    judges: list[JudgeLine]
    consensus: str
    unanchored: list[Unanchored]
    measures: list[tuple[str, str]]

    @property
    def id(self) -> str:
        return anchor("item", self.item.item_id)

    @property
    def href(self) -> str:
        return href("item", self.item.item_id)


def _offsets(spans: Sequence[SpanOut]) -> list[tuple[int, int]]:
    return [(s.start, s.end) for s in spans if s.start is not None and s.end is not None]


def judged_variable(variables: dict[str, Any]) -> str | None:
    """Which variable the offsets point into: ``response``, else ``output`` (as
    :func:`juryflow.analysis.agreement_report.disagreements` reads the text)."""
    for name in ("response", "output"):
        if variables.get(name) is not None:
            return name
    return None


def _judge_line(answer: JudgeAnswer, layer: str | None) -> JudgeLine:
    if answer.score is None:
        return JudgeLine(
            answer.judge_id, None, "—", "–", f"unscored: {answer.unscored_reason or ''}", True
        )
    if answer.output_kind != "spans":
        detail = "score only"
    else:
        anchored = len(_offsets(answer.spans))
        detail = f"{anchored} span(s) in the text"
        if len(answer.spans) > anchored:
            detail += f", {len(answer.spans) - anchored} not found in it"
    return JudgeLine(
        answer.judge_id, layer, num(answer.score, 2), verdict_word(answer.verdict), detail, False
    )


def item_view(
    item: DisputedItem,
    variables: dict[str, Any],
    keys: dict[str, str],
    gold_label: str,
    rule: RunRule | None = None,
    facts: ConsensusFacts | None = None,
) -> ItemView:
    """The article of one disputed item: ``keys`` maps each judge to its layer key; ``rule``
    and ``facts`` (the run's stored rule, the item's stored consensus) say which rule made
    the consensus."""
    ok = item.consensus_status == "ok"
    layers: list[Layer] = []
    judges: list[JudgeLine] = []
    unanchored: list[Unanchored] = []
    for answer in item.judges:
        key = keys.setdefault(answer.judge_id, f"j{len(keys)}")
        has_spans = answer.score is not None and answer.output_kind == "spans"
        if has_spans:
            spans = _offsets(answer.spans)
            layers.append(Layer(key, f"{answer.judge_id} ({len(spans)})", spans))
            unanchored.extend(
                Unanchored(answer.judge_id, s.text, s.match)
                for s in answer.spans
                if s.start is None or s.end is None
            )
        judges.append(_judge_line(answer, key if has_spans else None))
    if ok:
        spans = _offsets(item.consensus_spans)
        layers.append(Layer("consensus", f"consensus ({len(spans)})", spans))
    if item.gold_spans is not None:
        spans = _offsets(item.gold_spans)
        layers.append(Layer("gold", f"{gold_label} ({len(spans)})", spans))
    judged = judged_variable(variables)
    return ItemView(
        item=item,
        block_id=f"overlay-{item.rank}",
        judged_variable=judged,
        reference=[(k, reference_text(v)) for k, v in variables.items() if k != judged],
        layers=layers,
        segments=segments(item.text, layers),
        judges=judges,
        consensus=(
            consensus_line(item.consensus_score, rule or RunRule.of(None), facts)
            if ok
            else item.consensus_status or "none"
        ),
        unanchored=unanchored,
        measures=[(label, show(item)) for label, show in ITEM_MEASURES],
    )


# ------------------------------------------------------------------------------ the data


@dataclass(frozen=True, slots=True)
class JudgeMeta:
    """What the run recorded about a judge besides its answers."""

    provider: str | None
    model: str | None
    judgments: int
    cost_usd: float | None


@dataclass(frozen=True, slots=True)
class ReportData:
    run: RunRecord
    summary: dict[str, Any]
    """``Store.run_summary``: counts, consensus hallucination rate, cost."""
    agreement: AgreementReport
    disputed: list[DisputedItem]
    judge_meta: dict[str, JudgeMeta]
    scores: dict[str, list[float]]
    """Judge id -> its raw scores, for the histograms."""
    consensus_medians: list[float]
    comparison: dict[str, Any] | None
    variables: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Item id -> its variables, for the disputed items."""
    gold: GoldSource = "dataset"
    # what says which rule made each consensus number: the run's stored rule, the verdict
    # rules its items were decided by, the disputed items' stored consensus
    rule: RunRule = field(default_factory=lambda: RunRule.of(None))
    verdict_rules: list[str] = field(default_factory=list)
    facts: dict[str, ConsensusFacts] = field(default_factory=dict)
    bias: BiasSection | None = None
    """The bias probes, as the run's page shows them (None: not loaded)."""

    @property
    def judges(self) -> list[str]:
        """The judges in panel order, as the agreement report has them."""
        return self.agreement.judges

    @property
    def gold_label(self) -> str:
        return GOLD_LABELS[self.gold]

    def layer_keys(self) -> dict[str, str]:
        """Each judge's overlay layer (and colour): ``j<position in the panel>``."""
        return {judge_id: f"j{k}" for k, judge_id in enumerate(self.judges)}

    def items(self) -> list[ItemView]:
        keys = self.layer_keys()
        return [
            item_view(
                d,
                self.variables.get(d.item_id, {}),
                keys,
                self.gold_label,
                self.rule,
                self.facts.get(d.item_id),
            )
            for d in self.disputed
        ]


def _judge_meta(store: Store, run_id: str) -> dict[str, JudgeMeta]:
    return {
        str(row["judge_id"]): JudgeMeta(
            row["provider"],
            row["model"],
            int(row["judgments"]),
            None if row["cost_usd"] is None else float(row["cost_usd"]),
        )
        for row in judge_stats(store, run_id)
    }


def load_report_data(
    store: Store, run_id: str, top: int = 15, gold: GoldSource = "dataset"
) -> ReportData:
    run = store.get_run(run_id)
    if run is None:
        raise ValueError(f"no run {run_id!r} in {store.path}")
    scores, medians = raw_scores(store, run_id)
    disputed = disagreements(store, run_id, top, gold=gold)
    with store.read() as con:
        verdict_rules = run_verdict_rules(con, run_id)
        facts = consensus_facts(con, run_id, [d.item_id for d in disputed])
    agreement = agreement_report(store, run_id, gold=gold)
    return ReportData(
        run=run,
        summary={**store.run_summary(run_id), **cost_split(store, run_id)},
        agreement=agreement,
        disputed=disputed,
        judge_meta=_judge_meta(store, run_id),
        scores=scores,
        consensus_medians=medians,
        comparison=latest_comparison(store, run_id),
        variables=item_variables(store, run_id, [d.item_id for d in disputed]),
        gold=gold,
        rule=RunRule.of(run.consensus),
        verdict_rules=verdict_rules,
        facts=facts,
        bias=bias_section(store, agreement),
    )
