"""The span views on stored ``span_sets`` / ``span_overlaps`` (issue 12).

The views must give the same rows as their query-time definitions (spans merged into
intervals when the view is read, kept as ``BASELINE_SQL`` in bench/bench_views.py) at every
moment: after each chunk a run writes (items before or after their judgments, an item's
judges split over two writes as on resume), after the consensus is written and rewritten
(``juryflow reaggregate``, a rule fitted over the run), after a run's rows are copied for
a re-aggregation, and on a store migrated from schema version 4.
"""

from __future__ import annotations

import importlib.util
import itertools
import random
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juryflow.maths import span_overlaps as so
from juryflow.maths.records import (
    Consensus,
    ConsensusSpan,
    GoldLabels,
    Item,
    Judgment,
    Span,
    unscored,
)
from juryflow.storage.schema import LATEST_VERSION
from juryflow.storage.store import RunRecord, Store

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_views.py"
SPAN_VIEWS = ("judge_pair_agreement", "judge_bias", "judge_accuracy")
JUDGES = ("a", "b", "c", "d")


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_views", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _bench()


# -- the maths ----------------------------------------------------------------------------

_INTERVALS = st.lists(
    st.tuples(st.integers(-5, 40), st.integers(-3, 15)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=6,
)


def _chars(spans: Sequence[tuple[int, int]]) -> set[int]:
    return {c for s, e in spans for c in range(s, e)}


@settings(max_examples=200, deadline=None)
@given(sets=st.lists(_INTERVALS, min_size=1, max_size=6), groups=st.data())
def test_sizes_and_overlaps_equal_character_sets(
    sets: list[list[tuple[int, int]]], groups: st.DataObject
) -> None:
    """Overlapping, touching, empty and negative intervals: sums == Python set sizes."""
    owner = [k for k, spans in enumerate(sets) for _ in spans]
    merged = so.disjoint(owner, [s for x in sets for s, _ in x], [e for x in sets for _, e in x])
    chars = [_chars(x) for x in sets]
    assert so.set_sizes(merged, len(sets)).tolist() == [len(c) for c in chars]
    for k in range(len(sets)):  # disjoint, sorted, exactly the characters
        mine = [
            (s, e)
            for o, s, e in zip(merged.owner, merged.starts, merged.ends, strict=True)
            if o == k
        ]
        assert all(e1 < s2 for (_, e1), (s2, _) in itertools.pairwise(mine))
        assert _chars(mine) == chars[k]
    item = sorted(groups.draw(st.lists(st.integers(0, 2), min_size=len(sets), max_size=len(sets))))
    a, b = so.pairs_within(item)
    expected = [(i, j) for i in range(len(sets)) for j in range(i + 1, len(sets))]
    assert sorted(zip(a.tolist(), b.tolist(), strict=True)) == [
        (i, j) for i, j in expected if item[i] == item[j]
    ]
    shared = so.overlaps(merged, len(sets), a, b)
    assert shared.tolist() == [len(chars[i] & chars[j]) for i, j in zip(a, b, strict=True)]


# -- a store written piece by piece -------------------------------------------------------


def _run(run_id: str) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        kind="evaluate",
        suite="default",
        status="running",
        started_at=datetime.now(UTC),
        finished_at=None,
        dataset="prop",
        panel_name="prop",
        panel={"name": "prop", "judges": [{"id": j} for j in JUDGES]},
        prompts=[],
        quorum=2,
        n_judges=len(JUDGES),
    )


def new_store(path: Path, run_id: str = "r") -> Store:
    store = Store(path)
    store.migrate()
    with store.write() as con:
        for statement in bench.baseline_statements():
            con.execute(statement)
    store.create_run(_run(run_id))
    return store


def assert_views_match_baseline(store: Store) -> None:
    with store.read() as con:
        for view in SPAN_VIEWS:
            new = con.execute(f"SELECT * FROM {view} ORDER BY ALL").fetchall()
            old = con.execute(f"SELECT * FROM baseline_{view} ORDER BY ALL").fetchall()
            assert bench.same_rows(new, old), (view, new, old)


_SPAN = st.tuples(st.one_of(st.none(), st.integers(-4, 30)), st.integers(-2, 12)).map(
    lambda t: Span(t[0], None if t[0] is None else t[0] + t[1], "x", "exact")
)


@st.composite
def judgments_of(draw: st.DrawFn, item_id: str) -> list[Judgment]:
    out = []
    for judge in draw(st.lists(st.sampled_from(JUDGES), unique=True, max_size=len(JUDGES))):
        kind = draw(st.sampled_from(["spans", "spans", "score"]))
        if draw(st.integers(0, 9)) == 0:
            out.append(unscored(item_id, judge, kind, "timeout"))
        elif kind == "score":
            out.append(Judgment(item_id, judge, "score", draw(st.sampled_from([0.1, 0.7]))))
        else:
            spans = tuple(draw(st.lists(_SPAN, max_size=4)))
            out.append(Judgment(item_id, judge, "spans", 1.0 if spans else 0.0, spans))
    return out


@st.composite
def consensus_of(draw: st.DrawFn, item_id: str) -> Consensus:
    ok = draw(st.booleans())
    spans = tuple(
        ConsensusSpan(s, s + n, "x", 2, 2)
        for s, n in draw(st.lists(st.tuples(st.integers(-2, 30), st.integers(-1, 10)), max_size=3))
    )
    flagged = draw(st.sampled_from([True, False, None])) if ok else None
    return Consensus(
        item_id,
        "ok" if ok else "insufficient",
        len(JUDGES),
        3,
        3,
        0.5 if ok else None,
        0.5 if ok else None,
        0.0 if ok else None,
        1.0 if ok else None,
        1.0 if ok else None,
        flagged,
        n_span_judges=draw(st.integers(0, 2)),
        spans=spans if ok else (),
    )


@st.composite
def gold_of(draw: st.DrawFn) -> GoldLabels | None:
    if draw(st.integers(0, 4)) == 0:
        return None
    spans = draw(st.lists(st.tuples(st.integers(-3, 30), st.integers(0, 10)), max_size=3))
    return GoldLabels(
        draw(st.sampled_from([True, False, None])), tuple((s, s + n) for s, n in spans)
    )


@st.composite
def runs(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 5))
    ids = [f"i{k}" for k in range(n)]
    return {
        "items": [Item(i, {"response": "x"}, draw(gold_of()), k) for k, i in enumerate(ids)],
        "judgments": [j for i in ids for j in draw(judgments_of(i))],
        "consensus": [draw(consensus_of(i)) for i in ids],
        "rewritten": [draw(consensus_of(i)) for i in ids if draw(st.booleans())],
        "seed": draw(st.integers(0, 2**16)),
    }


def _write_piecewise(store: Store, run: dict[str, Any], check: bool) -> None:
    """The run's rows in random chunks and orders, the views checked after every write."""
    rng = random.Random(run["seed"])
    judgments = list(run["judgments"])
    rng.shuffle(judgments)  # an item's judges land in different writes, as on resume
    cut = rng.randint(0, len(judgments))
    items = list(run["items"])
    early = items[: rng.randint(0, len(items))]
    writes: list[tuple[Sequence[Item], Sequence[Judgment], Sequence[Consensus]]] = [
        (early, judgments[:cut], ()),
        ((), judgments[cut:], ()),
        (items, (), run["consensus"][: len(run["consensus"]) // 2]),  # items re-sent: ignored
        ((), (), run["consensus"][len(run["consensus"]) // 2 :]),
    ]
    for items_part, judgments_part, consensus_part in writes:
        how = rng.randint(0, 1)
        if how == 0:
            store.write_chunk("r", items_part, judgments_part, consensus_part)
        else:
            store.insert_items("r", items_part)
            store.insert_judgments("r", judgments_part)
            store.insert_consensus("r", consensus_part)
        if check:
            assert_views_match_baseline(store)


# ~1 s an example (a store per example, a view check per write): CI's time is bounded
@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(run=runs())
def test_views_equal_the_query_time_definitions_at_every_write(
    tmp_path_factory: pytest.TempPathFactory, run: dict[str, Any]
) -> None:
    store = new_store(tmp_path_factory.mktemp("w") / "s.duckdb")
    _write_piecewise(store, run, check=True)
    # a rule fitted over the run rewrites the whole consensus
    store.replace_consensus("r", run["rewritten"], {"rule": "refit"})
    assert_views_match_baseline(store)
    # juryflow reaggregate: the run's rows copied under a new id, a consensus made anew
    store.create_run(_run("r2"))
    store.copy_run_rows("r", "r2")
    assert_views_match_baseline(store)
    store.replace_consensus("r2", run["consensus"], {"rule": "again"})
    assert_views_match_baseline(store)


# -- migration ----------------------------------------------------------------------------


def _stored(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    with store.read() as con:
        return {
            "span_sets": con.execute("SELECT * FROM span_sets ORDER BY ALL").fetchall(),
            "span_overlaps": con.execute("SELECT * FROM span_overlaps ORDER BY ALL").fetchall(),
            "span_chars": con.execute(
                "SELECT run_id, item_id, judge_id, span_chars FROM judgments ORDER BY ALL"
            ).fetchall(),
            **{
                view: con.execute(f"SELECT * FROM {view} ORDER BY ALL").fetchall()
                for view in SPAN_VIEWS
            },
        }


def _to_version_4(path: Path) -> None:
    """The store as schema version 4 left it: no span tables, no judgments.span_chars."""
    con = duckdb.connect(str(path))
    try:
        for view in (*SPAN_VIEWS, *(f"baseline_{v}" for v in SPAN_VIEWS)):
            con.execute(f"DROP VIEW IF EXISTS {view}")
        con.execute("DROP TABLE span_sets")
        con.execute("DROP TABLE span_overlaps")
        con.execute("ALTER TABLE judgments DROP COLUMN span_chars")
        # what migration 8 added (6 and 7 run again as they are)
        con.execute("DROP TABLE run_shards")
        con.execute("DROP TABLE store_meta")
        con.execute("ALTER TABLE runs DROP COLUMN finished_snapshot")
        # what migrations 10-13 added: cache tokens, early stopping's tables, batch ids, 429s
        for column in ("cache_write_tokens", "cache_read_tokens", "batch_id"):
            con.execute(f"ALTER TABLE judgments DROP COLUMN {column}")
        con.execute("DROP TABLE skipped_judgments")
        con.execute("DROP TABLE audit_items")
        con.execute("DROP TABLE rate_limited")
        con.execute("DROP TABLE judgment_sample_spans")
        con.execute("DROP TABLE judgment_samples")
        con.execute("DELETE FROM schema_version WHERE version > 4")
    finally:
        con.close()


# Four random runs: each is a whole v4 store migrated (8 s); test_migration_backfills_in_chunks
# and the span views' own properties cover the rest.
@settings(max_examples=4, deadline=None)
@given(run=runs())
def test_migration_backfills_a_version_4_store(
    tmp_path_factory: pytest.TempPathFactory, run: dict[str, Any]
) -> None:
    path = tmp_path_factory.mktemp("m") / "s.duckdb"
    store = new_store(path)
    _write_piecewise(store, run, check=False)
    store.create_run(_run("r2"))
    store.copy_run_rows("r", "r2")
    store.replace_consensus("r2", run["rewritten"], {"rule": "refit"})
    written = _stored(store)
    _to_version_4(path)
    migrated = Store(path)
    assert migrated.migrate() == LATEST_VERSION
    backfilled = _stored(migrated)
    for table in ("span_sets", "span_overlaps", "span_chars"):
        assert backfilled[table] == written[table], table
    for view in SPAN_VIEWS:
        assert bench.same_rows(backfilled[view], written[view]), view
    with migrated.write() as con:
        for statement in bench.baseline_statements():
            con.execute(statement)
    assert_views_match_baseline(migrated)


def test_migration_backfills_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run larger than one backfill chunk (here 7 items) gets every item's rows."""
    from juryflow.storage.store import span_sets as store_module

    rng = random.Random(3)
    path = tmp_path / "s.duckdb"
    store = new_store(path)
    items = [
        Item(f"i{k:02d}", {"response": "x"}, GoldLabels(True, ((rng.randint(0, 9), 14),)), k)
        for k in range(30)
    ]
    judgments = [
        Judgment(
            i.item_id,
            judge,
            "spans",
            1.0,
            (Span(s := rng.randint(0, 10), s + rng.randint(1, 8), "x", "exact"),),
        )
        for i in items
        for judge in JUDGES
    ]
    consensus = [
        Consensus(i.item_id, "ok", 4, 4, 4, 1.0, 1.0, 1.0, 1.0, 0.0, True, n_span_judges=4,
                  spans=(ConsensusSpan(2, 9, "x", 3, 3),))
        for i in items
    ]  # fmt: skip
    store.write_chunk("r", items, judgments, consensus)
    written = _stored(store)
    _to_version_4(path)
    monkeypatch.setattr(store_module, "_BACKFILL_CHUNK", 7)
    Store(path).migrate()
    assert _stored(Store(path)) == written


# -- the benches ----------------------------------------------------------------------------


def _bench_output(*args: str) -> str:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, *args],
        cwd=BENCH.parents[1],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_bench_views_checks_the_baseline() -> None:
    """``bench/bench_views.py --baseline`` (as bench/README.md runs it, at a small size)."""
    out = _bench_output("bench/bench_views.py", "--items", "2000", "--baseline", "--repeats", "1")
    for view in SPAN_VIEWS:
        assert f"\n{view}: cold " in out and f"  baseline_{view}: cold " in out, out
    assert out.count("same rows as the baseline: True") == len(SPAN_VIEWS), out


def test_bench_storage_writes_and_counts() -> None:
    out = _bench_output("bench/bench_storage.py", "--rows", "20000", "--batch", "5000")
    assert "bulk: " in out and "per-transaction: " in out and "judgment rows/s" in out, out


def test_reading_a_store_at_an_older_schema_brings_it_up_to_date(tmp_path: Path) -> None:
    """`juryflow agreement` on a store whose views all exist, at schema 4: it migrates, so
    the views read the stored overlaps instead of the older, slower definitions."""
    from juryflow.storage.reads.analysis import ensure_views

    path = tmp_path / "s.duckdb"
    new_store(path)
    _to_version_4(path)
    con = duckdb.connect(str(path))
    try:
        for statement in bench.baseline_statements():
            con.execute(statement)
        for view in SPAN_VIEWS:  # as a version-4 store has them: computed at query time
            con.execute(f"CREATE VIEW {view} AS SELECT * FROM baseline_{view}")
    finally:
        con.close()
    ensure_views(Store(path))
    _, rows = Store(path).query("SELECT max(version) FROM schema_version")
    assert rows == [(LATEST_VERSION,)]
    _, rows = Store(path).query(
        "SELECT count(*) FROM duckdb_views() WHERE view_name = 'judge_pair_agreement' "
        "AND sql LIKE '%span_overlaps%'"
    )
    assert rows == [(1,)]
