"""The item_disagreement view over 1,000,000 judgments (target <= 1 s per query).

Usage: python bench/bench_disagreement_view.py [--items 200000] [--judges 5]
           [--batch-items 10000] [--repeats 3] [--seed 7]

Builds a store the way runs do (Store.insert_items / insert_judgments / insert_consensus,
one transaction per batch) with items x judges judgments, seeded: judges 0-2 answer with
spans (about 40 % of their answers flag 1-2 spans of 8-40 characters near a per-item spot,
so the judges partly overlap), judges 3-4 with scores; ~3 % of judgments are unscored;
every item has a consensus row (with the span agreement counts chars_any / chars_all the
consensus step stores), and a consensus span where two span judges flagged.
Prints the write throughput on the way, then times on one read-only connection:

- ``SELECT * FROM item_disagreement WHERE run_id = ? ORDER BY disagreement_rank LIMIT 50``
  (the "what do the judges split on most" query);
- ``SELECT count(*) FROM item_disagreement`` (the whole view computed).

Each query runs ``--repeats`` times; the first (cold) run, the best and the worst are shown.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common

from juryflow.maths.records import Consensus, ConsensusSpan, GoldLabels, Item, Judgment, Span
from juryflow.storage.store import Store

TARGET_S = 1.0
RUN_ID = "bench-disagreement"
SPAN_JUDGES = 3
RESPONSE = "x" * 1200
QUERIES = {
    "top 50": (
        "SELECT * FROM item_disagreement WHERE run_id = ? ORDER BY disagreement_rank LIMIT 50",
        [RUN_ID],
    ),
    "count(*)": ("SELECT count(*) FROM item_disagreement", []),
}


def make_batch(
    rng: random.Random, start: int, size: int, judges: int
) -> tuple[list[Item], list[Judgment], list[Consensus]]:
    items: list[Item] = []
    judgments: list[Judgment] = []
    consensus: list[Consensus] = []
    for n in range(start, start + size):
        item_id = f"item-{n:07d}"
        gold = GoldLabels(hallucinated=rng.random() < 0.4, spans=()) if n % 2 else None
        items.append(Item(item_id, {"reference": "ref", "response": "resp"}, gold, n))
        spot = rng.randrange(0, 1100)
        scores: list[float] = []
        flagged = 0
        marked: list[set[int]] = []  # characters each answering span judge marked
        for j in range(judges):
            judge_id = f"judge-{j}"
            if rng.random() < 0.03:
                kind = "spans" if j < SPAN_JUDGES else "score"
                judgments.append(
                    Judgment(item_id, judge_id, kind, None, unscored_reason="bench: timeout")  # type: ignore[arg-type]
                )
                continue
            if j < SPAN_JUDGES:
                spans: tuple[Span, ...] = ()
                if rng.random() < 0.4:
                    spans = tuple(
                        _span(rng, spot + rng.randrange(-10, 10)) for _ in range(rng.randint(1, 2))
                    )
                    flagged += 1
                score = 1.0 if spans else 0.0
                marked.append({c for sp in spans for c in range(sp.char_start, sp.char_end)})  # type: ignore[arg-type]
                judgments.append(
                    Judgment(item_id, judge_id, "spans", score, spans, raw_output="{}")
                )
            else:
                score = rng.choice((0.0, 0.0, 0.3, 0.6, 1.0))
                judgments.append(Judgment(item_id, judge_id, "score", score, raw_output="{}"))
            scores.append(score)
        consensus.append(
            _consensus(item_id, judges, scores, spot if flagged >= 2 else None, marked)
        )
    return items, judgments, consensus


def _span(rng: random.Random, start: int) -> Span:
    start = max(0, min(start, 1150))
    end = min(start + rng.randint(8, 40), len(RESPONSE))
    return Span(start, end, RESPONSE[start:end], "exact", RESPONSE[start:end])


def _consensus(
    item_id: str, judges: int, scores: list[float], spot: int | None, marked: list[set[int]]
) -> Consensus:
    """As the consensus step records it, span agreement (chars_any / chars_all) included."""
    chars_any = len(set().union(*marked)) if marked else 0
    chars_all = len(set.intersection(*marked)) if marked else 0
    quorum = judges // 2 + 1
    if len(scores) < quorum:
        return Consensus(
            item_id,
            "insufficient",
            judges,
            len(scores),
            len(scores),
            *[None] * 6,
            n_span_judges=len(marked),
            chars_any=chars_any,
            chars_all=chars_all,
        )
    ordered = sorted(scores)
    median = ordered[len(ordered) // 2]
    spans = ()
    if spot is not None:
        start = max(0, min(spot, 1150))
        spans = (ConsensusSpan(start, start + 12, RESPONSE[start : start + 12], 2, 2),)
    return Consensus(
        item_id,
        "ok",
        judges,
        len(scores),
        len(scores),
        median,
        median,
        ordered[0],
        ordered[-1],
        ordered[-1] - ordered[0],
        median > 0.5,
        n_span_judges=len(marked),
        spans=spans,
        chars_any=chars_any,
        chars_all=chars_all,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--judges", type=int, default=5)
    parser.add_argument("--batch-items", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"setup: {args.items:,} items x {args.judges} judges; {_common.machine()}")

    with _common.temp_dir("bench-disagreement-") as tmp:
        store = Store(Path(tmp) / "bench.duckdb")
        store.migrate()
        build = 0.0
        writes = {"items": 0.0, "judgments": 0.0, "consensus": 0.0}
        rows = {"items": 0, "judgments": 0, "spans": 0, "consensus": 0}
        for start in range(0, args.items, args.batch_items):
            t0 = time.perf_counter()
            items, judgments, consensus = make_batch(
                rng, start, min(args.batch_items, args.items - start), args.judges
            )
            build += time.perf_counter() - t0
            for name, write, batch in (
                ("items", store.insert_items, items),
                ("judgments", store.insert_judgments, judgments),
                ("consensus", store.insert_consensus, consensus),
            ):
                t0 = time.perf_counter()
                write(RUN_ID, batch)  # type: ignore[operator]
                writes[name] += time.perf_counter() - t0
                rows[name] += len(batch)
            rows["spans"] += sum(len(j.spans) for j in judgments)
        total_write = sum(writes.values())
        total_rows = rows["items"] + rows["judgments"] + rows["consensus"]
        print(
            f"written: {rows['items']:,} items, {rows['judgments']:,} judgments "
            f"(+{rows['spans']:,} spans), {rows['consensus']:,} consensus rows, in batches of "
            f"{args.batch_items:,} items ({build:.1f} s building the records, not counted)"
        )
        print(
            f"write throughput: judgments {rows['judgments'] / writes['judgments']:,.0f} rows/s "
            f"(spans included, target >= 200,000 as bench_storage), items "
            f"{rows['items'] / writes['items']:,.0f} rows/s, consensus "
            f"{rows['consensus'] / writes['consensus']:,.0f} rows/s; all "
            f"{total_rows / total_write:,.0f} rows/s"
        )
        size_mb = store.path.stat().st_size / 2**20
        wal = store.path.with_name(store.path.name + ".wal")
        wal_mb = wal.stat().st_size / 2**20 if wal.exists() else 0.0
        print(f"store file: {size_mb:.0f} MB (+{wal_mb:.0f} MB WAL)")

        with store.read() as con:
            view = con.execute(
                "SELECT count(*) FROM duckdb_views() WHERE view_name = 'item_disagreement'"
            ).fetchone()
            if not view or not view[0]:
                print("item_disagreement view: NOT in the store; nothing to time")
                return
            for label, (sql, params) in QUERIES.items():
                times: list[float] = []
                result: list[tuple[object, ...]] = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    result = con.execute(sql, params).fetchall()
                    times.append(time.perf_counter() - t0)
                best, worst = min(times), max(times)
                met = (
                    "met" if worst <= TARGET_S else ("met (best)" if best <= TARGET_S else "MISSED")
                )
                shown = f"{len(result)} rows" if len(result) != 1 else f"result {result[0]}"
                print(
                    f"item_disagreement {label}: cold {times[0]:.3f} s, best {best:.3f} s, "
                    f"worst {worst:.3f} s over {args.repeats} runs ({shown}) "
                    f"(target <= {TARGET_S:g} s: {met})"
                )


if __name__ == "__main__":
    main()
