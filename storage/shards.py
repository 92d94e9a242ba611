"""Sharded runs: one run's items split over N processes (or machines) writing one store.

Every item belongs to one shard by a stable hash of its id, so all judges of an item, and
its consensus, are written by the process that owns the shard. A DuckLake has no keys, so
"exactly once" is kept by ownership: the first shard to start creates the run and its N
``run_shards`` rows, and each process claims its shard by an UPDATE of that shard's row.
DuckLake lets only one of two concurrent UPDATEs of a table commit; the other is run again
by :meth:`Store.transact` and then finds the shard taken (see storage/lake_design.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb

from juryflow.storage.connection import StoreError
from juryflow.storage.store import RunRecord, Store

# A run id travels in shell commands and Prefect parameters: keep it to a safe alphabet.
_RUN_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:")
MAX_SHARDS = 10_000


class ShardError(ValueError):
    """A shard cannot be judged as asked; the message names the fix."""


@dataclass(frozen=True, slots=True)
class ShardSpec:
    """Shard ``index`` of ``count`` (1-based: ``--shard 1/4`` is the first of four)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, item_id: str) -> bool:
        return shard_of(item_id, self.count) == self.index


def parse_shard(text: str) -> ShardSpec:
    """``"I/N"`` with 1 <= I <= N; else ShardError."""
    head, slash, tail = text.strip().partition("/")
    try:
        index, count = int(head), int(tail)
    except ValueError:
        index = count = 0
    if not slash or not 1 <= index <= count <= MAX_SHARDS:
        raise ShardError(
            f"--shard {text!r}: give I/N with 1 <= I <= N <= {MAX_SHARDS}, e.g. --shard 1/4"
        )
    return ShardSpec(index, count)


def check_run_id(run_id: str | None) -> str:
    """The ``--run-id`` every shard of one run shares."""
    if not run_id:
        raise ShardError(
            "--shard needs --run-id RUN, the same for every shard of the run "
            "(any name of letters, digits, '-', '_', '.', ':')"
        )
    if len(run_id) > 100 or not set(run_id) <= _RUN_ID_CHARS:
        raise ShardError(
            f"--run-id {run_id!r}: use up to 100 letters, digits, '-', '_', '.' or ':'"
        )
    return run_id


def shard_of(item_id: str, count: int) -> int:
    """The shard (1..count) of an item: a hash of its id, the same on every machine."""
    digest = hashlib.blake2b(item_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count + 1


def owner_id() -> str:
    """This process, as the ``run_shards.owner`` column names it: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_gone(owner: str) -> bool:
    """Is the process that claimed a shard known to have ended (killed, crashed)?

    Only a process on this host can be checked; one elsewhere is taken over with
    ``--take-over`` by whoever knows it is gone.
    """
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False


@dataclass(frozen=True, slots=True)
class ShardRow:
    shard: int
    n_shards: int
    owner: str
    claimed_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class ShardedRunStatus:
    """Where a sharded run stands: its shards, and whether it is completed."""

    run_id: str
    status: str
    shards: tuple[ShardRow, ...]
    judgments: int
    items: int

    @property
    def unfinished(self) -> list[int]:
        return [row.shard for row in self.shards if row.finished_at is None]

    def to_dict(self) -> dict[str, object]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "judgments": self.judgments,
            "items": self.items,
            "shards": [
                {
                    "shard": f"{row.shard}/{row.n_shards}",
                    "owner": row.owner,
                    "finished_at": row.finished_at.isoformat() if row.finished_at else None,
                }
                for row in self.shards
            ],
        }


_SHARDS = (
    "SELECT shard, n_shards, owner, claimed_at, finished_at FROM run_shards "
    "WHERE run_id = ? ORDER BY shard"
)


def _shard_rows(con: duckdb.DuckDBPyConnection, run_id: str) -> tuple[ShardRow, ...]:
    return tuple(ShardRow(*row) for row in con.execute(_SHARDS, [run_id]).fetchall())


def create_or_join(store: Store, run: RunRecord, spec: ShardSpec) -> RunRecord | None:
    """Create the sharded run ``run`` with its shard rows, unless a shard created it first.

    Returns the run as stored when it existed (the caller joins it, with its settings),
    None when this call created it. Two shards starting together both UPDATE the
    ``run_creation`` row first, so their transactions conflict and the second one, run
    again, finds the run.
    """

    def body(con: duckdb.DuckDBPyConnection) -> RunRecord | None:
        con.execute("UPDATE store_meta SET value = value WHERE key = 'run_creation'")
        stored = store.get_run_in(con, run.run_id)
        if stored is not None:
            return stored
        store.insert_run_in(con, run)
        con.executemany(
            "INSERT INTO run_shards (run_id, shard, n_shards) VALUES (?, ?, ?)",
            [(run.run_id, shard, spec.count) for shard in range(1, spec.count + 1)],
        )
        return None

    return store.transact(body, f"create run {run.run_id}")


def claim_shard(store: Store, run_id: str, spec: ShardSpec, *, take_over: bool = False) -> None:
    """Make this process the owner of shard ``spec`` of ``run_id`` (a finished shard too:
    judged again, it finds everything stored). Raises ShardError when another live
    process owns it (``take_over`` claims it anyway) or the run has another shard count.
    """
    me = owner_id()

    def body(con: duckdb.DuckDBPyConnection) -> None:
        _check_claimable(_shard_rows(con, run_id), run_id, spec, me, take_over)
        con.execute(
            "UPDATE run_shards SET owner = ?, claimed_at = ? WHERE run_id = ? AND shard = ?",
            [me, datetime.now(UTC), run_id, spec.index],
        )
        con.execute(
            "UPDATE runs SET status = 'running', finished_at = NULL, error = NULL "
            "WHERE run_id = ? AND status <> 'completed'",
            [run_id],
        )

    store.transact(body, f"claim shard {spec} of run {run_id}")


def check_claim(store: Store, run_id: str, spec: ShardSpec, *, take_over: bool = False) -> None:
    """What :func:`claim_shard` would refuse, read only (the command line's preflight)."""
    with store.read() as con:
        rows = _shard_rows(con, run_id)
    _check_claimable(rows, run_id, spec, owner_id(), take_over)


def _check_claimable(
    shards: tuple[ShardRow, ...], run_id: str, spec: ShardSpec, me: str, take_over: bool
) -> None:
    rows = {row.shard: row for row in shards}
    if not rows:
        raise ShardError(
            f"run {run_id} is not a sharded run; give a new --run-id for a sharded run"
        )
    row = rows.get(spec.index)
    if row is None or row.n_shards != spec.count:
        count = next(iter(rows.values())).n_shards
        raise ShardError(f"run {run_id} was started with {count} shards; use --shard I/{count}")
    if row.finished_at is not None:
        return  # judged again, it finds everything stored
    if row.owner and row.owner != me and not take_over and not _owner_gone(row.owner):
        claimed = f"{row.claimed_at:%Y-%m-%d %H:%M:%S}" if row.claimed_at else "earlier"
        raise ShardError(
            f"shard {spec} of run {run_id} is being judged by {row.owner} (since {claimed}); "
            "if that process is gone, run this again with --take-over"
        )


def release_shard(store: Store, run_id: str, spec: ShardSpec, status: str, error: str) -> None:
    """A shard stopped before its end: anyone may resume it, and the run says why."""

    def body(con: duckdb.DuckDBPyConnection) -> None:
        con.execute(
            "UPDATE run_shards SET owner = '' WHERE run_id = ? AND shard = ? AND owner = ?",
            [run_id, spec.index, owner_id()],
        )
        con.execute(
            "UPDATE runs SET status = ?, finished_at = ?, error = ? WHERE run_id = ?",
            [status, datetime.now(UTC), f"shard {spec}: {error}", run_id],
        )

    store.transact(body, f"release shard {spec} of run {run_id}")


def finish_shard(store: Store, run_id: str, spec: ShardSpec) -> bool:
    """Mark this shard finished; the last one completes the run. True when it did.

    Shards finishing together both UPDATE ``run_shards``: one commits first and the
    other, run again, sees every shard finished.
    """

    def body(con: duckdb.DuckDBPyConnection) -> bool:
        con.execute(
            "UPDATE run_shards SET finished_at = ? WHERE run_id = ? AND shard = ?",
            [datetime.now(UTC), run_id, spec.index],
        )
        if any(row.finished_at is None for row in _shard_rows(con, run_id)):
            return False
        _check_exactly_once(con, run_id)
        store.complete_run_in(con, run_id)
        return True

    completed = store.transact(body, f"finish shard {spec} of run {run_id}")
    if completed:
        store.record_finished_snapshot(run_id)
    return completed


def finish_sharded_run(store: Store, run_id: str) -> ShardedRunStatus:
    """``juryflow finish RUN``: check every shard finished and every (item, judge) is
    stored once, then mark the run completed (already completed: said, not redone)."""

    def body(con: duckdb.DuckDBPyConnection) -> bool:
        run = store.get_run_in(con, run_id)
        if run is None:
            raise ShardError(f"no run {run_id!r} in {store.path}; `juryflow runs` lists them")
        rows = _shard_rows(con, run_id)
        if not rows:
            raise ShardError(f"run {run_id} is not a sharded run; there is nothing to finish")
        unfinished = [f"{row.shard}/{row.n_shards}" for row in rows if row.finished_at is None]
        if unfinished:
            owners = {
                f"{row.shard}/{row.n_shards}": row.owner or "nobody"
                for row in rows
                if row.finished_at is None
            }
            raise ShardError(
                f"run {run_id} is not complete: shard {', '.join(unfinished)} not finished "
                f"(judged by {json.dumps(owners)}); run `juryflow run DATASET --shard I/N "
                f"--run-id {run_id}` for each, then finish again"
            )
        _check_exactly_once(con, run_id)
        if run.status == "completed":
            return False
        store.complete_run_in(con, run_id)
        return True

    if store.transact(body, f"finish run {run_id}"):
        store.record_finished_snapshot(run_id)
    return sharded_run_status(store, run_id)


def _check_exactly_once(con: duckdb.DuckDBPyConnection, run_id: str) -> None:
    row = con.execute(
        "SELECT count(*) FROM (SELECT item_id, judge_id FROM judgments WHERE run_id = ? "
        "GROUP BY item_id, judge_id HAVING count(*) > 1)",
        [run_id],
    ).fetchone()
    twice = int(row[0]) if row else 0
    if twice:
        raise StoreError(
            f"run {run_id}: {twice} (item, judge) pairs are stored more than once; the run is "
            "left unfinished (report this: shards must never overlap)"
        )


def sharded_run_status(store: Store, run_id: str) -> ShardedRunStatus:
    with store.read() as con:
        run = store.get_run_in(con, run_id)
        if run is None:
            raise ShardError(f"no run {run_id!r} in {store.path}; `juryflow runs` lists them")
        rows = _shard_rows(con, run_id)
        counts = con.execute(
            "SELECT (SELECT count(*) FROM judgments WHERE run_id = $r), "
            "(SELECT count(*) FROM consensus WHERE run_id = $r)",
            {"r": run_id},
        ).fetchone()
    judgments, items = (int(counts[0]), int(counts[1])) if counts else (0, 0)
    return ShardedRunStatus(run_id, run.status, rows, judgments, items)


__all__ = [
    "ShardError",
    "ShardSpec",
    "ShardedRunStatus",
    "check_claim",
    "check_run_id",
    "claim_shard",
    "create_or_join",
    "finish_shard",
    "finish_sharded_run",
    "parse_shard",
    "release_shard",
    "shard_of",
]
