"""The DuckLake store against a DuckDB file: writes, `juryflow disagreements`, 4 shards vs 1.

Usage: python bench/bench_lake.py [--judgments 1000000] [--chunk-items 200] [--repeats 5]
           [--shard-items 3000] [--shards 4] [--latency-ms 200] [--concurrency 8]
           [--pg-dsn 'dbname=X host=H port=P user=U'] [--data-path DIR]
           [--parts all|stores|shards]

Without ``--pg-dsn`` it starts its own PostgreSQL (tests/pg_server.py, fsync off) and makes
one database per lake; with it, every part uses that one catalog (``--data-path``, else a
temporary directory, for its Parquet files). Three parts, each printed as it ends
(``--parts stores``: 1-2 only, ``--parts shards``: 3 only):

1. **Writes**: ``--judgments`` judgments (that / 3 items x 3 span judges, the seeded records
   of bench_viewer.make_batch: the sample's responses, 0-3 spans per answer around a spot
   per item, ~3 % unscored, gold labels on every other item, a consensus per item) written
   through ``Store.write_chunk`` in chunks of ``--chunk-items`` items, as a run does (no
   held session: a file is opened and closed per chunk), alternately into a DuckDB file and
   into ``ducklake:postgres:...``; judgments/s of each (the whole chunk
   transaction: items, judgments, spans, consensus, span sets) and lake / file.
2. **`juryflow disagreements`**: what the command does after parsing its options
   (``juryflow.analysis.agreement_report.disagreements(Store(db), run, 10)``: resolve the run, the
   ``item_disagreement`` view's top 10, their judgments and spans), ``--repeats`` times on
   each store; the first call after the lake is detached (attach included) is shown apart,
   the median of all is the figure. Then again on the lake after
   ``storage.lake_maintenance.compact`` with its defaults (``juryflow store compact``: the
   small files merged; no snapshot is old enough to expire) when that exists (else, or when
   it fails, the row says so).
3. **Shards**: ``--shard-items`` items (the bundled sample cycled) x 3 LLM judges on the
   stand-in (``juryflow.standin.server`` in its own process, ``--latency-ms`` per
   answer, ``--concurrency`` calls per judge and process), ``--no-cache``, against one
   running Prefect server: (a) one ``juryflow run DATASET --db LAKE`` process, then (b)
   ``--shards`` concurrent ``juryflow run DATASET --shard i/N --run-id R --db LAKE``
   processes followed by ``juryflow finish R``. Wall times (process start to exit), the
   ratio, and whether both runs' consensus (item_id, score, hallucinated) is identical.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import random
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common
from bench_memory import prefect_env
from bench_viewer import _responses, make_batch

from juryflow.analysis.agreement_report import disagreements
from juryflow.storage.connection import StoreError, close_lakes
from juryflow.storage.store import RunRecord, Store
from tests.pg_server import PostgresUnavailable, running_postgres

JUDGES = 3
CONSENSUS = "SELECT item_id, score, hallucinated FROM consensus WHERE run_id = ? ORDER BY item_id"


@dataclass(frozen=True, slots=True)
class Lake:
    db: str
    """``--db``: ``ducklake:postgres:<dsn>``."""
    data_path: Path


@contextlib.contextmanager
def lakes(pg_dsn: str | None, data_path: Path) -> Iterator[Callable[[str], Lake]]:
    """A maker of each part's lake: a new database and data path under ``data_path`` when
    this bench runs PostgreSQL itself; else ``--pg-dsn``'s one catalog, whose data path is
    fixed when it is created, for every part."""
    if pg_dsn is not None:
        yield lambda _name: Lake(f"ducklake:postgres:{pg_dsn}", data_path)
        return
    with running_postgres() as server:
        yield lambda name: Lake(
            f"ducklake:postgres:{server.create_database(name)}", data_path / name
        )


def run_record(run_id: str) -> RunRecord:
    now = datetime.now(UTC)
    panel = {"judges": [{"id": f"judge-{j}"} for j in range(JUDGES)]}
    return RunRecord(
        run_id=run_id, kind="evaluate", suite="bench", status="completed", started_at=now,
        finished_at=now, dataset="bench", panel_name="bench-lake", panel=panel, prompts=[],
        quorum=JUDGES // 2 + 1, n_judges=JUDGES,
    )  # fmt: skip


def disk_usage(path: Path) -> tuple[int, float]:
    """Files and MB under ``path`` (a DuckDB file: the file and its WAL)."""
    files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
    if path.is_file():
        wal = path.with_name(path.name + ".wal")
        files += [wal] if wal.exists() else []
    return len(files), sum(p.stat().st_size for p in files) / 2**20


# -- 1. writes ------------------------------------------------------------------------


def write_both(
    stores: dict[str, Store], run_id: str, judgments: int, chunk: int, seed: int
) -> dict[str, float]:
    """Seconds spent in ``write_chunk`` per store; the same chunks, alternating which store
    is written first, so that neither always meets the other's cache or page-out."""
    rng = random.Random(seed)
    texts = _responses()
    spent = dict.fromkeys(stores, 0.0)
    items = judgments // JUDGES
    report_every = max(1, items // chunk // 10)
    for number, start in enumerate(range(0, items, chunk)):
        batch = make_batch(rng, texts, start, min(chunk, items - start), JUDGES)
        order = list(stores) if number % 2 == 0 else list(reversed(stores))
        for name in order:
            t0 = time.perf_counter()
            stores[name].write_chunk(run_id, *batch)
            spent[name] += time.perf_counter() - t0
        if (number + 1) % report_every == 0:
            done = (start + len(batch[0])) * JUDGES
            rates = ", ".join(f"{n} {done / s:,.0f}/s" for n, s in spent.items())
            print(f"  {done:,} judgments: {rates}; load {os.getloadavg()[0]:.2f}", flush=True)
    return spent


def part_writes(file_store: Store, lake: Lake, run_id: str, args: argparse.Namespace) -> Store:
    """Part 1; returns the lake's store."""
    lake_store = Store(lake.db, str(lake.data_path))
    n = args.judgments // JUDGES * JUDGES
    print(
        f"1. writes: {n:,} judgments ({n // JUDGES:,} items x {JUDGES} judges) through "
        f"Store.write_chunk, chunks of {args.chunk_items} items; {_common.machine()}",
        flush=True,
    )
    for store in (file_store, lake_store):
        store.migrate()
        store.create_run(run_record(run_id))
    spent = write_both(
        {"file": file_store, "lake": lake_store}, run_id, n, args.chunk_items, args.seed
    )
    chunks = -(-n // JUDGES // args.chunk_items)
    for name, store in (("file", file_store), ("lake", lake_store)):
        stored = store.query("SELECT count(*) FROM judgments WHERE run_id = ?", [run_id])[1]
        assert stored[0][0] == n, f"{name}: {stored[0][0]} judgments stored, {n} written"
        files, mb = disk_usage(lake.data_path if store.lake else Path(str(store.path)))
        print(
            f"write {name}: {spent[name]:.1f} s, {n / spent[name]:,.0f} judgments/s, "
            f"{spent[name] / chunks * 1000:.0f} ms a chunk; {files} files, {mb:,.0f} MB on disk"
        )
    ratio = (n / spent["lake"]) / (n / spent["file"])
    print(
        f"write lake / file: {ratio:.2f} (judgments/s); load {os.getloadavg()[0]:.2f}", flush=True
    )
    return lake_store


# -- 2. juryflow disagreements -------------------------------------------------------


def time_disagreements(store: Store, run_id: str, repeats: int) -> tuple[float, float]:
    """(first, median) seconds of ``juryflow disagreements RUN`` 's query; the first after
    every lake is detached, so on a lake it pays the attach as a new process would."""
    close_lakes()
    times: list[float] = []
    top: list[str] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        found = disagreements(store, run_id, top=10)
        times.append(time.perf_counter() - t0)
        top = [item.item_id for item in found]
    assert len(top) == len(set(top)) > 0, top
    return times[0], statistics.median(times)


def compact_function() -> Callable[[Store], object] | None:
    """``storage.lake_maintenance.compact`` if that module has it yet."""
    module = importlib.import_module("juryflow.storage.lake.maintenance")
    found = getattr(module, "compact", None)
    return found if callable(found) else None


def part_disagreements(
    file_store: Store, lake_store: Store, lake: Lake, run_id: str, repeats: int
) -> None:
    print(f"2. juryflow disagreements (top 10), {repeats} repeats", flush=True)
    rows = {
        "file": time_disagreements(file_store, run_id, repeats),
        "lake": time_disagreements(lake_store, run_id, repeats),
    }
    compact = compact_function()
    if compact is None:
        print("lake after compact: skipped (no storage.lake_maintenance.compact yet)")
    else:
        t0 = time.perf_counter()
        try:
            report = compact(lake_store)
        except StoreError as error:
            print(f"lake after compact: skipped, compact failed: {error}")
        else:
            spent = time.perf_counter() - t0
            files, mb = disk_usage(lake.data_path)
            live = (getattr(report, "files_before", "?"), getattr(report, "files_after", "?"))
            print(
                f"compact: {spent:.1f} s; live data files {live[0]} -> {live[1]}; data path "
                f"now {files} files, {mb:,.0f} MB"
            )
            rows["lake after compact"] = time_disagreements(lake_store, run_id, repeats)
    for name, (first, median) in rows.items():
        ratio = f", {median / rows['file'][1]:.2f}x the file" if name != "file" else ""
        print(
            f"disagreements {name}: median {median * 1000:.0f} ms "
            f"(first {first * 1000:.0f} ms){ratio}"
        )
    print(f"load {os.getloadavg()[0]:.2f}", flush=True)


# -- 3. shards ------------------------------------------------------------------------


def juryflow(env: dict[str, str], cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "juryflow", *args],
        env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def wait_ok(child: subprocess.Popen[str], what: str) -> None:
    out, err = child.communicate(timeout=3600)
    if child.returncode != 0:
        raise SystemExit(f"{what} exited {child.returncode}:\n{out[-1500:]}\n{err[-3000:]}")


def part_shards(lake: Lake, tmp: Path, args: argparse.Namespace) -> None:
    n = args.shards
    print(
        f"3. {args.shard_items:,} items x 3 LLM judges on the stand-in ({args.latency_ms:g} ms, "
        f"{args.concurrency} calls per judge and process), one process vs {n} shards; "
        f"{_common.machine()}",
        flush=True,
    )
    dataset = _common.synth_dataset(tmp / "items.jsonl", args.shard_items)
    with contextlib.ExitStack() as stack:
        stub, base = _common.start_stub_process(args.latency_ms)
        stack.callback(stub.wait)
        stack.callback(stub.terminate)
        panel = _common.write_stub_panel(tmp / "panel.yaml", base, base + "/v1", args.concurrency)
        env = prefect_env(tmp / "prefect-home")
        env["JURYFLOW_DATA_PATH"] = str(lake.data_path)
        env["JURYFLOW_JOURNAL_DIR"] = str(tmp / "journals")
        api, _ = stack.enter_context(_common.background_prefect_server(env))
        env["PREFECT_API_URL"] = api
        common = [
            "run", str(dataset), "--panel", str(panel), "--db", lake.db, "--no-cache",
            "--suite", "bench-lake",
        ]  # fmt: skip
        store = Store(lake.db, str(lake.data_path))
        store.migrate()  # so that the runs table exists before the first run
        before = set(runs(store))

        t0 = time.perf_counter()
        wait_ok(juryflow(env, tmp, *common), "juryflow run")
        single = time.perf_counter() - t0
        (single_id,) = set(runs(store)) - before
        print(f"one process: {single:.1f} s (run {single_id})", flush=True)

        sharded_id = f"bench-shards-{secrets.token_hex(3)}"
        t0 = time.perf_counter()
        children = [
            juryflow(env, tmp, *common, "--shard", f"{i}/{n}", "--run-id", sharded_id)
            for i in range(1, n + 1)
        ]
        for i, child in enumerate(children, 1):
            wait_ok(child, f"shard {i}/{n}")
        shards_done = time.perf_counter() - t0
        wait_ok(juryflow(env, tmp, "finish", sharded_id, "--db", lake.db), "juryflow finish")
        sharded = time.perf_counter() - t0
        print(
            f"{n} shards + finish: {sharded:.1f} s (shards {shards_done:.1f} s, "
            f"finish {sharded - shards_done:.1f} s; run {sharded_id})"
        )
        print(f"speed-up of {n} shards (one process's time / theirs): {single / sharded:.2f}x")
        one = store.query(CONSENSUS, [single_id])[1]
        split = store.query(CONSENSUS, [sharded_id])[1]
        same = one == split and len(one) == args.shard_items
        print(
            f"consensus (item_id, score, hallucinated) of both runs: "
            f"{'identical' if same else 'DIFFERENT'} ({len(one):,} vs {len(split):,} items)"
        )
        status = store.query("SELECT status FROM runs WHERE run_id = ?", [sharded_id])[1]
        print(f"sharded run status: {status[0][0]}; load {os.getloadavg()[0]:.2f}", flush=True)
        close_lakes()
        if not same:
            raise SystemExit("the sharded run's consensus differs from the single run's")


def runs(store: Store) -> list[str]:
    return [str(r[0]) for r in store.query("SELECT run_id FROM runs")[1]]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--judgments", type=int, default=1_000_000)
    parser.add_argument("--chunk-items", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--shard-items", type=int, default=3000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--pg-dsn", help="a PostgreSQL libpq DSN for the catalog")
    parser.add_argument("--data-path", help="where the lake's Parquet files go")
    parser.add_argument(
        "--parts",
        choices=("all", "stores", "shards"),
        default="all",
        help="stores: writes and disagreements (1-2); shards: 3",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(_common.temp_dir("bench-lake-")))
        _common.prefect_env(tmp)
        data_path = Path(args.data_path or tmp / "lake-data")
        try:
            new_lake = stack.enter_context(lakes(args.pg_dsn, data_path))
        except PostgresUnavailable as error:
            raise SystemExit(f"no PostgreSQL for the lake: {error}; or pass --pg-dsn") from None
        stack.callback(close_lakes)
        if args.parts in ("all", "stores"):
            run_id = f"bench-lake-{secrets.token_hex(3)}"
            file_store = Store(tmp / "bench.duckdb")
            lake = new_lake("bench_writes")
            lake_store = part_writes(file_store, lake, run_id, args)
            part_disagreements(file_store, lake_store, lake, run_id, args.repeats)
        if args.parts in ("all", "shards"):
            part_shards(new_lake("bench_shards"), tmp, args)
    print(f"done in {time.perf_counter() - started:.0f} s; load avg {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
