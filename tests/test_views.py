"""The agreement views: hand-computed numbers, and the same numbers as the numpy maths.

Hand-built stores (records written with the Store's own inserts, consensus from
``juryflow.maths.consensus``) pin exact values; a randomised store and a real offline run check
that every view agrees with :func:`juryflow.analysis.agreement_report.agreement_report`, which
is built on the
tested numpy functions of ``juryflow.maths.agreement`` / ``juryflow.maths.gold``.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juryflow.analysis.agreement_report import AgreementReport, agreement_report
from juryflow.maths.consensus import panel_consensus
from juryflow.maths.records import GoldLabels, Item, Judgment, OutputKind, Span, unscored
from juryflow.planning.run_request import RunRequest
from juryflow.storage.reads import analysis as sa
from juryflow.storage.store import RunRecord, Store

# Every character is its own word, so consensus spans are never widened by word snapping.
TEXT = "a.b.c.d.e.f.g.h.i.j"


def spans_judgment(item_id: str, judge_id: str, offsets: Sequence[tuple[int, int]]) -> Judgment:
    spans = tuple(Span(s, e, TEXT[s:e], "detector") for s, e in offsets)
    return Judgment(item_id, judge_id, "spans", 1.0 if spans else 0.0, spans)


def score_judgment(item_id: str, judge_id: str, score: float) -> Judgment:
    return Judgment(item_id, judge_id, "score", score)


def failed(item_id: str, judge_id: str, kind: OutputKind = "spans") -> Judgment:
    return unscored(item_id, judge_id, kind, "timeout")


def build_store(
    path: Path,
    judges: Sequence[str],
    judgments: Sequence[Judgment],
    gold: Mapping[str, GoldLabels | None] | None = None,
    *,
    item_ids: Sequence[str] | None = None,
    texts: dict[str, str] | None = None,
    run_id: str = "run-1",
    quorum: int | None = None,
    started_at: datetime | None = None,
) -> Store:
    """A store holding one run: items, judgments and the consensus computed from them."""
    store = Store(path)
    store.migrate()
    ids = list(item_ids or dict.fromkeys(j.item_id for j in judgments))
    text_of = {i: (texts or {}).get(i, TEXT) for i in ids}
    store.create_run(
        RunRecord(
            run_id=run_id,
            kind="evaluate",
            suite="default",
            status="completed",
            started_at=started_at or datetime.now(UTC),
            finished_at=datetime.now(UTC),
            dataset="hand-built",
            panel_name="hand",
            panel={"name": "hand", "judges": [{"id": j} for j in judges]},
            prompts=[],
            quorum=quorum or len(judges) // 2 + 1,
            n_judges=len(judges),
        )
    )
    store.insert_items(
        run_id,
        [
            Item(i, {"response": text_of[i]}, (gold or {}).get(i), row_number=n)
            for n, i in enumerate(ids)
        ],
    )
    store.insert_judgments(run_id, judgments)
    by_item: dict[str, list[Judgment]] = {i: [] for i in ids}
    for j in judgments:
        by_item[j.item_id].append(j)
    store.insert_consensus(run_id, panel_consensus(by_item, text_of, len(judges), quorum))
    return store


def rows(store: Store, sql: str, *params: Any) -> list[dict[str, Any]]:
    columns, values = store.query(sql, params)
    return [dict(zip(columns, v, strict=True)) for v in values]


# -- the hand-computed example --------------------------------------------------------
#
#   item  A (spans)       B (spans)       C (score)   gold
#   i1    [0,6)  -> 1     [4,10) -> 1     0.2         hallucinated [2,8)
#   i2    []     -> 0     [0,4)  -> 1     0.9         clean
#   i3    unscored        []     -> 0     0.1         hallucinated [0,2)

HAND = [
    spans_judgment("i1", "A", [(0, 6)]),
    spans_judgment("i1", "B", [(4, 10)]),
    score_judgment("i1", "C", 0.2),
    spans_judgment("i2", "A", []),
    spans_judgment("i2", "B", [(0, 4)]),
    score_judgment("i2", "C", 0.9),
    failed("i3", "A"),
    spans_judgment("i3", "B", []),
    score_judgment("i3", "C", 0.1),
]
HAND_GOLD = {
    "i1": GoldLabels(True, ((2, 8),)),
    "i2": GoldLabels(False, ()),
    "i3": GoldLabels(True, ((0, 2),)),
}


@pytest.fixture
def hand(tmp_path: Path) -> Store:
    return build_store(tmp_path / "hand.duckdb", ["A", "B", "C"], HAND, HAND_GOLD)


def test_item_disagreement_hand_computed(hand: Store) -> None:
    got = {r["item_id"]: r for r in rows(hand, "SELECT * FROM item_disagreement")}
    i1, i2, i3 = got["i1"], got["i2"], got["i3"]
    # i1: scores 1, 1, 0.2; A and B flag [0,10) between them, both [4,6)
    assert i1["n_scored"] == 3 and i1["score_spread"] == pytest.approx(0.8)
    assert (i1["n_hallucinated_verdicts"], i1["n_clean_verdicts"]) == (2, 1)
    assert i1["split_verdict"] and i1["verdict_split"] == pytest.approx(2 / 3)
    assert (i1["chars_any"], i1["chars_all"]) == (10, 2)
    assert i1["span_disagreement"] == pytest.approx(0.8)
    assert i1["disagreement"] == pytest.approx((0.8 + 2 / 3 + 0.8) / 3)
    assert i1["consensus_hallucinated"] and i1["consensus_chars"] == 2
    # i2: scores 0, 1, 0.9; only B flags [0,4)
    assert i2["score_spread"] == pytest.approx(1.0)
    assert i2["span_disagreement"] == pytest.approx(1.0)
    assert i2["disagreement"] == pytest.approx((1 + 2 / 3 + 1) / 3)
    # i3: A failed; B and C agree it is clean; one span judge -> span measure undefined
    assert i3["n_judgments"] == 3 and i3["n_scored"] == 2
    assert i3["score_spread"] == pytest.approx(0.1) and i3["verdict_split"] == 0
    assert not i3["split_verdict"] and i3["span_disagreement"] is None
    assert i3["disagreement"] == pytest.approx(0.05)
    assert [got[i]["disagreement_rank"] for i in ("i2", "i1", "i3")] == [1, 2, 3]


def test_judge_pair_agreement_hand_computed(hand: Store) -> None:
    got = {
        (r["judge_a"], r["judge_b"]): r for r in rows(hand, "SELECT * FROM judge_pair_agreement")
    }
    ab, ac, bc = got["A", "B"], got["A", "C"], got["B", "C"]
    assert ab["n_items"] == 2 and ab["verdict_agreement"] == pytest.approx(0.5)
    assert ab["cohen_kappa"] == pytest.approx(0.0)  # po 0.5, pe 0.5
    assert (ab["n_span_items"], ab["overlap_chars"], ab["chars_a"], ab["chars_b"]) == (2, 2, 6, 10)
    assert ab["span_f1"] == pytest.approx(4 / 16) and ab["span_jaccard"] == pytest.approx(2 / 14)
    assert ac["verdict_agreement"] == 0 and ac["cohen_kappa"] == pytest.approx(-1.0)
    assert ac["n_span_items"] == 0 and ac["span_f1"] is None  # C is a score-only judge
    assert bc["n_items"] == 3 and bc["verdict_agreement"] == pytest.approx(2 / 3)
    assert bc["cohen_kappa"] == pytest.approx(0.4)  # po 2/3, pe 4/9


def test_judge_bias_hand_computed(hand: Store) -> None:
    got = {r["judge_id"]: r for r in rows(hand, "SELECT * FROM judge_bias")}
    # consensus medians: i1 1.0, i2 0.9, i3 0.05
    assert got["A"]["n_scored"] == 2 and got["A"]["n_unscored"] == 1
    assert got["A"]["bias"] == pytest.approx((0 - 0.9) / 2)
    assert got["B"]["bias"] == pytest.approx((0 + 0.1 - 0.05) / 3)
    assert got["C"]["bias"] == pytest.approx((-0.8 + 0 + 0.05) / 3)
    assert got["A"]["flag_rate"] == pytest.approx(0.5)
    assert got["A"]["consensus_verdict_agreement"] == pytest.approx(0.5)
    # consensus spans: [4,6) on i1 only
    assert got["A"]["consensus_span_f1"] == pytest.approx(2 * 2 / (6 + 2))
    assert got["B"]["consensus_span_f1"] == pytest.approx(2 * 2 / (10 + 2))
    assert got["C"]["n_span_items"] == 0 and got["C"]["consensus_span_f1"] is None


def test_judge_accuracy_hand_computed(hand: Store) -> None:
    got = {r["judge_id"]: r for r in rows(hand, "SELECT * FROM judge_accuracy")}
    assert set(got) == {"A", "B", "C", "consensus"}
    a, b, c, cons = got["A"], got["B"], got["C"], got["consensus"]
    # A failed on i3: over all items that counts as flagging nothing there (RAGTruth style);
    # over the items it answered it was perfect.
    assert (a["tp"], a["fp"], a["fn"], a["tn"]) == (1, 0, 1, 1)
    assert a["f1"] == pytest.approx(2 / 3) and a["f1_answered"] == 1.0
    assert (a["n_answered"], a["n_items"]) == (2, 3) and a["coverage"] == pytest.approx(2 / 3)
    assert (a["overlap_chars"], a["pred_chars"], a["gold_chars"]) == (4, 6, 8)
    assert a["span_f1"] == pytest.approx(8 / 14)
    assert a["span_f1_answered"] == pytest.approx(2 / 3)
    assert (b["tp"], b["fp"], b["fn"]) == (1, 1, 1) and b["f1"] == pytest.approx(0.5)
    assert (b["overlap_chars"], b["pred_chars"], b["gold_chars"]) == (4, 10, 8)
    assert b["span_precision"] == pytest.approx(0.4) and b["span_recall"] == pytest.approx(0.5)
    assert b["span_f1"] == pytest.approx(8 / 18)
    assert (c["tp"], c["fp"], c["fn"], c["precision"], c["f1"]) == (0, 1, 2, 0.0, 0.0)
    assert c["n_span_items"] == 0 and c["span_f1"] is None
    assert (cons["tp"], cons["fp"], cons["fn"]) == (1, 1, 1)
    assert (cons["overlap_chars"], cons["pred_chars"], cons["gold_chars"]) == (2, 2, 8)
    assert cons["span_precision"] == 1.0 and cons["span_f1"] == pytest.approx(0.4)


def test_report_has_the_hand_computed_numbers(hand: Store) -> None:
    report = agreement_report(hand)
    pair = {(p.judge_a, p.judge_b): p for p in report.groups[0].pairs}
    assert pair["A", "B"].span_f1.value == pytest.approx(0.25)
    assert pair["B", "C"].cohen_kappa.value == pytest.approx(0.4)
    assert pair["A", "C"].span_f1.value is None
    assert pair["A", "C"].span_f1.note == "no item both answered with spans"
    acc = {a.predictor: a for a in report.accuracy}
    assert acc["B"].spans is not None and acc["B"].spans.f1 == pytest.approx(8 / 18)
    assert acc["A"].coverage == pytest.approx(2 / 3)
    assert acc["A"].response is not None and acc["A"].response.f1 == pytest.approx(2 / 3)
    assert acc["A"].response_answered is not None and acc["A"].response_answered.f1 == 1.0
    assert acc["A"].spans_answered is not None
    assert acc["A"].spans_answered.f1 == pytest.approx(2 / 3)
    assert acc["C"].spans is None and acc["consensus"].spans is not None
    judge = {j.judge_id: j for j in report.judge_summaries}
    assert judge["A"].bias.value == pytest.approx(-0.45) and judge["A"].bias.n == 2
    assert judge["C"].consensus_span_f1.note == "score-only judge"
    assert_views_match_report(hand, report)


# -- views == numpy -------------------------------------------------------------------


def _close(sql_value: float | None, numpy_value: float | None) -> bool:
    if sql_value is None or numpy_value is None:
        return sql_value is None and numpy_value is None
    return math.isclose(sql_value, numpy_value, rel_tol=1e-9, abs_tol=1e-12)


def assert_views_match_report(store: Store, report: AgreementReport) -> None:
    """Every number the views and the numpy report both have is the same."""
    run_id = report.run_id
    everyone = report.groups[0]
    numpy_pairs = {tuple(sorted((p.judge_a, p.judge_b))): p for p in everyone.pairs}
    sql_pairs = {(r["judge_a"], r["judge_b"]): r for r in sa.judge_pair_rows(store, run_id)}
    assert set(sql_pairs) == {k for k, p in numpy_pairs.items() if p.n_items > 0}
    for key, row in sql_pairs.items():
        p = numpy_pairs[key]
        assert row["n_items"] == p.n_items, key
        assert _close(row["verdict_agreement"], p.verdict_agreement.value), key
        assert _close(row["cohen_kappa"], p.cohen_kappa.value), key
        assert row["n_span_items"] == p.n_span_items, key
        assert _close(row["span_f1"], p.span_f1.value), key

    summaries = {j.judge_id: j for j in report.judge_summaries}
    for row in sa.judge_bias_rows(store, run_id):
        j = summaries[row["judge_id"]]
        assert row["n_scored"] == j.n_scored
        assert _close(row["mean_score"], j.mean_score) and _close(row["flag_rate"], j.flag_rate)
        assert _close(row["bias"], j.bias.value), row["judge_id"]
        assert row["n_vs_consensus"] == j.bias.n
        assert _close(row["consensus_verdict_agreement"], j.consensus_verdict_agreement.value)
        assert _close(row["consensus_span_f1"], j.consensus_span_f1.value), row["judge_id"]
        if row["n_span_items"]:
            # precision and recall against the consensus come from the same characters
            scores = j.consensus_spans
            assert scores is not None, row["judge_id"]
            assert (scores.tp, scores.tp + scores.fp, scores.tp + scores.fn) == (
                row["overlap_chars"],
                row["judge_chars"],
                row["consensus_chars"],
            ), row["judge_id"]
            assert _close(scores.f1, j.consensus_span_f1.value), row["judge_id"]

    accuracy = {a.predictor: a for a in report.accuracy}
    sql_accuracy = {r["judge_id"]: r for r in sa.judge_accuracy_rows(store, run_id)}
    assert set(sql_accuracy) == {k for k, a in accuracy.items() if a.n_items or a.n_span_items}
    for name, row in sql_accuracy.items():
        a = accuracy[name]
        assert row["n_items"] == a.n_items and row["n_span_items"] == a.n_span_items, name
        assert row["n_answered"] == a.n_answered, name
        assert row["n_span_answered"] == a.n_span_answered, name
        assert _close(row["coverage"], a.coverage), name
        if a.response_answered is not None:
            assert _close(row["f1_answered"], a.response_answered.f1), name
        if a.spans_answered is not None:
            assert _close(row["span_f1_answered"], a.spans_answered.f1), name
        if a.response is None:
            assert row["f1"] is None
        else:
            assert (row["tp"], row["fp"], row["fn"]) == (
                a.response.tp,
                a.response.fp,
                a.response.fn,
            ), name
            assert _close(row["precision"], a.response.precision)
            assert _close(row["recall"], a.response.recall)
            assert _close(row["f1"], a.response.f1)
        if a.spans is None:
            assert row["span_f1"] is None, name
        else:
            assert row["overlap_chars"] == a.spans.tp, name
            assert row["pred_chars"] == a.spans.tp + a.spans.fp, name
            assert row["gold_chars"] == a.spans.tp + a.spans.fn, name
            assert _close(row["span_precision"], a.spans.precision)
            assert _close(row["span_recall"], a.spans.recall)
            assert _close(row["span_f1"], a.spans.f1)


def _random_spans(rng: random.Random, length: int) -> list[tuple[int, int]]:
    out = []
    for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
        start = rng.randrange(length)
        out.append((start, min(length, start + rng.randrange(1, 8))))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_views_agree_with_numpy_on_random_runs(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    judges: dict[str, OutputKind] = {
        "s1": "spans",
        "s2": "spans",
        "s3": "spans",
        "q1": "score",
        "q2": "score",
    }
    length = len(TEXT)
    judgments: list[Judgment] = []
    gold: dict[str, GoldLabels | None] = {}
    item_ids = [f"item-{n:02d}" for n in range(40)]
    for item_id in item_ids:
        for judge_id, kind in judges.items():
            roll = rng.random()
            if roll < 0.08:
                continue  # never judged
            if roll < 0.16:
                judgments.append(failed(item_id, judge_id, kind))
            elif kind == "spans":
                judgments.append(spans_judgment(item_id, judge_id, _random_spans(rng, length)))
            else:
                judgments.append(score_judgment(item_id, judge_id, rng.choice([0.0, 0.3, 0.6, 1])))
        roll = rng.random()
        if roll < 0.15:
            gold[item_id] = None
        else:
            g = _random_spans(rng, length)
            gold[item_id] = GoldLabels(bool(g), tuple(g))
    store = build_store(
        tmp_path / "random.duckdb", list(judges), judgments, gold, item_ids=item_ids
    )
    report = agreement_report(store)
    assert report.has_gold and len(report.groups[0].pairs) == 10
    assert_views_match_report(store, report)


# -- gold edge cases ------------------------------------------------------------------


def test_no_gold_means_no_accuracy_rows(tmp_path: Path) -> None:
    store = build_store(tmp_path / "s.duckdb", ["A", "B", "C"], HAND)
    assert rows(store, "SELECT * FROM judge_accuracy") == []
    report = agreement_report(store)
    assert not report.has_gold and report.accuracy == []
    assert "accuracy against gold omitted" in " ".join(report.notes)
    assert report.groups[0].error_correlation is None


def test_verdict_only_gold_has_no_span_accuracy(tmp_path: Path) -> None:
    # A data set with a `hallucinated` column and no `labels`: the store holds [] spans,
    # which must not be read as "no hallucinated character".
    gold = {i: GoldLabels(h, ()) for i, h in (("i1", True), ("i2", False), ("i3", True))}
    store = build_store(tmp_path / "s.duckdb", ["A", "B", "C"], HAND, gold)
    got = {r["judge_id"]: r for r in rows(store, "SELECT * FROM judge_accuracy")}
    assert got["B"]["n_items"] == 3 and got["B"]["f1"] == pytest.approx(0.5)
    assert all(r["n_span_items"] == 0 and r["span_f1"] is None for r in got.values())
    report = agreement_report(store)
    assert all(a.spans is None for a in report.accuracy)
    assert "no human span labels" in " ".join(report.notes)
    assert_views_match_report(store, report)


def test_hallucinated_item_without_spans_is_left_out_of_span_accuracy(tmp_path: Path) -> None:
    gold = dict(HAND_GOLD, i3=GoldLabels(True, ()))
    store = build_store(tmp_path / "s.duckdb", ["A", "B", "C"], HAND, gold)
    b = rows(store, "SELECT * FROM judge_accuracy WHERE judge_id = 'B'")[0]
    assert b["n_items"] == 3 and b["n_span_items"] == 2
    assert_views_match_report(store, agreement_report(store))


def test_item_with_one_rating_ranks_last(tmp_path: Path) -> None:
    judgments = [
        score_judgment("lonely", "A", 1.0),
        failed("lonely", "B", "score"),
        score_judgment("calm", "A", 0.0),
        score_judgment("calm", "B", 0.0),
    ]
    store = build_store(tmp_path / "s.duckdb", ["A", "B"], judgments, quorum=1)
    got = {r["item_id"]: r for r in rows(store, "SELECT * FROM item_disagreement")}
    assert got["lonely"]["n_scored"] == 1
    assert got["lonely"]["score_spread"] is None and got["lonely"]["disagreement"] is None
    assert got["calm"]["disagreement"] == 0
    assert got["lonely"]["disagreement_rank"] == 2


def test_views_are_created_for_an_older_store(tmp_path: Path) -> None:
    store = build_store(tmp_path / "s.duckdb", ["A", "B", "C"], HAND, HAND_GOLD)
    with store.write() as con:
        con.execute("DROP VIEW item_disagreement")
    sa.ensure_views(store)
    assert len(rows(store, "SELECT * FROM item_disagreement")) == 3


# -- a real offline run ---------------------------------------------------------------


@pytest.fixture(scope="module")
def offline_store(
    prefect_harness: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    from juryflow.flows.evaluate import evaluate

    db = tmp_path_factory.mktemp("views") / "offline.duckdb"
    asyncio.run(evaluate(RunRequest(db=str(db))))
    yield Store(db)


def test_views_agree_with_numpy_on_the_offline_run(offline_store: Store) -> None:
    report = agreement_report(offline_store)
    assert report.n_items == 60 and len(report.judges) == 3
    assert_views_match_report(offline_store, report)
    disputed = rows(
        offline_store,
        "SELECT disagreement, disagreement_rank FROM item_disagreement ORDER BY disagreement_rank",
    )
    assert len(disputed) == 60
    values = [r["disagreement"] for r in disputed]
    assert values == sorted(values, key=lambda v: -1 if v is None else v, reverse=True)


def test_item_disagreement_span_counts_match_character_sets(tmp_path: Path) -> None:
    """The view's span counts (from the consensus step) against Python sets of characters."""
    import random

    from juryflow.maths.records import Judgment, Span
    from juryflow.storage.store import Store

    rng = random.Random(11)
    store = Store(tmp_path / "sets.duckdb")
    store.migrate()
    items, judgments, expected = [], [], {}
    for n in range(60):
        item_id = f"i{n}"
        items.append(Item(item_id, {"reference": "r", "response": "x" * 200}, None, n))
        flagged: list[set[int]] = []
        for judge in ("a", "b", "c"):
            spans = []
            for _ in range(rng.randint(0, 4)):  # overlapping and touching spans included
                start = rng.randint(0, 190)
                spans.append(Span(start, min(200, start + rng.randint(1, 30)), "x", "exact"))
            flagged.append({c for s in spans for c in range(s.char_start, s.char_end)})
            judgments.append(Judgment(item_id, judge, "spans", 1.0 if spans else 0.0, tuple(spans)))
        union = set().union(*flagged)
        expected[item_id] = (len(union), len(flagged[0] & flagged[1] & flagged[2]))
    store.insert_items("r", items)
    store.insert_judgments("r", judgments)
    from juryflow.maths.consensus import item_consensus

    store.insert_consensus(
        "r",
        [
            item_consensus(
                i.item_id, [j for j in judgments if j.item_id == i.item_id], 3, "x" * 200
            )
            for i in items
        ],
    )
    _, rows = store.query(
        "SELECT item_id, chars_any, chars_all FROM item_disagreement WHERE run_id = 'r'"
    )
    assert {r[0]: (r[1], r[2]) for r in rows} == expected


# -- intervals == characters ----------------------------------------------------------

_SPANS = st.lists(
    st.tuples(st.integers(-3, 40), st.integers(0, 12)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=5,
)


def _chars(spans: Sequence[tuple[int, int]]) -> set[int]:
    return {c for s, e in spans for c in range(max(s, 0), e)}


@settings(max_examples=15, deadline=None)
@given(
    sets=st.lists(st.tuples(_SPANS, _SPANS, _SPANS), min_size=1, max_size=4),
    gold=st.lists(_SPANS, min_size=4, max_size=4),
)
def test_interval_overlaps_equal_character_sets(
    tmp_path_factory: pytest.TempPathFactory,
    sets: list[tuple[list[tuple[int, int]], ...]],
    gold: list[list[tuple[int, int]]],
) -> None:
    """Overlapping, touching, empty and negative spans: interval sums == set sizes."""
    store = Store(tmp_path_factory.mktemp("prop") / "p.duckdb")
    store.migrate()
    store.create_run(
        RunRecord(
            run_id="p",
            kind="evaluate",
            suite="default",
            status="completed",
            started_at=datetime.now(UTC),
            finished_at=datetime.now(UTC),
            dataset="prop",
            panel_name="prop",
            panel={"name": "prop", "judges": [{"id": j} for j in "abc"]},
            prompts=[],
            quorum=2,
            n_judges=3,
        )
    )
    ids = [f"i{n}" for n in range(len(sets))]
    store.insert_items(
        "p",
        [
            Item(i, {"response": "x"}, GoldLabels(True, tuple(g)), n)
            for n, (i, g) in enumerate(zip(ids, gold, strict=False))
        ],
    )
    store.insert_judgments(
        "p",
        [
            Judgment(i, judge, "spans", 1.0, tuple(Span(s, e, "x", "exact") for s, e in spans))
            for i, per_judge in zip(ids, sets, strict=True)
            for judge, spans in zip("abc", per_judge, strict=True)
        ],
    )
    flagged = {
        (i, judge): _chars(spans)
        for i, per_judge in zip(ids, sets, strict=True)
        for judge, spans in zip("abc", per_judge, strict=True)
    }
    # the intervals are disjoint and cover exactly the flagged characters
    for (i, judge), chars in flagged.items():
        _, got = store.query(
            "SELECT char_start, char_end FROM judgment_intervals "
            "WHERE item_id = ? AND judge_id = ? ORDER BY char_start",
            [i, judge],
        )
        covered = [c for s, e in got for c in range(s, e)]
        assert len(covered) == len(set(covered)) and set(covered) == chars
    pairs = {
        (r["judge_a"], r["judge_b"]): r for r in rows(store, "SELECT * FROM judge_pair_agreement")
    }
    for a, b in (("a", "b"), ("a", "c"), ("b", "c")):
        assert pairs[a, b]["overlap_chars"] == sum(len(flagged[i, a] & flagged[i, b]) for i in ids)
        assert pairs[a, b]["chars_a"] == sum(len(flagged[i, a]) for i in ids)
        assert pairs[a, b]["chars_b"] == sum(len(flagged[i, b]) for i in ids)
    gold_chars = {i: _chars(g) for i, g in zip(ids, gold, strict=False)}
    # every item is marked hallucinated: those without a span label are left out of span
    # accuracy, and a run with no span label at all has none
    usable = [i for i, g in zip(ids, gold, strict=False) if g]
    accuracy = {r["judge_id"]: r for r in rows(store, "SELECT * FROM judge_accuracy")}
    for judge in "abc":
        if not usable:
            assert accuracy[judge]["overlap_chars"] is None
            continue
        assert accuracy[judge]["overlap_chars"] == sum(
            len(flagged[i, judge] & gold_chars[i]) for i in usable
        )
        assert accuracy[judge]["pred_chars"] == sum(len(flagged[i, judge]) for i in usable)
        assert accuracy[judge]["gold_chars"] == sum(len(gold_chars[i]) for i in usable)


# The command /tmp/h/readme_h3.md proposes for the README, run as written there.
README_INTERVALS_SQL = (
    "SELECT judge_id, count(*) AS intervals, sum(char_end - char_start) AS chars "
    "FROM judgment_intervals WHERE run_id = (SELECT max(run_id) FROM runs) "
    "GROUP BY judge_id ORDER BY judge_id"
)


def test_readme_intervals_query(offline_store: Store) -> None:
    from typer.testing import CliRunner

    from juryflow.cli import app

    result = CliRunner().invoke(
        app, ["sql", README_INTERVALS_SQL, "--db", str(offline_store.path), "--format", "csv"]
    )
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0] == "judge_id,intervals,chars"
    flagged = {
        r["judge_id"]: r["n"]
        for r in rows(
            offline_store,
            "SELECT judge_id, count(*) AS n FROM judgment_chars GROUP BY judge_id",
        )
    }
    got = {line.split(",")[0]: int(line.split(",")[2]) for line in lines[1:]}
    assert got == flagged and got


def test_views_from_before_intervals_are_replaced(tmp_path: Path) -> None:
    """A store with the character-expanding views gets the interval ones on first analysis."""
    store = build_store(tmp_path / "s.duckdb", ["A", "B", "C"], HAND, HAND_GOLD)
    with store.write() as con:
        con.execute("DROP VIEW judgment_chars")
        con.execute("DROP VIEW judgment_intervals")
    sa.ensure_views(store)
    assert rows(store, "SELECT count(*) AS n FROM judgment_intervals") == [{"n": 3}]
