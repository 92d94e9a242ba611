"""DuckDB write throughput for judgments (target ≥ 200,000 rows/s).

Usage: python bench/bench_storage.py [--rows 1000000] [--batch 20000]
Writes through Store.insert_judgments exactly as a run does (one transaction per batch,
judgments with one span each), and prints rows/s.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from judges.records import Judgment, Span
from storage.store import Store


def make_batch(start: int, size: int, judges: int) -> list[Judgment]:
    out: list[Judgment] = []
    for n in range(start, start + size):
        item = f"item-{n // judges}"
        judge = f"judge-{n % judges}"
        score = (n % 7) / 6
        spans = (Span(10, 20, "0123456789", "exact", "0123456789"),) if score > 0.5 else ()
        out.append(
            Judgment(
                item_id=item,
                judge_id=judge,
                output_kind="spans",
                score=score,
                spans=spans,
                raw_output='{"hallucination_list": []}',
                latency_ms=12.5,
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--judges", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.duckdb")
        store.migrate()
        build = 0.0
        write = 0.0
        for start in range(0, args.rows, args.batch):
            t0 = time.perf_counter()
            batch = make_batch(start, min(args.batch, args.rows - start), args.judges)
            t1 = time.perf_counter()
            store.insert_judgments("bench", batch)
            write += time.perf_counter() - t1
            build += t1 - t0
        _, rows = store.query("SELECT count(*) FROM judgments")
        assert rows[0][0] == args.rows
        print(f"judgment rows written: {args.rows:,} in batches of {args.batch:,}")
        print(f"write time: {write:.2f} s -> {args.rows / write:,.0f} rows/s (target >= 200,000)")
        print(f"(building the Judgment objects, not counted: {build:.2f} s)")


if __name__ == "__main__":
    main()
