"""``--gold dataset|annotations|both`` (issue 13): reviewers' annotations as the human labels
of `juryflow agreement`, `disagreements`, `report`, `calibrate` and of the SQL views."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from juryflow.analysis.agreement_report import AgreementReport, agreement_report, disagreements
from juryflow.cli import app
from juryflow.maths.records import GoldLabels, Judgment, OutputKind
from juryflow.storage.annotations import NewAnnotation, SpanDecision, save_annotation
from juryflow.storage.connection import StoreError
from juryflow.storage.reads import analysis as sa
from juryflow.storage.store import Store
from tests.test_views import (
    HAND,
    HAND_GOLD,
    TEXT,
    build_store,
    failed,
    score_judgment,
    spans_judgment,
)

runner = CliRunner()
WIDE = {"COLUMNS": "220"}


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=WIDE)
    return result.exit_code, result.output


def _annotate(store: Store) -> None:
    """i1 judged clean; i2 hallucinated at [0, 4) (the dataset says clean); i3 left alone."""
    _, rows = store.query("SELECT char_start, char_end FROM consensus_spans WHERE item_id = 'i2'")
    decisions = tuple(SpanDecision(int(a), int(b), True) for a, b in rows)
    save_annotation(store, NewAnnotation("run-1", "i1", "ada", (), (), True, "first look"))
    save_annotation(store, NewAnnotation("run-1", "i1", "bob", (), (), False, "clean after all"))
    save_annotation(store, NewAnnotation("run-1", "i2", "ada", decisions, ((0, 4),), True))


@pytest.fixture
def annotated(tmp_path: Path) -> Store:
    store = build_store(tmp_path / "hand.duckdb", ["A", "B", "C"], HAND, HAND_GOLD)
    _annotate(store)
    return store


# -- by hand -------------------------------------------------------------------------------


def _chars(spans: Any) -> set[int]:
    return {c for s, e in spans for c in range(s, e)}


def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return p, r, f


def _by_hand(store: Store) -> dict[str, dict[str, Any]]:
    """Accuracy of every judge and the consensus against each item's newest annotation,
    straight from the rows: all annotated items, no answer = flagged nothing."""
    _, latest = store.query(
        "SELECT item_id, verdict, spans FROM annotations WHERE run_id = 'run-1' "
        "QUALIFY row_number() OVER (PARTITION BY item_id ORDER BY annotation_id DESC) = 1"
    )
    gold = {str(i): (bool(v), _chars(json.loads(s))) for i, v, s in latest}
    _, judged = store.query(
        "SELECT judge_id, item_id, score IS NOT NULL, coalesce(verdict, false), output_kind "
        "FROM judgments WHERE run_id = 'run-1'"
    )
    _, spans = store.query(
        "SELECT judge_id, item_id, char_start, char_end FROM judgment_spans "
        "WHERE run_id = 'run-1' AND char_start IS NOT NULL"
    )
    _, consensus = store.query(
        "SELECT item_id, status = 'ok', coalesce(hallucinated, false) FROM consensus "
        "WHERE run_id = 'run-1'"
    )
    _, consensus_spans = store.query(
        "SELECT item_id, char_start, char_end FROM consensus_spans WHERE run_id = 'run-1'"
    )
    said: dict[str, dict[str, bool]] = {}
    flagged: dict[str, dict[str, set[int]]] = {}
    span_judges = set()
    for judge, item, answered, verdict, kind in judged:
        said.setdefault(judge, {})[item] = bool(answered and verdict)
        if kind == "spans":
            span_judges.add(judge)
        if answered and kind == "spans":
            flagged.setdefault(judge, {}).setdefault(item, set())
    for judge, item, start, end in spans:
        if item in flagged.get(judge, {}):
            flagged[judge][item] |= set(range(start, end))
    ok = {str(item) for item, is_ok, _ in consensus if is_ok}
    said["consensus"] = {str(i): bool(ok_ and h) for i, ok_, h in consensus}
    flagged["consensus"] = {i: set() for i in ok}
    for item, start, end in consensus_spans:
        if item in ok:
            flagged["consensus"][item] |= set(range(start, end))
    span_judges.add("consensus")
    out: dict[str, dict[str, Any]] = {}
    for name, verdicts in said.items():
        tp = sum(verdicts.get(i, False) and g for i, (g, _) in gold.items())
        fp = sum(verdicts.get(i, False) and not g for i, (g, _) in gold.items())
        fn = sum(not verdicts.get(i, False) and g for i, (g, _) in gold.items())
        row: dict[str, Any] = {"response": _prf(tp, fp, fn), "n_items": len(gold)}
        if name in span_judges:
            overlap = sum(len(flagged[name].get(i, set()) & g) for i, (_, g) in gold.items())
            pred = sum(len(flagged[name].get(i, set())) for i in gold)
            labels = sum(len(g) for _, g in gold.values())
            row["spans"] = _prf(overlap, pred - overlap, labels - overlap)
        out[name] = row
    return out


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def test_agreement_against_annotations_is_the_hand_computed_accuracy(annotated: Store) -> None:
    report = agreement_report(annotated, gold="annotations")
    assert report.gold_source == "annotations" and report.has_gold
    hand = _by_hand(annotated)
    assert {a.predictor for a in report.accuracy} == set(hand)
    for a in report.accuracy:
        expected = hand[a.predictor]
        assert a.n_items == expected["n_items"] == 2, a.predictor
        assert a.response is not None
        got = (a.response.precision, a.response.recall, a.response.f1)
        assert all(map(_close, got, expected["response"])), a.predictor
        if "spans" in expected:
            assert a.spans is not None and a.n_span_items == 2, a.predictor
            got = (a.spans.precision, a.spans.recall, a.spans.f1)
            assert all(map(_close, got, expected["spans"])), a.predictor
        else:
            assert a.spans is None
    # a few by eye: B flags i1 (clean) and i2 (hallucinated at [0, 4), which B marks)
    b = next(a for a in report.accuracy if a.predictor == "B")
    assert b.response is not None and _close(b.response.f1, 2 / 3)
    assert b.spans is not None and _close(b.spans.f1, 2 * 4 / (10 + 4))


def test_the_dataset_labels_stay_the_default(annotated: Store) -> None:
    dataset = agreement_report(annotated)
    assert dataset.gold_source == "dataset"
    assert dataset == agreement_report(annotated, gold="dataset")
    assert {a.predictor: a.n_items for a in dataset.accuracy}["B"] == 3
    _, items = annotated.query(
        "SELECT item_id, gold_hallucinated, gold_spans FROM items ORDER BY item_id"
    )
    assert items == [("i1", True, "[[2, 8]]"), ("i2", False, "[]"), ("i3", True, "[[0, 2]]")]


def test_both_falls_back_to_the_dataset_labels(annotated: Store) -> None:
    labels = {
        d.item_id: (d.gold_hallucinated, [(s.start, s.end) for s in d.gold_spans or []])
        for d in disagreements(annotated, "run-1", top=10, gold="both")
    }
    assert labels == {
        "i1": (False, []),  # bob's newer annotation
        "i2": (True, [(0, 4)]),  # the annotation, not the dataset's "clean"
        "i3": (True, [(0, 2)]),  # no annotation: the dataset's label
    }
    only = {d.item_id: d.gold_hallucinated for d in disagreements(annotated, gold="annotations")}
    assert only == {"i1": False, "i2": True, "i3": None}
    both = agreement_report(annotated, gold="both")
    assert both.gold_source == "both"
    assert {a.predictor: a.n_items for a in both.accuracy}["B"] == 3
    _, rows = annotated.query(
        "SELECT item_id, gold_hallucinated, has_span_labels FROM adjudicated_labels "
        "ORDER BY item_id"
    )
    assert rows == [("i1", False, True), ("i2", True, True), ("i3", True, True)]


def test_no_annotation_means_no_accuracy_with_a_note(tmp_path: Path) -> None:
    store = build_store(tmp_path / "s.duckdb", ["A", "B", "C"], HAND, HAND_GOLD)
    report = agreement_report(store, gold="annotations")
    assert not report.has_gold and report.accuracy == []
    assert any("juryflow view" in note for note in report.notes)
    assert agreement_report(store, gold="both").accuracy == agreement_report(store).accuracy


def test_an_unknown_gold_source_is_refused(annotated: Store) -> None:
    with pytest.raises(StoreError, match="unknown gold source 'mine'"):
        agreement_report(annotated, gold="mine")  # type: ignore[arg-type]


# -- the SQL views ------------------------------------------------------------------------


def assert_accuracy_views_match(store: Store, report: AgreementReport) -> None:
    """``judge_accuracy_annotations`` / ``_adjudicated`` give the report's numbers."""
    accuracy = {a.predictor: a for a in report.accuracy}
    rows = {
        r["judge_id"]: r for r in sa.judge_accuracy_rows(store, report.run_id, report.gold_source)
    }
    assert set(rows) == {k for k, a in accuracy.items() if a.n_items or a.n_span_items}
    for name, row in rows.items():
        a = accuracy[name]
        assert row["n_items"] == a.n_items and row["n_span_items"] == a.n_span_items, name
        assert row["n_answered"] == a.n_answered and row["n_span_answered"] == a.n_span_answered
        if a.response is not None:
            assert (row["tp"], row["fp"], row["fn"]) == (
                a.response.tp,
                a.response.fp,
                a.response.fn,
            )
            assert _close(row["f1"], a.response.f1), name
        if a.response_answered is not None:
            assert _close(row["f1_answered"], a.response_answered.f1), name
        if a.spans is None:
            assert row["span_f1"] is None, name
        else:
            assert row["overlap_chars"] == a.spans.tp, name
            assert row["pred_chars"] == a.spans.tp + a.spans.fp, name
            assert row["gold_chars"] == a.spans.tp + a.spans.fn, name
            assert _close(row["span_f1"], a.spans.f1), name
        if a.spans_answered is not None:
            assert _close(row["span_f1_answered"], a.spans_answered.f1), name


def test_accuracy_views_match_the_report_by_hand(annotated: Store) -> None:
    for gold in ("annotations", "both"):
        assert_accuracy_views_match(annotated, agreement_report(annotated, gold=gold))


def _random_spans(rng: random.Random, length: int) -> list[tuple[int, int]]:
    out = []
    for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
        start = rng.randrange(length)
        out.append((start, min(length, start + rng.randrange(1, 8))))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_accuracy_views_match_the_report_on_random_runs(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    judges: dict[str, OutputKind] = {"s1": "spans", "s2": "spans", "s3": "spans", "q1": "score"}
    length = len(TEXT)
    judgments: list[Judgment] = []
    gold: dict[str, GoldLabels | None] = {}
    item_ids = [f"item-{n:02d}" for n in range(30)]
    for item_id in item_ids:
        for judge_id, kind in judges.items():
            roll = rng.random()
            if roll < 0.08:
                continue
            if roll < 0.16:
                judgments.append(failed(item_id, judge_id, kind))
            elif kind == "spans":
                judgments.append(spans_judgment(item_id, judge_id, _random_spans(rng, length)))
            else:
                judgments.append(score_judgment(item_id, judge_id, rng.choice([0.0, 0.6, 1])))
        g = _random_spans(rng, length)
        gold[item_id] = None if rng.random() < 0.2 else GoldLabels(bool(g), tuple(g))
    store = build_store(tmp_path / "r.duckdb", list(judges), judgments, gold, item_ids=item_ids)
    _, consensus = store.query("SELECT item_id, char_start, char_end FROM consensus_spans")
    by_item: dict[str, list[tuple[int, int]]] = {}
    for item, start, end in consensus:
        by_item.setdefault(str(item), []).append((int(start), int(end)))
    for item_id in rng.sample(item_ids, 15):
        decisions = tuple(
            SpanDecision(s, e, rng.random() < 0.6)
            for s, e in by_item.get(item_id, [])
            if rng.random() < 0.8
        )
        missed = tuple(_random_spans(rng, length))
        verdict = rng.choice([True, False, None])
        save_annotation(store, NewAnnotation("run-1", item_id, "r", decisions, missed, verdict))
    for source in ("annotations", "both"):
        report = agreement_report(store, gold=source)
        assert report.has_gold
        assert_accuracy_views_match(store, report)


# -- the command line ------------------------------------------------------------------------


def test_agreement_cli_takes_gold(annotated: Store) -> None:
    code, out = invoke("agreement", "--db", str(annotated.path), "--gold", "annotations")
    assert code == 0, out
    assert "gold: annotations" in out and "reviewers' annotations" in out
    code, out = invoke(
        "agreement", "--db", str(annotated.path), "--gold", "annotations", "-f", "json"
    )
    assert code == 0, out
    payload = json.loads(out)
    assert payload["gold_source"] == "annotations"
    assert payload == agreement_report(annotated, gold="annotations").model_dump(mode="json")
    code, out = invoke("agreement", "--db", str(annotated.path))
    assert code == 0 and "gold: dataset" in out


def test_a_bad_gold_is_one_line_and_exit_2(annotated: Store) -> None:
    for command in ("agreement", "disagreements", "calibrate", "report"):
        code, out = invoke(command, "--db", str(annotated.path), "--gold", "mine")
        assert code == 2, (command, out)
        assert "--gold 'mine': use one of dataset, annotations, both" in out, command
        assert "Traceback" not in out


def test_disagreements_cli_shows_the_chosen_labels(annotated: Store) -> None:
    code, out = invoke("disagreements", "--db", str(annotated.path), "--gold", "both")
    assert code == 0, out
    assert "gold (both)" in out
    code, out = invoke(
        "disagreements", "--db", str(annotated.path), "--gold", "annotations", "-f", "json"
    )
    assert code == 0, out
    gold = {i["item_id"]: i["gold_hallucinated"] for i in json.loads(out)}
    assert gold == {"i1": False, "i2": True, "i3": None}


def test_report_cli_takes_gold(annotated: Store, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    code, out = invoke(
        "report", "--db", str(annotated.path), "--gold", "annotations", "-o", str(page)
    )
    assert code == 0, out
    assert page.exists()


def test_calibrate_without_labels_of_the_source_says_how_to_get_some(tmp_path: Path) -> None:
    """(A calibration against annotations: tests/test_export_annotations.py, on a real run.)"""
    store = build_store(tmp_path / "c.duckdb", ["A", "B", "C"], HAND, HAND_GOLD)
    code, out = invoke("calibrate", "--db", str(store.path), "--gold", "annotations")
    assert code == 2, out
    assert "no item labelled by --gold annotations" in out and "juryflow view" in out
