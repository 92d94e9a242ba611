"""juryflow.maths.gold against sklearn, naive character sets and the RAGTruth dev sample."""

from __future__ import annotations

import doctest
import json
import re
import warnings
from dataclasses import FrozenInstanceError
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import precision_recall_fscore_support

import juryflow.maths.gold
from juryflow.maths.gold import PRF, response_prf, span_prf

RAGTRUTH_DATA2TXT = Path(__file__).resolve().parents[2] / "shared/data/ragtruth/data2txt_dev.jsonl"

Spans = list[tuple[int, int]]


def char_set(spans: Spans) -> set[int]:
    return {c for start, end in spans for c in range(start, end)}


def naive_span_prf(pred: list[Spans], gold: list[Spans]) -> tuple[float, float, float]:
    """Deliberately plain: sets of character indices, loops, no numpy."""
    overlap = n_pred = n_gold = 0
    for p_spans, g_spans in zip(pred, gold, strict=True):
        p, g = char_set(p_spans), char_set(g_spans)
        overlap += len(p & g)
        n_pred += len(p)
        n_gold += len(g)
    precision = overlap / n_pred if n_pred else 0.0
    recall = overlap / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def naive_response_prf(pred: list[bool], gold: list[bool]) -> tuple[float, float, float]:
    tp = fp = fn = 0
    for p, g in zip(pred, gold, strict=True):
        if p and g:
            tp += 1
        elif p:
            fp += 1
        elif g:
            fn += 1
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


# ------------------------------------------------------------------------ response level


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=40))
def test_response_prf_matches_sklearn(pairs: list[tuple[bool, bool]]) -> None:
    pred = np.array([p for p, _ in pairs])
    gold = np.array([g for _, g in pairs])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p, r, f, _ = precision_recall_fscore_support(
            gold, pred, average="binary", pos_label=True, zero_division=0
        )
    got = response_prf(pred, gold)
    assert got.precision == pytest.approx(p, abs=1e-12)
    assert got.recall == pytest.approx(r, abs=1e-12)
    assert got.f1 == pytest.approx(f, abs=1e-12)
    assert got.tp + got.fp + got.fn <= len(pairs)


def test_response_prf_zero_division_is_zero() -> None:
    assert response_prf([False, False], [False, False]) == PRF(0.0, 0.0, 0.0, 0, 0, 0)
    assert response_prf([], []) == PRF(0.0, 0.0, 0.0, 0, 0, 0)
    nothing_flagged = response_prf([False, False], [True, False])
    assert (nothing_flagged.precision, nothing_flagged.recall, nothing_flagged.fn) == (0.0, 0.0, 1)
    with pytest.raises(ValueError, match="length"):
        response_prf([True], [True, False])


def test_prf_is_frozen() -> None:
    prf = PRF.from_counts(1, 1, 1)
    with pytest.raises(FrozenInstanceError):
        prf.precision = 1.0  # type: ignore[misc]


# ---------------------------------------------------------------------------- span level

span_lists = st.lists(
    st.tuples(st.integers(0, 80), st.integers(0, 30)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=5,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(span_lists, span_lists), max_size=10))
def test_span_prf_matches_character_sets(items: list[tuple[Spans, Spans]]) -> None:
    pred = [p for p, _ in items]
    gold = [g for _, g in items]
    got = span_prf(pred, gold)
    assert (got.precision, got.recall, got.f1) == pytest.approx(naive_span_prf(pred, gold))
    assert got.tp == sum(len(char_set(p) & char_set(g)) for p, g in items)
    assert got.tp + got.fp == sum(len(char_set(p)) for p in pred)
    assert got.tp + got.fn == sum(len(char_set(g)) for g in gold)


def test_span_prf_merges_overlapping_spans_and_checks_lengths() -> None:
    # Predicted (0,10) and (5,15) cover 15 characters, not 20; gold (0,5) twice covers 5.
    got = span_prf([[(0, 10), (5, 15)]], [[(0, 5), (0, 5)]])
    assert (got.tp, got.fp, got.fn) == (5, 10, 0)
    assert span_prf([], []) == PRF(0.0, 0.0, 0.0, 0, 0, 0)
    with pytest.raises(ValueError, match="per item"):
        span_prf([[]], [])


# ------------------------------------------------------------------------------ RAGTruth


@pytest.fixture(scope="module")
def ragtruth_rows() -> list[dict]:
    if not RAGTRUTH_DATA2TXT.is_file():
        pytest.skip(f"RAGTruth sample not found at {RAGTRUTH_DATA2TXT} (shared/ not checked out)")
    with RAGTRUTH_DATA2TXT.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def digit_spans(text: str) -> Spans:
    """The fixed predictor: every run of digits is a suspected hallucination."""
    return [(m.start(), m.end()) for m in re.finditer(r"\d+", text)]


def test_ragtruth_digit_predictor(ragtruth_rows: list[dict]) -> None:
    pred = [digit_spans(row["response"]) for row in ragtruth_rows]
    gold = [[(label["start"], label["end"]) for label in row["labels"]] for row in ragtruth_rows]
    pred_flag = [bool(spans) for spans in pred]
    gold_flag = [bool(row["hallucinated"]) for row in ragtruth_rows]

    spans = span_prf(pred, gold)
    responses = response_prf(pred_flag, gold_flag)

    # Independent computation: character-index sets and counting loops.
    assert (spans.precision, spans.recall, spans.f1) == pytest.approx(
        naive_span_prf(pred, gold), abs=1e-12
    )
    assert (responses.precision, responses.recall, responses.f1) == pytest.approx(
        naive_response_prf(pred_flag, gold_flag), abs=1e-12
    )

    # Values obtained on data2txt_dev.jsonl (186 rows), pinned to catch regressions.
    assert (spans.tp, spans.fp, spans.fn) == (146, 1142, 6018)
    assert round(spans.precision, 4) == 0.1134
    assert round(spans.recall, 4) == 0.0237
    assert round(spans.f1, 4) == 0.0392
    assert (responses.tp, responses.fp, responses.fn) == (93, 70, 22)
    assert round(responses.precision, 4) == 0.5706
    assert round(responses.recall, 4) == 0.8087
    assert round(responses.f1, 4) == 0.6691


def test_ragtruth_flag_everything(ragtruth_rows: list[dict]) -> None:
    gold_flag = np.array([bool(row["hallucinated"]) for row in ragtruth_rows])
    got = response_prf(np.ones_like(gold_flag), gold_flag)
    # README: 186 rows, 115 hallucinated.
    assert got.precision == pytest.approx(115 / 186, abs=1e-12)
    assert got.recall == 1.0
    assert (got.tp, got.fp, got.fn) == (115, 71, 0)


def test_docstring_examples() -> None:
    result = doctest.testmod(juryflow.maths.gold)
    assert result.attempted > 0 and result.failed == 0
