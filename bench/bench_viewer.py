"""`juryflow view` at scale: the items and item pages of a 100,000-item x 3-judge run, served
over real HTTP (target: every items page in < 300 ms).

Usage: python bench/bench_viewer.py [--items 100000] [--judges 3] [--batch-items 10000]
           [--repeats 7] [--seed 7] [--db PATH]

Builds a store the way runs do (``Store.write_chunk``, one transaction per batch of
``--batch-items``, on one held connection): the responses cycle the bundled sample's
responses (so a text search finds real words), every judge answers with spans (0-3 spans
of 10-60 characters around a per-item spot, so the judges partly overlap), ~3 % of
judgments are unscored, about 2 % of items fall below quorum, and every other item has
gold labels. ``--db PATH`` keeps the store (and reuses it when it exists).

Then serves :func:`juryflow.viewer.app.create_app` with uvicorn on a free port in a
thread and times ``--repeats`` GETs of each URL (median and p95, after one warm-up): the
items page with its default sort, each sort, each filter, a text search, page 1000, and the
item page.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common

from juryflow.maths.records import Consensus, ConsensusSpan, GoldLabels, Item, Judgment, Span
from juryflow.storage.store import RunRecord, Store

TARGET_MS = 300.0
RUN_ID = "bench-viewer"
SORTS = (
    "disagreement",
    "score_spread",
    "verdict_split",
    "span_disagreement",
    "consensus_score",
    "consensus_verdict",
    "gold_mismatch",
    "item",
)


def _responses() -> list[str]:
    rows = [json.loads(line) for line in _common.SAMPLE.read_text("utf-8").splitlines() if line]
    return [str(r["response"]) for r in rows if r.get("response")]


def _judge_spans(rng: random.Random, text: str, spot: int) -> tuple[Span, ...]:
    spans = []
    for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
        start = max(0, min(len(text) - 1, spot + rng.randrange(-30, 30)))
        end = min(len(text), start + rng.randint(10, 60))
        spans.append(Span(start, end, text[start:end], "exact", text[start:end]))
    return tuple(spans)


def make_batch(
    rng: random.Random, texts: list[str], start: int, size: int, judges: int
) -> tuple[list[Item], list[Judgment], list[Consensus]]:
    items: list[Item] = []
    judgments: list[Judgment] = []
    consensus: list[Consensus] = []
    for n in range(start, start + size):
        item_id = f"item-{n:07d}"
        text = texts[n % len(texts)]
        gold = None
        if n % 2:
            flagged = rng.random() < 0.4
            g0 = rng.randrange(0, max(1, len(text) - 40))
            gold = GoldLabels(flagged, ((g0, g0 + 30),) if flagged else ())
        items.append(Item(item_id, {"reference": f"ref {n}", "response": text}, gold, n))
        spot = rng.randrange(0, max(1, len(text) - 60))
        scores: list[float] = []
        marked: list[set[int]] = []
        below_quorum = rng.random() < 0.02
        for j in range(judges):
            judge_id = f"judge-{j}"
            if below_quorum or rng.random() < 0.03:
                judgments.append(
                    Judgment(item_id, judge_id, "spans", None, unscored_reason="bench: timeout")
                )
                continue
            spans = _judge_spans(rng, text, spot)
            score = 1.0 if spans else 0.0
            marked.append({c for s in spans for c in range(s.char_start or 0, s.char_end or 0)})
            judgments.append(
                Judgment(
                    item_id, judge_id, "spans", score, spans,
                    reasoning="bench", raw_output="{}", latency_ms=rng.uniform(50, 900),
                )
            )  # fmt: skip
            scores.append(score)
        consensus.append(_consensus(item_id, text, judges, scores, marked))
    return items, judgments, consensus


def _consensus(
    item_id: str, text: str, judges: int, scores: list[float], marked: list[set[int]]
) -> Consensus:
    chars_any = len(set().union(*marked)) if marked else 0
    chars_all = len(set.intersection(*marked)) if marked else 0
    if len(scores) < judges // 2 + 1:
        return Consensus(
            item_id, "insufficient", judges, len(scores), len(scores), None, None, None, None,
            None, None, n_span_judges=len(marked), chars_any=chars_any, chars_all=chars_all,
        )  # fmt: skip
    counts: dict[int, int] = {}
    for chars in marked:
        for c in chars:
            counts[c] = counts.get(c, 0) + 1
    won = sorted(c for c, v in counts.items() if v * 2 > len(marked))
    spans: list[ConsensusSpan] = []
    for c in won:
        if spans and spans[-1].char_end == c:
            last = spans[-1]
            spans[-1] = ConsensusSpan(last.char_start, c + 1, text[last.char_start : c + 1], 2, 2)
        else:
            spans.append(ConsensusSpan(c, c + 1, text[c : c + 1], 2, 2))
    ordered = sorted(scores)
    median = ordered[len(ordered) // 2]
    return Consensus(
        item_id, "ok", judges, len(scores), len(scores), median, median, ordered[0],
        ordered[-1], ordered[-1] - ordered[0], bool(spans), n_span_judges=len(marked),
        spans=tuple(spans), chars_any=chars_any, chars_all=chars_all, verdict_rule="spans",
    )  # fmt: skip


def build_store(path: Path, items: int, judges: int, batch: int, seed: int) -> float:
    """Write the bench run into a new store at ``path``; returns the seconds it took."""
    started = time.perf_counter()
    rng = random.Random(seed)
    texts = _responses()
    store = Store(path)
    store.migrate()
    panel = {
        "name": "bench-viewer",
        "judges": [{"id": f"judge-{j}", "provider": "offline"} for j in range(judges)],
    }
    store.create_run(
        RunRecord(
            run_id=RUN_ID, kind="evaluate", suite="bench", status="completed",
            started_at=datetime.now(UTC), finished_at=datetime.now(UTC), dataset="bench",
            panel_name="bench-viewer", panel=panel, prompts=[], quorum=judges // 2 + 1,
            n_judges=judges,
        )
    )  # fmt: skip
    with store.session():
        for start in range(0, items, batch):
            its, js, cs = make_batch(rng, texts, start, min(batch, items - start), judges)
            store.write_chunk(RUN_ID, its, js, cs)
    return time.perf_counter() - started


@contextmanager
def serve(store_path: Path, reviewer: str = "bench") -> Iterator[str]:
    """The viewer over ``store_path`` on a free port (uvicorn in a thread); yields its URL."""
    from juryflow.viewer.server import start_in_thread
    from juryflow.viewer.state import ViewerState

    running = start_in_thread(ViewerState(store=Store(store_path), reviewer=reviewer))
    try:
        yield running.url.rstrip("/")
    finally:
        running.stop()


def get(url: str) -> tuple[int, float]:
    """Status and milliseconds of one GET, the whole body read."""
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            answer.read()
            status = int(answer.status)
    except urllib.error.HTTPError as error:
        status = error.code
    return status, (time.perf_counter() - t0) * 1000


def cases(items: int, judges: int) -> dict[str, str]:
    """Label -> path of every URL the bench times."""
    base = f"/runs/{RUN_ID}/items"
    last_page = max(1, min(1000, (items + 49) // 50))
    found: dict[str, str] = {"items (default sort)": base}
    for sort in SORTS:
        for order in ("desc", "asc"):
            found[f"sort {sort} {order}"] = f"{base}?sort={sort}&order={order}"
    found |= {
        "filter verdict_judge=judge-0 hallucinated": (
            f"{base}?verdict_judge=judge-0&verdict=hallucinated"
        ),
        "filter split=1": f"{base}?split=1",
        "filter unscored=1": f"{base}?unscored=1",
        "filter gold_mismatch=1": f"{base}?gold_mismatch=1",
        "filter insufficient=1": f"{base}?insufficient=1",
        "filters split+gold_mismatch, sort spread": (
            f"{base}?split=1&gold_mismatch=1&sort=score_spread"
        ),
        "search q=parking": f"{base}?q=parking",
        "search q=parking, split=1": f"{base}?q=parking&split=1",
        f"page {last_page}": f"{base}?page={last_page}",
        "item page": f"/runs/{RUN_ID}/item?id=item-{items // 2:07d}",
        "item page, with filter (prev/next)": (
            f"/runs/{RUN_ID}/item?id=item-{items // 2:07d}&sort=score_spread&unscored=0"
        ),
    }
    return found


def measure(url: str, paths: dict[str, str], repeats: int) -> list[tuple[str, int, float, float]]:
    """(label, status, median ms, p95 ms) per path, after one warm-up GET each."""
    rows = []
    for label, path in paths.items():
        get(url + path)
        results = [get(url + path) for _ in range(repeats)]
        times = sorted(ms for _, ms in results)
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        rows.append((label, results[-1][0], statistics.median(times), p95))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--judges", type=int, default=3)
    parser.add_argument("--batch-items", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--db", type=Path, default=None)
    args = parser.parse_args(argv)
    print(f"setup: {args.items:,} items x {args.judges} judges; {_common.machine()}")
    with _common.temp_dir("bench-viewer-") as tmp:
        path = args.db or Path(tmp) / "bench.duckdb"
        if path.exists():
            print(f"store: reusing {path}")
        else:
            seconds = build_store(path, args.items, args.judges, args.batch_items, args.seed)
            print(f"store: built in {seconds:.1f} s ({path.stat().st_size / 2**20:.0f} MB)")
        with serve(path) as url:
            rows = measure(url, cases(args.items, args.judges), args.repeats)
    width = max(len(label) for label, *_ in rows)
    worst = 0.0
    failed = False
    for label, status, median, p95 in rows:
        worst = max(worst, median)
        failed |= status != 200
        print(f"{label:<{width}}  HTTP {status}  median {median:7.1f} ms  p95 {p95:7.1f} ms")
    met = "met" if worst < TARGET_MS else "MISSED"
    print(f"slowest median {worst:.1f} ms (target < {TARGET_MS:g} ms: {met})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
