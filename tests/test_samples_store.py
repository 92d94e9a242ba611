"""A sampled judge's samples in the store and the journal (issue 26, point 1): written with
their reduced judgment, read back by cache key, and kept through a journal replay."""

from __future__ import annotations

from pathlib import Path

from juryflow.judges.batches.resend import RESEND
from juryflow.judges.sampling.keys import sample_cache_key
from juryflow.maths.records import Item, Judgment, Span, Usage
from juryflow.maths.samples.reducers import reduce_samples
from juryflow.storage.journal import Journal, judgment_from_json, judgment_to_json
from juryflow.storage.store import Store

TEXT = "The cafe opens at 9 am and serves ramen on Sundays."


def _sample(index: int, spans: tuple[Span, ...], score: float | None = 1.0) -> Judgment:
    if score is None:
        return Judgment(
            "i1",
            "noisy",
            "spans",
            None,
            unscored_reason="provider error: 500",
            cache_key=f"k{index}",
        )
    return Judgment(
        "i1",
        "noisy",
        "spans",
        score,
        spans=spans,
        raw_output=f"answer {index}",
        usage=Usage(100, 10, 0.001),
        provider="openai",
        model="m",
        cache_key=sample_cache_key("base", index),
    )


RAMEN = Span(34, 39, "ramen", "exact")
SUNDAYS = Span(43, 50, "Sundays", "exact")
AMBIGUOUS = Span(0, 3, "The", "ambiguous")
SAMPLES = [
    _sample(0, (RAMEN, AMBIGUOUS)),
    _sample(1, (RAMEN, SUNDAYS)),
    _sample(2, (), score=None),
]


def test_the_journal_keeps_a_judgments_samples() -> None:
    reduced = reduce_samples(SAMPLES, "majority", TEXT, cache_key="reduced")
    assert judgment_from_json(judgment_to_json(reduced)) == reduced
    plain = SAMPLES[0]
    assert judgment_from_json(judgment_to_json(plain)) == plain


def test_samples_are_stored_beside_their_reduction_and_served_by_key(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.duckdb")
    store.migrate()
    reduced = reduce_samples(SAMPLES, "majority", TEXT, cache_key="reduced")
    assert [s.text for s in reduced.spans] == ["ramen"]  # both scored samples marked it
    item = Item("i1", {"response": TEXT})
    store.write_chunk("r1", [item], [reduced], [])
    with store.read() as con:
        judgments = con.execute("SELECT judge_id, score, cache_key FROM judgments").fetchall()
        samples = con.execute(
            "SELECT sample_index, score, unscored_reason, cache_key, cached "
            "FROM judgment_samples ORDER BY sample_index"
        ).fetchall()
        spans = con.execute(
            "SELECT sample_index, span_index, char_start, char_end, text "
            "FROM judgment_sample_spans ORDER BY sample_index, span_index"
        ).fetchall()
    assert judgments == [("noisy", 1.0, "reduced")]
    assert [row[:3] for row in samples] == [
        (0, 1.0, None),
        (1, 1.0, None),
        (2, None, "provider error: 500"),
    ]
    assert [row[3] for row in samples] == ["base", sample_cache_key("base", 1), "k2"]
    # The ambiguous span casts no vote: kept without offsets, so the cache cannot make it vote.
    assert spans == [
        (0, 0, 34, 39, "ramen"),
        (0, 1, None, None, "The"),
        (1, 0, 34, 39, "ramen"),
        (1, 1, 43, 50, "Sundays"),
    ]
    keys = ["base", sample_cache_key("base", 1), "k2", "reduced"]
    found = store.cached_samples(keys)
    # Scored samples only; a reduction is never served as a sample (its key is not asked
    # for by a sampled judge, and a judge asked once finds the sample 0 by its own key).
    assert set(found) == {"base", sample_cache_key("base", 1), "reduced"}
    assert [s.char_start for s in found["base"].spans] == [34, None]
    assert found["base"].spans[0].match == "exact" and found["base"].spans[1].match == "unmatched"
    assert found["base"].usage.cost_usd == 0.001


def test_a_replayed_journal_holds_the_samples(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "run.jsonl")
    reduced = reduce_samples(SAMPLES, "majority", TEXT, cache_key="reduced")
    journal.append(reduced)
    journal.close()
    (replayed,) = Journal(tmp_path / "run.jsonl").replay()
    assert replayed.samples == reduced.samples


def test_a_reaggregation_copies_the_samples(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.duckdb")
    store.migrate()
    reduced = reduce_samples(SAMPLES, "majority", TEXT, cache_key="reduced")
    store.write_chunk("r1", [Item("i1", {"response": TEXT})], [reduced], [])
    store.copy_run_rows("r1", "r2")
    with store.read() as con:
        copied = con.execute(
            "SELECT sample_index, score, cached FROM judgment_samples WHERE run_id = 'r2' "
            "ORDER BY sample_index"
        ).fetchall()
        spans = con.execute(
            "SELECT count(*) FROM judgment_sample_spans WHERE run_id = 'r2'"
        ).fetchone()
    assert copied == [(0, 1.0, True), (1, 1.0, True), (2, None, True)]
    assert spans == (4,)


def test_a_pairs_stored_samples_are_read_back_for_a_resume_and_replaced_when_judged_again(
    tmp_path: Path,
) -> None:
    """What a batch run's ``--resume`` reads (``run_samples``: the scored samples of items
    still without consensus, each with its ``cached`` flag) and that a judgment written
    again for the same item and judge replaces its samples instead of adding to them."""
    from dataclasses import replace

    store = Store(tmp_path / "s.duckdb")
    store.migrate()
    item = Item("i1", {"response": TEXT})
    first = [replace(SAMPLES[0], cached=True), SAMPLES[1], SAMPLES[2]]
    waiting = replace(  # as batch mode stores a judgment waiting for its sample 2
        reduce_samples(first, "majority", TEXT, cache_key="x"),
        score=None,
        spans=(),
        unscored_reason=f"sample 2: expired {RESEND}",
    )
    store.write_chunk("r1", [item], [waiting], [])
    read = store.run_samples("r1")
    assert list(read) == [("i1", "noisy")]
    assert {index: s.cached for index, s in read[("i1", "noisy")].items()} == {0: True, 1: False}
    assert [span.text for span in read[("i1", "noisy")][1].spans] == ["ramen", "Sundays"]
    store.forget_unscored("r1", [("i1", "noisy")])  # as --resume does
    again = reduce_samples(SAMPLES[:2], "majority", TEXT, cache_key="y")
    store.write_chunk("r1", [], [again], [])
    with store.read() as con:
        rows = con.execute(
            "SELECT sample_index, cache_key FROM judgment_samples ORDER BY sample_index"
        ).fetchall()
    assert rows == [(0, "base"), (1, sample_cache_key("base", 1))]
    with store.read() as con:
        assert con.execute("SELECT count(*), count(score) FROM judgments").fetchall() == [(1, 1)]
