"""DuckDB write throughput for judgments (target ≥ 200,000 rows/s).

Usage: python bench/bench_storage.py [--rows 1000000] [--batch 20000]
Writes through Store.insert_judgments (one transaction per batch, about 40 % of judgments
with a span), in two modes, and prints rows/s for each:

- bulk: one connection held for all batches (Store.session(), as bulk loads do);
- per-transaction: the file opened and closed around every batch, as a run's chunk
  writes are (so that another process can take the file in between); each close
  checkpoints, which costs more as the file grows.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine
from juryflow.maths.records import Judgment, Span
from juryflow.storage.store import Store


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
    print(f"machine: {machine()}")
    batches = [
        make_batch(start, min(args.batch, args.rows - start), args.judges)
        for start in range(0, args.rows, args.batch)
    ]
    print(f"judgment rows: {args.rows:,} in batches of {args.batch:,}")
    for mode in ("bulk", "per-transaction"):
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(Path(tmp) / "bench.duckdb")
            store.migrate()
            started = time.perf_counter()
            if mode == "bulk":
                with store.session():
                    for batch in batches:
                        store.insert_judgments("bench", batch)
            else:
                for batch in batches:
                    store.insert_judgments("bench", batch)
            write = time.perf_counter() - started
            _, rows = store.query("SELECT count(*) FROM judgments")
            assert rows[0][0] == args.rows
            print(
                f"{mode}: {write:.2f} s -> {args.rows / write:,.0f} judgment rows/s "
                "(target >= 200,000)"
            )


if __name__ == "__main__":
    main()
