"""Spans loaded as arrays (``ItemSpans`` / ``SpanLine`` from DuckDB columns) give every
figure of ``juryflow agreement`` exactly as the list-based path did.

The list-based path of before is kept in :mod:`tests.test_agreement_arrays_reference`.
Runs are made by Hypothesis and written as rows into a real DuckDB store: as SQL rather
than through the store's inserts, so that rows the flow would never write (a judgment on an
item the run does not have, spans on a score judge, an insufficient consensus with spans,
ties in the item order, unanchored spans) are covered too.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from juryflow.analysis.agreement_report import agreement_report
from juryflow.maths import agreement as ag
from juryflow.storage.reads.analysis import load_run_data
from juryflow.storage.store import RunRecord, Store
from tests import test_agreement_arrays_reference as old

MAX_END = 40
Pair = tuple[int, int]


# -- runs as rows -----------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeSpec:
    judge_id: str
    kind: str
    prompt: str | None


@dataclass(frozen=True)
class JudgmentRow:
    item_id: str
    judge_id: str
    kind: str
    prompt: str | None
    score: float | None
    spans: list[tuple[int | None, int | None]]


@dataclass(frozen=True)
class ConsensusRow:
    item_id: str
    status: str
    median: float | None
    hallucinated: bool | None
    n_span_judges: int
    unlocalised: bool
    spans: list[Pair]


@dataclass(frozen=True)
class RunRows:
    panel: list[str]
    items: list[tuple[str, int, bool | None, list[Pair] | None, bool]]
    """item_id, row_number, gold_hallucinated, gold_spans, has gold at all."""
    judgments: list[JudgmentRow]
    consensus: list[ConsensusRow]


pairs = st.tuples(st.integers(0, MAX_END), st.integers(0, MAX_END)).map(lambda p: (min(p), max(p)))
span_lists = st.lists(pairs, max_size=4)
anchored_or_not = st.one_of(pairs, st.just((None, None)))


@st.composite
def run_rows(draw: st.DrawFn) -> RunRows:
    n_items = draw(st.integers(0, 7))
    judges = [
        JudgeSpec(
            f"judge-{k}",
            draw(st.sampled_from(["spans", "spans", "score"])),
            draw(st.sampled_from([None, "p1", "p2"])),
        )
        for k in range(draw(st.integers(0, 4)))
    ]
    # The panel order is not the id order, may miss a judge (sorted after the panel's) and
    # may name one that never judged.
    panel = list(draw(st.permutations([j.judge_id for j in judges])))
    panel = panel[: draw(st.integers(0, len(panel)))] + draw(st.sampled_from([[], ["judge-ghost"]]))
    item_ids = [f"item-{n}" for n in range(n_items)]
    items = []
    for item_id in item_ids:
        gold = draw(st.sampled_from(["none", "verdict", "spans", "both"]))
        hallucinated = draw(st.booleans()) if gold in ("verdict", "both") else None
        gold_spans = draw(span_lists) if gold in ("spans", "both") else None
        items.append((item_id, draw(st.integers(0, 3)), hallucinated, gold_spans, gold != "none"))

    judged_items = item_ids + (["item-orphan"] if draw(st.booleans()) else [])
    judgments = []
    for item_id in judged_items:
        for judge in judges:
            what = draw(st.sampled_from(["absent", "unscored", "scored", "scored", "scored"]))
            if what == "absent":
                continue
            score = draw(st.floats(0, 1)) if what == "scored" else None
            # Score judges seldom carry spans; the loader must ignore them there.
            spans = (
                draw(st.lists(anchored_or_not, max_size=4))
                if judge.kind == "spans" or draw(st.integers(0, 5)) == 0
                else []
            )
            judgments.append(
                JudgmentRow(item_id, judge.judge_id, judge.kind, judge.prompt, score, spans)
            )

    consensus = []
    for item_id in item_ids:
        status = draw(st.sampled_from(["absent", "ok", "ok", "insufficient"]))
        if status == "absent":
            continue
        consensus.append(
            ConsensusRow(
                item_id,
                status,
                draw(st.one_of(st.none(), st.floats(0, 1))),
                draw(st.one_of(st.none(), st.booleans())),
                draw(st.integers(0, 2)),
                draw(st.booleans()),
                draw(span_lists),
            )
        )
    return RunRows(panel, items, judgments, consensus)


_run_numbers = itertools.count()


def write_run(store: Store, rows: RunRows) -> str:
    run_id = f"run-{next(_run_numbers)}"
    store.create_run(
        RunRecord(
            run_id=run_id,
            kind="evaluate",
            suite="default",
            status="completed",
            started_at=datetime.now(UTC),
            finished_at=datetime.now(UTC),
            dataset="hypothesis",
            panel_name="generated",
            panel={"name": "generated", "judges": [{"id": j} for j in rows.panel]},
            prompts=[],
            quorum=1,
            n_judges=len(rows.panel),
        )
    )
    with store.write() as con:
        for item_id, row_number, hallucinated, gold_spans, has_gold in rows.items:
            con.execute(
                "INSERT INTO items (run_id, item_id, row_number, variables, gold_hallucinated, "
                "gold_spans) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    run_id,
                    item_id,
                    row_number,
                    json.dumps({"response": "x" * MAX_END}),
                    hallucinated,
                    json.dumps(gold_spans or []) if has_gold and gold_spans is not None else None,
                ],
            )
        for j in rows.judgments:
            con.execute(
                "INSERT INTO judgments (run_id, item_id, judge_id, provider, prompt_name, "
                "output_kind, score, verdict, unscored_reason, attempts, cached, "
                "verdict_threshold) VALUES (?, ?, ?, 'offline', ?, ?, ?, ?, ?, 1, false, 0.5)",
                [
                    run_id,
                    j.item_id,
                    j.judge_id,
                    j.prompt,
                    j.kind,
                    j.score,
                    None if j.score is None else j.score > 0.5,
                    "timeout" if j.score is None else None,
                ],
            )
            for k, (start, end) in enumerate(j.spans):
                con.execute(
                    "INSERT INTO judgment_spans (run_id, item_id, judge_id, span_index, "
                    "char_start, char_end, text, match_kind) VALUES (?, ?, ?, ?, ?, ?, 'x', ?)",
                    [
                        run_id,
                        j.item_id,
                        j.judge_id,
                        k,
                        start,
                        end,
                        "exact" if start is not None else "unmatched",
                    ],
                )
        for c in rows.consensus:
            con.execute(
                "INSERT INTO consensus (run_id, item_id, status, n_judges, n_answered, n_scored, "
                "n_span_judges, score_median, score, hallucinated, chars_any, chars_all, "
                "unlocalised) VALUES (?, ?, ?, 3, 3, 3, ?, ?, ?, ?, 0, 0, ?)",
                [
                    run_id,
                    c.item_id,
                    c.status,
                    c.n_span_judges,
                    c.median,
                    c.median,
                    c.hallucinated,
                    c.unlocalised,
                ],
            )
            for k, (start, end) in enumerate(c.spans):
                con.execute(
                    "INSERT INTO consensus_spans VALUES (?, ?, ?, ?, ?, 'x', 2, 2)",
                    [run_id, c.item_id, k, start, end],
                )
    return run_id


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    # One store for the module; every generated run is a new run in it.
    store = Store(Path(tmp_path_factory.mktemp("arrays")) / "runs.duckdb")
    store.migrate()
    yield store


def assert_same_data(store: Store, run_id: str) -> None:
    new, ref = load_run_data(store, run_id), old.load_run_data(store, run_id)
    assert new.item_ids == ref.item_ids
    assert new.judge_ids == ref.judge_ids
    assert new.output_kinds == ref.output_kinds
    assert new.prompts == ref.prompts
    for name in (
        "scores",
        "verdicts",
        "consensus_median",
        "consensus_verdict",
        "gold_hallucinated",
    ):
        np.testing.assert_array_equal(getattr(new, name), getattr(ref, name), err_msg=name)
    assert new.spans == ref.spans
    assert new.consensus_spans == ref.consensus_spans
    assert new.gold_spans == ref.gold_spans
    assert (new.has_gold, new.has_gold_spans) == (ref.has_gold, ref.has_gold_spans)
    assert (new.consensus_rule, new.contradictions, new.unlocalised) == (
        ref.consensus_rule,
        ref.contradictions,
        ref.unlocalised,
    )


# The reference predates span precision/recall against the consensus (test_views checks
# those against the judge_bias view's character counts).
_NOT_IN_REFERENCE: Any = {"judge_summaries": {"__all__": {"consensus_spans"}}}


def assert_same_report(store: Store, run_id: str) -> None:
    # JSON, so that an undefined figure compares as null on both sides.
    new = agreement_report(store, run_id).model_dump_json(exclude=_NOT_IN_REFERENCE)
    assert new == old.agreement_report(store, run_id).model_dump_json(exclude=_NOT_IN_REFERENCE)


@given(rows=run_rows())
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@pytest.mark.slow
def test_array_loader_and_report_match_the_list_path(store: Store, rows: RunRows) -> None:
    run_id = write_run(store, rows)
    assert_same_data(store, run_id)
    assert_same_report(store, run_id)


def test_larger_run_matches_the_list_path(store: Store) -> None:
    """Hundreds of items with several spans each: many intervals per line, merges across
    overlapping spans of one judge, two prompt groups."""
    rng = random.Random(3)
    judges = [JudgeSpec(f"judge-{k}", "spans" if k < 4 else "score", f"p{k % 2}") for k in range(5)]

    def spans(n: int) -> list[Pair]:
        out = []
        for _ in range(n):
            start = rng.randrange(0, MAX_END)
            out.append((start, min(MAX_END, start + rng.randrange(0, 15))))
        return out

    items = [
        (f"item-{n:04d}", n, rng.random() < 0.5, spans(rng.randrange(0, 3)), rng.random() < 0.9)
        for n in range(400)
    ]
    judgments = [
        JudgmentRow(
            item[0],
            j.judge_id,
            j.kind,
            j.prompt,
            None if rng.random() < 0.05 else rng.random(),
            list(spans(rng.randrange(0, 5))) if j.kind == "spans" else [],
        )
        for item in items
        for j in judges
    ]
    consensus = [
        ConsensusRow(item[0], "ok", rng.random(), rng.random() < 0.5, 3, False, spans(2))
        for item in items
    ]
    run_id = write_run(store, RunRows([j.judge_id for j in judges], items, judgments, consensus))
    assert_same_data(store, run_id)
    assert_same_report(store, run_id)
    report = agreement_report(store, run_id)
    assert len(report.groups) == 3 and report.has_gold


# -- the span maths on arrays against the list-based maths ----------------------------

per_item = st.lists(st.one_of(st.none(), span_lists), min_size=0, max_size=6)


@given(items=per_item)
def test_item_spans_round_trip(items: list[list[Pair] | None]) -> None:
    spans = ag.ItemSpans.from_lists(items)
    assert spans.to_lists() == [None if s is None else list(s) for s in items]
    assert spans.n_items == len(items)
    assert spans.max_end() == max((e for s in items if s for _, e in s), default=0)


@given(data=st.data(), n_items=st.integers(0, 6))
def test_item_counts_and_line_counts_match_the_union_path(
    data: st.DataObject, n_items: int
) -> None:
    a_lists = data.draw(
        st.lists(st.one_of(st.none(), span_lists), min_size=n_items, max_size=n_items)
    )
    b_lists = data.draw(
        st.lists(st.one_of(st.none(), span_lists), min_size=n_items, max_size=n_items)
    )
    stride = ag.span_stride(a_lists, b_lists)
    assert stride == old.span_stride(a_lists, b_lists)
    a, b = ag.SpanLine.of(a_lists, stride), ag.SpanLine.of(b_lists, stride)
    a_old, b_old = old.SpanLine.of(a_lists, stride), old.SpanLine.of(b_lists, stride)
    np.testing.assert_array_equal(a.intervals, a_old.intervals)
    np.testing.assert_array_equal(a.answered, a_old.answered)
    assert ag.line_counts(a.intervals, b.intervals) == old.line_counts(
        a_old.intervals, b_old.intervals
    )
    counts = ag.item_counts(a, b)
    for i in range(n_items):
        # Each item on its own, by the per-item function the micro figures add up.
        expected = ag.span_f1(a_lists[i] or [], b_lists[i] or [])
        assert tuple(int(c) for c in counts[:, i]) == expected
    both = a.answered & b.answered
    assert tuple(int(c) for c in counts[:, both].sum(axis=1)) == old.line_counts(
        a_old.on(both), b_old.on(both)
    )
    np.testing.assert_array_equal(ag.item_counts(a, a)[0], a.chars)


@given(
    judges=st.integers(0, 4).flatmap(
        lambda n_judges: st.integers(0, 5).flatmap(
            lambda n_items: st.lists(
                st.lists(st.one_of(st.none(), span_lists), min_size=n_items, max_size=n_items),
                min_size=n_judges,
                max_size=n_judges,
            )
        )
    )
)
def test_pairwise_span_f1_matches_the_union_path(judges: list[list[list[Pair] | None]]) -> None:
    np.testing.assert_array_equal(ag.pairwise_span_f1(judges), old.pairwise_span_f1(judges))


def test_span_line_refuses_malformed_spans_and_a_short_stride() -> None:
    with pytest.raises(ValueError, match=r"0 <= start <= end: item 1 has \(5, 3\)"):
        ag.SpanLine.of([[(0, 1)], [(5, 3)]], 10)
    with pytest.raises(ValueError, match="0 <= start <= end"):
        ag.SpanLine.of([[(-1, 3)]], 10)
    with pytest.raises(ValueError, match="must exceed every span end"):
        ag.SpanLine.of([[(0, 10)]], 10)
    with pytest.raises(ValueError, match="sorted item indexes"):
        ag.ItemSpans(np.array([1, 0]), np.array([0, 0]), np.array([1, 1]), np.ones(2, bool))
    with pytest.raises(ValueError, match="same stride"):
        ag.item_counts(ag.SpanLine.of([[]], 5), ag.SpanLine.of([[]], 6))


def test_empty_run_loads_as_empty_arrays(store: Store) -> None:
    run_id = write_run(store, RunRows([], [], [], []))
    data = load_run_data(store, run_id)
    assert data.item_ids == [] and data.judge_ids == [] and data.spans == []
    assert data.scores.shape == (0, 0) and data.gold_spans == [] and not data.has_gold
    assert_same_report(store, run_id)
