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
import math
import os
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import duckdb

from juryflow.storage.connection import StoreError
from juryflow.storage.store import RunRecord, Store

# A run id travels in shell commands and Prefect parameters: keep it to a safe alphabet.
_RUN_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:")
MAX_SHARDS = 10_000
LEASE_ENV = "JURYFLOW_SHARD_LEASE_SECONDS"
# Long enough that a renewal every third of it survives a slow store and clocks a few
# seconds apart; short enough that a shard whose machine died is judged again the same hour.
DEFAULT_LEASE_SECONDS = 600.0


class ShardError(ValueError):
    """A shard cannot be judged as asked; the message names the fix."""


class ShardLost(StoreError):
    """This process's claim on its shard lapsed and another process took the shard over:
    it must write nothing more (the new owner judges what is not stored)."""


def lease_seconds() -> float:
    """How long a shard's claim lasts without renewal (``JURYFLOW_SHARD_LEASE_SECONDS``)."""
    raw = os.environ.get(LEASE_ENV, "").strip()
    if not raw:
        return DEFAULT_LEASE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 1):
        raise ShardError(
            f"{LEASE_ENV}={raw!r}: give the seconds a shard's claim lasts without renewal "
            f"(at least 1; default {DEFAULT_LEASE_SECONDS:g})"
        )
    return value


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
    renewed_at: datetime | None = None

    def lapsed(self, lease: float, now: datetime) -> bool:
        """Has the owner gone ``lease`` seconds without renewing its claim (by our clock)?"""
        last = self.renewed_at or self.claimed_at
        return last is None or now - last > timedelta(seconds=lease)


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
    "SELECT shard, n_shards, owner, claimed_at, finished_at, renewed_at FROM run_shards "
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


def claim_shard(
    store: Store, run_id: str, spec: ShardSpec, *, take_over: bool = False
) -> ShardLease:
    """Make this process the owner of shard ``spec`` of ``run_id`` (a finished shard too:
    judged again, it finds everything stored) and return its lease, which the caller
    renews while it judges. Raises ShardError when another live process owns it
    (``take_over`` claims it anyway) or the run has another shard count.
    """
    me = owner_id()
    lease = lease_seconds()

    def body(con: duckdb.DuckDBPyConnection) -> None:
        _check_claimable(_shard_rows(con, run_id), run_id, spec, me, take_over, lease)
        now = datetime.now(UTC)
        con.execute(
            "UPDATE run_shards SET owner = ?, claimed_at = ?, renewed_at = ? "
            "WHERE run_id = ? AND shard = ?",
            [me, now, now, run_id, spec.index],
        )
        con.execute(
            "UPDATE runs SET status = 'running', finished_at = NULL, error = NULL "
            "WHERE run_id = ? AND status <> 'completed'",
            [run_id],
        )

    started = time.monotonic()
    store.transact(body, f"claim shard {spec} of run {run_id}")
    return ShardLease(store, run_id, spec, me, lease, started)


def check_claim(
    store: Store, run_id: str, spec: ShardSpec, *, take_over: bool = False
) -> str | None:
    """What :func:`claim_shard` would refuse, read only (the command line's preflight).
    Returns a line to show when the shard will be taken over from a lapsed owner."""
    with store.read() as con:
        rows = _shard_rows(con, run_id)
    return _check_claimable(rows, run_id, spec, owner_id(), take_over, lease_seconds())


def _check_claimable(
    shards: tuple[ShardRow, ...],
    run_id: str,
    spec: ShardSpec,
    me: str,
    take_over: bool,
    lease: float,
) -> str | None:
    rows = {row.shard: row for row in shards}
    if not rows:
        raise ShardError(
            f"run {run_id} is not a sharded run; give a new --run-id for a sharded run"
        )
    row = rows.get(spec.index)
    if row is None or row.n_shards != spec.count:
        count = next(iter(rows.values())).n_shards
        raise ShardError(f"run {run_id} was started with {count} shards; use --shard I/{count}")
    if row.finished_at is not None or not row.owner or row.owner == me:
        return None  # a finished shard, judged again, finds everything stored
    if take_over or _owner_gone(row.owner):
        return None
    last = row.renewed_at or row.claimed_at
    seen = f"{last.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC" if last else "never"
    if row.lapsed(lease, datetime.now(UTC)):
        return (
            f"shard {spec} of run {run_id}: taken over from {row.owner}, which last renewed "
            f"its claim at {seen} (over {lease:g} s ago, {LEASE_ENV})"
        )
    raise ShardError(
        f"shard {spec} of run {run_id} is being judged by {row.owner} (claim last renewed "
        f"at {seen}); it may be taken over once that claim is {lease:g} s old ({LEASE_ENV}), "
        "or now with --take-over if that process is gone"
    )


def release_shard(store: Store, run_id: str, spec: ShardSpec, status: str, error: str) -> None:
    """A shard stopped before its end: anyone may resume it, and the run says why. A
    process that lost its shard to another leaves both alone: the run is the new owner's."""
    me = owner_id()

    def body(con: duckdb.DuckDBPyConnection) -> None:
        if _owner_of(con, run_id, spec) != me:
            return
        con.execute(
            "UPDATE run_shards SET owner = '' WHERE run_id = ? AND shard = ? AND owner = ?",
            [run_id, spec.index, me],
        )
        con.execute(
            "UPDATE runs SET status = ?, finished_at = ?, error = ? WHERE run_id = ?",
            [status, datetime.now(UTC), f"shard {spec}: {error}", run_id],
        )

    store.transact(body, f"release shard {spec} of run {run_id}")


def _owner_of(con: duckdb.DuckDBPyConnection, run_id: str, spec: ShardSpec) -> str:
    row = con.execute(
        "SELECT owner FROM run_shards WHERE run_id = ? AND shard = ?", [run_id, spec.index]
    ).fetchone()
    return str(row[0]) if row else ""


class ShardLease:
    """This process's claim on its shard, renewed while it judges.

    Another machine cannot tell whether this process is alive, so it may take the shard
    over once the claim has gone ``seconds`` without renewal. Before every write the owner
    makes sure it renewed within a third of that (renewing if not): a renewal is an UPDATE
    of the shard's row, which conflicts with a concurrent takeover, so it either keeps the
    shard or learns it is lost, and then writes nothing more. A taker reads what is stored
    only after its claim committed, so no (item, judge) is judged and stored by both.
    """

    def __init__(
        self, store: Store, run_id: str, spec: ShardSpec, owner: str, seconds: float,
        renewed: float,
    ) -> None:  # fmt: skip
        self.store = store
        self.run_id = run_id
        self.spec = spec
        self.owner = owner
        self.seconds = seconds
        self._renewed = renewed  # time.monotonic() before the last renewal began
        self.lost_to: str | None = None

    @property
    def due(self) -> bool:
        return time.monotonic() - self._renewed >= self.seconds / 3

    def renew_if_due(self) -> None:
        """Before a write: raise ShardLost if the shard is lost, renew if a third is gone."""
        if self.lost_to is not None:
            raise self._lost()
        if self.due:
            self.renew()

    def renew(self) -> None:
        started = time.monotonic()

        def body(con: duckdb.DuckDBPyConnection) -> str:
            con.execute(
                "UPDATE run_shards SET renewed_at = ? WHERE run_id = ? AND shard = ? AND owner = ?",
                [datetime.now(UTC), self.run_id, self.spec.index, self.owner],
            )
            return _owner_of(con, self.run_id, self.spec)

        owner = self.store.transact(body, f"renew shard {self.spec} of run {self.run_id}")
        if owner != self.owner:
            self.lost_to = owner or "nobody"
            raise self._lost()
        self._renewed = started

    def _lost(self) -> ShardLost:
        return ShardLost(
            f"shard {self.spec} of run {self.run_id} was taken over by {self.lost_to} after "
            f"this process's claim went {self.seconds:g} s without renewal ({LEASE_ENV}); "
            "this process stopped and stored nothing more, the new owner judges the rest"
        )


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
    "LEASE_ENV",
    "ShardError",
    "ShardLease",
    "ShardLost",
    "ShardSpec",
    "ShardedRunStatus",
    "check_claim",
    "check_run_id",
    "claim_shard",
    "create_or_join",
    "finish_shard",
    "finish_sharded_run",
    "lease_seconds",
    "parse_shard",
    "release_shard",
    "shard_of",
]
