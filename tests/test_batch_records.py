"""The batch layer's pure parts: custom ids, where batches are cut, the journal record, the
backoff schedule."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juryflow.judges.batches.custom_ids import custom_id
from juryflow.judges.batches.records import (
    ANTHROPIC_LIMITS,
    OPENAI_LIMITS,
    BatchEntry,
    BatchFailure,
    BatchLimits,
    BatchResult,
    SubmittedBatch,
)
from juryflow.judges.batches.splitting import split
from juryflow.judges.batches.waiting import Backoff

PROPERTY = settings(deadline=None, max_examples=200)
ANTHROPIC_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ANY_TEXT = st.text(st.characters(), max_size=300)  # any Unicode: NUL, newlines, quotes


@PROPERTY
@given(ANY_TEXT, ANY_TEXT)
def test_custom_ids_suit_both_providers_whatever_the_ids(item_id: str, judge_id: str) -> None:
    made = custom_id(item_id, judge_id)
    assert ANTHROPIC_CUSTOM_ID.match(made)
    assert made == custom_id(item_id, judge_id)


@PROPERTY
@given(st.lists(st.tuples(ANY_TEXT, ANY_TEXT), unique=True, max_size=30))
def test_distinct_pairs_get_distinct_custom_ids(pairs: list[tuple[str, str]]) -> None:
    assert len({custom_id(item, judge) for item, judge in pairs}) == len(pairs)


def test_a_separator_inside_an_id_cannot_make_two_pairs_meet() -> None:
    assert custom_id("a|b", "c") != custom_id("a", "b|c")
    assert custom_id("a\x00b", "c") != custom_id("a", "b\x00c")


@PROPERTY
@given(
    st.lists(st.integers(1, 50), max_size=60),
    st.integers(1, 8),
    st.integers(50, 400),
    st.integers(0, 20),
)
def test_split_keeps_order_fills_each_batch_and_stays_within_limits(
    sizes: list[int], max_requests: int, max_bytes: int, overhead: int
) -> None:
    limits = BatchLimits(max_requests, max_bytes + overhead)
    chunks = split(sizes, limits, overhead)
    assert [i for chunk in chunks for i in chunk] == list(range(len(sizes)))
    for number, chunk in enumerate(chunks):
        used = overhead + sum(sizes[i] for i in chunk)
        assert len(chunk) <= max_requests
        assert used <= limits.max_bytes
        if number + 1 < len(chunks):  # greedy: the next request would not have fitted
            after = chunks[number + 1][0]
            assert len(chunk) == max_requests or used + sizes[after] > limits.max_bytes


def test_split_refuses_a_request_no_batch_can_hold() -> None:
    with pytest.raises(ValueError, match="cannot fit"):
        split([10, 500, 10], BatchLimits(10, 100))


def test_the_documented_provider_limits_are_the_defaults() -> None:
    assert (OPENAI_LIMITS.max_requests, OPENAI_LIMITS.max_bytes) == (50_000, 200_000_000)
    assert (ANTHROPIC_LIMITS.max_requests, ANTHROPIC_LIMITS.max_bytes) == (100_000, 256_000_000)
    with pytest.raises(ValueError):
        BatchLimits(0, 10)


def test_a_submitted_batch_survives_its_journal() -> None:
    entries = tuple(
        BatchEntry(custom_id(item, "judge \u00e9"), item, "judge \u00e9", structured)
        for item, structured in (('item "1"\n', True), ("item/2", False))
    )
    batch = SubmittedBatch("anthropic", "msgbatch_1", entries)
    assert SubmittedBatch.from_json(batch.to_json()) == batch
    assert batch.judge_ids == ("judge \u00e9",)
    with pytest.raises(ValueError, match="not a journaled batch"):
        SubmittedBatch.from_json('{"provider": "openai"}')


@PROPERTY
@given(ANY_TEXT, ANY_TEXT, st.integers(1, 64))
def test_each_sample_has_its_own_custom_id_and_sample_0_the_pairs(
    item_id: str, judge_id: str, sample: int
) -> None:
    ids = {custom_id(item_id, judge_id, k) for k in range(sample + 1)}
    assert len(ids) == sample + 1 and all(ANTHROPIC_CUSTOM_ID.match(made) for made in ids)
    assert custom_id(item_id, judge_id, 0) == custom_id(item_id, judge_id)


def test_a_samples_entry_survives_its_journal_and_an_older_journal_reads_as_sample_0() -> None:
    entries = (
        BatchEntry(custom_id("i", "j"), "i", "j", True),
        BatchEntry(custom_id("i", "j", 1), "i", "j", True, 1),
    )
    batch = SubmittedBatch("openai", "batch_1", entries)
    assert SubmittedBatch.from_json(batch.to_json()) == batch
    assert [entry.key for entry in entries] == [("i", 0), ("i", 1)]
    # Written before samples went into batches: four fields, read as sample 0.
    older = '{"provider":"openai","batch_id":"b","entries":[["jf_x","i","j",false]]}'
    assert SubmittedBatch.from_json(older).entries == (BatchEntry("jf_x", "i", "j", False),)


def test_a_result_is_a_response_or_a_failure_never_both_nor_neither() -> None:
    entry = BatchEntry("jf_1", "item", "judge", True)
    assert BatchResult(entry, failure=BatchFailure("expired", "expired")).item_id == "item"
    with pytest.raises(ValueError):
        BatchResult(entry)


def test_backoff_grows_to_its_maximum() -> None:
    assert Backoff(5, 2, 60).delays() == [5, 10, 20, 40, 60]
    assert Backoff(0, 2, 0).delays() == [0]
    with pytest.raises(ValueError):
        Backoff(10, 2, 5)
