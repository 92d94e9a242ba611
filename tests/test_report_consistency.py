"""The HTML report shows the numbers `juryflow agreement` / `disagreements` show, no others.

Every agreement, accuracy and bias figure of the report comes from
:func:`juryflow.analysis.agreement_report.agreement_report`, and its disputed items from
:func:`juryflow.analysis.agreement_report.disagreements`. Checked on two mixed panels (a
score-only judge next
to span judges): a hand-built store whose numbers are known, and a real run of the
Prefect flow against the stand-in model server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from juryflow.analysis.agreement_report import (
    Accuracy,
    AgreementReport,
    JudgeSummary,
    PairAgreement,
    Stat,
    agreement_report,
    disagreements,
)
from juryflow.maths.consensus import item_consensus
from juryflow.maths.records import GoldLabels, Item, Judgment, Span
from juryflow.planning.run_request import RunRequest
from juryflow.report.html import render_report
from juryflow.storage.store import RunRecord, Store
from tests.conftest import SAMPLE

# -- reading the report back ------------------------------------------------------------


@dataclass
class _Cell:
    text: str = ""


@dataclass
class _Svg:
    titles: list[str] = field(default_factory=list)
    cells: list[str] = field(default_factory=list)
    """The texts drawn in the heatmap cells, row by row."""


class _Page(HTMLParser):
    """Tables (by id), SVG charts (by aria-label) and the disputed items, in page order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[_Cell]]] = {}
        self.svgs: dict[str, _Svg] = {}
        self.items: list[str] = []
        self._table: list[list[_Cell]] | None = None
        self._cell: _Cell | None = None
        self._svg: _Svg | None = None
        self._svg_text: str | None = None
        self._in_title = False
        self._in_cell_text = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id"):
            self._table = self.tables.setdefault(str(a["id"]), [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in {"td", "th"} and self._table is not None:
            self._cell = _Cell()
            self._table[-1].append(self._cell)
        elif tag == "svg":
            self._svg = self.svgs.setdefault(str(a.get("aria-label")), _Svg())
        elif tag == "title" and self._svg is not None:
            self._in_title = True
            self._svg.titles.append("")
        elif tag == "text" and self._svg is not None and "cell" in (a.get("class") or ""):
            self._in_cell_text = True
            self._svg.cells.append("")
        elif tag == "article" and "item" in (a.get("class") or "").split():
            self.items.append(str(a.get("id")))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        elif tag in {"td", "th"}:
            self._cell = None
        elif tag == "svg":
            self._svg = None
        elif tag == "title":
            self._in_title = False
        elif tag == "text":
            self._in_cell_text = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.text += data
        if self._svg is not None and self._in_title:
            self._svg.titles[-1] += data
        if self._svg is not None and self._in_cell_text:
            self._svg.cells[-1] += data


def _page(document: str) -> _Page:
    page = _Page()
    page.feed(document)
    return page


def _texts(row: list[_Cell]) -> list[str]:
    return [" ".join(c.text.split()) for c in row]


# -- the hand-built mixed panel -----------------------------------------------------------
#
# A score-only judge next to two span judges, four items whose ranks by the
# item_disagreement view (mean of score spread, verdict split, span disagreement) are:
#
#   item  scorer  spans-a   spans-b   spread  split  span dis.  disagreement  rank
#   m-1   0.0     gamma     gamma     1.0     0.667  0.0        0.556         2
#   m-2   1.0     gamma     -         1.0     0.667  1.0        0.889         1
#   m-3   0.9     Alpha     theta     0.1     0.0    1.0        0.367         3
#   m-4   0.0     -         -         0.0     0.0    0.0        0.0           4
#
# m-1 and m-2 have the same score spread and minority, so ranking by those (as the report
# once did) puts m-1 first; m-3 has no split verdict but its span judges disagree.

TEXT = "Alpha beta gamma delta epsilon zeta eta theta."
SCORE_JUDGE = "scorer"
SPAN_JUDGES = ("spans-a", "spans-b")
HAND_PLAN: dict[str, tuple[float, tuple[str, ...], tuple[str, ...]]] = {
    "m-1": (0.0, ("gamma",), ("gamma",)),
    "m-2": (1.0, ("gamma",), ()),
    "m-3": (0.9, ("Alpha",), ("theta",)),
    "m-4": (0.0, (), ()),
}


def _spans(words: tuple[str, ...]) -> tuple[Span, ...]:
    return tuple(Span(TEXT.index(w), TEXT.index(w) + len(w), w, "exact") for w in words)


def _hand_store(path: Path) -> Store:
    store = Store(path)
    store.migrate()
    judges = (SCORE_JUDGE, *SPAN_JUDGES)
    store.create_run(
        RunRecord(
            run_id="mixed",
            kind="evaluate",
            suite="report-consistency",
            status="completed",
            started_at=datetime.now(UTC),
            finished_at=datetime.now(UTC),
            dataset="hand-built",
            panel_name="mixed",
            panel={"name": "mixed", "judges": [{"id": j} for j in judges]},
            prompts=[],
            quorum=2,
            n_judges=len(judges),
        )
    )
    gamma = (TEXT.index("gamma"), TEXT.index("gamma") + len("gamma"))
    items = [
        Item(
            item_id,
            {"response": TEXT},
            GoldLabels(hallucinated=item_id != "m-4", spans=(gamma,) if item_id != "m-4" else ()),
            row_number=n,
        )
        for n, item_id in enumerate(HAND_PLAN)
    ]
    store.insert_items("mixed", items)
    judgments: list[Judgment] = []
    for item_id, (score, a_words, b_words) in HAND_PLAN.items():
        judgments.append(Judgment(item_id, SCORE_JUDGE, "score", score))
        for judge_id, words in zip(SPAN_JUDGES, (a_words, b_words), strict=True):
            spans = _spans(words)
            judgments.append(Judgment(item_id, judge_id, "spans", 1.0 if spans else 0.0, spans))
    store.insert_judgments("mixed", judgments)
    store.insert_consensus(
        "mixed",
        [
            item_consensus(
                item_id, [j for j in judgments if j.item_id == item_id], len(judges), TEXT
            )
            for item_id in HAND_PLAN
        ],
    )
    return store


# -- a real run of the flow, with a score-prompt model judge and two detectors -------------


@pytest.fixture(scope="module")
def prefect_run(
    prefect_harness: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Store, str]]:
    from juryflow.flows.evaluate import evaluate
    from juryflow.standin.server import StubConfig, running_stub_server

    folder = tmp_path_factory.mktemp("report-run")
    subset = folder / "subset.jsonl"
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:12]
    subset.write_text("".join(lines), encoding="utf-8")
    key_env = "JURYFLOW_REPORT_TEST_KEY"
    with running_stub_server(StubConfig(latency_ms=1)) as stub, pytest.MonkeyPatch.context() as mp:
        mp.setenv(key_env, "sk-report-test-0123456789")
        panel = folder / "panel.yaml"
        panel.write_text(
            f"""
name: report-mixed
quorum: 2
judges:
  - id: {SCORE_JUDGE}
    provider: openai
    model: stub-random
    prompt: hallucination_score
    base_url: "{stub.openai_base_url}"
    api_key_env: {key_env}
  - {{id: numbers, provider: offline, detector: numbers}}
  - {{id: names, provider: offline, detector: names}}
""",
            encoding="utf-8",
        )
        db = folder / "run.duckdb"
        summary = asyncio.run(
            evaluate(RunRequest(dataset=str(subset), panel=str(panel), db=str(db)))
        )
    yield Store(db), str(summary["run_id"])


@dataclass(frozen=True)
class Case:
    store: Store
    run_id: str
    span_judges: tuple[str, ...]


@pytest.fixture(params=["hand-built", "prefect-flow"])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Case:
    if request.param == "hand-built":
        return Case(_hand_store(tmp_path / "mixed.duckdb"), "mixed", SPAN_JUDGES)
    store, run_id = request.getfixturevalue("prefect_run")
    return Case(store, run_id, ("numbers", "names"))


# -- (a) a score-only judge has no span F1 with anyone ---------------------------------------


def _pair(report: AgreementReport, a: str, b: str) -> PairAgreement:
    pairs = report.groups[0].pairs
    return next(p for p in pairs if {p.judge_a, p.judge_b} == {a, b})


def test_span_f1_of_a_score_only_judge_reads_na_with_the_reason(case: Case) -> None:
    report = agreement_report(case.store, case.run_id)
    page = _page(render_report(case.store, case.run_id))
    heatmap = page.svgs["span F1 (characters)"]
    judges = report.groups[0].judges
    n = len(judges)
    assert len(heatmap.cells) == n * n
    me = judges.index(SCORE_JUDGE)
    for other in case.span_judges:
        pair = _pair(report, SCORE_JUDGE, other)
        assert pair.span_f1.value is None and pair.span_f1.note
        k = judges.index(other)
        for i, j in ((me, k), (k, me)):
            assert heatmap.cells[i * n + j] == "n/a", (judges[i], judges[j])
            assert heatmap.titles[i * n + j] == (
                f"{judges[i]} / {judges[j]}: n/a ({pair.span_f1.note})"
            )
        row = next(
            _texts(r)
            for r in page.tables["pairs"][1:]
            if {r[0].text, r[1].text} == {SCORE_JUDGE, other}
        )
        assert row[6] == f"n/a ({pair.span_f1.note})"
        assert "0.000" not in row[6]
    # two span judges do have a span F1, and the report shows the same number
    a, b = case.span_judges
    pair = _pair(report, a, b)
    i, j = judges.index(a), judges.index(b)
    assert heatmap.titles[i * n + j] == f"{a} / {b}: {pair.span_f1.show()}"


# -- (b) the disputed items are the ranking of `juryflow disagreements` ------------------------


def test_disputed_items_are_in_the_order_of_juryflow_disagreements(case: Case) -> None:
    from juryflow.cli import app

    top = 8
    page = _page(render_report(case.store, case.run_id, top=top))
    shown = [item_id.removeprefix("item-") for item_id in page.items]
    expected = [d.item_id for d in disagreements(case.store, case.run_id, top)]
    n_items = agreement_report(case.store, case.run_id).n_items
    assert shown == expected and len(shown) == min(top, n_items)
    db = str(case.store.path)
    args = ["disagreements", case.run_id, "--db", db, "--top", str(top), "--format", "json"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "220"})
    assert result.exit_code == 0, result.output
    assert shown == [row["item_id"] for row in json.loads(result.output)]


def test_hand_built_ranking_follows_the_view_not_the_score_spread(tmp_path: Path) -> None:
    store = _hand_store(tmp_path / "mixed.duckdb")
    page = _page(render_report(store, "mixed"))
    assert [i.removeprefix("item-") for i in page.items] == ["m-2", "m-1", "m-3", "m-4"]


# -- (c) every figure equals the AgreementReport's ----------------------------------------------

GROUP_ROWS: dict[str, str] = {
    "Krippendorff α, interval (scores)": "alpha_interval",
    "Krippendorff α, ordinal (scores)": "alpha_ordinal",
    "Fleiss κ (verdicts)": "fleiss_kappa",
    "percent agreement (verdicts)": "percent_agreement",
    "mean pairwise Cohen κ": "mean_cohen_kappa",
    "mean pairwise span F1 (chars)": "mean_span_f1",
    "effective panel size (errors vs gold)": "effective_panel_size",
}


def _show(stat: Stat | None) -> str:
    return "—" if stat is None else stat.show()


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def test_agreement_table_shows_the_agreement_report(case: Case) -> None:
    report = agreement_report(case.store, case.run_id)
    rows = _page(render_report(case.store, case.run_id)).tables["panel-agreement"]
    header = _texts(rows[0])
    assert header[0] == "metric"
    assert header[1::2] == [f"{g.name} ({len(g.judges)})" for g in report.groups]
    seen = set()
    for row in rows[1:]:
        cells = _texts(row)
        field_name = GROUP_ROWS.get(cells[0])
        assert field_name is not None, f"a new agreement row {cells[0]!r}: check it here"
        seen.add(field_name)
        for k, group in enumerate(report.groups):
            stat: Stat | None = getattr(group, field_name)
            assert cells[1 + 2 * k] == _show(stat), (cells[0], group.name)
            assert cells[2 + 2 * k] == (str(stat.n) if stat is not None and stat.n else "")
    assert seen >= {"alpha_interval", "fleiss_kappa", "percent_agreement", "mean_span_f1"}


def test_pairs_and_heatmaps_show_the_agreement_report(case: Case) -> None:
    report = agreement_report(case.store, case.run_id)
    page = _page(render_report(case.store, case.run_id))
    group = report.groups[0]
    rows = [_texts(r) for r in page.tables["pairs"][1:]]
    assert rows == [
        [
            p.judge_a,
            p.judge_b,
            str(p.n_items),
            p.verdict_agreement.show(),
            p.cohen_kappa.show(),
            str(p.n_span_items),
            p.span_f1.show(),
        ]
        for p in group.pairs
    ]
    n = len(group.judges)
    for label, matrix, metric in (
        ("Cohen κ (verdicts)", group.cohen_kappa_matrix, "cohen_kappa"),
        ("span F1 (characters)", group.span_f1_matrix, "span_f1"),
    ):
        svg = page.svgs[label]
        for i in range(n):
            for j in range(n):
                value = matrix[i][j]
                cell = svg.cells[i * n + j]
                assert cell == ("n/a" if value is None else f"{value:.2f}"), (label, i, j)
                if i != j:
                    stat: Stat = getattr(_pair(report, group.judges[i], group.judges[j]), metric)
                    assert stat.value == value
                    assert svg.titles[i * n + j].endswith(f": {stat.show()}")


JUDGE_COLUMNS: dict[str, Callable[[JudgeSummary], str]] = {
    "judge": lambda j: j.judge_id,
    "scored": lambda j: f"{j.n_scored}/{j.n_items}",
    "mean score": lambda j: _num(j.mean_score),
    "flag rate": lambda j: "—" if j.flag_rate is None else f"{100 * j.flag_rate:.1f} %",
    "bias vs median": lambda j: j.bias.show() if j.bias.value is None else f"{j.bias.value:+.3f}",
    "verdict = consensus": lambda j: j.consensus_verdict_agreement.show(),
    "span F1 vs consensus": lambda j: j.consensus_span_f1.show(),
}


def test_judges_against_the_panel_show_the_agreement_report(case: Case) -> None:
    report = agreement_report(case.store, case.run_id)
    rows = [_texts(r) for r in _page(render_report(case.store, case.run_id)).tables["judges"]]
    header = rows[0]
    assert [r[header.index("judge")] for r in rows[1:]] == report.judges
    for label, show in JUDGE_COLUMNS.items():
        column = header.index(label)
        assert [r[column] for r in rows[1:]] == [show(j) for j in report.judge_summaries], label
    score_only = next(j for j in report.judge_summaries if j.judge_id == SCORE_JUDGE)
    assert score_only.consensus_span_f1.value is None


ACCURACY_COLUMNS: dict[str, Callable[[Accuracy], str]] = {
    "predictor": lambda a: a.predictor,
    "items": lambda a: str(a.n_items),
    "precision": lambda a: _num(a.response.precision) if a.response else "n/a",
    "recall": lambda a: _num(a.response.recall) if a.response else "n/a",
    "F1": lambda a: _num(a.response.f1) if a.response else "n/a",
    "span items": lambda a: str(a.n_span_items),
    "span P": lambda a: _num(a.spans.precision) if a.spans else "n/a",
    "span R": lambda a: _num(a.spans.recall) if a.spans else "n/a",
    "span F1": lambda a: _num(a.spans.f1) if a.spans else "n/a",
}


def test_accuracy_shows_the_agreement_report(case: Case) -> None:
    report = agreement_report(case.store, case.run_id)
    assert report.has_gold and report.accuracy
    rows = [_texts(r) for r in _page(render_report(case.store, case.run_id)).tables["accuracy"]]
    header = rows[0]
    for label, show in ACCURACY_COLUMNS.items():
        column = header.index(label)
        assert [r[column] for r in rows[1:]] == [show(a) for a in report.accuracy], label
