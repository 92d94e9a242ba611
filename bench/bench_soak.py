"""Soak: 10,000 items × 3 judges against a faulty stand-in, stopped three ways and resumed.

One run of ``juryflow run`` (the real command, as subprocesses, each with its own ephemeral
Prefect server) is taken through four segments:

1. started, then Ctrl-C (SIGINT to its process group, as a terminal sends it);
2. ``--resume``, with a long reader holding the store read-only meanwhile (longer than the
   lock deadline, shortened here to ``--lock-wait`` seconds), then SIGTERM (what a Prefect
   worker sends to cancel);
3. ``--resume``, then SIGKILL;
4. ``--resume``, then Ctrl-C 1, 3 and 6 s after it starts (start-up: the ephemeral server,
   the flow starting, planning), each a segment of its own;
5. ``--resume``, then its store file deleted (the next ``--resume`` rebuilds it from the
   run's journal);
6. as root, the store's disk (a tmpfs of its own) shrunk to just what it holds, so that the
   ``--resume`` fills it, then grown again;
7. ``--resume`` to the end.

The stand-in answers with 429s, 500s, hangs (past the judges' timeout) and malformed
output. Figures printed:

- rows lost / duplicated: (item, judge) pairs missing from or repeated in ``judgments``;
- calls repeated: answers the stand-in completed ("ok") in a segment beyond the pairs that
  segment stored or journaled, set against the calls juryflow may have had in flight at the
  signal (3 judges × ``max_concurrency``): only those may repeat. The stand-in's own
  in-flight count at the signal is printed too; it is lower, because it misses answers
  already sent but not yet read by the (CPU-bound) client;
- seconds from each signal to the exit, and its exit code;
- processes left over: any process juryflow started (its ephemeral Prefect server above
  all) still running 5 s after each segment ended.

Run: ``.venv/bin/python bench/bench_soak.py`` (a few minutes on 2 cores). Not run by tests.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from _common import KEY_ENV, REPO, machine, prefect_env, synth_dataset

JUDGES = (
    ("claude", "anthropic", "stub-spans-good"),
    ("gpt", "openai", "stub-spans-nearmiss"),
    ("local", "openai", "stub-random"),
)

READER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from juryflow.storage.connection import connect

    # a long `juryflow sql` read: one read-only connection held for the whole query
    with connect(Path(sys.argv[1]), read_only=True) as con:
        con.execute("SELECT count(*) FROM judgments").fetchall()
        print("holding", flush=True)
        time.sleep(float(sys.argv[2]))
    """
)


@dataclass
class Segment:
    name: str
    exit_code: int | None = None
    seconds_to_exit: float | None = None
    in_flight_at_signal: int = 0
    calls_after_stop: int = 0
    """Requests reaching the stand-in more than 2 s after the signal."""
    left_over: list[str] = field(default_factory=list)
    stderr_lines: int = 0
    waiting_notices: int = 0
    """Lines saying the run waits for the store a reader holds."""
    wall: float = 0.0
    ok_answers: int = 0
    """Answers the stand-in completed during the segment."""
    pairs_done: int = 0
    """(item, judge) pairs the segment added to the store and journal."""
    last_line: str = ""
    tracebacks: int = 0

    @property
    def repeated(self) -> int:
        return self.ok_answers - self.pairs_done


def write_panel(path: Path, base_url: str, concurrency: int) -> Path:
    lines = ["name: soak", "judges:"]
    for judge_id, provider, model in JUDGES:
        url = base_url if provider == "anthropic" else base_url + "/v1"
        lines.append(
            f"  - {{id: {judge_id}, provider: {provider}, model: {model}, "
            f"prompt: data2txt_spans, base_url: '{url}', api_key_env: {KEY_ENV}, "
            f"max_concurrency: {concurrency}, timeout: 2.0, max_attempts: 8}}"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def descendants(pid: int) -> list[object]:
    import psutil

    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.NoSuchProcess:
        return []


def still_running(processes: list[object]) -> list[str]:
    import psutil

    left = []
    for process in processes:
        assert isinstance(process, psutil.Process)
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{process.pid} {' '.join(process.cmdline())[:80]}")
        except psutil.NoSuchProcess:
            pass
    return left


def run_segment(
    segment: Segment,
    db: Path,
    command: list[str],
    env: dict[str, str],
    stats: object,
    stop_at_ok: int | None,
    send: signal.Signals | None,
    during: threading.Event | None = None,
    at_seconds: float | None = None,
    damage: Callable[[], None] | None = None,
) -> None:
    """Run one segment; once the stand-in has answered ``stop_at_ok`` calls (or
    ``at_seconds`` after the start), send ``send``, or do ``damage`` to the store."""
    started = time.monotonic()
    ok_before = ok_calls(stats)
    pairs_before = answered_pairs(db)
    child = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a terminal's foreground job: Ctrl-C reaches its group
    )
    seen: dict[int, object] = {}
    stderr_chunks: list[str] = []
    reader = threading.Thread(
        target=lambda: stderr_chunks.append(child.stderr.read() if child.stderr else ""),
        daemon=True,
    )
    reader.start()
    while child.poll() is None:
        for process in descendants(child.pid):
            seen.setdefault(process.pid, process)  # type: ignore[attr-defined]
        due = (stop_at_ok is not None and ok_calls(stats) >= stop_at_ok) or (
            at_seconds is not None and time.monotonic() - started >= at_seconds
        )
        if (send is not None or damage is not None) and due:
            if during is not None and not during.is_set():
                time.sleep(0.2)
                continue
            segment.in_flight_at_signal = stats.snapshot()["in_flight"]  # type: ignore[attr-defined]
            sent = time.monotonic()
            if damage is not None:
                damage()
            elif send == signal.SIGINT:
                os.killpg(child.pid, send)
            elif send is not None:
                child.send_signal(send)
            at_stop: int | None = None
            while child.poll() is None or at_stop is None:
                if child.poll() is not None and segment.seconds_to_exit is None:
                    segment.seconds_to_exit = time.monotonic() - sent
                if at_stop is None and time.monotonic() >= sent + 2.0:
                    at_stop = stats.requests()  # type: ignore[attr-defined]
                time.sleep(0.02)
            if segment.seconds_to_exit is None:
                segment.seconds_to_exit = time.monotonic() - sent
            segment.calls_after_stop = stats.requests() - at_stop  # type: ignore[attr-defined]
            break
        time.sleep(0.02 if at_seconds is not None else 0.2)
    child.wait()
    reader.join(timeout=10)
    segment.exit_code = child.returncode
    segment.wall = time.monotonic() - started
    text = "".join(stderr_chunks)
    segment.stderr_lines = len(text.strip().splitlines())
    segment.last_line = text.strip().splitlines()[-1] if text.strip() else ""
    segment.tracebacks = text.count("Traceback")
    segment.waiting_notices = text.count("waiting for the store")
    if segment.exit_code not in (0, 2, 130, 143, -9) or segment.tracebacks:
        print(f"  {segment.name}: unexpected exit {segment.exit_code}\n{text[-2000:]}")
    segment.ok_answers = ok_calls(stats) - ok_before
    segment.pairs_done = answered_pairs(db) - pairs_before
    time.sleep(5.0)
    segment.left_over = still_running(list(seen.values()))


def answered_pairs(db: Path) -> int:
    """Pairs a call answered, in the store or the journal (provider errors left out)."""
    from juryflow.storage.journal import Journal, journal_path
    from juryflow.storage.store import Store

    # a store the segment deleted: the journal holds what the run answered
    journals = sorted((db.parent / f"{db.name}.journal").glob("*.jsonl"))
    journaled = journals[0].stem if journals else None
    run_id = Store(db).latest_run_id() if db.exists() else journaled
    if run_id is None:
        return 0
    pairs: set[tuple[str, str]] = set()
    if db.exists():
        _, rows = Store(db).query(
            "SELECT item_id, judge_id FROM judgments WHERE run_id = ? "
            "AND coalesce(unscored_reason, '') NOT LIKE 'provider error%'",
            [run_id],
        )
        pairs = {(str(item), str(judge)) for item, judge in rows}
    for judgment in Journal(journal_path(db, run_id)).replay():
        if not (judgment.unscored_reason or "").startswith("provider error"):
            pairs.add((judgment.item_id, judgment.judge_id))
    return len(pairs)


def ok_calls(stats: object) -> int:
    return int(stats.snapshot()["by_outcome"].get("ok", 0))  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16, help="per judge")
    parser.add_argument("--latency-ms", type=float, default=30.0)
    parser.add_argument("--hold", type=float, default=25.0, help="reader holds the store (s)")
    parser.add_argument("--lock-wait", type=float, default=8.0, help="the run's lock deadline")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="juryflow-soak-"))
    prefect_env(tmp)
    from juryflow.standin.server import StubConfig, running_stub_server
    from juryflow.storage.journal import journal_path
    from juryflow.storage.store import Store

    # Cycled rows repeat prompts: --no-cache below keeps every pair a real call.
    dataset = synth_dataset(tmp / "items.jsonl", args.items)
    disk = own_disk(tmp / "disk")
    db = (disk or tmp) / "soak.duckdb"
    pairs = args.items * len(JUDGES)
    config = StubConfig(
        latency_ms=args.latency_ms,
        fault_429=0.05,
        fault_500=0.03,
        fault_hang=0.005,
        malformed=0.03,
        retry_after=0.05,
        hang_seconds=3.0,
        seed=10,
    )
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["JURYFLOW_LOCK_WAIT_SECONDS"] = str(args.lock_wait)
    base = [sys.executable, "-m", "juryflow", "run"]
    segments: list[Segment] = []
    started = time.monotonic()
    with running_stub_server(config) as stub:
        panel = write_panel(tmp / "panel.yaml", stub.base_url, args.concurrency)
        first = [*base, str(dataset), "--panel", str(panel), "--db", str(db)]
        first += ["--chunk-size", "200", "--no-cache"]

        print(f"soak: {args.items:,} items × {len(JUDGES)} judges in {tmp}")
        ctrl_c = Segment("Ctrl-C (SIGINT to the group)")
        run_segment(ctrl_c, db, first, env, stub.stats, int(pairs * 0.15), signal.SIGINT)
        segments.append(ctrl_c)
        run_id = Store(db).latest_run_id()
        assert run_id is not None, "the run did not start"
        resume = [*base, "--resume", run_id, "--db", str(db), "--no-cache"]

        # Segment 2: a long reader, then SIGTERM once the reader is gone.
        term = Segment("SIGTERM, after a long reader")
        released = threading.Event()
        held: dict[str, float] = {}

        def hold_store() -> None:
            while ok_calls(stub.stats) < int(pairs * 0.25):
                time.sleep(0.2)
            process = subprocess.Popen(
                [sys.executable, "-c", READER, str(db), str(args.hold)],
                cwd=REPO,
                stdout=subprocess.PIPE,
                text=True,
            )
            if process.stdout is not None:
                process.stdout.readline()
            held["from"] = time.monotonic()
            process.wait()
            held["to"] = time.monotonic()
            released.set()

        holder = threading.Thread(target=hold_store, daemon=True)
        holder.start()
        run_segment(term, db, resume, env, stub.stats, int(pairs * 0.45), signal.SIGTERM, released)
        segments.append(term)
        holder.join(timeout=5)
        status_after_reader = Store(db).get_run(run_id)

        kill = Segment("SIGKILL")
        run_segment(kill, db, resume, env, stub.stats, int(pairs * 0.70), signal.SIGKILL)
        segments.append(kill)

        for delay in (1.0, 3.0, 6.0):
            early = Segment(f"Ctrl-C {delay:g} s into start-up")
            run_segment(early, db, resume, env, stub.stats, None, signal.SIGINT, at_seconds=delay)
            segments.append(early)

        deleted = Segment("store file deleted")
        at = ok_calls(stub.stats) + int(pairs * 0.05)
        run_segment(deleted, db, resume, env, stub.stats, at, None, damage=db.unlink)
        segments.append(deleted)

        if disk is not None:
            full = Segment("disk full")
            at = ok_calls(stub.stats) + int(pairs * 0.02)
            run_segment(full, db, resume, env, stub.stats, at, None, damage=lambda: fill(disk))
            segments.append(full)
            resize(disk, "2g")

        finish = Segment("--resume to the end")
        run_segment(finish, db, resume, env, stub.stats, None, None)
        segments.append(finish)
        snapshot = stub.stats.snapshot()

    wall = time.monotonic() - started
    store = Store(db)
    run = store.get_run(run_id)
    _, rows = store.query(
        "SELECT count(*), count(DISTINCT (item_id, judge_id)), "
        "count(*) FILTER (WHERE unscored_reason LIKE 'provider error%') "
        "FROM judgments WHERE run_id = ?",
        [run_id],
    )
    total, distinct, provider_errors = rows[0]
    _, rows = store.query(
        "SELECT (SELECT count(*) FROM items WHERE run_id = ?), "
        "(SELECT count(*) FROM consensus WHERE run_id = ?)",
        [run_id, run_id],
    )
    items, consensus = rows[0]
    answered = distinct - provider_errors
    ok = int(snapshot["by_outcome"].get("ok", 0))
    repeated = ok - answered
    in_flight = sum(s.in_flight_at_signal for s in segments)
    client_bound = len(JUDGES) * args.concurrency
    beyond = sum(max(0, s.repeated - client_bound) for s in segments)
    left = [p for s in segments for p in s.left_over]

    print(machine())
    for s in segments:
        exit_text = f"exit {s.exit_code}"
        if s.seconds_to_exit is not None:
            exit_text += f" {s.seconds_to_exit:.1f} s after the signal"
        if s.exit_code == 2:
            exit_text += f" ({s.tracebacks} tracebacks; last line: {s.last_line[:90]}...)"
        print(
            f"  {s.name}: {exit_text}; in flight at the signal {s.in_flight_at_signal}; "
            f"calls > 2 s after it {s.calls_after_stop}; answers {s.ok_answers:,} for "
            f"{s.pairs_done:,} new pairs (repeated {s.repeated}); stderr lines {s.stderr_lines} "
            f"({s.waiting_notices} waiting for the store); "
            f"wall {s.wall:.0f} s; left over {len(s.left_over)}"
        )
    if "from" in held:
        print(
            f"  reader held the store {held['to'] - held['from']:.1f} s (deadline "
            f"{args.lock_wait:.0f} s); run status afterwards: "
            f"{status_after_reader.status if status_after_reader else '?'}"
        )
    print(
        f"rows: {total:,} judgments, {distinct:,} distinct pairs of {pairs:,}: "
        f"lost {pairs - distinct}, duplicated {total - distinct}"
    )
    print(
        f"items {items:,}, consensus {consensus:,}; run status {run.status if run else '?'}; "
        f"journal left {journal_path(db, run_id).exists()}"
    )
    print(
        f"calls: {snapshot['total']:,} requests; {ok:,} answered ok for {answered:,} "
        f"answered pairs ({provider_errors} pairs out of retries): repeated {repeated} "
        f"(the stand-in's in-flight count at the three signals: {in_flight}); repeated "
        f"beyond the {client_bound} calls juryflow may have in flight, per interrupt: {beyond}"
    )
    print(f"stand-in outcomes: {dict(sorted(snapshot['by_outcome'].items()))}")
    print(f"processes left over: {len(left)} {left if left else ''}")
    print(f"wall: {wall:.0f} s")
    if disk is not None:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def own_disk(where: Path) -> Path | None:
    """A tmpfs of its own for the store, so that its disk can fill; None unless root."""
    if os.geteuid() != 0:
        print("not root: the disk-full segment is left out")
        return None
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2g", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        print(f"no tmpfs ({mounted.stderr.decode().strip()}): the disk-full segment is left out")
        where.rmdir()
        return None
    return where


def resize(disk: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(disk)], check=True)


def fill(disk: Path) -> None:
    """Shrink the tmpfs to what it holds now and a little: the next writes find it full."""
    used = os.statvfs(disk)
    held = (used.f_blocks - used.f_bfree) * used.f_frsize
    resize(disk, f"{held // 1024 + 512}k")


if __name__ == "__main__":
    main()
